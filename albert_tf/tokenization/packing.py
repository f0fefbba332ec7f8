"""Packing token ids into ALBERT model inputs, in pure Python: `[CLS] a [SEP] b [SEP]` + padding.

This is the original fine-tuning input format (google-research/albert `classifier_utils`,
`official.nlp.data.classifier_data_lib`): a pair is truncated by `truncate_seq_pair`, which removes
the last token of the longer segment (of `b` on a tie) until the pair fits; a single segment is cut
to `seq_length - 2`; `b` gets its `[SEP]` only when it has tokens. The in-graph layer
(`albert_tf.tokenization.in_graph`) computes the same result with tensor ops; this module is its
reference and the packing of the Python tokenizers.
"""

from __future__ import annotations

from typing import Dict, List, MutableSequence, Optional, Sequence


def truncate_seq_pair(tokens_a: MutableSequence, tokens_b: MutableSequence, max_num_tokens: int) -> None:
    """Truncates a pair in place to at most `max_num_tokens` in total, the original way.

    One token at a time is popped from the end of the longer sequence (`tokens_b` when they are
    equally long), which keeps as much of the shorter one as possible. This is not round robin:
    `[5, 5]` cut to 7 becomes `[4, 3]`.

    Args:
      tokens_a: first segment (modified).
      tokens_b: second segment (modified).
      max_num_tokens: the total length allowed (>= 0).

    Raises:
      ValueError: for a negative `max_num_tokens`.
    """
    if max_num_tokens < 0:
        raise ValueError(f"max_num_tokens must be >= 0, got {max_num_tokens}")
    while len(tokens_a) + len(tokens_b) > max_num_tokens:
        if len(tokens_a) > len(tokens_b):
            tokens_a.pop()
        else:
            tokens_b.pop()


def pack_inputs(
    ids_a: Sequence[int],
    ids_b: Optional[Sequence[int]] = None,
    *,
    seq_length: int,
    cls_id: int,
    sep_id: int,
    pad_id: int = 0,
) -> Dict[str, List[int]]:
    """Builds `input_ids`, `input_mask` and `segment_ids` of length `seq_length` for one example.

    Args:
      ids_a: token ids of the first segment.
      ids_b: token ids of the second segment, or None/empty for a single segment.
      seq_length: the model's sequence length (>= 3).
      cls_id, sep_id, pad_id: the special token ids.

    Returns:
      A dict of three lists of `seq_length` ints: `input_ids` (padded with `pad_id`),
      `input_mask` (1 for real tokens), `segment_ids` (0 for `[CLS] a [SEP]`, 1 for `b [SEP]`).

    Raises:
      ValueError: for `seq_length < 3`.
    """
    if seq_length < 3:
        raise ValueError(f"seq_length must be >= 3 ([CLS] a [SEP] b [SEP] needs room), got {seq_length}")
    a = list(ids_a)
    b = list(ids_b) if ids_b else []
    if b:
        truncate_seq_pair(a, b, seq_length - 3)
    else:
        del a[seq_length - 2 :]
    input_ids = [cls_id] + a + [sep_id]
    segment_ids = [0] * len(input_ids)
    if b:
        input_ids += b + [sep_id]
        segment_ids += [1] * (len(b) + 1)
    padding = seq_length - len(input_ids)
    return {
        "input_ids": input_ids + [pad_id] * padding,
        "input_mask": [1] * len(input_ids) + [0] * padding,
        "segment_ids": segment_ids + [0] * padding,
    }


def bucketed_width(longest: int, sequence_length: int, length_bucket: int) -> int:
    """The width a length-aware batch is packed to, in Python (the in-graph layer's is
    `albert_tf.tokenization.in_graph.packed_width`): its longest real length rounded up to a
    multiple of `length_bucket`, at least `length_bucket`, at most `sequence_length`."""
    return min(sequence_length, max(length_bucket, -(-longest // length_bucket) * length_bucket))
