"""N-gram masking on the fly in tf.data: fresh ALBERT masks every epoch from unmasked instances.

The SOP pairing is done once (``make-pretraining-data --masked-lm-prob 0`` writes unmasked
instances; records that already carry masks work too, their original ids are put back first).
The masking then runs as TensorFlow ops inside ``Dataset.map``, so every epoch sees new masks.
Nothing runs per record but reading, numbering and shuffling; the rest runs once per batch:

* every record is numbered by its *key* ``epoch * 2**40 + index`` (``index``: its position in that
  epoch's read order; ``enumerate`` does this without a map), before the shuffle;
* per batch, one ``map`` parses the records (``parse_example``), puts masked ids back, draws the
  random numbers of every row from its key (a counter-based hash: SplitMix64 keyed by the seed,
  the input pipeline and the key) and masks, vectorized over ``[batch, max_seq_length]``. All of
  it but the parsing is one XLA-compiled function (``jit_compile``), which fuses the masking
  rounds' small ops into a few loops.

So a run is reproducible, independent of the parallelism and of the shuffle, and a resumed run
masks every record exactly as an uninterrupted one (the key holds the epoch).

The masking is the algorithm of :func:`albert_tf.data.pretraining_instances.create_masked_lm_predictions`
(the original ALBERT's) in a form without per-token Python: the original walks whole-word
candidates in a random order, draws n with p(n) proportional to 1/n, shrinks the n-gram until it
fits the budget and skips it when it overlaps; a candidate it skips is never revisited. Here every
word gets a random priority and an n up front, and each round accepts, in every row at once, the
highest-priority candidate after the last accepted one that fits and does not overlap. The state
only changes when a candidate is accepted, so this accepts exactly the candidates the sequential
walk would for the same priorities and draws, in at most ``max_predictions_per_seq`` rounds.
Replacements are 80% ``[MASK]``, 10% kept, 10% a random id in ``[0, vocab_size)``.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Dict, Mapping, Optional, Sequence, Union

import tensorflow as tf

from albert_tf.data.pretraining_instances import InstanceConfig, VocabInfo
from albert_tf.data.tfrecords import list_files, parse_examples

# The original ALBERT's rate; used where the data's own is 0 (instances written unmasked).
DEFAULT_MASKED_LM_PROB = 0.15
# A record's key is epoch * 2**KEY_INDEX_BITS + its index in the epoch (up to ~10**12 records).
KEY_INDEX_BITS = 40

_INT64_MAX = tf.int64.max
_UINT64 = (1 << 64) - 1
# SplitMix64 (Steele, Lea, Flood 2014): the golden-ratio increment and the finalizer's multipliers.
_GOLDEN = 0x9E3779B97F4A7C15
_MIX1 = 0xBF58476D1CE4E5B9
_MIX2 = 0x94D049BB133111EB


@dataclasses.dataclass(frozen=True)
class MaskingConfig:
    """The masking settings and vocabulary ids the on-the-fly masker needs.

    Build it with `from_tokenizer` (ids from the vocabulary) or `from_output_dir` (a
    ``make-pretraining-data`` output) rather than by hand.

    Attributes:
        max_seq_length, max_predictions_per_seq: the record shapes.
        vocab_size: random replacements are uniform in ``[0, vocab_size)``.
        cls_id, sep_id, mask_id: special ids (``[CLS]``/``[SEP]`` are never masked).
        masked_lm_prob, ngram, favor_shorter_ngram, do_whole_word_mask: as in `InstanceConfig`.
    """

    max_seq_length: int
    max_predictions_per_seq: int
    vocab_size: int
    cls_id: int
    sep_id: int
    mask_id: int
    masked_lm_prob: float = DEFAULT_MASKED_LM_PROB
    ngram: int = 3
    favor_shorter_ngram: bool = True
    do_whole_word_mask: bool = True

    def __post_init__(self):
        if not 0.0 < self.masked_lm_prob <= 1.0:
            raise ValueError(f"masked_lm_prob must be in (0, 1] for masking on the fly, got {self.masked_lm_prob}")
        if self.ngram < 1:
            raise ValueError(f"ngram must be at least 1, got {self.ngram}")
        if not 0 < self.vocab_size < 1 << 32:
            raise ValueError(f"vocab_size must be in [1, 2**32), got {self.vocab_size}")
        for name in ("cls_id", "sep_id", "mask_id"):
            if not 0 <= getattr(self, name) < self.vocab_size:
                raise ValueError(f"{name} {getattr(self, name)} is outside the vocabulary [0, {self.vocab_size})")
        if not 1 <= self.max_predictions_per_seq <= self.max_seq_length:
            raise ValueError(
                f"max_predictions_per_seq must be in [1, max_seq_length={self.max_seq_length}], "
                f"got {self.max_predictions_per_seq}"
            )

    @classmethod
    def from_instance_config(
        cls,
        instance: Union[InstanceConfig, Mapping[str, Any]],
        vocab: Union[VocabInfo, Mapping[str, int]],
        masked_lm_prob: Optional[float] = None,
    ) -> "MaskingConfig":
        """The masking of `instance` with the ids of `vocab`.

        Args:
            instance: an `InstanceConfig`, or the ``instance_config`` entry of a ``metadata.json``
                (missing keys take `InstanceConfig`'s defaults).
            vocab: a `VocabInfo`, or the ``vocab`` entry of a ``metadata.json``.
            masked_lm_prob: overrides the instance's rate; by default the instance's, or
                `DEFAULT_MASKED_LM_PROB` where that is 0 (instances written unmasked).
        """
        settings = _instance_settings(instance)
        if masked_lm_prob is None:
            masked_lm_prob = settings["masked_lm_prob"] or DEFAULT_MASKED_LM_PROB
        ids = vocab if isinstance(vocab, Mapping) else dataclasses.asdict(vocab)
        return cls(
            max_seq_length=settings["max_seq_length"],
            max_predictions_per_seq=settings["max_predictions_per_seq"],
            vocab_size=int(ids["vocab_size"]),
            cls_id=int(ids["cls_id"]),
            sep_id=int(ids["sep_id"]),
            mask_id=int(ids["mask_id"]),
            masked_lm_prob=masked_lm_prob,
            ngram=settings["ngram"],
            favor_shorter_ngram=settings["favor_shorter_ngram"],
            do_whole_word_mask=settings["do_whole_word_mask"],
        )

    @classmethod
    def from_tokenizer(
        cls,
        tokenizer,
        instance: Union[InstanceConfig, Mapping[str, Any], None] = None,
        *,
        max_seq_length: Optional[int] = None,
        max_predictions_per_seq: Optional[int] = None,
        masked_lm_prob: Optional[float] = None,
    ) -> "MaskingConfig":
        """The masking of `instance` with the special ids and vocabulary size of `tokenizer`.

        Args:
            tokenizer: a tokenizer with a ``vocab`` (`albert_tf.tokenization`'s, or
                tf-models-official's); a `TokenizerFile`; or a path: a SentencePiece ``.model``,
                else a WordPiece ``vocab.txt``.
            instance: an `InstanceConfig` or a ``metadata.json``'s ``instance_config``: lengths
                and masking settings; None: `InstanceConfig`'s defaults (the original flags).
            max_seq_length, max_predictions_per_seq: override the instance's lengths.
            masked_lm_prob: overrides the instance's rate (see `from_instance_config`).

        Raises:
            ValueError: the vocabulary lacks ``[CLS]``, ``[SEP]`` or ``[MASK]``, or a setting is out
                of range.
        """
        settings = _instance_settings(instance)
        if max_seq_length is not None:
            settings["max_seq_length"] = max_seq_length
        if max_predictions_per_seq is not None:
            settings["max_predictions_per_seq"] = max_predictions_per_seq
        vocab = VocabInfo.from_tokenizer(_load_tokenizer(tokenizer))
        return cls.from_instance_config(settings, vocab, masked_lm_prob)

    @classmethod
    def from_output_dir(cls, output_dir: str, masked_lm_prob: Optional[float] = None) -> "MaskingConfig":
        """The settings and ids recorded in the ``metadata.json`` of a ``make-pretraining-data`` output.

        Args:
            output_dir: the directory written by the Beam pipeline.
            masked_lm_prob: overrides the recorded rate (by default the recorded one, or
                `DEFAULT_MASKED_LM_PROB` for unmasked data).
        """
        path = os.path.join(output_dir, "metadata.json")
        with tf.io.gfile.GFile(path, "r") as f:
            metadata = json.load(f)
        return cls.from_instance_config(metadata["instance_config"], metadata["vocab"], masked_lm_prob)

    def ngram_thresholds(self):
        """Cumulative p(n) for n = 1 .. ngram - 1: n is 1 + the number of thresholds a uniform passes."""
        weights = [1.0 / n for n in range(1, self.ngram + 1)]
        if not self.favor_shorter_ngram:
            weights = weights[::-1]
        total = sum(weights)
        out, acc = [], 0.0
        for w in weights[:-1]:
            acc += w / total
            out.append(acc)
        return out


def masking_record(config: Optional[MaskingConfig]) -> Dict[str, Any]:
    """How a run's records are masked, for its ``run_config.json`` (`PretrainingRunConfig.masking`):
    ``{"mode": "offline"}`` for None, else ``{"mode": "on-the-fly"}`` plus every `MaskingConfig` field."""
    if config is None:
        return {"mode": "offline"}
    return {"mode": "on-the-fly", **dataclasses.asdict(config)}


def _instance_settings(instance) -> Dict[str, Any]:
    """The `InstanceConfig` fields of an `InstanceConfig`, a mapping (defaults filled in) or None."""
    if instance is None:
        instance = InstanceConfig()
    if isinstance(instance, InstanceConfig):
        return dataclasses.asdict(instance)
    defaults = dataclasses.asdict(InstanceConfig())
    return {k: instance.get(k, default) for k, default in defaults.items()}


def _load_tokenizer(tokenizer):
    """A tokenizer object from a tokenizer, a `TokenizerFile` (``kind``, ``path``) or a path."""
    if isinstance(tokenizer, (str, os.PathLike)):
        path = os.fspath(tokenizer)
        kind = "sentencepiece" if path.endswith(".model") else "wordpiece"
    elif hasattr(tokenizer, "kind") and hasattr(tokenizer, "path"):
        kind, path = tokenizer.kind, tokenizer.path
    else:
        return tokenizer
    from albert_tf.tokenization.resolve import python_tokenizer

    return python_tokenizer(kind, path)


# --- random numbers -----------------------------------------------------------------------------


def _mix64_int(z: int) -> int:
    """SplitMix64's finalizer on a Python int (for the per-run constant)."""
    z &= _UINT64
    z = ((z ^ (z >> 30)) * _MIX1) & _UINT64
    z = ((z ^ (z >> 27)) * _MIX2) & _UINT64
    return z ^ (z >> 31)


def _mix64(z: tf.Tensor) -> tf.Tensor:
    """SplitMix64's finalizer on a uint64 tensor (multiplications wrap modulo 2**64)."""
    z = tf.bitwise.bitwise_xor(z, tf.bitwise.right_shift(z, tf.constant(30, tf.uint64))) * tf.constant(_MIX1, tf.uint64)
    z = tf.bitwise.bitwise_xor(z, tf.bitwise.right_shift(z, tf.constant(27, tf.uint64))) * tf.constant(_MIX2, tf.uint64)
    return tf.bitwise.bitwise_xor(z, tf.bitwise.right_shift(z, tf.constant(31, tf.uint64)))


def stream_base(seed: int, shard: int = 0) -> int:
    """The 64-bit state every record's stream is derived from: the seed and the input pipeline."""
    return _mix64_int(_mix64_int((seed + 1) * _GOLDEN) + (shard + 1) * _GOLDEN)


def record_keys(epoch, index) -> tf.Tensor:
    """``epoch * 2**40 + index``: the int64 key whose stream masks a record."""
    return tf.cast(epoch, tf.int64) * (1 << KEY_INDEX_BITS) + tf.cast(index, tf.int64)


def batch_draws(config: MaskingConfig, keys, seed: int, shard: int = 0) -> Dict[str, tf.Tensor]:
    """The random numbers that mask a batch of records, from their keys.

    Row ``r`` is a SplitMix64 stream: its state is ``mix(base + key_r * γ)`` (``base`` from
    `stream_base`), its ``j``-th value ``mix(state + j * γ)``; positions use values ``2p + 1`` and
    ``2p + 2``. The first gives the priority (top 40 bits) and the n-gram uniform (low 24), the
    second the replacement uniform (top 24 bits) and the random id (low 32, scaled to
    ``vocab_size``, so no modulo bias). Every row's numbers depend only on its key.

    Args:
        config: the masking settings (``max_seq_length``, ``vocab_size``).
        keys: int64 ``[batch]`` record keys (`record_keys`).
        seed: the masking seed.
        shard: the input pipeline (folded into the base state).

    Returns:
        ``priority`` (int64 in ``[0, 2**40)``), ``ngram_u``, ``replace_u`` (float32 in [0, 1)) and
        ``random_ids`` (int32 in ``[0, vocab_size)``), each ``[batch, max_seq_length]``.
    """
    length = config.max_seq_length
    keys = tf.bitcast(tf.cast(keys, tf.int64), tf.uint64)
    states = _mix64(tf.constant(stream_base(seed, shard), tf.uint64) + keys * tf.constant(_GOLDEN, tf.uint64))
    counters = tf.range(1, 2 * length + 1, dtype=tf.int64)
    steps = tf.bitcast(counters, tf.uint64) * tf.constant(_GOLDEN, tf.uint64)
    values = tf.reshape(_mix64(states[:, tf.newaxis] + steps[tf.newaxis, :]), [-1, length, 2])
    first, second = values[:, :, 0], values[:, :, 1]
    low24 = tf.constant(0xFFFFFF, tf.uint64)
    scale = 1.0 / (1 << 24)
    low32 = tf.bitwise.bitwise_and(second, tf.constant(0xFFFFFFFF, tf.uint64))
    random_ids = tf.bitwise.right_shift(low32 * tf.constant(config.vocab_size, tf.uint64), tf.constant(32, tf.uint64))
    return {
        "priority": tf.cast(tf.bitwise.right_shift(first, tf.constant(24, tf.uint64)), tf.int64),
        "ngram_u": tf.cast(tf.bitwise.bitwise_and(first, low24), tf.float32) * scale,
        "replace_u": tf.cast(tf.bitwise.right_shift(second, tf.constant(40, tf.uint64)), tf.float32) * scale,
        "random_ids": tf.cast(random_ids, tf.int32),
    }


# --- masking ------------------------------------------------------------------------------------


def restore_original_ids(features: Dict[str, tf.Tensor]) -> tf.Tensor:
    """``input_ids`` [B, L] with the masked positions set back to their ``masked_lm_ids``.

    One scatter of every prediction slot into the flattened ids; padding slots (weight 0) go to
    an extra element that is dropped, so the shapes are static and it compiles with XLA.
    """
    input_ids = features["input_ids"]
    batch, length = tf.shape(input_ids)[0], tf.shape(input_ids)[1]
    positions = tf.cast(features["masked_lm_positions"], tf.int32)
    rows = tf.range(batch, dtype=tf.int32)[:, tf.newaxis] * length
    target = tf.where(features["masked_lm_weights"] > 0, rows + positions, batch * length)
    flat = tf.concat([tf.reshape(input_ids, [-1]), tf.zeros([1], input_ids.dtype)], axis=0)
    flat = tf.tensor_scatter_nd_update(
        flat, tf.reshape(target, [-1, 1]), tf.reshape(tf.cast(features["masked_lm_ids"], input_ids.dtype), [-1])
    )
    return tf.reshape(flat[:-1], [batch, length])


def _exclusive_prefix(values: tf.Tensor, extra: int) -> tf.Tensor:
    """[B, L] -> [B, L + 1 + extra]: sums of values before index k, the total repeated past the end."""
    inclusive = tf.cumsum(values, axis=1)
    zeros = tf.zeros_like(values[:, :1])
    return tf.concat([zeros, inclusive, tf.tile(inclusive[:, -1:], [1, extra])], axis=1)


def mask_batch(
    features: Dict[str, tf.Tensor],
    draws: Dict[str, tf.Tensor],
    config: MaskingConfig,
    with_ngram_counts: bool = False,
):
    """Applies n-gram masking to a batch of unmasked instances.

    Args:
        features: int32 ``input_ids`` (unmasked), ``input_mask``, ``token_boundary`` of shape
            ``[B, max_seq_length]`` (other entries are passed through).
        draws: `batch_draws` of the rows (``priority``, ``ngram_u``, ``replace_u``, ``random_ids``).
        config: the masking settings.
        with_ngram_counts: also return ``masked_lm_ngram_counts`` ``[B, ngram]``: how many masked
            n-grams of each length (in words) every row got, for monitoring the masking.

    Returns:
        `features` with ``input_ids`` masked and ``masked_lm_positions``, ``masked_lm_ids``
        (int32) and ``masked_lm_weights`` (float32) of shape ``[B, max_predictions_per_seq]``.
    """
    length = config.max_seq_length
    max_pred = config.max_predictions_per_seq
    max_n = config.ngram
    ids = features["input_ids"]
    batch = tf.shape(ids)[0]
    positions = tf.range(length, dtype=tf.int32)[tf.newaxis, :]

    real = features["input_mask"] > 0
    special = tf.logical_or(tf.equal(ids, config.cls_id), tf.equal(ids, config.sep_id))
    is_cand = tf.logical_and(real, tf.logical_not(special))
    cand_int = tf.cast(is_cand, tf.int32)
    if config.do_whole_word_mask:
        # The first candidate piece opens a word even when it is a continuation piece.
        first = tf.logical_and(is_cand, tf.equal(tf.cumsum(cand_int, axis=1, exclusive=True), 0))
        starts = tf.logical_and(is_cand, tf.logical_or(features["token_boundary"] > 0, first))
    else:
        starts = is_cand
    words_so_far = tf.cumsum(tf.cast(starts, tf.int32), axis=1)
    word_of_piece = words_so_far - 1  # valid where is_cand
    num_words = words_so_far[:, -1:]  # [B, 1]

    # Pieces per word: a segment sum over (row, word) pairs.
    row = tf.range(batch, dtype=tf.int32)[:, tf.newaxis] * length
    segment = tf.where(is_cand, row + tf.maximum(word_of_piece, 0), batch * length)
    word_len = tf.math.unsorted_segment_sum(
        tf.reshape(cand_int, [-1]), tf.reshape(segment, [-1]), batch * length + 1
    )[:-1]
    word_len = tf.reshape(word_len, [batch, length])
    # span[:, k, m - 1]: pieces in words k .. k + m - 1 (growing with m while words remain).
    pieces_before = _exclusive_prefix(word_len, max_n)
    span = tf.stack(
        [pieces_before[:, m : m + length] - pieces_before[:, :length] for m in range(1, max_n + 1)], axis=-1
    )

    words = positions  # word index k, laid out like positions
    word_valid = words < num_words
    ngram_n = tf.ones_like(ids)
    for threshold in config.ngram_thresholds():
        ngram_n += tf.cast(draws["ngram_u"] >= threshold, tf.int32)
    ngram_n = tf.minimum(ngram_n, num_words - words)  # clipped at the last word
    # allowed[:, k, m - 1]: an n-gram of m words is within the one drawn at word k.
    allowed = tf.range(1, max_n + 1)[tf.newaxis, tf.newaxis, :] <= ngram_n[:, :, tf.newaxis]

    num_tokens = tf.reduce_sum(tf.cast(real, tf.float64), axis=1)
    budget = tf.cast(tf.round(num_tokens * config.masked_lm_prob), tf.int32)  # half to even, as Python
    budget = tf.minimum(max_pred, tf.maximum(1, budget))[:, tf.newaxis]  # [B, 1]
    priority = draws["priority"]
    no_covered = tf.fill(tf.shape(ids), tf.constant(length + max_n, tf.int32))

    def round_fn(covered, next_covered, count, last, active, ngram_counts):
        room = budget - count  # [B, 1]
        # The shrunk n-gram: the longest allowed one that fits (span lengths grow with m).
        fits = tf.logical_and(allowed, span <= room[:, :, tf.newaxis])
        fit = tf.reduce_sum(tf.cast(fits, tf.int32), axis=2)
        # next_covered[:, k]: the first covered word >= k, so [k, k + fit) overlaps iff it is below k + fit.
        candidate = word_valid & (priority > last) & (fit > 0) & (next_covered >= words + fit) & active
        key = tf.where(candidate, priority, _INT64_MAX)
        pick = tf.argmin(key, axis=1, output_type=tf.int32)[:, tf.newaxis]  # [B, 1]
        best = tf.reduce_min(key, axis=1, keepdims=True)
        found = best < _INT64_MAX
        picked_m = tf.gather(fit, pick, batch_dims=1)
        picked_spans = tf.gather(span, pick[:, 0], batch_dims=1)  # [B, max_n]
        picked_len = tf.gather(picked_spans, tf.maximum(picked_m - 1, 0), batch_dims=1)
        before_end = (words < pick + picked_m) & found
        covered = tf.logical_or(covered, before_end & (words >= pick))
        next_covered = tf.where(before_end, tf.minimum(next_covered, tf.maximum(words, pick)), next_covered)
        count = count + tf.where(found, picked_len, 0)
        last = tf.where(found, best, last)
        active = tf.logical_and(found, count < budget)
        if with_ngram_counts:
            ngram_counts += tf.one_hot(picked_m[:, 0] - 1, max_n, dtype=tf.int32) * tf.cast(found, tf.int32)
        return covered, next_covered, count, last, active, ngram_counts

    state = (
        tf.zeros_like(ids, dtype=tf.bool),
        no_covered,
        tf.zeros([batch, 1], tf.int32),
        tf.fill([batch, 1], tf.constant(-1, tf.int64)),  # priorities are >= 0
        tf.ones([batch, 1], tf.bool),
        tf.zeros([batch, max_n], tf.int32),
    )
    covered, _, _, _, _, ngram_counts = tf.while_loop(
        lambda covered, next_covered, count, last, active, ngram_counts: tf.reduce_any(active),
        round_fn,
        state,
        maximum_iterations=max_pred,
    )

    covered_piece = tf.logical_and(is_cand, tf.gather(covered, tf.maximum(word_of_piece, 0), batch_dims=1))
    u = draws["replace_u"]
    replaced = tf.where(
        u < 0.8,
        tf.fill(tf.shape(ids), tf.constant(config.mask_id, ids.dtype)),
        tf.where(u < 0.9, ids, tf.cast(draws["random_ids"], ids.dtype)),
    )
    masked_ids = tf.where(covered_piece, replaced, ids)

    # Ascending masked positions: top_k of (length - position) over covered pieces. In float32
    # (exact up to 2**24), for which XLA's CPU top_k is a fast kernel rather than a sort.
    order_key = tf.where(covered_piece, tf.cast(length - positions, tf.float32), 0.0)
    top_values, top_positions = tf.math.top_k(order_key, k=max_pred, sorted=True)
    real_slot = top_values > 0
    out_positions = tf.where(real_slot, top_positions, 0)
    out = dict(features)
    out["input_ids"] = masked_ids
    out["masked_lm_positions"] = out_positions
    out["masked_lm_ids"] = tf.where(real_slot, tf.gather(ids, out_positions, batch_dims=1), 0)
    out["masked_lm_weights"] = tf.cast(real_slot, tf.float32)
    if with_ngram_counts:
        out["masked_lm_ngram_counts"] = ngram_counts
    return out


def masking_function(
    config: MaskingConfig, seed: int, shard: int = 0, *, with_ngram_counts: bool = False, jit_compile: bool = True
):
    """``fn(keys, features)``: restores the original ids, draws and masks one parsed batch.

    Args:
        config: the masking settings.
        seed, shard: as for `batch_draws`.
        with_ngram_counts: see `mask_batch`.
        jit_compile: compile with XLA (the same masks, several times faster on a CPU).

    Returns:
        A ``tf.function`` taking int64 ``keys`` ``[B]`` and the dict `parse_examples` returns.
    """

    def restore_draw_mask(keys, features):
        features = dict(features)
        features["input_ids"] = restore_original_ids(features)
        return mask_batch(features, batch_draws(config, keys, seed, shard), config, with_ngram_counts)

    return tf.function(restore_draw_mask, jit_compile=jit_compile, autograph=False)


def make_on_the_fly_dataset(
    source: Union[str, Sequence[str], tf.data.Dataset],
    batch_size: int,
    config: MaskingConfig,
    *,
    seed: int = 0,
    is_training: bool = True,
    start_epoch: int = 0,
    num_epochs: Optional[int] = None,
    shuffle_buffer_size: int = 10000,
    drop_remainder: Optional[bool] = None,
    cycle_length: int = 8,
    input_context=None,
    num_parallel_calls: int = tf.data.AUTOTUNE,
    with_ngram_counts: bool = False,
    jit_compile: bool = True,
) -> tf.data.Dataset:
    """A batched dataset of freshly masked ALBERT pretraining features.

    Args:
        source: TFRecord files (globs, comma-separated or a list) in the ALBERT format, masked or
            not; or a ``tf.data.Dataset`` of such serialized records (read anew each epoch).
        batch_size: examples per batch (per replica with `input_context`).
        config: masking settings and vocabulary ids.
        seed: the masking (and shuffling) seed.
        is_training: shuffle files and records and repeat; otherwise one pass in order.
        start_epoch: the epoch number of the first pass (to resume with the masks a run would
            have used next).
        num_epochs: passes over the data; None repeats forever in training, 1 otherwise.
        shuffle_buffer_size: records held for shuffling.
        drop_remainder: drop a last partial batch; defaults to `is_training`.
        cycle_length: files read in parallel.
        input_context: a ``tf.distribute.InputContext``: files are sharded by input pipeline, and
            the pipeline id is folded into the random streams.
        num_parallel_calls: parallelism of the per-batch map.
        with_ngram_counts: add ``masked_lm_ngram_counts`` (see `mask_batch`).
        jit_compile: run the masking as one XLA function (`masking_function`); the masks are the
            same either way.

    Returns:
        A dataset of the dicts `tfrecords.make_pretraining_dataset` yields (int32 ids, float32 weights).
    """
    if drop_remainder is None:
        drop_remainder = is_training
    if num_epochs is None and not is_training:
        num_epochs = 1
    shard = 0
    if isinstance(source, tf.data.Dataset):
        files = None
        records = source
    else:
        files = list_files(source)
        if input_context is not None and input_context.num_input_pipelines > 1:
            if len(files) < input_context.num_input_pipelines:
                raise ValueError(
                    f"{len(files)} files cannot be sharded over {input_context.num_input_pipelines} input pipelines"
                )
            files = files[input_context.input_pipeline_id :: input_context.num_input_pipelines]
            shard = input_context.input_pipeline_id
        files_tensor = tf.constant(files)

    def epoch_records(epoch):
        if files is None:
            epoch_ds = records
        else:
            ordered = files_tensor
            if is_training:
                noise = tf.random.stateless_uniform([len(files)], seed=tf.stack([tf.constant(seed, tf.int64), epoch]))
                ordered = tf.gather(files_tensor, tf.argsort(noise))
            epoch_ds = tf.data.Dataset.from_tensor_slices(ordered).interleave(
                tf.data.TFRecordDataset,
                cycle_length=min(cycle_length, len(files)),
                num_parallel_calls=tf.data.AUTOTUNE,
                deterministic=True,
            )
        # (key, record) pairs: `enumerate` zips a counter in, cheaper than a map per record.
        return epoch_ds.enumerate(start=record_keys(epoch, 0))

    if num_epochs is None:
        epochs = tf.data.Dataset.counter(start_epoch, dtype=tf.int64)
    else:
        epochs = tf.data.Dataset.range(start_epoch, start_epoch + num_epochs, dtype=tf.int64)
    dataset = epochs.flat_map(epoch_records)
    if is_training:
        dataset = dataset.shuffle(shuffle_buffer_size, seed=seed, reshuffle_each_iteration=True)
    dataset = dataset.batch(batch_size, drop_remainder=drop_remainder)
    mask = masking_function(config, seed, shard, with_ngram_counts=with_ngram_counts, jit_compile=jit_compile)

    def parse_and_mask(keys, serialized):
        return mask(keys, parse_examples(serialized, config.max_seq_length, config.max_predictions_per_seq))

    dataset = dataset.map(parse_and_mask, num_parallel_calls=num_parallel_calls, deterministic=True)
    return dataset.prefetch(tf.data.AUTOTUNE)
