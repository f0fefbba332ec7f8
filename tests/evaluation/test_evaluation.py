"""Constant baselines, the collapse check, the classification report and the blessing rule."""

from __future__ import annotations

import numpy as np
import pytest

from albert_tf.evaluation import (
    BlessingRule,
    check_collapse,
    classification_report,
    decide,
    empty_answer_baseline,
    majority_class_baseline,
    majority_tag_baseline,
    mean_baseline,
)
from albert_tf.evaluation.report import format_confusion_matrix

LABELS = np.array([1] * 62 + [0] * 38)


# --- baselines -----------------------------------------------------------------------------------


def test_majority_class_baseline_scores_the_constant_answer():
    baseline = majority_class_baseline(LABELS, ["accuracy", "mcc", "f1"], label_names=["neg", "pos"])
    assert baseline.answer == 1 and baseline.kind == "majority_class"
    assert baseline.metrics["accuracy"] == pytest.approx(0.62)
    assert baseline.metrics["mcc"] == 0.0
    assert "'pos'" in baseline.description and "62.0%" in baseline.description
    assert baseline.to_dict()["answer"] == 1


def test_majority_class_ties_take_the_smallest_id():
    assert majority_class_baseline([2, 2, 0, 0, 1]).answer == 0


def test_mean_baseline_is_the_variance_and_zero_correlation():
    targets = np.array([1.0, 2.0, 3.0, 6.0])
    baseline = mean_baseline(targets, ["mse", "pearson", "spearman"])
    assert baseline.answer == pytest.approx(3.0)
    assert baseline.metrics["mse"] == pytest.approx(np.var(targets))
    assert baseline.metrics["pearson"] == 0.0 and baseline.metrics["spearman"] == 0.0


def test_empty_answer_and_majority_tag_baselines():
    squad = empty_answer_baseline([True, False, False, True])
    assert squad.metrics["exact"] == pytest.approx(50.0) and squad.metrics["f1"] == pytest.approx(50.0)
    tags = majority_tag_baseline([0, 0, 0, 1, 2], tag_names=["O", "B-PER", "I-PER"])
    assert tags.answer == 0 and tags.metrics["token_accuracy"] == pytest.approx(0.6) and tags.metrics["entity_f1"] == 0.0


def test_baselines_refuse_empty_input():
    with pytest.raises(ValueError, match="no labels"):
        majority_class_baseline([])
    with pytest.raises(ValueError, match="no targets"):
        mean_baseline([])


# --- collapse ------------------------------------------------------------------------------------


def test_constant_predictions_are_collapse():
    baseline = majority_class_baseline(LABELS)
    check = check_collapse({"accuracy": 0.62, "predicted_classes": 1.0}, baseline, "accuracy")
    assert check.collapsed and check.constant and "same class" in check.reason


def test_metric_at_the_baseline_is_collapse_even_with_varied_predictions():
    baseline = majority_class_baseline(LABELS)
    check = check_collapse({"accuracy": 0.625, "predicted_classes": 2.0}, baseline, "accuracy", margin=0.01)
    assert check.collapsed and not check.constant and "within 0.01" in check.reason
    learned = check_collapse({"accuracy": 0.70, "predicted_classes": 2.0}, baseline, "accuracy", margin=0.01)
    assert not learned.collapsed and learned.reason == ""


def test_regression_collapse_and_lower_is_better_metrics():
    baseline = mean_baseline([1.0, 2.0, 3.0], ["mse"])
    assert check_collapse({"mse": 0.5, "prediction_std": 0.0}, baseline, "mse").constant
    assert check_collapse({"mse": 0.66, "prediction_std": 0.3}, baseline, "mse").collapsed  # variance is 0.667
    assert not check_collapse({"mse": 0.1, "prediction_std": 0.8}, baseline, "mse").collapsed


def test_collapse_needs_the_metric_on_both_sides():
    with pytest.raises(ValueError, match="not among"):
        check_collapse({"f1": 0.5}, majority_class_baseline(LABELS), "accuracy")


# --- report --------------------------------------------------------------------------------------


