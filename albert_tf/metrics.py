"""Evaluation metrics of the fine-tuning tasks, as GLUE and CoNLL report them, in NumPy.

* `accuracy`; `f1_score` / `precision_recall_f1` of a positive class (MRPC, QQP report F1 of
  label 1); `matthews_corrcoef` (CoLA), the multi-class form of Gorodkin (2004), equal to the
  usual binary formula for two classes and 0 when it is undefined (a constant prediction);
* `pearson_corr` and `spearman_corr` (STS-B); Spearman ranks ties by their average rank;
* `token_accuracy` over the labelled positions of token classification.

`glue_metrics(names, predictions, labels)` computes a list of them by name; `METRICS` lists the
names.

The entity-level scores of tagging (`get_entities`, `split_tag`, `entity_scores`) live in
`albert_tf.tasks.tagging.metrics`; they are importable from here too, loaded on first use (the
task layer imports this module, so importing it back eagerly would make the two a cycle).
"""

from __future__ import annotations

import math
from typing import Dict, Optional, Sequence, Tuple

import numpy as np

from albert_tf._lazy import lazy_attributes as _lazy_attributes


def _check_same_length(predictions, labels) -> Tuple[np.ndarray, np.ndarray]:
    predictions = np.asarray(predictions).reshape(-1)
    labels = np.asarray(labels).reshape(-1)
    if predictions.shape != labels.shape:
        raise ValueError(f"predictions ({predictions.shape[0]}) and labels ({labels.shape[0]}) differ in length")
    if predictions.size == 0:
        raise ValueError("no predictions to score")
    return predictions, labels


def accuracy(predictions, labels) -> float:
    """Fraction of predictions equal to their label."""
    predictions, labels = _check_same_length(predictions, labels)
    return float(np.mean(predictions == labels))


def precision_recall_f1(predictions, labels, positive=1) -> Tuple[float, float, float]:
    """Precision, recall and F1 of the class `positive` (0 where a ratio is 0/0)."""
    predictions, labels = _check_same_length(predictions, labels)
    predicted = predictions == positive
    actual = labels == positive
    true_positives = float(np.sum(predicted & actual))
    precision = true_positives / float(np.sum(predicted)) if np.any(predicted) else 0.0
    recall = true_positives / float(np.sum(actual)) if np.any(actual) else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def f1_score(predictions, labels, positive=1) -> float:
    """F1 of the class `positive` (GLUE's F1 for MRPC and QQP, positive = 1)."""
    return precision_recall_f1(predictions, labels, positive)[2]


def matthews_corrcoef(predictions, labels) -> float:
    """Matthews correlation coefficient (multi-class R_K; 0 when undefined)."""
    predictions, labels = _check_same_length(predictions, labels)
    classes, encoded = np.unique(np.concatenate([labels, predictions]), return_inverse=True)
    n = labels.size
    truth, predicted = encoded[:n], encoded[n:]
    confusion = np.zeros((classes.size, classes.size), dtype=np.float64)
    np.add.at(confusion, (truth, predicted), 1.0)
    t = confusion.sum(axis=1)  # occurrences of each class
    p = confusion.sum(axis=0)  # predictions of each class
    c = np.trace(confusion)
    s = float(n)
    numerator = c * s - np.dot(t, p)
    denominator = math.sqrt(s * s - np.dot(p, p)) * math.sqrt(s * s - np.dot(t, t))
    return float(numerator / denominator) if denominator else 0.0


def pearson_corr(predictions, labels) -> float:
    """Pearson correlation (NaN when either side is constant)."""
    predictions, labels = _check_same_length(predictions, labels)
    x = predictions.astype(np.float64) - np.mean(predictions, dtype=np.float64)
    y = labels.astype(np.float64) - np.mean(labels, dtype=np.float64)
    denominator = math.sqrt(float(np.dot(x, x)) * float(np.dot(y, y)))
    return float(np.dot(x, y) / denominator) if denominator else float("nan")


def _average_ranks(values: np.ndarray) -> np.ndarray:
    order = np.argsort(values, kind="mergesort")
    sorted_values = values[order]
    ranks = np.empty(values.size, dtype=np.float64)
    # Runs of equal values share the mean of the ranks they span (1-based).
    boundaries = np.flatnonzero(np.diff(sorted_values)) + 1
    starts = np.concatenate([[0], boundaries])
    ends = np.concatenate([boundaries, [values.size]])
    for start, end in zip(starts, ends):
        ranks[order[start:end]] = (start + end + 1) / 2.0
    return ranks


def spearman_corr(predictions, labels) -> float:
    """Spearman rank correlation: Pearson of the average ranks (NaN when either side is constant)."""
    predictions, labels = _check_same_length(predictions, labels)
    return pearson_corr(
        _average_ranks(predictions.astype(np.float64)), _average_ranks(labels.astype(np.float64))
    )


def token_accuracy(predictions, labels, weights=None) -> float:
    """Accuracy over token positions with nonzero `weights` (all positions without weights)."""
    predictions = np.asarray(predictions).reshape(-1)
    labels = np.asarray(labels).reshape(-1)
    if predictions.shape != labels.shape:
        raise ValueError(f"predictions {predictions.shape} and labels {labels.shape} differ in shape")
    mask = np.ones_like(labels, dtype=bool) if weights is None else np.asarray(weights).reshape(-1) > 0
    if mask.shape != labels.shape:
        raise ValueError(f"weights {mask.shape} and labels {labels.shape} differ in shape")
    if not np.any(mask):
        raise ValueError("no labelled token to score")
    return float(np.mean(predictions[mask] == labels[mask]))


# --- by name -------------------------------------------------------------------------------------

METRICS = {
    "accuracy": accuracy,
    "f1": f1_score,
    "mcc": matthews_corrcoef,
    "pearson": pearson_corr,
    "spearman": spearman_corr,
}


def glue_metrics(names: Sequence[str], predictions, labels) -> Dict[str, float]:
    """The metrics `names` (keys of `METRICS`) of `predictions` against `labels`.

    Classification metrics take class ids, correlations take real-valued predictions.
    """
    unknown = [n for n in names if n not in METRICS]
    if unknown:
        raise ValueError(f"unknown metric(s) {unknown}; expected some of {', '.join(METRICS)}")
    return {name: METRICS[name](predictions, labels) for name in names}


def combined_score(metrics: Dict[str, float], names: Optional[Sequence[str]] = None) -> float:
    """The mean of the named metrics, GLUE's single number for tasks with two (F1/accuracy,
    Pearson/Spearman)."""
    names = list(names or metrics)
    return float(np.mean([metrics[n] for n in names]))


_MOVED = {name: "albert_tf.tasks.tagging.metrics" for name in ("entity_scores", "get_entities", "split_tag")}
__getattr__, __dir__ = _lazy_attributes(__name__, _MOVED, globals())
