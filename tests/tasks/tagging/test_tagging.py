"""Tests of `albert_tf.tasks.tagging`: sub-word label alignment, the masked loss, decoding, scoring, a short fit."""

import numpy as np
import pytest

import keras
import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.data.tables import DataFormatError
from albert_tf.tasks.tagging.data import TaggedSentence, TagVocab
from albert_tf.modeling import AlbertEncoder
from albert_tf.tasks import tagging
from albert_tf.tasks.tagging import IGNORE_LABEL, AlbertForTagging
from albert_tf.tokenization import WordPieceTokenizer
from albert_tf.training import create_optimizer

CONFIG = AlbertConfig(
    vocab_size=30, embedding_size=8, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
    max_position_embeddings=32,
)
TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "paris", "is", "big", "good", "##s", "京", "北"]
VOCAB = TagVocab(["O", "B-LOC", "I-LOC"])


def tokenizer():
    return WordPieceTokenizer(vocab={t: i for i, t in enumerate(TOKENS)})


def test_first_piece_carries_the_label():
    sentences = [TaggedSentence(("Paris", "goods", "is", "big"), ("B-LOC", "O", "O", "O"), "f", 1)]
    encoded = tagging.encode_sentences(sentences, tokenizer(), seq_length=8, tag_vocab=VOCAB)
    ids = {t: i for i, t in enumerate(TOKENS)}
    assert encoded.features["input_ids"][0].tolist() == [2, ids["paris"], ids["good"], ids["##s"], ids["is"], ids["big"], 3, 0]
    assert encoded.features["labels"][0].tolist() == [IGNORE_LABEL, 1, 0, IGNORE_LABEL, 0, 0, IGNORE_LABEL, IGNORE_LABEL]
    assert encoded.word_positions == [[1, 2, 4, 5]]
    assert encoded.features["input_mask"][0].tolist() == [1, 1, 1, 1, 1, 1, 1, 0]
    # Words beyond the sequence length get no position (and are predicted O).
    short = tagging.encode_sentences(sentences, tokenizer(), seq_length=4, tag_vocab=VOCAB)
    assert short.word_positions == [[1, 2, -1, -1]] and short.truncated_words == 2
    assert short.features["input_ids"][0].tolist() == [2, ids["paris"], ids["good"], 3]
    with pytest.raises(DataFormatError, match=r"dev:5: unknown tag 'B-PER'"):
        tagging.encode_sentences([TaggedSentence(("a",), ("B-PER",), "dev", 5)], tokenizer(), seq_length=8, tag_vocab=VOCAB)


def test_loss_ignores_unlabelled_positions():
    keras.utils.set_random_seed(0)
    model = AlbertForTagging(AlbertEncoder.from_albert_config(CONFIG), num_labels=3)
    labels = np.array([[IGNORE_LABEL, 1, 2, IGNORE_LABEL], [IGNORE_LABEL, 0, IGNORE_LABEL, IGNORE_LABEL]], "int32")
    x = {
        "input_ids": np.array([[2, 5, 6, 3], [2, 7, 3, 0]], "int32"),
        "input_mask": np.array([[1, 1, 1, 1], [1, 1, 1, 0]], "int32"),
        "segment_ids": np.zeros((2, 4), "int32"),
        "labels": labels,
    }
    logits = np.asarray(model(x)["logits"])
    assert logits.shape == (2, 4, 3)
    loss = float(model.compute_loss(x, y_pred={"logits": tf.constant(logits)}))
    z = logits.astype(np.float64) - logits.max(-1, keepdims=True)
    log_probs = z - np.log(np.exp(z).sum(-1, keepdims=True))
    expected = -np.mean([log_probs[0, 1, 1], log_probs[0, 2, 2], log_probs[1, 1, 0]])
    assert loss == pytest.approx(expected, rel=1e-5)
    predicted = logits.argmax(-1)
    expected_accuracy = np.mean([predicted[0, 1] == 1, predicted[0, 2] == 2, predicted[1, 1] == 0])
    assert float(model.token_accuracy.result()) == pytest.approx(expected_accuracy)


def test_decode_and_score():
    sentences = [TaggedSentence(("北", "京", "is"), ("B-LOC", "I-LOC", "O"), "f", 1)]
    encoded = tagging.encode_sentences(sentences, tokenizer(), seq_length=6, tag_vocab=VOCAB)
    logits = np.zeros((1, 6, 3), np.float32)
    logits[0, 1, 1] = 5.0  # 北 -> B-LOC
    logits[0, 2, 2] = 5.0  # 京 -> I-LOC
    logits[0, 3, 0] = 5.0  # is -> O
    assert tagging.decode_predictions(logits, encoded.word_positions, VOCAB) == [["B-LOC", "I-LOC", "O"]]
    scores = tagging.score_tagging(logits, encoded, sentences, VOCAB)
    assert scores["entity_f1"] == 1.0 and scores["token_accuracy"] == 1.0
    logits[0, 2] = [5.0, 0.0, 0.0]  # 京 -> O: the entity span is wrong, 2 of 3 tokens right
    scores = tagging.score_tagging(logits, encoded, sentences, VOCAB)
    assert scores["entity_f1"] == 0.0 and scores["token_accuracy"] == pytest.approx(2 / 3)
    assert scores["loss"] > 0


