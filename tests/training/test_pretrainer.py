"""Tests for albert_tf.pretrainer: the original losses computed by hand, metrics, fit, serialization."""

import numpy as np
import pytest
import tensorflow as tf
import keras

from albert_tf import AlbertConfig, AlbertEncoder
from albert_tf.pretrainer import AlbertPretrainer, masked_lm_loss, sentence_loss

CONFIG = AlbertConfig(
    vocab_size=40, embedding_size=8, hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32
)


def make_features(n=16, seq=12, predictions=4, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, CONFIG.vocab_size, (n, seq)).astype("int32")
    positions = np.sort(rng.choice(np.arange(1, seq), size=(n, predictions)), axis=1).astype("int32")
    weights = (rng.random((n, predictions)) < 0.75).astype("float32")
    weights[:, 0] = 1.0
    return {
        "input_ids": ids,
        "input_mask": np.ones((n, seq), "int32"),
        "segment_ids": (np.arange(seq)[None] >= seq // 2).repeat(n, 0).astype("int32"),
        "masked_lm_positions": positions * weights.astype("int32"),
        "masked_lm_ids": np.take_along_axis(ids, positions, 1) * weights.astype("int32"),
        "masked_lm_weights": weights,
        # SOP label: a learnable function of the input, so accuracy can rise.
        "next_sentence_labels": (ids[:, 1:2] % 2).astype("int32"),
    }


def log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def test_losses_match_the_original_formulas():
    rng = np.random.default_rng(1)
    logits = rng.normal(size=(3, 4, 7)).astype("float32")
    ids = rng.integers(0, 7, (3, 4))
    weights = np.array([[1, 1, 0, 0], [1, 0, 0, 0], [1, 1, 1, 1]], "float32")
    loss, correct = masked_lm_loss(logits, ids, weights)
    ce = -np.take_along_axis(log_softmax(logits), ids[..., None], -1)[..., 0]
    np.testing.assert_allclose(loss, (weights * ce).sum() / (weights.sum() + 1e-5), rtol=1e-6)
    np.testing.assert_array_equal(correct, (logits.argmax(-1) == ids).astype("float32"))

    sop_logits = rng.normal(size=(5, 2)).astype("float32")
    labels = np.array([[0], [1], [1], [0], [1]])
    loss, correct = sentence_loss(sop_logits, labels)
    ce = -np.take_along_axis(log_softmax(sop_logits), labels, -1)[:, 0]
    np.testing.assert_allclose(loss, ce.mean(), rtol=1e-6)


@pytest.mark.slow
def test_fit_lowers_the_loss_and_reports_the_metrics():
    keras.utils.set_random_seed(0)
    model = AlbertPretrainer(AlbertEncoder.from_albert_config(CONFIG))
    features = make_features(n=32)
    dataset = tf.data.Dataset.from_tensor_slices(features).batch(8).repeat()
    model.compile(optimizer=keras.optimizers.Adam(5e-3))
    before = model.evaluate(tf.data.Dataset.from_tensor_slices(features).batch(8), verbose=0, return_dict=True)
    model.fit(dataset, steps_per_epoch=60, epochs=1, verbose=0)
    after = model.evaluate(tf.data.Dataset.from_tensor_slices(features).batch(8), verbose=0, return_dict=True)
    assert set(after) >= {"loss", "mlm_loss", "sop_loss", "mlm_accuracy", "sop_accuracy", "mlm_perplexity"}
    assert after["loss"] < 0.85 * before["loss"]
    assert after["mlm_accuracy"] > before["mlm_accuracy"]
    np.testing.assert_allclose(after["mlm_perplexity"], np.exp(after["mlm_loss"]), rtol=1e-4)
    np.testing.assert_allclose(after["loss"], after["mlm_loss"] + after["sop_loss"], rtol=1e-4)


def test_evaluate_loss_equals_hand_computation():
    model = AlbertPretrainer(AlbertEncoder.from_albert_config(CONFIG), sentence_task="nsp")
    model.compile()
    features = make_features(n=8)
    result = model.evaluate(tf.data.Dataset.from_tensor_slices(features).batch(8), verbose=0, return_dict=True)
    out = model(features)
    mlm = np.asarray(masked_lm_loss(out["mlm_logits"], features["masked_lm_ids"], features["masked_lm_weights"])[0])
    nsp = np.asarray(sentence_loss(out["sentence_logits"], features["next_sentence_labels"])[0])
    np.testing.assert_allclose(result["loss"], mlm + nsp, rtol=1e-5)
    assert "nsp_accuracy" in result


def test_keras_file_round_trip(tmp_path):
    model = AlbertPretrainer(AlbertEncoder.from_albert_config(CONFIG.replace(sharing="none")))
    features = make_features(n=4)
    expected = model(features)
    model.save(tmp_path / "pretrainer.keras")
    restored = keras.saving.load_model(tmp_path / "pretrainer.keras")
    assert restored.encoder.sharing == "none"
    got = restored(features)
    np.testing.assert_array_equal(got["mlm_logits"], expected["mlm_logits"])
    np.testing.assert_array_equal(got["sentence_logits"], expected["sentence_logits"])


def test_rejects_unknown_sentence_task():
    with pytest.raises(ValueError, match="sentence_task"):
        AlbertPretrainer(AlbertEncoder.from_albert_config(CONFIG), sentence_task="next")
