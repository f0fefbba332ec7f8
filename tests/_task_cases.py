"""The task battery's cases: one `TaskCase` (tests/_task_battery.py) per family of raw-text task model,
on the session's tiny config and SentencePiece model: `AlbertTextClassifier`, `AlbertTextRegressor`
(text pairs), `AlbertTextTagger`, `AlbertMultipleChoice` and `AlbertQuestionAnswerer` (SQuAD v1 and
v2). tests/tasks/test_task_battery.py runs the battery on them, tests/tasks/test_round_trip.py the
round-trip matrix."""

import random

import numpy as np
import pytest
import tensorflow as tf

import _task_battery as battery
from albert_tf.tasks.tagging.metrics import entity_record
from albert_tf import (
    AlbertMultipleChoice,
    AlbertQuestionAnswerer,
    AlbertTextClassifier,
    AlbertTextRegressor,
    AlbertTextTagger,
)

SEQ = 16
QA_SEQ = 32
# Words of one to three pieces of the tiny SentencePiece model; "good" and "bad" carry the labels.
FILLER = ["a", "an", "the", "dog", "cat", "sat", "on", "it"]
LABELS = ["neg", "pos"]
TAGS = ["O", "B-POS", "I-POS", "B-NEG", "I-NEG"]
# Classifiers and regressors pool as the tiny recipe does: the token mean learns the tiny sets fastest.
POOLING = "mean"
QA_SETTINGS = dict(doc_stride=8, max_query_length=6, max_answer_length=8)
# The signatures of the exports without a TF Serving Classify / Regress API.
TEXT_SIGNATURES = ("serving_default", "tokens")


def _words(rng, low, high):
    return [rng.choice(FILLER) for _ in range(rng.randrange(low, high + 1))]


def _sentiment_texts(n, seed):
    """Texts of one or two filler words with "good" (label 1) or "bad" (label 0) among them."""
    rng = random.Random(seed)
    texts, labels = [], []
    for _ in range(n):
        label = rng.randrange(2)
        words = _words(rng, 1, 2)
        words.insert(rng.randrange(len(words) + 1), "good" if label else "bad")
        texts.append(" ".join(words))
        labels.append(label)
    return texts, np.array(labels, "int32")


def _entity_texts(n, seed):
    """Filler words with "good" (a POS entity) and "bad" (NEG) among them, as character spans."""
    rng = random.Random(seed)
    texts, entities = [], []
    for _ in range(n):
        words = _words(rng, 1, 2)
        for _ in range(rng.randrange(1, 3)):
            words.insert(rng.randrange(len(words) + 1), rng.choice(["good", "bad"]))
        text, spans, offset = " ".join(words), [], 0
        for word in words:
            start = text.index(word, offset)
            offset = start + len(word)
            if word in ("good", "bad"):
                spans.append((start, offset, "POS" if word == "good" else "NEG"))
        texts.append(text)
        entities.append(spans)
    return texts, entities


def _choices(n, seed):
    """A one-word context and three choices; the right one holds "good", the others "bad"."""
    rng = random.Random(seed)
    contexts, choices, labels = [], [], []
    for _ in range(n):
        label = rng.randrange(3)
        contexts.append(rng.choice(FILLER))
        choices.append([f"{rng.choice(FILLER)} {'good' if i == label else 'bad'}" for i in range(3)])
        labels.append(label)
    return (contexts, choices), np.array(labels, "int32")


def _questions(n, seed, unanswerable_every=0):
    """Contexts of filler words with "good" somewhere, the answer; with `unanswerable_every`, every
    such context has no "good" and its question no answer (None)."""
    rng = random.Random(seed)
    questions, contexts, answers = [], [], []
    for i in range(n):
        words = _words(rng, 2, 4)
        questions.append("what is " + rng.choice(FILLER))
        if unanswerable_every and i % unanswerable_every == 0:
            contexts.append(" ".join(words))
            answers.append(None)
            continue
        position = rng.randrange(len(words) + 1)
        words.insert(position, "good")
        contexts.append(" ".join(words))
        answers.append(("good", len(" ".join(words[:position])) + (1 if position else 0)))
    return (questions, contexts), answers


def _softmax(logits):
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


def _decoded(values):
    return [v.decode("utf-8") for v in values.tolist()]


# --- the families ------------------------------------------------------------------------------------


