"""Tests of `albert_tf.metrics`: hand-computed values, and agreement with scipy, scikit-learn and seqeval."""

import math

import numpy as np
import pytest

from albert_tf import metrics


def test_accuracy_and_f1_by_hand():
    predictions = [1, 0, 1, 1, 0, 1]
    labels = [1, 0, 0, 1, 1, 1]
    assert metrics.accuracy(predictions, labels) == pytest.approx(4 / 6)
    # TP = 3, predicted positive = 4, actual positive = 4.
    precision, recall, f1 = metrics.precision_recall_f1(predictions, labels)
    assert (precision, recall) == (pytest.approx(0.75), pytest.approx(0.75))
    assert f1 == pytest.approx(0.75)
    assert metrics.f1_score([0, 0], [0, 0]) == 0.0  # no positives anywhere: 0, not NaN


def test_matthews_by_hand_and_degenerate():
    # TP=2, TN=1, FP=1, FN=1: (2*1 - 1*1) / sqrt(3*3*2*2) = 1/6.
    predictions = [1, 1, 1, 0, 0]
    labels = [1, 1, 0, 1, 0]
    assert metrics.matthews_corrcoef(predictions, labels) == pytest.approx(1 / 6)
    assert metrics.matthews_corrcoef([1, 1, 1], [0, 1, 0]) == 0.0  # constant prediction
    assert metrics.matthews_corrcoef([0, 1, 0, 1], [0, 1, 0, 1]) == pytest.approx(1.0)
    assert metrics.matthews_corrcoef([1, 0, 1, 0], [0, 1, 0, 1]) == pytest.approx(-1.0)


def test_correlations_by_hand():
    x = [1.0, 2.0, 3.0, 4.0]
    assert metrics.pearson_corr(x, [2.0, 4.0, 6.0, 8.0]) == pytest.approx(1.0)
    assert metrics.pearson_corr(x, [4.0, 3.0, 2.0, 1.0]) == pytest.approx(-1.0)
    # Monotone but not linear: Spearman 1, Pearson below 1.
    assert metrics.spearman_corr(x, [1.0, 10.0, 100.0, 1000.0]) == pytest.approx(1.0)
    assert metrics.pearson_corr(x, [1.0, 10.0, 100.0, 1000.0]) < 0.9
    # Ties get the average rank: ranks of [1, 1, 2] are [1.5, 1.5, 3].
    expected = np.corrcoef([1.5, 1.5, 3.0], [1.0, 2.0, 3.0])[0, 1]
    assert metrics.spearman_corr([1.0, 1.0, 2.0], [1.0, 2.0, 3.0]) == pytest.approx(expected)
    assert math.isnan(metrics.pearson_corr([1.0, 1.0], [1.0, 2.0]))


def test_against_scipy_and_sklearn():
    scipy_stats = pytest.importorskip("scipy.stats")
    sk = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(0)
    for _ in range(5):
        labels = rng.integers(0, 2, size=200)
        predictions = np.where(rng.random(200) < 0.7, labels, 1 - labels)
        assert metrics.f1_score(predictions, labels) == pytest.approx(sk.f1_score(labels, predictions))
        assert metrics.matthews_corrcoef(predictions, labels) == pytest.approx(sk.matthews_corrcoef(labels, predictions))
        assert metrics.accuracy(predictions, labels) == pytest.approx(sk.accuracy_score(labels, predictions))
        multi_labels = rng.integers(0, 3, size=200)
        multi_predictions = np.where(rng.random(200) < 0.6, multi_labels, rng.integers(0, 3, size=200))
        assert metrics.matthews_corrcoef(multi_predictions, multi_labels) == pytest.approx(
            sk.matthews_corrcoef(multi_labels, multi_predictions)
        )
        scores = rng.normal(size=100)
        targets = np.round(scores + rng.normal(scale=0.5, size=100), 1)  # rounded: ties
        assert metrics.pearson_corr(scores, targets) == pytest.approx(scipy_stats.pearsonr(scores, targets)[0])
        assert metrics.spearman_corr(scores, targets) == pytest.approx(scipy_stats.spearmanr(scores, targets)[0])


def test_token_accuracy_uses_weights():
    predictions = np.array([[1, 2, 3], [1, 1, 1]])
    labels = np.array([[1, 0, 3], [2, 1, -100]])
    weights = labels >= 0
    # Scored positions: (0,0) ok, (0,1) wrong, (0,2) ok, (1,0) wrong, (1,1) ok.
    assert metrics.token_accuracy(predictions, labels, weights) == pytest.approx(3 / 5)
    with pytest.raises(ValueError, match="no labelled token"):
        metrics.token_accuracy([1], [1], [0])


def test_get_entities_bio_and_iob1():
    tags = ["B-PER", "I-PER", "O", "B-LOC", "B-LOC", "I-LOC", "I-ORG", "O", "I-PER"]
    assert metrics.get_entities(tags) == [
        ("PER", 0, 1),
        ("LOC", 3, 3),
        ("LOC", 4, 5),
        ("ORG", 6, 6),  # I- of another type starts a new entity (conlleval)
        ("PER", 8, 8),  # I- after O too
    ]
    with pytest.raises(ValueError, match="not 'O'"):
        metrics.get_entities(["B-PER", "PER"])


def test_entity_scores_by_hand():
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O"]]
    predicted = [["B-PER", "I-PER", "O", "O"], ["B-ORG", "B-LOC"]]
    scores = metrics.entity_scores(predicted, gold)
    # Predicted: PER(0-1) ok, ORG ok, LOC(1,1) wrong; gold: PER, LOC, ORG.
    assert (scores["num_correct"], scores["num_predicted"], scores["num_true"]) == (2, 3, 3)
    assert scores["precision"] == pytest.approx(2 / 3)
    assert scores["recall"] == pytest.approx(2 / 3)
    assert scores["f1"] == pytest.approx(2 / 3)
    assert scores["per_type"]["LOC"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 1}
    # A partially matching span is wrong: exact spans only.
    partial = metrics.entity_scores([["B-PER", "O"]], [["B-PER", "I-PER"]])
    assert partial["f1"] == 0.0


def test_entity_scores_match_seqeval():
    seqeval = pytest.importorskip("seqeval.metrics")
    rng = np.random.default_rng(1)
    tags = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG"]
    gold, predicted = [], []
    for _ in range(60):
        n = int(rng.integers(1, 12))
        g = [tags[i] for i in rng.integers(0, len(tags), size=n)]
        p = [t if rng.random() < 0.7 else tags[int(rng.integers(0, len(tags)))] for t in g]
        gold.append(g)
        predicted.append(p)
    ours = metrics.entity_scores(predicted, gold)
    assert ours["precision"] == pytest.approx(seqeval.precision_score(gold, predicted))
    assert ours["recall"] == pytest.approx(seqeval.recall_score(gold, predicted))
    assert ours["f1"] == pytest.approx(seqeval.f1_score(gold, predicted))


def test_glue_metrics_by_name_and_errors():
    out = metrics.glue_metrics(["accuracy", "f1", "mcc"], [1, 0, 1], [1, 0, 0])
    assert out["accuracy"] == pytest.approx(2 / 3)
    assert out["f1"] == pytest.approx(2 / 3)
    assert metrics.combined_score({"a": 0.5, "b": 1.0}) == pytest.approx(0.75)
    with pytest.raises(ValueError, match="unknown metric"):
        metrics.glue_metrics(["bleu"], [1], [1])
    with pytest.raises(ValueError, match="differ in length"):
        metrics.accuracy([1, 0], [1])
    with pytest.raises(ValueError, match="no predictions"):
        metrics.accuracy([], [])