def test_saved_model_round_trip(tmp_path):
    keras.utils.set_random_seed(0)
    model = AlbertForTagging(AlbertEncoder.from_albert_config(CONFIG), num_labels=3)
    x = {"input_ids": np.array([[2, 5, 3]], "int32"), "input_mask": np.ones((1, 3), "int32"), "segment_ids": np.zeros((1, 3), "int32")}
    before = np.asarray(model(x)["logits"])
    model.save(tmp_path / "m.keras")
    loaded = keras.saving.load_model(tmp_path / "m.keras", compile=False)
    assert isinstance(loaded, AlbertForTagging) and loaded.num_labels == 3
    np.testing.assert_allclose(np.asarray(loaded(x)["logits"]), before, rtol=1e-6, atol=1e-6)


@pytest.mark.slow
def test_fit_lowers_the_loss():
    """Two-token entities "7 8" (B-LOC I-LOC) among random O tokens."""
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    n, seq = 96, 8
    ids = rng.integers(10, 30, size=(n, seq)).astype("int32")
    where = rng.integers(1, seq - 2, size=n)
    ids[np.arange(n), where] = 7
    ids[np.arange(n), where + 1] = 8
    labels = np.zeros((n, seq), "int32")
    labels[np.arange(n), where] = 1
    labels[np.arange(n), where + 1] = 2
    labels[:, 0] = IGNORE_LABEL
    features = {"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": np.zeros_like(ids), "labels": labels}
    dataset = tf.data.Dataset.from_tensor_slices(features).repeat().batch(16)
    model = AlbertForTagging(AlbertEncoder.from_albert_config(CONFIG), num_labels=3)
    model.compile(optimizer=create_optimizer("adamw", 5e-3, num_train_steps=60, num_warmup_steps=2), jit_compile=False)
    history = model.fit(dataset, epochs=3, steps_per_epoch=20, verbose=0).history
    assert history["loss"][-1] < 0.5 * history["loss"][0]
    assert history["token_accuracy"][-1] > 0.9


# Whitespace by `str.isspace` (ASCII, \x1c-\x1f, NEL, NBSP, ideographic and line separators) among
# characters that are not whitespace (zero-width space, BOM, controls, CJK, combining marks,
# astral characters, a lone surrogate).
TRICKY_TEXTS = [
    "", " ", "\t\n\r\x0b\x0c", "a", " a ", "a  bc\u3000d", "  Ada Lovelace wrote.\n",
    "x\x1cy\x1dz\x1e\x1fw", "a\x85b\xa0c\u2028d\u2029e\u3000f\u2003g", "a\u200bb\ufeffc\x00d\x07e\x1bf",
    "北京 是\u3000中国的首都。", "e\u0301t\u00e9 caf\u00e9", "\U0001F600 \U0001F600x \U00020000", "a\ud800 b",
]


def _reference_units(text, token_unit):
    """The units as `str.split()` and the regex `\\S+` cut them, independently of the library."""
    import re

    if token_unit == "char":
        units = [(c, i, i + 1) for i, c in enumerate(text) if not c.isspace()]
    else:
        units = [(m.group(), m.start(), m.end()) for m in re.finditer(r"\S+", text)]
        assert [u for u, _, _ in units] == text.split()
    return units


@pytest.mark.parametrize("token_unit", ["word", "char"])
def test_one_splitter_for_tagging_the_text_tagger_and_the_cli(token_unit):
    """`tasks.tagging.split_with_offsets`, `tagging.text_model.split_units` (AlbertTextTagger) and the CLI's
    `examples_from_texts` cut the same units at the same offsets, on the same `TOKEN_UNITS`."""
    import types

    from albert_tf.tasks.tagging import data as tagging_data
    from albert_tf.tasks.tagging import text_model as text_models
    from albert_tf.tasks.family import task_family
    from albert_tf.tasks.tagging import data as folder_data

    assert tagging.TOKEN_UNITS is folder_data.TOKEN_UNITS is tagging_data.TOKEN_UNITS
    assert tagging_data.TOKEN_UNITS == ("word", "char")
    family = task_family("conll")
    for text in TRICKY_TEXTS:
        expected = _reference_units(text, token_unit)
        assert tagging.split_with_offsets(text, token_unit) == expected, repr(text)
        assert text_models.split_units(text, token_unit) == expected, repr(text)
        assert all(text[s:e] == u for u, s, e in expected)
        if expected:
            (sentence,) = family.examples_from_texts(types.SimpleNamespace(token_unit=token_unit), [text], None)
            assert sentence.tokens == tuple(u for u, _, _ in expected), repr(text)


def test_splitters_on_an_unknown_unit():
    """`split_with_offsets` refuses it; `split_units` and the CLI split into words, as they always did."""
    import types

    from albert_tf.tasks.tagging import text_model as text_models
    from albert_tf.tasks.family import task_family

    with pytest.raises(ValueError, match=r"^token_unit must be one of \('word', 'char'\), got 'piece'$"):
        tagging.split_with_offsets("a b", "piece")
    assert text_models.split_units(" a  b", "piece") == [("a", 1, 2), ("b", 4, 5)]
    (sentence,) = task_family("conll").examples_from_texts(types.SimpleNamespace(token_unit="piece"), ["a  b"], None)
    assert sentence.tokens == ("a", "b")
    assert tagging.split_with_offsets("a b") == [("a", 0, 1), ("b", 2, 3)]  # "word" by default
