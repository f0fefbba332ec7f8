"""`fit` on the raw-text models checks its inputs in the caller's terms (issue 37): label names map
to class ids through the model's `labels` (training exactly as on the ids), names the model has
not, ids outside the task's range and strings where numbers are due are one-line errors raised
before training starts, and training texts that are mostly pieces unknown to the vocabulary
(Chinese on an English SentencePiece model) get a one-line warning."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf import (
    AlbertMultipleChoice,
    AlbertQuestionAnswerer,
    AlbertTextClassifier,
    AlbertTextRegressor,
    AlbertTextTagger,
)
from albert_tf.modeling import AlbertEncoder
from albert_tf.tasks import text_task
from albert_tf.tokenization.in_graph import AlbertTokenizerLayer

SEQ = 16
TEXTS = ["a good film", "the plot was bad", "a good story", "a bad movie", "good acting", "poor acting",
         "a great film", "a boring story"]
IDS = [1, 0, 1, 0, 1, 0, 1, 0]
NAMES = ["neg", "pos"]
CHINESE = ["今天天气很好，我们去公园散步吧", "这部电影很好看", "我不喜欢这个故事", "演员的表演很差"]


def build(cls, tiny_config, tiny_spm_model, seed=0, sequence_length=SEQ, **kwargs):
    keras.utils.set_random_seed(seed)
    preprocessor = AlbertTokenizerLayer.from_sentencepiece(tiny_spm_model, sequence_length=sequence_length)
    return cls(AlbertEncoder.from_albert_config(tiny_config), preprocessor, **kwargs)


def one_line_error(call, match):
    """The ValueError `call` raises: one line (no traceback-sized message) matching `match`."""
    with pytest.raises(ValueError, match=match) as error:
        call()
    message = str(error.value)
    assert "\n" not in message and len(message) < 300, message
    return message


@pytest.mark.slow
def test_label_names_train_exactly_as_their_ids(tiny_config, tiny_spm_model):
    """The same seed, the same texts: labels given as the model's names or as their ids train to the
    same weights, bit for bit (names are mapped to the ids `np.asarray` gives for the ids)."""

    def trained(labels):
        model = build(AlbertTextClassifier, tiny_config, tiny_spm_model, seed=3, num_classes=2, labels=NAMES)
        keras.utils.set_random_seed(5)
        history = model.fit(TEXTS, labels, batch_size=4, epochs=2, verbose=0).history
        return [w.numpy() for w in model.weights], history

    by_ids, history_ids = trained(IDS)
    by_names, history_names = trained([NAMES[i] for i in IDS])
    assert len(by_ids) == len(by_names)
    assert all(np.array_equal(a, b) for a, b in zip(by_ids, by_names))
    assert history_ids == history_names
    model = build(AlbertTextClassifier, tiny_config, tiny_spm_model, num_classes=2, labels=NAMES)
    # Names as a NumPy array, as bytes (a string tensor's values) and in a dataset zipped with y.
    assert np.array_equal(model._labels_array(np.array(["pos", "neg"])), [1, 0])
    assert np.array_equal(model._labels_array(tf.constant(["pos", "neg"])), [1, 0])
    ids = np.array([0, 1], "int32")
    assert model._labels_array(ids).dtype == np.int32 and np.array_equal(model._labels_array(ids), ids)
    batch = next(iter(model.make_dataset(tf.data.Dataset.from_tensor_slices(TEXTS[:2]), ["pos", "neg"])))
    assert batch[1].numpy().tolist() == [1, 0]


def test_label_names_without_model_names_are_refused(tiny_config, tiny_spm_model):
    model = build(AlbertTextClassifier, tiny_config, tiny_spm_model, num_classes=2)
    message = one_line_error(lambda: model.fit(TEXTS[:2], ["pos", "neg"], verbose=0),
                             r"^labels are strings \('pos', \.\.\.\) but the model has no label names: pass "
                             r"labels=\[\.\.\.\] to from_pretrained or the constructor, or class ids 0\.\.1$")
    assert "None values" not in message
    named = build(AlbertTextClassifier, tiny_config, tiny_spm_model, num_classes=2, labels=NAMES)
    one_line_error(lambda: named.fit(TEXTS[:2], ["pos", "meh"], verbose=0),
                   r"^label 'meh' is not one of the model's labels: neg, pos$")
    one_line_error(lambda: named.evaluate(TEXTS[:2], ["pos", "meh"], verbose=0), "label 'meh'")


def _classifier(c, s):
    return build(AlbertTextClassifier, c, s, num_classes=2)


def _tagger(c, s):
    return build(AlbertTextTagger, c, s, tags=["O", "B-POS", "I-POS"])


CHOICES = (["the sky is blue", "grass is green"], [["blue", "green", "red"], ["blue", "green", "red"]])

BAD_LABELS = [
    ("class id 2 of 2", _classifier, TEXTS[:2], [2, 0], r"^label 2 is out of range: class ids are 0\.\.1$"),
    ("class id -1", _classifier, TEXTS[:2], [1, -1], r"^label -1 is out of range: class ids are 0\.\.1$"),
    ("fractional class id", _classifier, TEXTS[:2], [0.5, 1], r"^label 0\.5 is not one of the class ids 0\.\.1$"),
    ("missing class id", _classifier, TEXTS[:2], [None, 1], r"^label None is not one of the class ids 0\.\.1$"),
    ("no labels", _classifier, TEXTS[:2], None, r"^training needs labels: pass y= \(one label per input\)$"),
    ("a name for a regressor", lambda c, s: build(AlbertTextRegressor, c, s), TEXTS[:2], ["high", 0.2],
     r"^label 'high' is not a number: a regressor's labels are numbers \(scores\)$"),
    ("None for a regressor", lambda c, s: build(AlbertTextRegressor, c, s), TEXTS[:2], [0.1, None],
     r"^label None is not a number"),
    ("tag id out of range", _tagger, ["a good film"], [[0, 7, 0]],
     r"^text 0: tag id 7 is out of range: tag ids are 0\.\.2 \(O, B-POS, I-POS\)$"),
    ("unknown tag", _tagger, ["a good film"], [["O", "B-NEG", "O"]],
     r"^text 0: unknown tag 'B-NEG'; the model's tags are O, B-POS, I-POS$"),
    ("entity of an unknown type", _tagger, ["a good film"], [[(2, 6, "NEG")]],
     r"^text 0: the entity \(2, 6, 'NEG'\) needs the tag B-NEG, which the model has not; its tags are O, B-POS, I-POS$"),
    ("choice index 3 of 3", lambda c, s: build(AlbertMultipleChoice, c, s), CHOICES, [3, 0],
     r"^label 3 is out of range: choice indices are 0\.\.2$"),
    ("choice text", lambda c, s: build(AlbertMultipleChoice, c, s), CHOICES, ["blue", "green"],
     r"^labels are strings \('blue', \.\.\.\) but multiple choice takes the index of the right choice"),
    ("an answer that is no (text, start)",
     lambda c, s: build(AlbertQuestionAnswerer, c, s, sequence_length=32, max_query_length=8, doc_stride=8),
     (["who wrote it"], ["ada wrote it"]), [3], r"^answer 0 must be \(text, start\)"),
]


@pytest.mark.parametrize("what, make, x, y, match", BAD_LABELS, ids=[case[0] for case in BAD_LABELS])
def test_labels_the_task_cannot_read_are_one_line_before_training(tiny_config, tiny_spm_model, what, make, x, y,
                                                                  match):
    model = make(tiny_config, tiny_spm_model)
    before = [w.numpy() for w in model.weights]
    one_line_error(lambda: model.fit(x, y, epochs=1, verbose=0), match)
    # Refused before training: no step ran.
    assert all(np.array_equal(a, w.numpy()) for a, w in zip(before, model.weights))
    assert int(model.optimizer.iterations.numpy()) == 0


def test_tag_ids_train_as_tag_names(tiny_config, tiny_spm_model):
    model = _tagger(tiny_config, tiny_spm_model)
    by_names = model.make_dataset(["a good film"], [["O", "B-POS", "I-POS"]])
    by_ids = model.make_dataset(["a good film"], [[0, 1, np.int64(2)]])
    (_, a), (_, b) = next(iter(by_names)), next(iter(by_ids))
    assert np.array_equal(a.numpy(), b.numpy())


def test_dataset_labels_are_checked_by_their_type(tiny_config, tiny_spm_model):
    """A dataset is not read ahead (its first batch would leave the order training sees): string
    labels are refused from its element spec, in one line."""
    model = build(AlbertTextClassifier, tiny_config, tiny_spm_model, num_classes=2, labels=NAMES)
    labelled = tf.data.Dataset.from_tensor_slices((TEXTS[:2], ["pos", "neg"], [1.0, 1.0]))
    one_line_error(lambda: model.fit(labelled, verbose=0),
                   r"^the dataset's labels are strings: map them to class ids 0\.\.1 in the dataset "
                   r"\(model\.labels lists the names in id order\), or pass the texts and labels as arrays$")
    # Two strings per element read as a text pair: the message says where the labels went.
    pairs = tf.data.Dataset.from_tensor_slices((TEXTS[:2], ["pos", "neg"]))
    one_line_error(lambda: model.fit(pairs, verbose=0),
                   r"^the dataset yields no labels \(its elements are two strings, which the model reads as its "
                   r"two text inputs\): yield \(texts, labels\) with the labels as numbers, or pass y=$")
    regressor = build(AlbertTextRegressor, tiny_config, tiny_spm_model)
    one_line_error(lambda: regressor.fit(labelled, verbose=0), r"^the dataset's labels are strings: a regressor's")


@pytest.mark.slow
def test_unknown_pieces_warn_in_one_line(tiny_config, tiny_spm_model, capsys):
    """Chinese on the tiny English SentencePiece model: half of the pieces are `<unk>` (a run of
    unknown characters is one piece), far above the 5 % default; English text: none."""
    model = build(AlbertTextClassifier, tiny_config, tiny_spm_model, num_classes=2)
    model.fit(CHINESE, [1, 1, 0, 0], epochs=1, verbose=0)
    err = capsys.readouterr().err
    warnings = [line for line in err.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1, err
    assert warnings[0].startswith(
        "warning: 50.0% of the training texts' pieces are unknown to this model's vocabulary (spiece.model, 64 pieces)"
    ), warnings[0]
    assert "unknown_warning=None" in warnings[0]
    model.fit(TEXTS, IDS, epochs=1, verbose=0)
    assert "warning:" not in capsys.readouterr().err
    assert model.warn_unknown_pieces(TEXTS) == 0.0
    assert model.warn_unknown_pieces(CHINESE, unknown_warning=None) is None
    assert model.warn_unknown_pieces(CHINESE, unknown_warning=0.6) == 0.5  # a threshold above the rate
    assert "warning:" not in capsys.readouterr().err
    one_line_error(lambda: model.fit(TEXTS, IDS, verbose=0, unknown_warning=5),
                   r"^unknown_warning must be a rate between 0 and 1 \(or None: no check\), got 5$")


@pytest.mark.parametrize("make, x", [
    (lambda c, s: build(AlbertTextClassifier, c, s, num_classes=2), (CHINESE, CHINESE)),
    (lambda c, s: build(AlbertTextRegressor, c, s), CHINESE),
    (_tagger, CHINESE),
    (lambda c, s: build(AlbertMultipleChoice, c, s), (CHINESE[:2], [CHINESE[2:], CHINESE[:2]])),
    (lambda c, s: build(AlbertQuestionAnswerer, c, s, sequence_length=32, max_query_length=8, doc_stride=8),
     (CHINESE[:2], CHINESE[2:])),
], ids=["classifier pairs", "regressor", "tagger", "multiple choice", "question answerer"])
def test_every_text_model_measures_its_training_texts(tiny_config, tiny_spm_model, capsys, make, x):
    model = make(tiny_config, tiny_spm_model)
    assert model.warn_unknown_pieces(x) == pytest.approx(0.5)
    assert capsys.readouterr().err.count("warning: 50.0% of the training texts' pieces") == 1
    assert model.warn_unknown_pieces(tf.data.Dataset.from_tensor_slices(CHINESE)) is None  # not read ahead


def test_the_unknown_rate_is_measured_on_a_sample(tiny_config, tiny_spm_model, capsys, monkeypatch):
    monkeypatch.setattr(text_task, "UNKNOWN_SAMPLE", 3)
    model = build(AlbertTextClassifier, tiny_config, tiny_spm_model, num_classes=2)
    assert model.warn_unknown_pieces(TEXTS + CHINESE * 2) > 0.05
    assert "of the pieces of 3 of the 16 training texts are unknown" in capsys.readouterr().err
