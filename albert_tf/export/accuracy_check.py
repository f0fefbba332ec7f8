"""The accuracy check of a lower-precision export (bf16 graph, OpenVINO int8/bf16): on labelled
texts, its accuracy may fall at most `max_drop` below the float32 graph's, else the export is refused.

Both graphs are scored on the same texts by callables (texts -> class scores), so the check knows
nothing of the runtime: a SavedModel signature, an OpenVINO compiled model, a LiteRT interpreter.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional, Sequence

import numpy as np

# Half a point of accuracy: what the issue that added bf16 and int8 exports allows.
DEFAULT_MAX_DROP = 0.005

Scorer = Callable[[Sequence[str], Optional[Sequence[str]]], np.ndarray]


class AccuracyCheckError(ValueError):
    """A lower-precision graph lost more accuracy than allowed (its message is one line)."""


@dataclasses.dataclass(frozen=True)
class LabelledTexts:
    """Texts (and second segments for pair tasks) with their class ids."""

    texts: Sequence[str]
    labels: Sequence[int]
    texts_b: Optional[Sequence[str]] = None

    def __post_init__(self):
        if not len(self.texts):
            raise AccuracyCheckError("the accuracy check needs at least one labelled text")
        if len(self.labels) != len(self.texts) or (self.texts_b is not None and len(self.texts_b) != len(self.texts)):
            raise AccuracyCheckError(
                f"the accuracy check's texts ({len(self.texts)}) and labels ({len(self.labels)}) differ in number"
            )


def _accuracy(scorer: Scorer, data: LabelledTexts, batch_size: int) -> float:
    correct = 0
    for start in range(0, len(data.texts), batch_size):
        texts = list(data.texts[start:start + batch_size])
        texts_b = None if data.texts_b is None else list(data.texts_b[start:start + batch_size])
        scores = np.asarray(scorer(texts, texts_b))
        predicted = scores.reshape(len(texts), -1).argmax(-1)
        correct += int((predicted == np.asarray(data.labels[start:start + batch_size])).sum())
    return correct / len(data.texts)


def check_accuracy(reference: Scorer, candidate: Scorer, data: LabelledTexts, *, what: str,
                   max_drop: float = DEFAULT_MAX_DROP, batch_size: int = 32) -> dict:
    """Scores `data` with both graphs; returns the record export.json keeps (`reference_accuracy`,
    `accuracy`, `drop`, `max_drop`, `examples`).

    Raises:
      AccuracyCheckError: `candidate` (named `what` in the message) is more than `max_drop` below
        `reference`.
    """
    reference_accuracy = _accuracy(reference, data, batch_size)
    accuracy = _accuracy(candidate, data, batch_size)
    drop = reference_accuracy - accuracy
    record = dict(reference_accuracy=round(reference_accuracy, 6), accuracy=round(accuracy, 6), drop=round(drop, 6),
                  max_drop=max_drop, examples=len(data.texts))
    if drop > max_drop + 1e-12:
        raise AccuracyCheckError(
            f"the {what} scores {accuracy:.4f} on {len(data.texts)} labelled texts, {drop * 100:.2f} points below "
            f"float32's {reference_accuracy:.4f} (at most {max_drop * 100:.2f} allowed): not exported"
        )
    return record
