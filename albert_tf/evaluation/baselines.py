"""The best constant answer of each task kind: the floor a trained model has to beat.

A model that answers the same for every input scores exactly what these predictors score, so a
metric is only evidence of learning once it clears them:

* classification: the majority class of the eval labels (accuracy = its share, MCC = 0);
* regression: the mean of the eval targets (MSE = their variance, correlations 0);
* SQuAD v2: the empty answer for every question (EM = F1 = the share of unanswerable questions);
* token tagging: the most frequent tag for every token.

Each function returns a `ConstantBaseline`: the constant answer and the task metrics it gets on
the eval data, computed with the same metric functions as the model's.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, Optional, Sequence

import numpy as np

from albert_tf.metrics import glue_metrics


@dataclasses.dataclass(frozen=True)
class ConstantBaseline:
    """The best constant predictor on an eval set.

    Attributes:
        kind: "majority_class", "mean", "empty_answer" or "majority_tag".
        answer: The constant answer (a class id, a float, "", a tag id).
        metrics: The task metrics of always giving `answer`, by name.
        description: One line for logs and reports ("always 1 (57.0% of 1,228)").
    """

    kind: str
    answer: Any
    metrics: Dict[str, float]
    description: str

    def to_dict(self) -> Dict[str, Any]:
        answer = self.answer.item() if isinstance(self.answer, np.generic) else self.answer
        return {"kind": self.kind, "answer": answer, "metrics": dict(self.metrics), "description": self.description}


def _as_array(values, name: str) -> np.ndarray:
    array = np.asarray(values).reshape(-1)
    if array.size == 0:
        raise ValueError(f"no {name} to compute a baseline from")
    return array


def majority_class_baseline(
    labels: Sequence[int],
    metric_names: Sequence[str] = ("accuracy", "mcc"),
    label_names: Optional[Sequence[str]] = None,
) -> ConstantBaseline:
    """Always the most frequent class of `labels` (ties: the smallest id).

    Args:
        labels: The eval set's class ids.
        metric_names: `albert_tf.metrics` names to score the constant answer with.
        label_names: Label strings by id, for the description.
    """
    labels = _as_array(labels, "labels").astype(np.int64)
    ids, counts = np.unique(labels, return_counts=True)
    answer = int(ids[np.argmax(counts)])
    metrics = glue_metrics(list(metric_names), np.full_like(labels, answer), labels)
    shown = label_names[answer] if label_names is not None else answer
    share = counts.max() / labels.size
    return ConstantBaseline(
        "majority_class", answer, {k: float(v) for k, v in metrics.items()},
        f"always {shown!r} ({share:.1%} of {labels.size:,})",
    )


def mean_baseline(targets: Sequence[float], metric_names: Sequence[str] = ("mse",)) -> ConstantBaseline:
    """Always the mean of the eval `targets` (the constant of least squared error).

    Correlations of a constant are undefined; they are reported as 0.
    """
    targets = _as_array(targets, "targets").astype(np.float64)
    answer = float(targets.mean())
    constant = np.full_like(targets, answer)
    metrics: Dict[str, float] = {}
    for name in metric_names:
        if name in ("pearson", "spearman"):
            metrics[name] = 0.0
        elif name == "mse":
            metrics[name] = float(np.mean((constant - targets) ** 2))
        elif name == "mae":
            metrics[name] = float(np.mean(np.abs(constant - targets)))
        else:
            metrics.update({k: float(v) for k, v in glue_metrics([name], constant, targets).items()})
    return ConstantBaseline("mean", answer, metrics, f"always {answer:.4g} (the mean of {targets.size:,} targets)")


def empty_answer_baseline(has_answer: Sequence[bool]) -> ConstantBaseline:
    """SQuAD v2: "no answer" for every question. EM and F1 are the share of unanswerable ones.

    Args:
        has_answer: Per eval question, whether it has a gold answer.
    """
    has_answer = _as_array(has_answer, "questions").astype(bool)
    share = float(np.mean(~has_answer))
    # The official script scores in percent.
    metrics = {"exact": 100.0 * share, "f1": 100.0 * share, "HasAns_f1": 0.0, "NoAns_f1": 100.0}
    return ConstantBaseline("empty_answer", "", metrics, f"always no answer ({share:.1%} of {has_answer.size:,} unanswerable)")


def majority_tag_baseline(tags: Sequence[int], tag_names: Optional[Sequence[str]] = None) -> ConstantBaseline:
    """Token tagging: the most frequent tag (usually "O") for every scored token.

    Metrics: `token_accuracy` (the tag's share) and entity-level `entity_f1`, `entity_precision`,
    `entity_recall` (0: no entity is found), the names of `albert_tf.tasks.tagging.score_tagging`.
    """
    tags = _as_array(tags, "tags").astype(np.int64)
    ids, counts = np.unique(tags, return_counts=True)
    answer = int(ids[np.argmax(counts)])
    share = float(counts.max() / tags.size)
    shown = tag_names[answer] if tag_names is not None else answer
    return ConstantBaseline(
        "majority_tag", answer, {"token_accuracy": share, "entity_f1": 0.0, "entity_precision": 0.0, "entity_recall": 0.0},
        f"always tag {shown!r} ({share:.1%} of {tags.size:,} tokens)",
    )
