"""SQuAD answers from model outputs, and the official scores: n-best spans, EM/F1, no-answer threshold.

* `postprocess_v1`: the original v1.1 post-processing (`official.nlp.data.squad_lib_sp.
  postprocess_output`, which is google-research/albert `write_predictions_v1` for one pass): the
  `n_best_size` best starts times the `n_best_size` best ends of every feature, minus spans that
  leave the context, end before they start, are longer than `max_answer_length` pieces or start
  where the window is not the piece's max-context window; sorted by start + end logit, the text
  of each span cut from the original context through the piece-to-character offsets, duplicates
  dropped, `n_best_size` kept.
* `postprocess_v2`: the original v2.0 post-processing (`write_predictions_v2`) for the outputs of
  the ALBERT v2 head: the `start_n_top x end_n_top` beam of every feature with the same filters,
  sorted by start + end log-probability; the null score of an example is the lowest answerability
  logit among its features, and the answer is "" when it exceeds the threshold.
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
import math
import os
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

DEFAULT_N_BEST_SIZE = 20
DEFAULT_MAX_ANSWER_LENGTH = 30


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


def _softmax(scores: Sequence[float]) -> List[float]:
    if not scores:
        return []
    top = max(scores)
    exps = [math.exp(s - top) for s in scores]
    total = sum(exps)
    return [e / total for e in exps]


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


def postprocess_v1(
    examples: Sequence[Any],
    features: Sequence[Any],
    results: Sequence[RawResultV1],
    *,
    n_best_size: int = DEFAULT_N_BEST_SIZE,
    max_answer_length: int = DEFAULT_MAX_ANSWER_LENGTH,
) -> Tuple[Predictions, NBest]:
    """SQuAD v1.1 answers from start/end logits.

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
    from official.nlp.data import squad_lib_sp

    _check_positive("n_best_size", n_best_size)
    _check_positive("max_answer_length", max_answer_length)
    by_id = _results_by_id(features, results)
    _features_by_example(examples, features)
    # Plain floats, so that the n-best lists are JSON-serializable whatever the model returned.
    clean = [
        RawResultV1(uid, [float(x) for x in r.start_logits], [float(x) for x in r.end_logits])
        for uid, r in by_id.items()
    ]
    predictions, nbest, _ = squad_lib_sp.postprocess_output(
        all_examples=examples,
        all_features=features,
        all_results=clean,
        n_best_size=n_best_size,
        max_answer_length=max_answer_length,
        do_lower_case=True,  # unused by the function
        version_2_with_negative=False,
    )
    return predictions, nbest


def postprocess_v2(
    examples: Sequence[Any],
    features: Sequence[Any],
    results: Sequence[RawResultV2],
    *,
    n_best_size: int = DEFAULT_N_BEST_SIZE,
    max_answer_length: int = DEFAULT_MAX_ANSWER_LENGTH,
    null_score_diff_threshold: Optional[float] = None,
) -> Tuple[Predictions, NBest, NullScores]:
    """SQuAD v2.0 answers from the outputs of the ALBERT v2 head.

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
    _check_positive("n_best_size", n_best_size)
    _check_positive("max_answer_length", max_answer_length)
    by_id = _results_by_id(features, results)
    grouped = _features_by_example(examples, features)

    predictions = collections.OrderedDict()
    all_nbest = collections.OrderedDict()
    null_scores = collections.OrderedDict()
    for example_index, example in enumerate(examples):
        prelim = []
        score_null = 1_000_000.0  # the original's "large and positive" start value
        for feature_index, feature in enumerate(grouped.get(example_index, [])):
            result = by_id[feature.unique_id]
            start_n_top = len(result.start_top_index)
            if start_n_top == 0 or len(result.end_top_index) % start_n_top or len(result.start_top_log_probs) != start_n_top:
                raise ValueError(f"result {feature.unique_id} has inconsistent beam sizes")
            if len(result.end_top_log_probs) != len(result.end_top_index):
                raise ValueError(f"result {feature.unique_id} has inconsistent beam sizes")
            end_n_top = len(result.end_top_index) // start_n_top
            score_null = min(score_null, float(result.cls_logits))
            doc_offset = feature.tokens.index("[SEP]") + 1
            window = len(feature.tok_start_to_orig_index)
            for i in range(start_n_top):
                start_index = int(result.start_top_index[i])
                for j in range(end_n_top):
                    end_index = int(result.end_top_index[i * end_n_top + j])
                    if not 0 <= start_index - doc_offset < window:
                        continue
                    if end_index - doc_offset >= window:
                        continue
                    if not feature.token_is_max_context.get(start_index, False):
                        continue
                    if end_index < start_index or end_index - start_index + 1 > max_answer_length:
                        continue
                    prelim.append(
                        (
                            feature_index,
                            start_index - doc_offset,
                            end_index - doc_offset,
                            float(result.start_top_log_probs[i]),
                            float(result.end_top_log_probs[i * end_n_top + j]),
                        )
                    )
        prelim.sort(key=lambda p: p[3] + p[4], reverse=True)

        features_of_example = grouped.get(example_index, [])
        seen = set()
        nbest = []
        for feature_index, start, end, start_lp, end_lp in prelim:
            if len(nbest) >= n_best_size:
                break
            feature = features_of_example[feature_index]
            begin = feature.tok_start_to_orig_index[start]
            finish = feature.tok_end_to_orig_index[end]
            text = example.paragraph_text[begin : finish + 1].strip()
            if text in seen:
                continue
            seen.add(text)
            nbest.append((text, start_lp, end_lp))
        if not nbest:
            nbest.append(("", -1e6, -1e6))
        probs = _softmax([s + e for _, s, e in nbest])
        all_nbest[example.qas_id] = [
            collections.OrderedDict(text=t, probability=p, start_log_prob=s, end_log_prob=e)
            for (t, s, e), p in zip(nbest, probs)
        ]
        null_scores[example.qas_id] = score_null
        if null_score_diff_threshold is not None and score_null > null_score_diff_threshold:
            predictions[example.qas_id] = ""
        else:
            predictions[example.qas_id] = nbest[0][0]
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
