"""The score of a multiple-choice run: the accuracy of the chosen options."""

from __future__ import annotations

from typing import Sequence

import numpy as np


def race_accuracy(predictions: Sequence[int], labels: Sequence[int]) -> float:
    """The fraction of predictions equal to the labels.

    Raises:
        ValueError: different lengths, or no labels.
    """
    predictions, labels = np.asarray(predictions).reshape(-1), np.asarray(labels).reshape(-1)
    if predictions.shape != labels.shape:
        raise ValueError(f"{predictions.size} predictions for {labels.size} labels")
    if labels.size == 0:
        raise ValueError("no labels to score")
    return float(np.mean(predictions == labels))