def _classifier_case():
    x, y = _sentiment_texts(32, seed=0)
    probe, _ = _sentiment_texts(6, seed=1)
    return battery.TaskCase(
        name="classifier",
        build=lambda encoder, preprocessor: AlbertTextClassifier(encoder, preprocessor, num_classes=2,
                                                                       pooling=POOLING),
        sequence_length=SEQ, x=x, y=y, probe=probe,
        serving_inputs=lambda texts: {"text": tf.constant(texts)},
        served_answers=lambda out: {"logits": out["logits"], "probabilities": out["probabilities"],
                                    "label_id": out["label_id"], "label": _decoded(out["label"])},
        predicted_answers=lambda logits: {"logits": logits, "probabilities": _softmax(logits),
                                          "label_id": logits.argmax(-1), "label": [LABELS[i] for i in logits.argmax(-1)]},
        export_kind="classification",
        signatures=("serving_default", "tokens", "classify"),
        export_kwargs={"labels": LABELS},
        bad_inputs=[
            battery.BadInput("a bare str", "a good dog", ValueError, "must be a batch of texts.*not one str"),
            battery.BadInput("non-strings", [1, 2], TypeError, "texts must be strings"),
            battery.BadInput("an empty batch", [], ValueError, "non-empty batch"),
            battery.BadInput("pair of different lengths", (["a good dog"], ["a", "b"]), ValueError, "equally long"),
            battery.BadInput("labels for fewer texts", ["a good dog", "a bad cat"], ValueError, "1 labels for 2 inputs",
                             y=[1]),
        ],
    )


def _sentiment_pairs(n, seed):
    """`_sentiment_texts` paired with one filler word each; the target is 1 for "good", -1 for "bad"."""
    texts, labels = _sentiment_texts(n, seed)
    rng = random.Random(seed)
    return (texts, [rng.choice(FILLER) for _ in texts]), labels * 2.0 - 1.0


def _regressor_case():
    x, y = _sentiment_pairs(32, seed=2)
    probe, _ = _sentiment_pairs(6, seed=3)
    return battery.TaskCase(
        name="regressor",
        build=lambda encoder, preprocessor: AlbertTextRegressor(encoder, preprocessor, pooling=POOLING),
        sequence_length=SEQ, x=x, y=y, probe=probe,
        serving_inputs=lambda pair: {"text": tf.constant(pair[0]), "text_b": tf.constant(pair[1])},
        served_answers=lambda out: out["score"],
        export_kind="regression",
        signatures=("serving_default", "tokens", "regress"),
        export_kwargs={"pair": True},
        bad_inputs=[
            battery.BadInput("a bare str", "a good dog", ValueError, "must be a batch of texts.*not one str"),
            battery.BadInput("a bare str in a pair", ("a good dog", ["a bad cat"]), ValueError,
                             "texts_a must be a batch of texts"),
            battery.BadInput("non-strings", ([1.5], ["a"]), TypeError, "texts_a must be strings"),
            battery.BadInput("an empty batch", ([], []), ValueError, "non-empty batch"),
            battery.BadInput("pair of different lengths", (["a good dog"], ["a", "b"]), ValueError, "equally long"),
            battery.BadInput("labels for fewer pairs", (["a good dog", "a bad cat"], ["a", "b"]), ValueError,
                             "1 labels for 2 inputs", y=[1.0]),
        ],
    )


def _entities(out):
    """The served entities as `predict`'s records (`albert_tf.tasks.tagging.metrics.entity_record`)."""
    return [[entity_record(label, start, end, text, score)
             for label, start, end, text, score in zip(_decoded(labels[:n]), starts[:n], ends[:n], _decoded(texts[:n]),
                                                       scores[:n])]
            for labels, starts, ends, texts, scores, n in zip(out["entity_labels"], out["entity_starts"], out["entity_ends"],
                                                              out["entity_texts"], out["entity_scores"], out["num_entities"])]


def _tagger_case():
    x, y = _entity_texts(32, seed=4)
    probe, _ = _entity_texts(6, seed=5)
    return battery.TaskCase(
        name="tagger",
        build=lambda encoder, preprocessor: AlbertTextTagger(encoder, preprocessor, TAGS),
        sequence_length=SEQ, x=x, y=y, probe=probe,
        serving_inputs=lambda texts: {"text": tf.constant(texts)},
        served_answers=_entities,
        export_kind="tagging",
        signatures=TEXT_SIGNATURES,
        bad_inputs=[
            battery.BadInput("a bare str", "a good dog", ValueError, "list of texts"),
            battery.BadInput("non-strings", [1, 2], ValueError, "list of texts \\(str\\)"),
            battery.BadInput("an empty batch", [], ValueError, "non-empty list of texts"),
            battery.BadInput("labels for fewer texts", ["a good dog", "a bad cat"], ValueError,
                             "1 label lists for 2 texts", y=[[(2, 6, "POS")]]),
            battery.BadInput("too few tags", ["a good dog"], ValueError, "2 tags for 3 word units", y=[["O", "B-POS"]]),
        ],
    )


