"""Evaluation metrics of the fine-tuning tasks, as GLUE and CoNLL report them, in NumPy.

* `accuracy`; `f1_score` / `precision_recall_f1` of a positive class (MRPC, QQP report F1 of
  label 1); `matthews_corrcoef` (CoLA), the multi-class form of Gorodkin (2004), equal to the
  usual binary formula for two classes and 0 when it is undefined (a constant prediction);
* `pearson_corr` and `spearman_corr` (STS-B); Spearman ranks ties by their average rank;
* `token_accuracy` over the labelled positions of token classification;
* `get_entities` and `entity_scores`: entity-level precision / recall / F1 over exact spans of
  BIO (IOB2, also IOB1) tag sequences, the conlleval / `seqeval` (default mode) definition: an
  entity starts at `B-X`, or at `I-X` not preceded by a tag of type X, and ends before the next
  tag that does not continue it.

`glue_metrics(names, predictions, labels)` computes a list of them by name; `METRICS` lists the
names.
"""

from __future__ import annotations

import math
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np


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


# --- entity-level scores -------------------------------------------------------------------------


def split_tag(tag: str) -> Tuple[str, str]:
    if tag == "O" or not tag:
        return "O", ""
    if len(tag) > 2 and tag[1] in "-_" and tag[0] in "BIES":
        return tag[0], tag[2:]
    raise ValueError(f"tag {tag!r} is not 'O' or PREFIX-TYPE with PREFIX in B, I, E, S")


def get_entities(tags: Sequence[str]) -> List[Tuple[str, int, int]]:
    """The entities of one BIO tag sequence as `(type, start, end)`, `end` inclusive.

    Follows conlleval: an `I-X` after `O` or after another type starts a new entity (so IOB1
    data scores as intended); `E-X`/`S-X` (IOBES) close an entity.
    """
    entities = []
    current_type, start = None, None
    previous_prefix = "O"
    for i, tag in enumerate(list(tags) + ["O"]):
        prefix, kind = split_tag(tag)
        # Does an entity end before position i?
        if current_type is not None:
            ends = (
                prefix in ("O", "B", "S")
                or kind != current_type
                or previous_prefix in ("E", "S")
            )
            if ends:
                entities.append((current_type, start, i - 1))
                current_type, start = None, None
        # Does one start at i?
        if prefix != "O" and current_type is None:
            current_type, start = kind, i
        previous_prefix = prefix
    return entities


def entity_scores(
    predicted_tags: Iterable[Sequence[str]], true_tags: Iterable[Sequence[str]]
) -> Dict[str, object]:
    """Micro-averaged entity precision / recall / F1 over exact (type, start, end) spans.

    Args:
        predicted_tags: One tag sequence per sentence.
        true_tags: The gold sequences, each as long as its prediction.

    Returns:
        `precision`, `recall`, `f1` (floats; 0 for 0/0), `num_predicted`, `num_true`, `num_correct`,
        and `per_type`: {type: {precision, recall, f1, support}}.
    """
    predicted_sequences = [list(s) for s in predicted_tags]
    true_sequences = [list(s) for s in true_tags]
    if len(predicted_sequences) != len(true_sequences):
        raise ValueError(f"{len(predicted_sequences)} predicted and {len(true_sequences)} true sequences")
    predicted_set, true_set = set(), set()
    for index, (predicted, gold) in enumerate(zip(predicted_sequences, true_sequences)):
        if len(predicted) != len(gold):
            raise ValueError(f"sequence {index}: {len(predicted)} predicted tags for {len(gold)} true tags")
        predicted_set.update((index,) + e for e in get_entities(predicted))
        true_set.update((index,) + e for e in get_entities(gold))
    correct = predicted_set & true_set

    def prf(num_correct, num_predicted, num_true):
        precision = num_correct / num_predicted if num_predicted else 0.0
        recall = num_correct / num_true if num_true else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        return precision, recall, f1

    per_type = {}
    for kind in sorted({e[1] for e in predicted_set | true_set}):
        n_correct = sum(1 for e in correct if e[1] == kind)
        n_predicted = sum(1 for e in predicted_set if e[1] == kind)
        n_true = sum(1 for e in true_set if e[1] == kind)
        p, r, f = prf(n_correct, n_predicted, n_true)
        per_type[kind] = {"precision": p, "recall": r, "f1": f, "support": n_true}
    precision, recall, f1 = prf(len(correct), len(predicted_set), len(true_set))
    return {
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "num_predicted": len(predicted_set),
        "num_true": len(true_set),
        "num_correct": len(correct),
        "per_type": per_type,
    }


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
