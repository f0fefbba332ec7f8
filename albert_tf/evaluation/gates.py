"""The blessing rule: when a candidate model is good enough to push.

Modelled on TFMA's `MetricThreshold` (a value threshold plus a change threshold against the
serving model), with one more gate TFMA leaves to the user and we do not: the best constant
answer (`albert_tf.evaluation.baselines`). A candidate is blessed only when every check passes:

1. **beats the constant answer**: its metric is past the constant's by more than
   `baseline_margin`; for classification its MCC is above `min_mcc` (a constant has MCC 0), and
   its accuracy beats the majority rate by more than chance at `confidence` (a one-sided test
   of a proportion: with 200 eval texts and a 61.5% majority, 67.2% is needed at 0.95);
2. **value threshold**: the metric reaches `threshold` (a floor; a ceiling for losses/errors);
3. **change threshold**: the metric is not worse than the pushed model's by more than `tolerance`;
4. for a distilled student, when `teacher_margin` is set: **close to the teacher**, its metric at
   most `teacher_margin` worse than its teacher's on the same data.

The defaults refuse a model that answers the same for every input, whatever the threshold.
`decide` returns every check with its figures, so a refusal can say why in one line.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from typing import Any, Dict, List, Mapping, Optional

from albert_tf.evaluation.baselines import ConstantBaseline
from albert_tf.evaluation.collapse import higher_is_better


@dataclasses.dataclass(frozen=True)
class BlessingRule:
    """What a candidate must reach to be blessed.

    Attributes:
        metric: The metric the value and change thresholds compare ("accuracy", "f1", "mse"...).
        threshold: Value threshold: the metric's floor (ceiling when lower is better).
        baseline_margin: How far past the best constant answer the metric must be (absolute).
        min_mcc: Classification: MCC must be above this (0: better than any constant).
        confidence: Classification: accuracy must beat the majority rate at this one-sided
            confidence (0 switches the test off).
        tolerance: Change threshold: how much worse than the pushed model the metric may be
            (negative: how much better it must be).
        teacher_margin: A distilled student: how much worse than its teacher the metric may be
            (None: no teacher check).
    """

    metric: str = "accuracy"
    threshold: float = 0.0
    baseline_margin: float = 0.0
    min_mcc: float = 0.0
    confidence: float = 0.95
    tolerance: float = 0.0
    teacher_margin: Optional[float] = None

    def __post_init__(self):
        if not isinstance(self.metric, str) or not self.metric:
            raise ValueError(f"metric must be a metric name, got {self.metric!r}")
        for name in ("threshold", "baseline_margin", "min_mcc", "confidence", "tolerance"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
                raise ValueError(f"{name} must be a number, got {value!r}")
        if self.baseline_margin < 0:
            raise ValueError(f"baseline_margin must be >= 0, got {self.baseline_margin}")
        if not 0 <= self.confidence < 1:
            raise ValueError(f"confidence must be in [0, 1), got {self.confidence}")
        margin = self.teacher_margin
        if margin is not None and (isinstance(margin, bool) or not isinstance(margin, (int, float)) or not margin >= 0):
            raise ValueError(f"teacher_margin must be a number >= 0, got {margin!r}")

    def to_dict(self) -> Dict[str, Any]:
        values = dataclasses.asdict(self)
        if self.teacher_margin is None:
            # A rule without a teacher reads exactly as before the field existed.
            values.pop("teacher_margin")
        return values


@dataclasses.dataclass(frozen=True)
class Check:
    name: str
    passed: bool
    detail: str


@dataclasses.dataclass(frozen=True)
class Decision:
    """The verdict and every check behind it; `reason` is the first failure (or a summary)."""

    blessed: bool
    reason: str
    checks: List[Check]

    def to_dict(self) -> Dict[str, Any]:
        return {"blessed": self.blessed, "reason": self.reason, "checks": [dataclasses.asdict(c) for c in self.checks]}


def accuracy_beats_majority(accuracy: float, majority_rate: float, examples: int, confidence: float) -> Check:
    """One-sided test that `accuracy` on `examples` texts is above the majority-class rate."""
    if confidence <= 0:
        return Check("accuracy beats chance", True, "test off (confidence 0)")
    if examples <= 0:
        return Check("accuracy beats chance", False, "no eval examples")
    p = min(max(majority_rate, 1e-9), 1 - 1e-9)
    needed = p + statistics.NormalDist().inv_cdf(confidence) * math.sqrt(p * (1 - p) / examples)
    passed = accuracy > needed
    return Check(
        "accuracy beats chance",
        passed,
        f"accuracy {accuracy:.4f} {'>' if passed else '<='} {needed:.4f}, the majority rate {majority_rate:.4f} "
        f"plus chance at {confidence:.0%} confidence on {examples:,} examples",
    )


def decide(
    candidate: Mapping[str, float],
    constant: ConstantBaseline,
    rule: BlessingRule,
    *,
    examples: int,
    pushed: Optional[Mapping[str, float]] = None,
    teacher: Optional[Mapping[str, float]] = None,
) -> Decision:
    """Applies `rule` to the candidate's metrics.

    Args:
        candidate: The candidate's metrics on the eval data.
        constant: The best constant answer on the same data.
        rule: The blessing rule.
        examples: Number of eval examples (for the significance test).
        pushed: The pushed (serving) model's metrics on the same data, None if nothing is pushed.
        teacher: A distilled candidate's teacher's metrics on the same data (checked when
            `rule.teacher_margin` is set).

    Raises:
        ValueError: `rule.metric` is missing from the candidate's or the constant's metrics.
    """
    metric = rule.metric
    if metric not in candidate:
        raise ValueError(f"unknown eval metric {metric!r}; computed: {', '.join(sorted(candidate))}")
    if metric not in constant.metrics:
        raise ValueError(f"the constant baseline has no {metric!r}; it has {', '.join(sorted(constant.metrics))}")
    up = higher_is_better(metric)
    value = float(candidate[metric])
    floor = float(constant.metrics[metric])
    checks: List[Check] = []

    gain = value - floor if up else floor - value
    checks.append(Check(
        "beats the constant answer",
        gain > rule.baseline_margin,
        f"{metric} {value:.4f} vs {floor:.4f} for {constant.description}"
        + (f" (margin {rule.baseline_margin})" if rule.baseline_margin else ""),
    ))
    if constant.kind == "majority_class":
        mcc = candidate.get("mcc")
        if mcc is not None:
            checks.append(Check("mcc above minimum", float(mcc) > rule.min_mcc,
                                f"mcc {float(mcc):.4f} vs minimum {rule.min_mcc} (a constant answer has 0)"))
        if "accuracy" in candidate and "accuracy" in constant.metrics:
            checks.append(accuracy_beats_majority(float(candidate["accuracy"]), float(constant.metrics["accuracy"]),
                                                  examples, rule.confidence))
    meets = value >= rule.threshold if up else value <= rule.threshold
    checks.append(Check("value threshold", meets,
                        f"{metric} {value:.4f} {'>=' if up else '<='} {rule.threshold:.4f}" if meets else
                        f"{metric} {value:.4f} is {'below' if up else 'above'} the threshold {rule.threshold:.4f}"))
    if pushed is None:
        checks.append(Check("not worse than the pushed model", True, "no model pushed yet"))
    else:
        if metric not in pushed:
            raise ValueError(f"the pushed model's metrics lack {metric!r}")
        before = float(pushed[metric])
        ok = value + rule.tolerance >= before if up else value - rule.tolerance <= before
        checks.append(Check("not worse than the pushed model", ok,
                            f"{metric} {value:.4f} vs the pushed model's {before:.4f} (tolerance {rule.tolerance})"))
    if rule.teacher_margin is not None:
        if teacher is None or metric not in teacher:
            raise ValueError(f"the rule has a teacher_margin but no teacher {metric!r} to compare with")
        reference = float(teacher[metric])
        close = value + rule.teacher_margin >= reference if up else value - rule.teacher_margin <= reference
        checks.append(Check("within the margin of the teacher", close,
                            f"{metric} {value:.4f} vs the teacher's {reference:.4f} (margin {rule.teacher_margin})"))
    failed = [c for c in checks if not c.passed]
    if failed:
        return Decision(False, f"{failed[0].name} failed: {failed[0].detail}", checks)
    return Decision(True, "; ".join(c.detail for c in checks), checks)
