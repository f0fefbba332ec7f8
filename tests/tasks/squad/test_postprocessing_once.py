"""SQuAD post-processing is written once: `albert_tf.tasks.squad.spans`.

The Python entry points (`postprocessing.postprocess_v1` / `postprocess_v2`, on the features of
`albert_tf.tasks.squad.data`) and the served graph (`serving.QaGraph`, traced as the SavedModel's
`serving_default` traces it, on its own in-graph windows) must give the same answers for the
same model: random heads whose outputs depend only on a window's tokens and positions stand in
for a model, on questions with one or several (doc-stride) windows. The v1 Python answers are
also checked against the original (`official.nlp.data.squad_lib_sp.postprocess_output`), and the
modules are checked to leave the selection to `spans`.
"""

import ast
import inspect
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.tasks.squad import data as squad_data
from albert_tf.tasks.squad import postprocessing, serving, spans
from albert_tf.tokenization import SentencePieceTokenizer
from albert_tf.tokenization.in_graph import AlbertTokenizerLayer

SEQ = 40
READING = dict(doc_stride=8, max_query_length=8)
# Repeated words give repeated answer texts (the n-best drops them); long contexts, several windows.
CASES = [
    ("Where was Einstein born?", "Albert Einstein was born in Ulm in 1879."),
    ("Who gave their name to Normandy?",
     "The Normans were the people who in the 10th and 11th centuries gave their name to Normandy, a region in "
     "France. The Normans were descended from Norse raiders and pirates from Denmark, Iceland and Norway."),
    ("Who sold crêpes?", "  The  Café in\tZÜRICH sold 12,000 crêpes;   naïve  résumés\u00a0à la carte.  "),
    ("What?", "Norway"),
    ("Who is the king of the north?",
     "\u3000Paris lies on the Seine; who, where, when, what is the king of the north? The north, the north.\u2003"),
    ("When did Einstein move?",
     "Einstein moved to Bern in 1902, then to Zürich. Einstein was born in Ulm in 1879 and developed the theory "
     "of relativity. Einstein moved to Bern in 1902."),
]


class RandomHead:
    """A stand-in SQuAD head: random outputs that depend only on the tokens and positions of a
    window, so that both pipelines see the same outputs for the same window."""

    start_n_top, end_n_top = 4, 3

    def __init__(self, version: str, seed: int):
        rng = np.random.default_rng(seed)
        self.version = version
        self.token = tf.constant(rng.normal(0.0, 3.0, (5, 1000)), tf.float32)
        self.position = tf.constant(rng.normal(0.0, 1.0, (3, SEQ)), tf.float32)

    def _scores(self, ids, row):
        return tf.gather(self.token[row], tf.math.floormod(ids, 1000)) + self.position[row][None, : tf.shape(ids)[1]]

    def __call__(self, inputs, training=False):
        ids = tf.cast(inputs["input_ids"], tf.int32)
        if self.version == "v1":
            return {"start_logits": self._scores(ids, 0), "end_logits": self._scores(ids, 1)}
        p_mask = tf.cast(inputs["p_mask"], tf.float32)
        start_lp, start_index = tf.math.top_k(tf.nn.log_softmax(self._scores(ids, 0) - 1e4 * p_mask), self.start_n_top)
        # The ends depend on their start, as the real head's do.
        end = self._scores(ids, 1)[:, None, :] + 0.5 * tf.cast(start_index, tf.float32)[:, :, None] * self.position[2][None, None, : tf.shape(ids)[1]]
        end_lp, end_index = tf.math.top_k(tf.nn.log_softmax(end - 1e4 * p_mask[:, None, :]), self.end_n_top)
        mask = tf.cast(inputs["input_mask"], tf.float32)
        cls = tf.reduce_sum(tf.gather(self.token[4], tf.math.floormod(ids, 1000)) * mask, 1) / tf.reduce_sum(mask, 1)
        beam = [tf.shape(ids)[0], self.start_n_top * self.end_n_top]
        return {"start_top_log_probs": start_lp, "start_top_index": start_index, "end_top_log_probs": tf.reshape(end_lp, beam),
                "end_top_index": tf.reshape(end_index, beam), "cls_logits": cls}


@pytest.fixture(scope="module")
def layer(squad_spm_model):
    return AlbertTokenizerLayer.from_sentencepiece(squad_spm_model, sequence_length=SEQ)


