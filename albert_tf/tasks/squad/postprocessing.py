"""SQuAD answers from model outputs, and the official scores: n-best spans, EM/F1, no-answer threshold.

The answers are not selected here: `postprocess_v1` and `postprocess_v2` pack the `SquadFeature`s
and the model's results of each feature as tensors and call `albert_tf.tasks.squad.spans.
select_answers`, the one implementation of the original post-processing, which the served graph
(`albert_tf.tasks.squad.serving.QaGraph`) calls too. What stays here is the Python side:

* `postprocess_v1`: the original v1.1 post-processing (`official.nlp.data.squad_lib_sp.
  postprocess_output`, which is google-research/albert `write_predictions_v1` for one pass) as
  `qas_id -> answer` and the n-best dicts (`text`, `probability`, `start_logit`, `end_logit`);
  an example without a legal span gets the original's stand-in answer "empty".
* `postprocess_v2`: the original v2.0 post-processing (`write_predictions_v2`) for the outputs of
  the ALBERT v2 head, with the n-best dicts (`start_log_prob`, `end_log_prob`) and the null
  scores; the answer is "" when the null score exceeds the threshold.
* `squad_v1_metrics` / `squad_v2_metrics`: the official evaluation scripts (their copies in
  `official.nlp.tools`), as percentages, with the v2 script's `best_f1_thresh` search.
* `evaluate_v1` / `evaluate_v2`: the whole dev evaluation; v2 tunes the threshold the original
  way (predict with no threshold, take the official `best_f1_thresh` of the null scores, predict
  again with it).

One deliberate difference from the original v2 code: an example is unanswerable when its null
score is *greater than* the threshold, as the official script's threshold search assumes (the
original code used "greater or equal", which turned the question sitting exactly at the threshold
into a no-answer that the search had counted as answered). So the reported `f1` equals `best_f1`.
"""

from __future__ import annotations

import collections
import os
from typing import Any, Dict, Iterator, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np
import tensorflow as tf

from albert_tf.tasks.squad import spans

DEFAULT_N_BEST_SIZE = spans.DEFAULT_N_BEST_SIZE
DEFAULT_MAX_ANSWER_LENGTH = spans.DEFAULT_MAX_ANSWER_LENGTH
# Questions post-processed per call of the selection: bounds the memory of a large dev set.
_CHUNK_EXAMPLES = 512


class RawResultV1(NamedTuple):
    """Model outputs for one feature of the v1 head (one logit per position)."""

    unique_id: int
    start_logits: Sequence[float]
    end_logits: Sequence[float]


class RawResultV2(NamedTuple):
    """Model outputs for one feature of the v2 head (beam of starts, ends per start, null logit)."""

    unique_id: int
    start_top_log_probs: Sequence[float]
    start_top_index: Sequence[int]
    end_top_log_probs: Sequence[float]
    end_top_index: Sequence[int]
    cls_logits: float


# qas_id -> answer text; qas_id -> candidate dicts (best first); qas_id -> null score.
Predictions = Dict[str, str]
NBest = Dict[str, List[Dict[str, Any]]]
NullScores = Dict[str, float]


