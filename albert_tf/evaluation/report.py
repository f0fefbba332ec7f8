"""The evaluation report of a classifier: metrics, per-label slices and the confusion matrix.

`classification_report` is what the pipeline's Evaluator writes to disk (`evaluation.json`) and
what `albert-tf evaluate` prints: beside the overall metrics, how the model does on the texts of
each true label (support, recall = accuracy on the slice, precision, F1, how often the label is
predicted) and the full confusion matrix, so a model that only ever predicts one label is
visible at a glance.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Sequence

import numpy as np

from albert_tf.metrics import glue_metrics


def confusion_matrix(predicted_ids, true_ids, num_labels: int) -> np.ndarray:
    """`[true, predicted]` counts; an id outside [0, num_labels) counts in no cell."""
    predicted_ids = np.asarray(predicted_ids, dtype=np.int64).reshape(-1)
    true_ids = np.asarray(true_ids, dtype=np.int64).reshape(-1)
    if predicted_ids.shape != true_ids.shape:
        raise ValueError(f"{predicted_ids.size} predictions for {true_ids.size} labels")
    matrix = np.zeros((num_labels, num_labels), dtype=np.int64)
    valid = (predicted_ids >= 0) & (predicted_ids < num_labels) & (true_ids >= 0) & (true_ids < num_labels)
    np.add.at(matrix, (true_ids[valid], predicted_ids[valid]), 1)
    return matrix


def classification_report(
    predicted_ids,
    true_ids,
    label_names: Sequence[str],
    metric_names: Optional[Sequence[str]] = None,
) -> Dict[str, Any]:
    """Metrics, slices by true label and the confusion matrix.

    Args:
        predicted_ids: Predicted class ids (-1 for a label the eval data does not know: wrong).
        true_ids: True class ids.
        label_names: Label strings by id.
        metric_names: `albert_tf.metrics` names; default accuracy, F1 and MCC for two labels,
            accuracy and MCC otherwise.

    Returns:
        `{"examples", "metrics", "predicted_classes", "slices": {label: {...}},
        "confusion_matrix": {"labels", "rows_are": "true", "matrix"}}`.
    """
    predicted_ids = np.asarray(predicted_ids, dtype=np.int64).reshape(-1)
    true_ids = np.asarray(true_ids, dtype=np.int64).reshape(-1)
    if not true_ids.size:
        raise ValueError("no eval examples")
    num_labels = len(label_names)
    if metric_names is None:
        metric_names = ["accuracy", "f1", "mcc"] if num_labels == 2 else ["accuracy", "mcc"]
    scored = predicted_ids
    if num_labels == 2:
        # F1 and MCC need binary predictions: an unknown label is the wrong class.
        scored = np.where(predicted_ids < 0, 1 - true_ids, predicted_ids)
    metrics = {k: float(v) for k, v in glue_metrics(list(metric_names), scored, true_ids).items()}
    matrix = confusion_matrix(predicted_ids, true_ids, num_labels)
    slices = {}
    for i, name in enumerate(label_names):
        # From the labels, not the matrix: a prediction outside the label list is in no cell.
        support = int(np.sum(true_ids == i))
        predicted = int(matrix[:, i].sum())
        correct = int(matrix[i, i])
        recall = correct / support if support else 0.0
        precision = correct / predicted if predicted else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        slices[name] = {
            "support": support,
            "accuracy": recall,
            "precision": precision,
            "f1": f1,
            "predicted": predicted,
        }
    return {
        "examples": int(true_ids.size),
        "metrics": metrics,
        "predicted_classes": int(np.unique(predicted_ids).size),
        "slices": slices,
        "confusion_matrix": {"labels": list(label_names), "rows_are": "true", "matrix": matrix.tolist()},
    }


def format_confusion_matrix(report: Dict[str, Any]) -> str:
    """The report's confusion matrix as aligned text (rows: true label, columns: predicted)."""
    labels = report["confusion_matrix"]["labels"]
    matrix = report["confusion_matrix"]["matrix"]
    width = max(8, *(len(str(label)) for label in labels))
    lines = ["true \\ predicted".ljust(width + 2) + "".join(str(label).rjust(width) for label in labels)]
    for label, row in zip(labels, matrix):
        lines.append(str(label).ljust(width + 2) + "".join(str(v).rjust(width) for v in row))
    return "\n".join(lines)
