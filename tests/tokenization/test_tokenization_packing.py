"""Tests of albert_tf.tokenization.packing: the original truncation and `[CLS] a [SEP] b [SEP]`."""

import random

import pytest

from albert_tf.tokenization.packing import pack_inputs, truncate_seq_pair


def _truncated(len_a, len_b, max_num_tokens):
    a, b = list(range(len_a)), list(range(100, 100 + len_b))
    truncate_seq_pair(a, b, max_num_tokens)
    return a, b


def test_truncate_seq_pair_pops_the_longer_segment_from_the_end():
    a, b = _truncated(10, 2, 8)
    assert a == list(range(6)) and b == [100, 101]
    a, b = _truncated(2, 10, 8)
    assert a == [0, 1] and b == list(range(100, 106))
    # Not round robin: equal segments lose from b first.
    a, b = _truncated(5, 5, 7)
    assert (len(a), len(b)) == (4, 3)
    a, b = _truncated(3, 3, 10)
    assert (len(a), len(b)) == (3, 3)
    assert _truncated(4, 0, 0) == ([], [])


def test_truncate_seq_pair_keeps_prefixes_and_total():
    rng = random.Random(0)
    for _ in range(500):
        la, lb, m = rng.randrange(40), rng.randrange(40), rng.randrange(50)
        a, b = _truncated(la, lb, m)
        assert len(a) + len(b) == min(la + lb, m)
        assert a == list(range(len(a))) and b == list(range(100, 100 + len(b)))
        # The shorter segment is only cut once both are (about) equally long.
        if len(a) < la and len(b) < lb:
            assert len(a) - len(b) in (0, 1)


def test_truncate_seq_pair_rejects_negative_budget():
    with pytest.raises(ValueError, match="max_num_tokens"):
        truncate_seq_pair([1], [2], -1)


def test_pack_inputs_single_and_pair():
    single = pack_inputs([7, 8, 9], seq_length=6, cls_id=2, sep_id=3)
    assert single == {
        "input_ids": [2, 7, 8, 9, 3, 0],
        "input_mask": [1, 1, 1, 1, 1, 0],
        "segment_ids": [0, 0, 0, 0, 0, 0],
    }
    pair = pack_inputs([7, 8], [9], seq_length=8, cls_id=2, sep_id=3, pad_id=5)
    assert pair == {
        "input_ids": [2, 7, 8, 3, 9, 3, 5, 5],
        "input_mask": [1, 1, 1, 1, 1, 1, 0, 0],
        "segment_ids": [0, 0, 0, 0, 1, 1, 0, 0],
    }
    # An empty second segment packs as a single segment (no second [SEP]).
    assert pack_inputs([7], [], seq_length=4, cls_id=2, sep_id=3) == pack_inputs([7], seq_length=4, cls_id=2, sep_id=3)


def test_pack_inputs_truncates_long_segments():
    single = pack_inputs(list(range(10, 30)), seq_length=5, cls_id=2, sep_id=3)
    assert single["input_ids"] == [2, 10, 11, 12, 3]
    assert single["input_mask"] == [1] * 5
    pair = pack_inputs(list(range(10, 20)), list(range(20, 30)), seq_length=8, cls_id=2, sep_id=3)
    # 10 + 10 tokens into 5: a keeps 3, b keeps 2.
    assert pair["input_ids"] == [2, 10, 11, 12, 3, 20, 21, 3]
    assert pair["segment_ids"] == [0, 0, 0, 0, 0, 1, 1, 1]


def test_pack_inputs_rejects_short_sequences():
    with pytest.raises(ValueError, match="seq_length must be >= 3"):
        pack_inputs([1], seq_length=2, cls_id=2, sep_id=3)


def test_bucketed_width_is_the_in_graph_packed_width():
    """The clients' Python width and the layer's in-graph one agree on every length."""
    import tensorflow as tf

    from albert_tf.tokenization.in_graph import packed_width
    from albert_tf.tokenization.packing import bucketed_width

    for bucket in (1, 8, 16):
        for longest in range(0, 70):
            lengths = tf.constant([[0, longest], [1, 0]])
            assert bucketed_width(longest, 64, bucket) == int(packed_width(lengths, 64, bucket)), (longest, bucket)
    assert bucketed_width(0, 64, 16) == 16 and bucketed_width(17, 64, 16) == 32 and bucketed_width(70, 64, 16) == 64