def _multiple_choice_case():
    x, y = _choices(32, seed=6)
    probe, _ = _choices(6, seed=7)
    return battery.TaskCase(
        name="multiple_choice",
        build=lambda encoder, preprocessor: AlbertMultipleChoice(encoder, preprocessor),
        sequence_length=SEQ, x=x, y=y, probe=probe,
        serving_inputs=lambda pair: {"text": tf.constant(pair[0]), "question": tf.constant([""] * len(pair[0])),
                                     "choices": tf.constant(pair[1])},
        served_answers=lambda out: {"logits": out["logits"], "scores": out["scores"],
                                    "predicted_choice": out["predicted_choice"]},
        predicted_answers=lambda logits: {"logits": logits, "scores": _softmax(logits),
                                          "predicted_choice": logits.argmax(-1)},
        export_kind="multiple_choice",
        signatures=TEXT_SIGNATURES,
        bad_inputs=[
            battery.BadInput("a bare str", "a good dog", ValueError, "pair \\(contexts, choices\\)"),
            battery.BadInput("not a pair", ["a", "b", "c"], ValueError, "pair \\(contexts, choices\\)"),
            battery.BadInput("a bare str context", ("a", [["b", "c"]]), ValueError, "contexts must be a batch"),
            battery.BadInput("non-strings", ([1], [["b", "c"]]), TypeError, "contexts must be strings"),
            battery.BadInput("an empty batch", ([], []), ValueError, "non-empty batch"),
            battery.BadInput("labels for fewer contexts", (["a", "b"], [["c", "d"], ["e", "f"]]), ValueError,
                             "1 labels for 2 inputs", y=[0]),
            battery.BadInput("ragged choices", (["a", "b"], [["c", "d"], ["e"]]), ValueError, "rectangle"),
            battery.BadInput("one choice", (["a"], [["b"]]), ValueError, "at least 2 choices"),
            battery.BadInput("more contexts than rows", (["a", "b"], [["c", "d"]]), ValueError, "2 contexts but 1 rows"),
        ],
    )


def _answers(out):
    return [{"text": text, "start": int(start), "end": int(end), "score": float(score), "has_answer": int(has)}
            for text, start, end, score, has in zip(_decoded(out["answer_text"]), out["start_char"], out["end_char"],
                                                    out["score"], out["has_answer"])]


def _with_has_answer(answers):
    """`predict`'s answers with the export's `has_answer`: 1 where there is an answer."""
    return [dict(answer, has_answer=int(answer["text"] != "")) for answer in answers]


def _question_answerer_case(version):
    unanswerable_every = 3 if version == "v2" else 0
    x, y = _questions(32, seed=8, unanswerable_every=unanswerable_every)
    probe, _ = _questions(6, seed=9, unanswerable_every=unanswerable_every)
    bad_inputs = [
        battery.BadInput("not a pair", ["what is it"], ValueError, "pair \\(questions, contexts\\)"),
        battery.BadInput("a bare str", ("what is it", ["a good dog"]), ValueError, "lists of texts"),
        battery.BadInput("non-strings", ([1], ["a good dog"]), ValueError, "lists of texts \\(str\\)"),
        battery.BadInput("an empty batch", ([], []), ValueError, "non-empty lists of texts"),
        battery.BadInput("pair of different lengths", (["q", "r"], ["a good dog"]), ValueError,
                         "^2 questions but 1 contexts$"),
        battery.BadInput("answers for fewer questions", (["q", "r"], ["a good dog", "a dog"]), ValueError,
                         "^1 answers for 2 questions$", y=[("good", 2)]),
        battery.BadInput("an answer not in its context", (["q"], ["a good dog"]), ValueError,
                         "is not at character 0", y=[("good", 0)]),
    ]
    if version == "v1":
        bad_inputs.append(battery.BadInput("no answer for v1", (["q"], ["a dog"]), ValueError,
                                           "unanswerable questions need version='v2'", y=[None]))
    return battery.TaskCase(
        name=f"squad_{version}",
        build=lambda encoder, preprocessor: AlbertQuestionAnswerer(encoder, preprocessor, version=version,
                                                                   **QA_SETTINGS),
        sequence_length=QA_SEQ, x=x, y=y, probe=probe,
        serving_inputs=lambda pair: {"question": tf.constant(pair[0]), "context": tf.constant(pair[1])},
        served_answers=_answers,
        predicted_answers=_with_has_answer,
        export_kind=f"squad_{version}",
        signatures=TEXT_SIGNATURES,
        bad_inputs=bad_inputs,
        head_labels=_squad_head_labels(version),
    )


def _squad_head_labels(version):
    """The head reads the answer positions (and v2's answerability) as inputs, by their own names."""
    if version == "v1":
        return lambda y: {"start_positions": y["start_logits"], "end_positions": y["end_logits"]}
    return lambda y: {"start_positions": y["start_log_probs"], "end_positions": y["end_log_probs"],
                      "is_impossible": y["cls_logits"]}


CASES = {case.name: case for case in (
    _classifier_case(), _regressor_case(), _tagger_case(), _multiple_choice_case(), _question_answerer_case("v1"),
    _question_answerer_case("v2"),
)}
BAD_INPUTS = [
    pytest.param(name, bad, id=f"{name}-{bad.what}")
    for name, case in CASES.items() for bad in case.bad_inputs
]
