"""Judging trained models: constant baselines, collapse detection, reports and the blessing rule.

Modules:
  baselines   the best constant answer per task kind (majority class, mean, empty answer, tag).
  collapse    `check_collapse`: constant dev predictions or a metric stuck at the baseline.
  report      `classification_report`: metrics, per-label slices, confusion matrix.
  gates       `BlessingRule` and `decide`: when a candidate may be pushed.
"""

from albert_tf.evaluation.baselines import (
    ConstantBaseline,
    empty_answer_baseline,
    majority_class_baseline,
    majority_tag_baseline,
    mean_baseline,
)
from albert_tf.evaluation.collapse import CollapseCheck, check_collapse
from albert_tf.evaluation.gates import BlessingRule, Decision, decide
from albert_tf.evaluation.report import classification_report, confusion_matrix

__all__ = [
    "BlessingRule",
    "CollapseCheck",
    "ConstantBaseline",
    "Decision",
    "check_collapse",
    "classification_report",
    "confusion_matrix",
    "decide",
    "empty_answer_baseline",
    "majority_class_baseline",
    "majority_tag_baseline",
    "mean_baseline",
]
