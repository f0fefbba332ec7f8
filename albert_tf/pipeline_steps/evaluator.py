"""Evaluator: the candidate's task metrics on the eval split against the best constant answer,
the threshold and the pushed model.

Both the candidate and the currently pushed model (the newest version in the serving base) are
scored the same way: their exported `serving_default` signature on the raw eval texts, so the
comparison holds even across vocabularies, and it measures exactly what TF Serving will answer.
The rule is `albert_tf.evaluation.gates.BlessingRule`: the candidate must beat the majority class
(by more than chance, with MCC above 0), reach the threshold, and not be worse than the pushed
model by more than the tolerance (and, for a distilled student given its teacher's SavedModel, not
be worse than the teacher by more than `teacher_margin`). A model that answers the same for every input is never
blessed, whatever the threshold. A pushed model that cannot be scored (another task's inputs, a
broken export) blocks the blessing with the reason given, rather than being ignored.

Output (the blessing directory): `summary.json` (both models' metrics, the constant baseline,
the rule, every check, the decision and its reason) and an empty `BLESSED` or `NOT_BLESSED` file,
as TFX's Evaluator writes. The evaluation directory gets the full report: `evaluation.json`
(metrics, baseline, slices by label, confusion matrix, decision) and `confusion_matrix.txt`.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from albert_tf.pipeline_steps import example_gen
from albert_tf.pipeline_steps.staging import read_summary, staged_directory, write_summary

BLESSED_FILE = "BLESSED"
EVALUATION_FILE = "evaluation.json"
CONFUSION_FILE = "confusion_matrix.txt"
NOT_BLESSED_FILE = "NOT_BLESSED"
PREDICT_BATCH = 64


def newest_version(model_dir: str) -> Optional[str]:
    """The newest integer version directory under `model_dir`, or None."""
    from albert_tf.export.serving_config import model_versions

    versions = model_versions(model_dir) if os.path.isdir(model_dir) else []
    return os.path.join(model_dir, str(max(versions))) if versions else None


def predict_labels(saved_model_dir: str, rows: Sequence[Dict[str, str]]) -> List[str]:
    """The label strings the SavedModel's `serving_default` predicts for the rows' raw texts."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the in-graph tokenizer's ops before loading)

    loaded = tf.saved_model.load(saved_model_dir)
    if "serving_default" not in loaded.signatures:
        raise ValueError(f"{saved_model_dir} has no serving_default signature")
    function = loaded.signatures["serving_default"]
    inputs = set(function.structured_input_signature[1])
    pair = example_gen.TEXT_B_FEATURE in inputs
    if example_gen.TEXT_FEATURE not in inputs:
        raise ValueError(f"{saved_model_dir}: serving_default takes {sorted(inputs)}, not raw text")
    if pair and any(r.get(example_gen.TEXT_B_FEATURE) is None for r in rows):
        raise ValueError(f"{saved_model_dir} expects sentence pairs; the eval data has single texts")
    labels: List[str] = []
    for start in range(0, len(rows), PREDICT_BATCH):
        batch = rows[start:start + PREDICT_BATCH]
        feed = {example_gen.TEXT_FEATURE: tf.constant([r[example_gen.TEXT_FEATURE] for r in batch])}
        if pair:
            feed[example_gen.TEXT_B_FEATURE] = tf.constant([r[example_gen.TEXT_B_FEATURE] for r in batch])
        outputs = function(**feed)
        if "label" not in outputs:
            raise ValueError(f"{saved_model_dir}: serving_default returns no 'label' (not a classifier)")
        labels.extend(v.decode("utf-8") for v in outputs["label"].numpy().reshape(-1))
    return labels


def label_ids(labels: Sequence[str], label_list: Sequence[str]) -> np.ndarray:
    """Ids of label strings in `label_list`; -1 for a label it does not know (always wrong)."""
    index = {label: i for i, label in enumerate(label_list)}
    return np.asarray([index.get(label, -1) for label in labels], dtype=np.int64)


def score(predicted: Sequence[str], truth: Sequence[str], label_list: Sequence[str]) -> Dict[str, float]:
    """GLUE metrics of predicted vs true label strings; an unknown predicted label counts as wrong."""
    return report(predicted, truth, label_list)["metrics"]


def report(predicted: Sequence[str], truth: Sequence[str], label_list: Sequence[str]) -> Dict[str, Any]:
    """`albert_tf.evaluation.classification_report` of predicted vs true label strings."""
    from albert_tf.evaluation import classification_report

    return classification_report(label_ids(predicted, label_list), label_ids(truth, label_list), list(label_list))


def decide(candidate: Dict[str, float], baseline: Optional[Dict[str, float]], metric: str, threshold: float, tolerance: float):
    """(blessed, reason) of the value and change thresholds alone (no constant-answer gate):
    the candidate's `metric` reaches `threshold` and is not worse than the pushed model's
    (`baseline`, None when nothing is pushed) by more than `tolerance`. `run_evaluator` applies
    the full rule of `albert_tf.evaluation.gates`."""
    value = candidate[metric]
    if value < threshold:
        return False, f"{metric} {value:.4f} is below the threshold {threshold:.4f}"
    if baseline is None:
        return True, f"{metric} {value:.4f} >= threshold {threshold:.4f}; no model pushed yet"
    if value + tolerance < baseline[metric]:
        return False, f"{metric} {value:.4f} is worse than the pushed model's {baseline[metric]:.4f} (tolerance {tolerance})"
    return True, f"{metric} {value:.4f} >= threshold {threshold:.4f} and not worse than the pushed model's {baseline[metric]:.4f}"