def test_report_slices_and_confusion_matrix():
    truth = np.array([0, 0, 0, 1, 1, 1, 1, 1])
    predicted = np.array([0, 1, -1, 1, 1, 1, 0, 1])  # -1: a label the eval data does not know
    report = classification_report(predicted, truth, ["neg", "pos"])
    assert report["confusion_matrix"]["matrix"] == [[1, 1], [1, 4]]  # the unknown label is in no cell
    assert report["metrics"]["accuracy"] == pytest.approx(5 / 8)
    neg = report["slices"]["neg"]
    assert neg["support"] == 3 and neg["accuracy"] == pytest.approx(1 / 3) and neg["predicted"] == 2
    assert report["slices"]["pos"]["precision"] == pytest.approx(4 / 5)
    assert report["predicted_classes"] == 3
    text = format_confusion_matrix(report)
    assert "true \\ predicted" in text and text.splitlines()[2].split() == ["pos", "1", "4"]


def test_report_of_a_constant_model_shows_it():
    report = classification_report(np.ones(100, int), LABELS, ["neg", "pos"])
    assert report["predicted_classes"] == 1 and report["metrics"]["mcc"] == 0.0
    assert report["slices"]["neg"]["accuracy"] == 0.0 and report["slices"]["neg"]["predicted"] == 0


# --- the blessing rule ---------------------------------------------------------------------------


def constant_model_metrics():
    return classification_report(np.ones(100, int), LABELS, ["neg", "pos"])["metrics"]


def test_default_rule_refuses_a_constant_model_at_any_threshold():
    baseline = majority_class_baseline(LABELS, ["accuracy", "f1", "mcc"])
    for threshold in (0.0, 0.5, 0.6):
        decision = decide(constant_model_metrics(), baseline, BlessingRule(threshold=threshold), examples=100)
        assert not decision.blessed
        assert decision.reason.startswith("beats the constant answer failed")


def test_rule_blesses_a_model_that_learned_and_reports_every_check():
    baseline = majority_class_baseline(LABELS)
    decision = decide({"accuracy": 0.80, "mcc": 0.55}, baseline, BlessingRule(threshold=0.5), examples=100)
    assert decision.blessed
    assert [c.name for c in decision.checks] == [
        "beats the constant answer", "mcc above minimum", "accuracy beats chance", "value threshold",
        "not worse than the pushed model",
    ]
    assert decision.to_dict()["checks"][0]["passed"]


def test_rule_wants_more_than_chance_over_the_majority():
    baseline = majority_class_baseline(LABELS)
    # 0.66 on 100 texts is 0.8 standard errors above a 0.62 majority: not evidence of learning.
    decision = decide({"accuracy": 0.66, "mcc": 0.1}, baseline, BlessingRule(), examples=100)
    assert not decision.blessed and decision.reason.startswith("accuracy beats chance failed")
    # The same gain on 2,000 texts is.
    assert decide({"accuracy": 0.66, "mcc": 0.1}, baseline, BlessingRule(), examples=2000).blessed
    assert decide({"accuracy": 0.66, "mcc": 0.1}, baseline, BlessingRule(confidence=0.0), examples=100).blessed


def test_rule_mcc_threshold_and_pushed_model():
    baseline = majority_class_baseline(LABELS)
    good = {"accuracy": 0.80, "mcc": 0.55}
    assert not decide(good, baseline, BlessingRule(min_mcc=0.6), examples=100).blessed
    assert not decide(good, baseline, BlessingRule(threshold=0.85), examples=100).blessed
    worse = decide(good, baseline, BlessingRule(), examples=100, pushed={"accuracy": 0.82})
    assert not worse.blessed and "pushed model" in worse.reason
    assert decide(good, baseline, BlessingRule(tolerance=0.05), examples=100, pushed={"accuracy": 0.82}).blessed
    must_improve = decide(good, baseline, BlessingRule(tolerance=-0.01), examples=100, pushed={"accuracy": 0.80})
    assert not must_improve.blessed


def test_rule_for_a_lower_is_better_metric():
    baseline = mean_baseline([1.0, 2.0, 3.0, 6.0], ["mse"])
    rule = BlessingRule(metric="mse", threshold=10.0)
    assert decide({"mse": 1.0}, baseline, rule, examples=4).blessed
    assert not decide({"mse": 3.5}, baseline, rule, examples=4).blessed  # the mean's mse is 3.5


def test_rule_validation():
    with pytest.raises(ValueError, match="baseline_margin"):
        BlessingRule(baseline_margin=-0.1)
    with pytest.raises(ValueError, match="confidence"):
        BlessingRule(confidence=1.0)
    with pytest.raises(ValueError, match="number"):
        BlessingRule(threshold="high")
    with pytest.raises(ValueError, match="unknown eval metric"):
        decide({"accuracy": 0.7}, majority_class_baseline(LABELS), BlessingRule(metric="f1"), examples=10)
