"""Collapse: a fine-tuned model that answers (almost) the same for every input.

Small or briefly pretrained encoders often settle on the label prior: every dev prediction is
the majority class, the loss sits at the entropy of the prior, and accuracy equals the majority
rate. Such a run "succeeds" by every exit code, so it is checked explicitly, from the dev
metrics alone:

* `predicted_classes` (the number of distinct predicted classes on the dev set) is 1, or
  `prediction_std` (the spread of a regressor's predictions) is ~0: the predictions are constant;
* the watched metric is not above the best constant answer's (`albert_tf.evaluation.baselines`)
  by more than `margin`: the model is stuck at the baseline.

The classification and regression eval functions of `albert_tf.tasks.classification` report
`predicted_classes` / `prediction_std` beside their metrics, so `run_finetuning` can check every
evaluation and the kept one (`check_collapse`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, Mapping, Optional

from albert_tf.evaluation.baselines import ConstantBaseline

# Metrics where lower is better; everything else is higher-is-better.
LOWER_IS_BETTER = ("loss", "mse", "mae")
DEFAULT_MARGIN = 0.01


def higher_is_better(metric: str) -> bool:
    return not any(token in metric.lower() for token in LOWER_IS_BETTER)


@dataclasses.dataclass(frozen=True)
class CollapseCheck:
    """The verdict on one evaluation.

    Attributes:
        collapsed: Constant predictions or a metric at the baseline.
        constant: The predictions themselves are constant.
        reason: One line saying why (empty when not collapsed).
        metric, value, baseline_value: The watched metric, its value and the constant answer's.
    """

    collapsed: bool
    constant: bool
    reason: str
    metric: str
    value: Optional[float]
    baseline_value: Optional[float]

    def to_dict(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)


def check_collapse(
    metrics: Mapping[str, float],
    baseline: ConstantBaseline,
    metric: str,
    margin: float = DEFAULT_MARGIN,
) -> CollapseCheck:
    """Whether the evaluation `metrics` show a collapsed model.

    Args:
        metrics: One evaluation's metrics, with `predicted_classes` or `prediction_std` when the
            eval function reports them.
        baseline: The best constant answer on the same eval data.
        metric: The metric to compare with the baseline's (must be in both).
        margin: How far past the baseline's value the metric must be to count as learning.
    """
    if metric not in metrics:
        raise ValueError(f"metric {metric!r} is not among the evaluation metrics {sorted(metrics)}")
    if metric not in baseline.metrics:
        raise ValueError(f"the baseline has no {metric!r}; it has {sorted(baseline.metrics)}")
    value, floor = float(metrics[metric]), float(baseline.metrics[metric])
    constant = False
    reason = ""
    if "predicted_classes" in metrics and metrics["predicted_classes"] <= 1:
        constant = True
        reason = f"every dev prediction is the same class ({metric} {value:.4f}, {baseline.description}: {floor:.4f})"
    elif "prediction_std" in metrics and metrics["prediction_std"] < 1e-6:
        constant = True
        reason = f"every dev prediction is the same value ({metric} {value:.4f}, {baseline.description}: {floor:.4f})"
    else:
        gain = value - floor if higher_is_better(metric) else floor - value
        if gain <= margin:
            reason = (
                f"dev {metric} {value:.4f} is within {margin} of the best constant answer's {floor:.4f} "
                f"({baseline.description})"
            )
    return CollapseCheck(bool(reason), constant, reason, metric, value, floor)
