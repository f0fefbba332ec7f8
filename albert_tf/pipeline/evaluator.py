"""Evaluator: the candidate's task metrics on the eval split, the threshold, and the pushed model.

Both the candidate and the currently pushed model (the newest version in the serving base) are
scored the same way: their exported `serving_default` signature on the raw eval texts, so the
comparison holds even across vocabularies, and it measures exactly what TF Serving will answer.
The candidate is *blessed* when its `metric` reaches `threshold` and is not worse than the pushed
model's by more than `tolerance`. A pushed model that cannot be scored (another task's inputs,
a broken export) blocks the blessing with the reason given, rather than being ignored.

Output: `summary.json` (both models' metrics, the rule, the decision and its reason) and an empty
`BLESSED` or `NOT_BLESSED` file, as TFX's Evaluator writes.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from albert_tf.pipeline import example_gen
from albert_tf.pipeline.staging import read_summary, staged_directory, write_summary

BLESSED_FILE = "BLESSED"
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


def score(predicted: Sequence[str], truth: Sequence[str], label_list: Sequence[str]) -> Dict[str, float]:
    """GLUE metrics of predicted vs true label strings; an unknown predicted label counts as wrong."""
    from albert_tf.metrics import glue_metrics

    index = {label: i for i, label in enumerate(label_list)}
    truth_ids = np.asarray([index[t] for t in truth])
    # -1 never equals a true id: a label the eval data does not know is simply wrong.
    predicted_ids = np.asarray([index.get(p, -1) for p in predicted])
    names = ["accuracy", "f1", "mcc"] if len(label_list) == 2 else ["accuracy"]
    if len(label_list) == 2:
        # F1 and MCC need binary predictions: an unknown label is the wrong class.
        predicted_ids = np.where(predicted_ids < 0, 1 - truth_ids, predicted_ids)
    return {k: float(v) for k, v in glue_metrics(names, predicted_ids, truth_ids).items()}


def decide(candidate: Dict[str, float], baseline: Optional[Dict[str, float]], metric: str, threshold: float, tolerance: float):
    """(blessed, reason) under the rule of the module docstring."""
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
) -> Dict[str, Any]:
    """Scores the candidate SavedModel and the newest version under `serving_model_dir`
    (`<serving_base>/<model_name>`) on the eval split; writes the decision."""
    rows = example_gen.read_split(examples_dir, "eval")
    label_list = read_summary(examples_dir)["labels"]
    unknown = sorted({r[example_gen.LABEL_FEATURE] for r in rows} - set(label_list))
    if unknown:
        raise ValueError(f"the eval split has labels the training split lacks: {unknown}")
    truth = [r[example_gen.LABEL_FEATURE] for r in rows]
    candidate = score(predict_labels(candidate_dir, rows), truth, label_list)
    if metric not in candidate:
        raise ValueError(f"unknown eval metric {metric!r}; computed: {', '.join(sorted(candidate))}")
    pushed = newest_version(serving_model_dir)
    baseline, baseline_error = None, None
    if pushed is not None:
        try:
            baseline = score(predict_labels(pushed, rows), truth, label_list)
        except Exception as e:  # any failure to score it: reported, and the candidate is not blessed
            baseline_error = f"the pushed model {pushed} cannot be scored on this eval data: {e}"
    if baseline_error:
        blessed, reason = False, baseline_error
    else:
        blessed, reason = decide(candidate, baseline, metric, threshold, tolerance)
    summary = {
        "examples": len(rows),
        "metric": metric,
        "threshold": threshold,
        "tolerance": tolerance,
        "candidate": {"path": os.path.abspath(candidate_dir), "metrics": candidate},
        "baseline": None if pushed is None else {"path": pushed, "metrics": baseline},
        "blessed": blessed,
        "reason": reason,
    }
    with staged_directory(output_dir) as staging:
        write_summary(staging, summary)
        open(os.path.join(staging, BLESSED_FILE if blessed else NOT_BLESSED_FILE), "w").close()
    return summary


def is_blessed(evaluation_dir: str) -> bool:
    return os.path.isfile(os.path.join(evaluation_dir, BLESSED_FILE))
