"""Tests of `albert_tf.tasks.classification`: heads, losses, features, evaluation and a short fit."""

import numpy as np
import pytest

import keras
import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.data.features import examples_dataset
from albert_tf.data.tables import DataFormatError, TextExample
from albert_tf.tasks.classification.data import LabelVocab
from albert_tf.modeling import AlbertEncoder
from albert_tf.tasks import classification
from albert_tf.tasks.classification import AlbertForClassification, AlbertForRegression
from albert_tf.tokenization import WordPieceTokenizer
from albert_tf.training import create_optimizer

CONFIG = AlbertConfig(
    vocab_size=30, embedding_size=8, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
    max_position_embeddings=32,
)
TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad", "film", "a", "very", "##s"]


def encoder():
    return AlbertEncoder.from_albert_config(CONFIG)


def batch(n=4, seq=6, labels=None, seed=0):
    rng = np.random.default_rng(seed)
    x = {
        "input_ids": rng.integers(5, 30, size=(n, seq)).astype("int32"),
        "input_mask": np.ones((n, seq), "int32"),
        "segment_ids": np.zeros((n, seq), "int32"),
    }
    if labels is not None:
        x["labels"] = np.asarray(labels)
    return x


def log_softmax(z):
    z = z - z.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


def test_classifier_outputs_loss_and_accuracy():
    keras.utils.set_random_seed(0)
    model = AlbertForClassification(encoder(), num_labels=3)
    x = batch(labels=np.array([0, 2, 1, 2], "int32"))
    logits = np.asarray(model(x, training=False)["logits"])
    assert logits.shape == (4, 3) and logits.dtype == np.float32
    loss = float(model.compute_loss(x, y_pred={"logits": tf.constant(logits)}))
    expected = -np.mean(log_softmax(logits.astype(np.float64))[np.arange(4), x["labels"]])
    assert loss == pytest.approx(expected, rel=1e-5)
    assert float(model.accuracy.result()) == pytest.approx(np.mean(logits.argmax(-1) == x["labels"]))
    # Prediction needs no labels.
    del x["labels"]
    np.testing.assert_allclose(np.asarray(model(x)["logits"]), logits, rtol=1e-6)
    with pytest.raises(ValueError, match="num_labels"):
        AlbertForClassification(encoder(), num_labels=1)


def test_regressor_mse():
    keras.utils.set_random_seed(0)
    model = AlbertForRegression(encoder())
    x = batch(labels=np.array([0.0, 1.5, 3.0, 5.0], "float32"))
    predictions = np.asarray(model(x)["predictions"])
    assert predictions.shape == (4,)
    loss = float(model.compute_loss(x, y_pred={"predictions": tf.constant(predictions)}))
    assert loss == pytest.approx(np.mean((predictions - x["labels"]) ** 2), rel=1e-5)
    assert isinstance(classification.build_task_model(encoder(), None), AlbertForRegression)
    assert classification.build_task_model(encoder(), 4).num_labels == 4


def test_saved_model_round_trip(tmp_path):
    keras.utils.set_random_seed(0)
    model = AlbertForClassification(encoder(), num_labels=2, dropout=0.2)
    x = batch()
    before = np.asarray(model(x)["logits"])
    path = str(tmp_path / "model.keras")
    model.save(path)
    loaded = keras.saving.load_model(path, compile=False)
    assert isinstance(loaded, AlbertForClassification) and loaded.num_labels == 2 and loaded.dropout == 0.2
    np.testing.assert_allclose(np.asarray(loaded(x)["logits"]), before, rtol=1e-6, atol=1e-6)