def _check_positive(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")


def _results_by_id(features, results) -> Dict[int, Any]:
    by_id = {int(r.unique_id): r for r in results}
    missing = [f.unique_id for f in features if f.unique_id not in by_id]
    if missing:
        raise ValueError(
            f"{len(missing)} of {len(features)} features have no model result (first unique_id {missing[0]}); "
            f"predict on the features' dataset in order, without dropping a remainder"
        )
    return by_id


def _features_by_example(examples, features) -> Dict[int, list]:
    grouped: Dict[int, list] = collections.defaultdict(list)
    for feature in features:
        if not 0 <= feature.example_index < len(examples):
            raise ValueError(
                f"feature {feature.unique_id} belongs to example {feature.example_index}, "
                f"but there are {len(examples)} examples; pass the examples the features were made from"
            )
        grouped[feature.example_index].append(feature)
    return grouped


# --- features and results packed as the selection's tensors --------------------------------------


def _rows(values: Sequence[Sequence[Any]], dtype) -> Tuple[np.ndarray, np.ndarray]:
    """Rows of different lengths as one zero-padded array, and the mask of their real entries."""
    width = max([len(v) for v in values] + [1])
    array = np.zeros((len(values), width), dtype)
    mask = np.zeros((len(values), width), bool)
    for row, value in enumerate(values):
        array[row, : len(value)] = value
        mask[row, : len(value)] = True
    return array, mask


def _windows(examples: Sequence[Any], windows: Sequence[Tuple[int, Any]]) -> spans.Windows:
    """The `spans.Windows` of `(example index in examples, feature)` pairs, grouped by example."""
    for _, feature in windows:
        if len(feature.tok_start_to_orig_index) != len(feature.tok_end_to_orig_index):
            raise ValueError(f"feature {feature.unique_id} has different numbers of piece starts and ends")
    is_max_context = np.zeros((len(windows), max([len(f.tokens) for _, f in windows] + [1])), bool)
    for row, (_, feature) in enumerate(windows):
        positions = [p for p, value in feature.token_is_max_context.items() if value and 0 <= p < is_max_context.shape[1]]
        is_max_context[row, positions] = True
    first_char, _ = _rows([f.tok_start_to_orig_index for _, f in windows], np.int32)
    last_char, _ = _rows([f.tok_end_to_orig_index for _, f in windows], np.int32)
    return spans.Windows(
        example=tf.constant([e for e, _ in windows], tf.int32, shape=[len(windows)]),
        doc_offset=tf.constant([f.tokens.index("[SEP]") + 1 for _, f in windows], tf.int32, shape=[len(windows)]),
        window_length=tf.constant([len(f.tok_start_to_orig_index) for _, f in windows], tf.int32, shape=[len(windows)]),
        is_max_context=tf.constant(is_max_context),
        first_char=tf.constant(first_char),
        last_char=tf.constant(last_char),
        contexts=tf.constant([e.paragraph_text for e in examples], tf.string, shape=[len(examples)]),
    )


def _v1_candidates(results: Sequence[RawResultV1], n_best_size: int) -> spans.Candidates:
    start, mask = _rows([np.asarray(r.start_logits, np.float64) for r in results], np.float64)
    end, end_mask = _rows([np.asarray(r.end_logits, np.float64) for r in results], np.float64)
    if not np.array_equal(mask, end_mask):
        raise ValueError("every result needs as many start logits as end logits")
    # Only the positions a result has are ranked (results of different lengths share a width).
    return spans.v1_candidates(start, end, n_best_size, rank_mask=mask)


def _v2_beam(result: RawResultV2) -> Tuple[int, int]:
    """(start_n_top, end_n_top) of a v2 result."""
    start_n_top = len(result.start_top_index)
    if (
        start_n_top == 0
        or len(result.start_top_log_probs) != start_n_top
        or len(result.end_top_index) % start_n_top
        or len(result.end_top_log_probs) != len(result.end_top_index)
    ):
        raise ValueError(f"result {result.unique_id} has inconsistent beam sizes")
    return start_n_top, len(result.end_top_index) // start_n_top


def _v2_candidates(results: Sequence[RawResultV2]) -> spans.Candidates:
    beams = [_v2_beam(r) for r in results]
    start_n_top = max([s for s, _ in beams] + [1])
    end_n_top = max([e for _, e in beams] + [1])
    # Beams of different sizes padded to one: entry (i, j) stays at i * end_n_top + j.
    end_index = np.zeros((len(results), start_n_top, end_n_top), np.int32)
    end_log_probs = np.zeros((len(results), start_n_top, end_n_top), np.float64)
    valid = np.zeros((len(results), start_n_top, end_n_top), bool)
    for row, (result, (s, e)) in enumerate(zip(results, beams)):
        end_index[row, :s, :e] = np.reshape(result.end_top_index, (s, e))
        end_log_probs[row, :s, :e] = np.reshape(np.asarray(result.end_top_log_probs, np.float64), (s, e))
        valid[row, :s, :e] = True
    start_index, _ = _rows([np.asarray(r.start_top_index, np.int32) for r in results], np.int32)
    start_log_probs, _ = _rows([np.asarray(r.start_top_log_probs, np.float64) for r in results], np.float64)
    flat = lambda x: np.reshape(x, (len(results), start_n_top * end_n_top))  # noqa: E731
    return spans.v2_candidates(start_index, start_log_probs, flat(end_index), flat(end_log_probs), valid=flat(valid))


# --- answers -------------------------------------------------------------------------------------


class _Answer(NamedTuple):
    """One question's share of `spans.Answers`, in Python values."""

    text: str
    found: bool
    null_score: Optional[float]
    nbest: List[Tuple[str, float, float, float]]  # (text, start score, end score, probability)


def _select(
    examples: Sequence[Any],
    features: Sequence[Any],
    results: Sequence[Any],
    *,
    version: str,
    n_best_size: int,
    max_answer_length: int,
    null_score_diff_threshold: Optional[float] = None,
) -> Iterator[Tuple[Any, _Answer]]:
    """`(example, its answer)` for every example, by `spans.select_answers` on the features'
    windows (each example's features in their order, as the served graph's windows)."""
    _check_positive("n_best_size", n_best_size)
    _check_positive("max_answer_length", max_answer_length)
    by_id = _results_by_id(features, results)
    grouped = _features_by_example(examples, features)
    examples = list(examples)
    for begin in range(0, len(examples), _CHUNK_EXAMPLES):
        chunk = examples[begin : begin + _CHUNK_EXAMPLES]
        windows = [(i, f) for i in range(len(chunk)) for f in grouped.get(begin + i, [])]
        chunk_results = [by_id[f.unique_id] for _, f in windows]
        if version == "v2":
            candidates = _v2_candidates(chunk_results)
            cls_logits = tf.constant([float(r.cls_logits) for r in chunk_results], tf.float64, shape=[len(windows)])
        else:
            candidates = _v1_candidates(chunk_results, n_best_size)
            cls_logits = None
        answers = spans.select_answers(
            _windows(chunk, windows), candidates, max_answer_length=max_answer_length, n_best_size=n_best_size,
            cls_logits=cls_logits, null_score_diff_threshold=null_score_diff_threshold,
        )
        yield from zip(chunk, _python_answers(answers))


def _python_answers(answers: spans.Answers) -> List[_Answer]:
    nbest = zip(
        answers.nbest_text.to_list(), answers.nbest_start_score.to_list(), answers.nbest_end_score.to_list(),
        answers.nbest_probability.to_list(),
    )
    null_scores = [None] * len(answers.text) if answers.null_score is None else answers.null_score.numpy().tolist()
    return [
        _Answer(text.decode("utf-8"), bool(found), null, [(t.decode("utf-8"), s, e, p) for t, s, e, p in zip(*entries)])
        for text, found, null, entries in zip(answers.text.numpy(), answers.found.numpy(), null_scores, nbest)
    ]


def postprocess_v1(
    examples: Sequence[Any],
    features: Sequence[Any],
    results: Sequence[RawResultV1],
    *,
    n_best_size: int = DEFAULT_N_BEST_SIZE,
    max_answer_length: int = DEFAULT_MAX_ANSWER_LENGTH,
) -> Tuple[Predictions, NBest]:
    """SQuAD v1.1 answers from start/end logits (`spans.select_answers`).

    Args:
        examples: The `SquadExample`s (`albert_tf.tasks.squad.data`).
        features: Their `SquadFeature`s.
        results: One `RawResultV1` per feature (any order).
        n_best_size: Starts, ends and final candidates kept (20).
        max_answer_length: Longest answer in pieces (30).

    Returns:
        `(predictions, nbest)`: `qas_id -> answer text`, and `qas_id -> candidates` (dicts with
        `text`, `probability`, `start_logit`, `end_logit`, best first). An example without a
        valid span gets the original's stand-in answer "empty".

    Raises:
        ValueError: a feature without a result, or features of other examples.
    """
    predictions: Predictions = {}
    all_nbest: NBest = {}
    for example, answer in _select(examples, features, results, version="v1", n_best_size=n_best_size, max_answer_length=max_answer_length):
        entries = [dict(text=t, probability=p, start_logit=s, end_logit=e) for t, s, e, p in answer.nbest]
        # The original's stand-in when no span is legal (the served graph answers "" there).
        predictions[example.qas_id] = answer.text if answer.found else "empty"
        all_nbest[example.qas_id] = entries or [dict(text="empty", probability=1.0, start_logit=0.0, end_logit=0.0)]
    return predictions, all_nbest


def postprocess_v2(
    examples: Sequence[Any],
    features: Sequence[Any],
    results: Sequence[RawResultV2],
    *,
    n_best_size: int = DEFAULT_N_BEST_SIZE,
    max_answer_length: int = DEFAULT_MAX_ANSWER_LENGTH,
    null_score_diff_threshold: Optional[float] = None,
) -> Tuple[Predictions, NBest, NullScores]:
    """SQuAD v2.0 answers from the outputs of the ALBERT v2 head (`spans.select_answers`).

    Args:
        examples, features: As for `postprocess_v1`.
        results: One `RawResultV2` per feature (any order).
        n_best_size: Candidates kept per example (20).
        max_answer_length: Longest answer in pieces (30).
        null_score_diff_threshold: Answer "" when the example's null score exceeds it; None
            always answers the best span (how the threshold is tuned).

    Returns:
        `(predictions, nbest, null_scores)`: `qas_id -> answer text` ("" for no answer),
        `qas_id -> candidates` (dicts with `text`, `probability`, `start_log_prob`,
        `end_log_prob`), and `qas_id -> null score` (the lowest answerability logit over the
        example's features; the "na_probs" of the official script). An example without any
        valid span (or without features) gets "" with log-probabilities -1e6, as the original.

    Raises:
        ValueError: a feature without a result, inconsistent beam sizes, or features of other
            examples.
    """
    predictions: Predictions = {}
    all_nbest: NBest = {}
    null_scores: NullScores = {}
    answers = _select(
        examples, features, results, version="v2", n_best_size=n_best_size, max_answer_length=max_answer_length,
        null_score_diff_threshold=null_score_diff_threshold,
    )
    for example, answer in answers:
        entries = [dict(text=t, probability=p, start_log_prob=s, end_log_prob=e) for t, s, e, p in answer.nbest]
        predictions[example.qas_id] = answer.text
        all_nbest[example.qas_id] = entries or [
            dict(text="", probability=1.0, start_log_prob=spans.NO_SPAN_SCORE, end_log_prob=spans.NO_SPAN_SCORE)
        ]
        null_scores[example.qas_id] = answer.null_score
    return predictions, all_nbest, null_scores


# --- the official scores ------------------------------------------------------------------------


def _dataset_articles(dataset) -> List[Dict[str, Any]]:
    """The `data` list, from the list itself or the whole file's object."""
    if isinstance(dataset, Mapping) and "data" in dataset:
        dataset = dataset["data"]
    if not isinstance(dataset, list) or not all(
        isinstance(a, Mapping) and isinstance(a.get("paragraphs"), list) for a in dataset
    ):
        raise ValueError("dataset must be a SQuAD 'data' list (see albert_tf.tasks.squad.data.load_squad_json)")
    return dataset


def _check_predictions(predictions, name="predictions") -> None:
    if not isinstance(predictions, Mapping):
        raise TypeError(f"{name} must map question ids to answers, got {type(predictions).__name__}")
    for qid, value in predictions.items():
        if not isinstance(qid, str) or not isinstance(value, str):
            raise TypeError(f"{name} must map string ids to string answers; {qid!r} -> {value!r}")


def squad_v1_metrics(dataset, predictions: Mapping[str, str]) -> Dict[str, float]:
    """The official SQuAD v1.1 evaluation: `exact_match` and `f1` in percent.

    Every question of `dataset` counts; one without a prediction scores 0 (and is logged), as the
    official script does.
    """
    from official.nlp.tools import squad_evaluate_v1_1

    articles = _dataset_articles(dataset)
    _check_predictions(predictions)
    for article in articles:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                if not qa.get("answers"):
                    raise ValueError(f"question {qa.get('id')!r} has no gold answer; SQuAD v1.1 evaluation needs one")
    scores = squad_evaluate_v1_1.evaluate(articles, predictions)
    # The tf-models copy returns fractions (and calls F1 "final_f1"); the official script, percent.
    return {"exact_match": 100.0 * scores["exact_match"], "f1": 100.0 * scores["final_f1"]}


def squad_v2_metrics(
    dataset, predictions: Mapping[str, str], na_probs: Optional[Mapping[str, float]] = None
) -> Dict[str, float]:
    """The official SQuAD v2.0 evaluation (of the predicted questions), in percent.

    Args:
        dataset: The SQuAD v2.0 `data` list (or the file's object).
        predictions: `qas_id -> answer` ("" for no answer).
        na_probs: `qas_id -> null score` (any monotone no-answer score, e.g. `postprocess_v2`'s
            null scores); enables the threshold search.

    Returns:
        `exact`, `f1`, `total`, `HasAns_*` / `NoAns_*` (when there are such questions), and
        with `na_probs` the official `best_exact`, `best_exact_thresh`, `best_f1`,
        `best_f1_thresh`: the scores when every question whose null score exceeds the threshold
        is answered "", at the best threshold.
    """
    from official.nlp.tools import squad_evaluate_v2_0

    articles = _dataset_articles(dataset)
    _check_predictions(predictions)
    if na_probs is not None:
        if not isinstance(na_probs, Mapping):
            raise TypeError(f"na_probs must map question ids to scores, got {type(na_probs).__name__}")
        missing = [qid for qid in predictions if qid not in na_probs]
        if missing:
            raise ValueError(f"na_probs lacks {len(missing)} predicted question(s), e.g. {missing[0]!r}")
        na_probs = {qid: float(na_probs[qid]) for qid in predictions}
    if not predictions:
        raise ValueError("there are no predictions to evaluate")
    scores = squad_evaluate_v2_0.evaluate(articles, dict(predictions), na_probs)
    # The tf-models copy names the official best_* results final_*.
    out: Dict[str, float] = {}
    for key, value in scores.items():
        if key.startswith("final_"):
            if na_probs is None:
                continue
            key = "best_" + key[len("final_"):]
        if key.startswith("pr_"):
            continue
        out[key] = float(value)
    return out


def evaluate_v1(
    dataset,
    examples: Sequence[Any],
    features: Sequence[Any],
    results: Sequence[RawResultV1],
    *,
    n_best_size: int = DEFAULT_N_BEST_SIZE,
    max_answer_length: int = DEFAULT_MAX_ANSWER_LENGTH,
) -> Tuple[Dict[str, float], Predictions, NBest]:
    """`postprocess_v1` then `squad_v1_metrics`: `(metrics, predictions, nbest)`."""
    predictions, nbest = postprocess_v1(
        examples, features, results, n_best_size=n_best_size, max_answer_length=max_answer_length
    )
    return squad_v1_metrics(dataset, predictions), predictions, nbest


def evaluate_v2(
    dataset,
    examples: Sequence[Any],
    features: Sequence[Any],
    results: Sequence[RawResultV2],
    *,
    n_best_size: int = DEFAULT_N_BEST_SIZE,
    max_answer_length: int = DEFAULT_MAX_ANSWER_LENGTH,
    null_score_diff_threshold: Optional[float] = None,
) -> Tuple[Dict[str, float], Predictions, NBest, NullScores]:
    """The v2.0 dev evaluation with the original threshold tuning.

    Without `null_score_diff_threshold`, the best span of every question and the null scores give
    the official `best_f1_thresh`; the answers are then predicted again with that threshold. With
    one (e.g. tuned on another set), it is used as it is.

    Returns:
        `(metrics, predictions, nbest, null_scores)`; metrics are those of `squad_v2_metrics` for
        the final predictions, plus `best_exact`, `best_exact_thresh`, `best_f1`,
        `best_f1_thresh` of the threshold search and the `null_score_diff_threshold` used.
    """
    first, _, null_scores = postprocess_v2(
        examples, features, results, n_best_size=n_best_size, max_answer_length=max_answer_length
    )
    search = squad_v2_metrics(dataset, first, null_scores)
    def predict(threshold):
        return postprocess_v2(
            examples,
            features,
            results,
            n_best_size=n_best_size,
            max_answer_length=max_answer_length,
            null_score_diff_threshold=threshold,
        )

    threshold = search["best_f1_thresh"] if null_score_diff_threshold is None else float(null_score_diff_threshold)
    predictions, nbest, null_scores = predict(threshold)
    metrics = squad_v2_metrics(dataset, predictions)
    if null_score_diff_threshold is None and threshold == 0.0 and null_scores and metrics["f1"] < search["best_f1"]:
        # The official search starts from "answer nothing" at threshold 0.0, which assumes no-answer
        # probabilities in [0, 1]; null-score differences can be negative, so that state needs a
        # threshold below every null score.
        threshold = min(null_scores.values()) - 1.0
        predictions, nbest, null_scores = predict(threshold)
        metrics = squad_v2_metrics(dataset, predictions)
    for key in ("best_exact", "best_exact_thresh", "best_f1", "best_f1_thresh"):
        metrics[key] = search[key]
    metrics["null_score_diff_threshold"] = threshold
    return metrics, predictions, nbest, null_scores


def write_json_atomically(path: Union[str, os.PathLike], value: Any) -> None:
    """Writes `value` as indented JSON through a temporary file and a rename (predictions, n-best,
    null odds), so that no half-written file is ever left."""
    from albert_tf import file_io

    file_io.atomic_write_json(path, value, indent=4, sort_keys=False, makedirs=True)
