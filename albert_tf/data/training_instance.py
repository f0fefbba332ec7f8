"""`TrainingInstance`: one finished pretraining instance, the record `albert_tf.data.tfrecords`
writes and `albert_tf.data.pretraining_instances` makes (its own module, so that neither of those
imports the other for it)."""

from __future__ import annotations

import dataclasses
from typing import List


@dataclasses.dataclass(frozen=True)
class TrainingInstance:
    """One finished instance, unpadded; `tfrecords.serialize_instance` pads and encodes it.

    Attributes:
        input_ids: ``[CLS] A [SEP] B [SEP]`` with masking applied.
        segment_ids: 0 for ``[CLS] A [SEP]``, 1 for ``B [SEP]``.
        token_boundary: 1 at ``[CLS]``, ``[SEP]`` and word-start pieces.
        masked_lm_positions: the masked positions, ascending.
        masked_lm_ids: the original ids at those positions.
        next_sentence_label: the SOP label: 1 for swapped (or random) B, 0 for the true order.
    """

    input_ids: List[int]
    segment_ids: List[int]
    token_boundary: List[int]
    masked_lm_positions: List[int]
    masked_lm_ids: List[int]
    next_sentence_label: int