def test_encode_examples_packs_and_labels():
    tokenizer = WordPieceTokenizer(vocab={t: i for i, t in enumerate(TOKENS)})
    vocab = LabelVocab(["neg", "pos"])
    examples = [TextExample("a good film", None, "pos", "f.tsv", 2), TextExample("bad", "goods", "neg", "f.tsv", 3)]
    features = classification.encode_examples(examples, tokenizer, seq_length=8, label_vocab=vocab)
    ids = {t: i for i, t in enumerate(TOKENS)}
    assert features["input_ids"][0].tolist() == [ids["[CLS]"], ids["a"], ids["good"], ids["film"], ids["[SEP]"], 0, 0, 0]
    assert features["input_ids"][1].tolist() == [2, ids["bad"], 3, ids["good"], ids["##s"], 3, 0, 0]
    assert features["segment_ids"][1].tolist() == [0, 0, 0, 1, 1, 1, 0, 0]
    assert features["input_mask"][0].tolist() == [1, 1, 1, 1, 1, 0, 0, 0]
    assert features["labels"].tolist() == [1, 0] and features["labels"].dtype == np.int32
    bad = [TextExample("good", None, "neutral", "dev.tsv", 9)]
    with pytest.raises(DataFormatError, match=r"dev\.tsv:9: unknown label 'neutral'"):
        classification.encode_examples(bad, tokenizer, seq_length=8, label_vocab=vocab)
    regression = classification.encode_examples(
        [TextExample("good", None, "3.5", "f", 1)], tokenizer, seq_length=8, regression=True
    )
    assert regression["labels"].dtype == np.float32 and regression["labels"].tolist() == [3.5]
    unlabelled = classification.encode_examples([TextExample("good")], tokenizer, seq_length=8, with_labels=False)
    assert "labels" not in unlabelled


def test_score_predictions():
    logits = np.array([[2.0, 0.0], [0.0, 1.0], [1.0, 3.0], [0.5, 0.0]])
    labels = np.array([0, 1, 0, 1])
    out = classification.score_predictions(logits, labels, ["accuracy", "f1", "mcc"], regression=False)
    assert out["accuracy"] == pytest.approx(0.5)
    assert out["f1"] == pytest.approx(0.5)  # TP=1, FP=1, FN=1
    assert out["loss"] == pytest.approx(-np.mean(log_softmax(logits)[np.arange(4), labels]))
    reg = classification.score_predictions(np.array([1.0, 2.0, 3.0]), np.array([1.0, 2.0, 4.0]), ["pearson"], regression=True)
    assert reg["loss"] == pytest.approx(1 / 3) and 0.9 < reg["pearson"] < 1.0


def easy_dataset(n=128, seq=6):
    """Label 1 iff the first word is token 7: learnable in a few dozen steps."""
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, size=n).astype("int32")
    ids = rng.integers(9, 30, size=(n, seq)).astype("int32")
    ids[:, 0] = 2
    ids[:, 1] = np.where(labels == 1, 7, 8)
    return {"input_ids": ids, "input_mask": np.ones((n, seq), "int32"), "segment_ids": np.zeros((n, seq), "int32"), "labels": labels}


@pytest.mark.slow
def test_fit_lowers_the_loss_and_eval_fn_scores():
    keras.utils.set_random_seed(1)
    features = easy_dataset()
    dataset = examples_dataset(features).shuffle(128, seed=0).repeat().batch(16)
    model = AlbertForClassification(encoder(), num_labels=2)
    model.compile(optimizer=create_optimizer("adamw", 3e-3, num_train_steps=60, num_warmup_steps=4), jit_compile=False)
    history = model.fit(dataset, epochs=3, steps_per_epoch=20, verbose=0).history
    assert history["loss"][-1] < 0.5 * history["loss"][0]
    eval_fn = classification.make_eval_fn(["accuracy", "f1"], regression=False)
    metrics = eval_fn(model, examples_dataset(features).batch(32))
    assert metrics["accuracy"] > 0.9 and metrics["f1"] > 0.9
    assert set(metrics) == {"accuracy", "f1", "loss"}


def test_large_feature_sets_go_through_a_tfrecord_file(tmp_path):
    features = {
        "input_ids": np.arange(24, dtype=np.int32).reshape(4, 6),
        "input_mask": np.ones((4, 6), np.int32),
        "segment_ids": np.zeros((4, 6), np.int32),
        "labels": np.array([0.5, 1.0, 2.0, 3.5], np.float32),
    }
    in_memory = list(examples_dataset(features).as_numpy_iterator())
    spilled = examples_dataset(features, max_in_memory_bytes=1, spill_dir=str(tmp_path))
    assert [p.suffix for p in tmp_path.iterdir()] == [".tfrecord"]
    assert int(spilled.cardinality()) == 4
    for a, b in zip(in_memory, spilled.as_numpy_iterator()):
        assert a.keys() == b.keys()
        for key in a:
            assert a[key].dtype == b[key].dtype
            np.testing.assert_array_equal(a[key], b[key])
    with pytest.raises(ValueError, match="common length"):
        examples_dataset({"a": np.zeros(2), "b": np.zeros(3)})