def run_evaluator(
    examples_dir: str,
    candidate_dir: str,
    serving_model_dir: str,
    output_dir: str,
    *,
    metric: str = "accuracy",
    threshold: float = 0.0,
    tolerance: float = 0.0,
    baseline_margin: float = 0.0,
    min_mcc: float = 0.0,
    confidence: float = 0.95,
    report_dir: Optional[str] = None,
    teacher_dir: Optional[str] = None,
    teacher_margin: Optional[float] = None,
) -> Dict[str, Any]:
    """Scores the candidate SavedModel and the newest version under `serving_model_dir`
    (`<serving_base>/<model_name>`) on the eval split; writes the decision into `output_dir`
    and, when given, the full report into `report_dir`.

    The rule's fields (`metric` ... `confidence`, `teacher_margin`) are those of
    `albert_tf.evaluation.BlessingRule`; `teacher_dir` is a distilled candidate's teacher's
    SavedModel, scored the same way for the teacher check.
    """
    from albert_tf.evaluation import BlessingRule, decide as decide_rule, majority_class_baseline
    from albert_tf.evaluation.report import format_confusion_matrix
    from albert_tf.tasks.spec import write_json

    rule = BlessingRule(metric=metric, threshold=threshold, baseline_margin=baseline_margin, min_mcc=min_mcc,
                        confidence=confidence, tolerance=tolerance, teacher_margin=teacher_margin)
    if (teacher_dir is None) != (teacher_margin is None):
        raise ValueError("teacher_dir and teacher_margin go together")
    rows = example_gen.read_split(examples_dir, "eval")
    if not rows:
        raise ValueError(f"{examples_dir}: the eval split is empty")
    label_list = read_summary(examples_dir)["labels"]
    unknown = sorted({r[example_gen.LABEL_FEATURE] for r in rows} - set(label_list))
    if unknown:
        raise ValueError(f"the eval split has labels the training split lacks: {unknown}")
    truth = [r[example_gen.LABEL_FEATURE] for r in rows]
    truth_ids = label_ids(truth, label_list)
    candidate_report = report(predict_labels(candidate_dir, rows), truth, label_list)
    candidate = candidate_report["metrics"]
    constant = majority_class_baseline(truth_ids, list(candidate), label_names=label_list)
    if metric not in candidate:
        raise ValueError(f"unknown eval metric {metric!r}; computed: {', '.join(sorted(candidate))}")
    pushed = newest_version(serving_model_dir)
    baseline, baseline_error = None, None
    if pushed is not None:
        try:
            baseline = score(predict_labels(pushed, rows), truth, label_list)
        except Exception as e:  # any failure to score it: reported, and the candidate is not blessed
            baseline_error = f"the pushed model {pushed} cannot be scored on this eval data: {e}"
    teacher = None if teacher_dir is None else score(predict_labels(teacher_dir, rows), truth, label_list)
    decision = decide_rule(candidate, constant, rule, examples=len(rows), pushed=baseline, teacher=teacher)
    blessed, reason = decision.blessed, decision.reason
    if baseline_error:
        blessed, reason = False, baseline_error
    summary = {
        "examples": len(rows),
        "metric": metric,
        "threshold": threshold,
        "tolerance": tolerance,
        "rule": rule.to_dict(),
        "candidate": {"path": os.path.abspath(candidate_dir), "metrics": candidate},
        "constant_baseline": constant.to_dict(),
        "baseline": None if pushed is None else {"path": pushed, "metrics": baseline},
        **({} if teacher is None else {"teacher": {"path": os.path.abspath(teacher_dir), "metrics": teacher}}),
        "checks": decision.to_dict()["checks"],
        "blessed": blessed,
        "reason": reason,
    }
    evaluation = {**summary, "slices": candidate_report["slices"], "confusion_matrix": candidate_report["confusion_matrix"],
                  "predicted_classes": candidate_report["predicted_classes"]}
    if report_dir is not None:
        with staged_directory(report_dir) as staging:
            write_json(os.path.join(staging, EVALUATION_FILE), evaluation)
            with open(os.path.join(staging, CONFUSION_FILE), "w", encoding="utf-8") as f:
                f.write(format_confusion_matrix(candidate_report) + "\n")
    with staged_directory(output_dir) as staging:
        write_summary(staging, summary)
        write_json(os.path.join(staging, EVALUATION_FILE), evaluation)
        open(os.path.join(staging, BLESSED_FILE if blessed else NOT_BLESSED_FILE), "w").close()
    return summary


def kfp_metrics(summary: Dict[str, Any]) -> Dict[str, float]:
    """The metrics an Evaluator step logs from a `run_evaluator` summary: the candidate's, and
    prefixed `constant_`, `pushed_` and `teacher_` those of the constant answer, the pushed model
    and the teacher."""
    metrics = dict(summary["candidate"]["metrics"])
    metrics.update({"constant_" + k: v for k, v in summary["constant_baseline"]["metrics"].items()})
    if summary["baseline"] and summary["baseline"]["metrics"]:
        metrics.update({"pushed_" + k: v for k, v in summary["baseline"]["metrics"].items()})
    if summary.get("teacher"):
        metrics.update({"teacher_" + k: v for k, v in summary["teacher"]["metrics"].items()})
    return metrics


def is_blessed(evaluation_dir: str) -> bool:
    return os.path.isfile(os.path.join(evaluation_dir, BLESSED_FILE))