@pytest.fixture(scope="module")
def converted(squad_spm_model):
    """The Python pipeline's examples, features and model inputs of CASES."""
    tokenizer = SentencePieceTokenizer(squad_spm_model, lower_case=True)
    examples = [squad_data.SquadExample(str(i), q, c) for i, (q, c) in enumerate(CASES)]
    features, skipped = squad_data.convert_examples_to_features(
        examples, tokenizer, is_training=False, max_seq_length=SEQ, **READING)
    assert not skipped
    windows = [sum(f.example_index == i for f in features) for i in range(len(CASES))]
    assert max(windows) >= 3 and min(windows) == 1  # doc-stride questions and one-window questions
    inputs = {k: tf.constant(v) for k, v in squad_data.features_to_arrays(features, is_training=False).items()
              if k in squad_data.MODEL_INPUTS}
    return examples, features, inputs


def python_answers(converted, head, settings, threshold=None):
    """`postprocess_v1` / `postprocess_v2` on the head's outputs for the Python features."""
    examples, features, inputs = converted
    out = {k: v.numpy() for k, v in head(inputs).items()}
    options = dict(n_best_size=settings["n_best_size"], max_answer_length=settings["max_answer_length"])
    if head.version == "v1":
        results = [postprocessing.RawResultV1(f.unique_id, out["start_logits"][i], out["end_logits"][i])
                   for i, f in enumerate(features)]
        return postprocessing.postprocess_v1(examples, features, results, **options) + (None,)
    keys = ("start_top_log_probs", "start_top_index", "end_top_log_probs", "end_top_index", "cls_logits")
    results = [postprocessing.RawResultV2(f.unique_id, *(out[k][i] for k in keys)) for i, f in enumerate(features)]
    return postprocessing.postprocess_v2(examples, features, results, null_score_diff_threshold=threshold, **options)


def served_answers(layer, head, settings):
    """The served graph's answers (traced with the serving signature's string inputs)."""
    graph = serving.QaGraph(head, layer, serving.qa_settings(settings, head.version))
    spec = tf.TensorSpec([None], tf.string)
    answer = tf.function(graph.__call__, input_signature=[spec, spec])
    out = answer(tf.constant([q for q, _ in CASES]), tf.constant([c for _, c in CASES]))
    return {k: v.numpy() for k, v in out.items()}


def assert_same_answers(served, predictions, nbest, version):
    """The served answer of every question is the Python one, with its score and span."""
    for i, (_, context) in enumerate(CASES):
        text = served["answer_text"][i].decode("utf-8")
        best = nbest[str(i)][0]
        if version == "v1" and predictions[str(i)] == "empty":  # the original's stand-in: no legal span
            assert (text, served["has_answer"][i], served["score"][i]) == ("", 0, spans.NO_SPAN_SCORE)
            continue
        assert text == predictions[str(i)], i
        assert bool(served["has_answer"][i]) == bool(text)
        if text:
            assert context[served["start_char"][i]: served["end_char"][i]] == text
        else:
            assert served["start_char"][i] == served["end_char"][i] == -1
        keys = ("start_logit", "end_logit") if version == "v1" else ("start_log_prob", "end_log_prob")
        np.testing.assert_allclose(served["score"][i], best[keys[0]] + best[keys[1]], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("n_best_size, max_answer_length", [(20, 30), (3, 4)])
def test_v1_python_and_served_answers_are_equal(converted, layer, seed, n_best_size, max_answer_length):
    settings = dict(READING, n_best_size=n_best_size, max_answer_length=max_answer_length)
    head = RandomHead("v1", seed)
    predictions, nbest, _ = python_answers(converted, head, settings)
    served = served_answers(layer, head, settings)
    assert_same_answers(served, predictions, nbest, "v1")
    assert served["has_answer"].sum() >= 3
    assert all(len(entries) <= n_best_size and len({e["text"] for e in entries}) == len(entries) for entries in nbest.values())


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("n_best_size, max_answer_length", [(20, 30), (3, 4)])
def test_v2_python_and_served_answers_and_null_scores_are_equal(converted, layer, seed, n_best_size, max_answer_length):
    head = RandomHead("v2", seed)
    settings = dict(READING, n_best_size=n_best_size, max_answer_length=max_answer_length)
    _, _, null = python_answers(converted, head, settings)
    # A threshold that is one question's null score: that question keeps its answer (not greater).
    threshold = sorted(null.values())[len(null) // 2]
    settings["null_score_diff_threshold"] = threshold
    predictions, nbest, null = python_answers(converted, head, settings, threshold=threshold)
    served = served_answers(layer, head, settings)
    assert_same_answers(served, predictions, nbest, "v2")
    np.testing.assert_allclose(served["null_score"], [null[str(i)] for i in range(len(CASES))], rtol=1e-6, atol=1e-6)
    unanswered = [null[str(i)] > threshold for i in range(len(CASES))]
    assert 0 < sum(unanswered) < len(CASES)  # null answers and answers
    assert all(predictions[str(i)] == "" for i, no in enumerate(unanswered) if no)
    assert any(predictions[str(i)] for i, no in enumerate(unanswered) if not no)


def test_v1_python_answers_are_the_originals_on_ties(converted):
    """Integer logits tie often: the order of the original's stable sorts must be kept."""
    from official.nlp.data import squad_lib_sp

    examples, features, _ = converted
    rng = np.random.default_rng(7)
    for n_best_size, max_answer_length in ((20, 30), (4, 3)):
        results = [postprocessing.RawResultV1(f.unique_id, [float(x) for x in rng.integers(-3, 3, SEQ)],
                                              [float(x) for x in rng.integers(-3, 3, SEQ)]) for f in features]
        predictions, nbest = postprocessing.postprocess_v1(
            examples, features, results, n_best_size=n_best_size, max_answer_length=max_answer_length)
        expected, expected_nbest, _ = squad_lib_sp.postprocess_output(
            examples, features, results, n_best_size, max_answer_length, do_lower_case=True)
        assert predictions == dict(expected)
        for qas_id, entries in expected_nbest.items():
            got = nbest[qas_id]
            assert [(e["text"], e["start_logit"], e["end_logit"]) for e in got] == [
                (e["text"], e["start_logit"], e["end_logit"]) for e in entries]
            np.testing.assert_allclose([e["probability"] for e in got], [e["probability"] for e in entries], rtol=1e-12)


def test_both_paths_take_their_spans_from_spans_legal_spans(converted, layer, monkeypatch):
    """Forbidding every span in `spans` leaves both paths without an answer: neither filters spans itself."""
    monkeypatch.setattr(spans, "legal_spans", lambda windows, candidates, max_answer_length: tf.zeros_like(candidates.valid))
    settings = dict(READING, n_best_size=20, max_answer_length=30)
    predictions, nbest, _ = python_answers(converted, RandomHead("v1", 0), settings)
    assert set(predictions.values()) == {"empty"}
    assert not served_answers(layer, RandomHead("v1", 0), settings)["has_answer"].any()
    predictions, nbest, _ = python_answers(converted, RandomHead("v2", 0), settings)
    assert set(predictions.values()) == {""} and {e[0]["start_log_prob"] for e in nbest.values()} == {spans.NO_SPAN_SCORE}


def _called_names(function) -> set:
    """The names a function calls (`f(...)` gives "f", `module.f(...)` gives "module.f")."""
    names = set()
    for node in ast.walk(ast.parse(textwrap.dedent(inspect.getsource(function)))):
        if isinstance(node, ast.Call):
            target = node.func
            if isinstance(target, ast.Name):
                names.add(target.id)
            elif isinstance(target, ast.Attribute):
                names.add(f"{target.value.id}.{target.attr}" if isinstance(target.value, ast.Name) else target.attr)
    return names


def test_the_python_module_and_the_served_graph_leave_the_selection_to_spans():
    # Both entry points go through `_select`, which calls the shared selection ...
    assert "_select" in _called_names(postprocessing.postprocess_v1) & _called_names(postprocessing.postprocess_v2)
    assert "spans.select_answers" in _called_names(postprocessing._select)
    assert "spans.select_answers" in _called_names(serving.QaGraph.answers)
    # ... and neither module ranks, filters by length, cuts, strips or scores spans itself.
    for module in (postprocessing, serving):
        tree = ast.parse(inspect.getsource(module))
        calls = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                calls.add(node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", ""))
        assert not calls & {"sorted", "sort", "argsort", "top_k", "strip", "exp", "softmax", "_softmax"}, module.__name__
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare):
                names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
                names |= {n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
                assert not names & {"max_answer_length", "start_index", "end_index", "score_null"}, ast.unparse(node)
            if isinstance(node, ast.Subscript) and "paragraph_text" in ast.unparse(node.value):
                raise AssertionError(f"{module.__name__} cuts the context itself: {ast.unparse(node)}")
