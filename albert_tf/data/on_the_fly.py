"""N-gram masking on the fly in tf.data: fresh ALBERT masks every epoch from unmasked instances.

The SOP pairing is done once (``make-pretraining-data --masked-lm-prob 0`` writes unmasked
instances; records that already carry masks work too, their original ids are put back first).
The masking then runs as TensorFlow ops inside ``Dataset.map``, so every epoch sees new masks:

* per record, a ``map`` draws its random numbers with stateless ops seeded by
  ``stateless_fold_in([seed, epoch], index)`` (``index``: the record's position in that epoch's
  read order), so a run is reproducible and independent of the parallelism and of the shuffle;
* per batch, a second ``map`` applies the masking, vectorized over ``[batch, max_seq_length]``.

The masking is the algorithm of :func:`albert_tf.data.pretraining_instances.create_masked_lm_predictions`
(the original ALBERT's) in a form without per-token Python: the original walks whole-word
candidates in a random order, draws n with p(n) proportional to 1/n, shrinks the n-gram until it
fits the budget and skips it when it overlaps; a candidate it skips is never revisited. Here every
word gets a random 64-bit priority and an n up front, and each round accepts, in every row at
once, the highest-priority candidate after the last accepted one that fits and does not overlap.
The state only changes when a candidate is accepted, so this accepts exactly the candidates the
sequential walk would for the same priorities and draws, in at most ``max_predictions_per_seq``
rounds. Replacements are 80% ``[MASK]``, 10% a random id in ``[0, vocab_size)``, 10% kept.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Dict, Optional, Sequence, Union

import tensorflow as tf

from albert_tf.data.pretraining_instances import InstanceConfig, VocabInfo
from albert_tf.data.tfrecords import list_files, parse_examples

_INT64_MAX = tf.int64.max
_INT64_MIN = tf.int64.min


@dataclasses.dataclass(frozen=True)
class MaskingConfig:
    """The masking settings and vocabulary ids the on-the-fly masker needs.

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
    masked_lm_prob: float = 0.15
    ngram: int = 3
    favor_shorter_ngram: bool = True
    do_whole_word_mask: bool = True

    def __post_init__(self):
        if not 0.0 < self.masked_lm_prob <= 1.0:
            raise ValueError(f"masked_lm_prob must be in (0, 1] for masking on the fly, got {self.masked_lm_prob}")
        if self.ngram < 1:
            raise ValueError(f"ngram must be at least 1, got {self.ngram}")
        if self.vocab_size < 1:
            raise ValueError(f"vocab_size must be positive, got {self.vocab_size}")

    @classmethod
    def from_instance_config(
        cls, instance: InstanceConfig, vocab: VocabInfo, masked_lm_prob: Optional[float] = None
    ) -> "MaskingConfig":
        """The masking of `instance` (or `masked_lm_prob` when its own is 0, as for unmasked data)."""
        return cls(
            max_seq_length=instance.max_seq_length,
            max_predictions_per_seq=instance.max_predictions_per_seq,
            vocab_size=vocab.vocab_size,
            cls_id=vocab.cls_id,
            sep_id=vocab.sep_id,
            mask_id=vocab.mask_id,
            masked_lm_prob=instance.masked_lm_prob if masked_lm_prob is None else masked_lm_prob,
            ngram=instance.ngram,
            favor_shorter_ngram=instance.favor_shorter_ngram,
            do_whole_word_mask=instance.do_whole_word_mask,
        )

    @classmethod
    def from_output_dir(cls, output_dir: str, masked_lm_prob: Optional[float] = None) -> "MaskingConfig":
        """The settings recorded in the ``metadata.json`` of a ``make-pretraining-data`` output.

        Args:
            output_dir: the directory written by the Beam pipeline.
            masked_lm_prob: overrides the recorded probability (needed when it is 0, unmasked data).
        """
        path = os.path.join(output_dir, "metadata.json")
        with tf.io.gfile.GFile(path, "r") as f:
            metadata = json.load(f)
        instance = metadata["instance_config"]
        vocab = metadata["vocab"]
        prob = instance["masked_lm_prob"] if masked_lm_prob is None else masked_lm_prob
        if prob == 0:
            raise ValueError(f"{path} records masked_lm_prob=0 (unmasked data); pass the masked_lm_prob to use")
        return cls(
            max_seq_length=instance["max_seq_length"],
            max_predictions_per_seq=instance["max_predictions_per_seq"],
            vocab_size=vocab["vocab_size"],
            cls_id=vocab["cls_id"],
            sep_id=vocab["sep_id"],
            mask_id=vocab["mask_id"],
            masked_lm_prob=prob,
            ngram=instance["ngram"],
            favor_shorter_ngram=instance["favor_shorter_ngram"],
            do_whole_word_mask=instance["do_whole_word_mask"],
        )

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


def random_draws(config: MaskingConfig, seed) -> Dict[str, tf.Tensor]:
    """The random numbers that mask one record, from a stateless seed of shape [2].

    One ``stateless_uniform`` call makes 64 random bits per position and stream (one op instead of
    several keeps this per-record map cheap); the uniforms take the top 24 bits of theirs, the
    random ids the top 32 (scaled to ``vocab_size``, so no modulo bias).

    Returns:
        ``priority`` (int64, the candidate order), ``ngram_u``, ``replace_u``, ``keep_u``
        (float32 uniforms in [0, 1)) and ``random_ids`` (int32 in ``[0, vocab_size)``), each of
        shape ``[max_seq_length]``.
    """
    length = config.max_seq_length
    bits = tf.random.stateless_uniform([5, length], seed=seed, minval=None, maxval=None, dtype=tf.int64)
    top24 = tf.bitwise.right_shift(bits[1:4], 40) & 0xFFFFFF
    uniforms = tf.cast(top24, tf.float32) * (1.0 / (1 << 24))
    top32 = tf.bitwise.right_shift(bits[4], 32) & 0xFFFFFFFF
    random_ids = tf.bitwise.right_shift(top32 * config.vocab_size, 32)
    return {
        "priority": bits[0],
        "ngram_u": uniforms[0],
        "replace_u": uniforms[1],
        "keep_u": uniforms[2],
        "random_ids": tf.cast(random_ids, tf.int32),
    }


def record_seed(seed: int, epoch, index, shard=0):
    """The stateless seed of one record: ``fold_in(fold_in([seed, epoch], index), shard)``."""
    base = tf.stack([tf.constant(seed, tf.int64), tf.cast(epoch, tf.int64)])
    folded = tf.random.experimental.stateless_fold_in(base, tf.cast(index, tf.int64))
    return tf.random.experimental.stateless_fold_in(folded, tf.cast(shard, tf.int64))


def restore_original_ids(features: Dict[str, tf.Tensor]) -> tf.Tensor:
    """``input_ids`` [B, L] with the masked positions set back to their ``masked_lm_ids``."""
    input_ids = features["input_ids"]
    real = tf.where(features["masked_lm_weights"] > 0)  # [N, 2]: (row, slot)
    positions = tf.gather_nd(features["masked_lm_positions"], real)
    originals = tf.gather_nd(features["masked_lm_ids"], real)
    indices = tf.stack([tf.cast(real[:, 0], tf.int32), positions], axis=1)
    return tf.tensor_scatter_nd_update(input_ids, indices, originals)


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
        draws: `random_draws` of each row, stacked to ``[B, max_seq_length]``.
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

    special = tf.logical_or(tf.equal(ids, config.cls_id), tf.equal(ids, config.sep_id))
    is_cand = tf.logical_and(features["input_mask"] > 0, tf.logical_not(special))
    cand_int = tf.cast(is_cand, tf.int32)
    if config.do_whole_word_mask:
        # The first candidate piece opens a word even when it is a continuation piece.
        first = tf.logical_and(is_cand, tf.equal(tf.cumsum(cand_int, axis=1, exclusive=True), 0))
        starts = tf.logical_and(is_cand, tf.logical_or(features["token_boundary"] > 0, first))
    else:
        starts = is_cand
    word_of_piece = tf.cumsum(tf.cast(starts, tf.int32), axis=1) - 1  # valid where is_cand
    num_words = tf.reduce_sum(tf.cast(starts, tf.int32), axis=1, keepdims=True)  # [B, 1]

    # Pieces per word: a segment sum over (row, word) pairs.
    row = tf.range(batch, dtype=tf.int32)[:, tf.newaxis] * length
    segment = tf.where(is_cand, row + tf.maximum(word_of_piece, 0), batch * length)
    word_len = tf.math.unsorted_segment_sum(
        tf.reshape(cand_int, [-1]), tf.reshape(segment, [-1]), batch * length + 1
    )[:-1]
    word_len = tf.reshape(word_len, [batch, length])
    # pieces_before[:, k]: pieces in words < k.
    pieces_before = _exclusive_prefix(word_len, max_n)
    span_len = [pieces_before[:, m : m + length] - pieces_before[:, :length] for m in range(1, max_n + 1)]

    words = positions  # word index k, laid out like positions
    word_valid = words < num_words
    ngram_n = tf.ones_like(ids)
    for threshold in config.ngram_thresholds():
        ngram_n += tf.cast(draws["ngram_u"] >= threshold, tf.int32)
    ngram_n = tf.minimum(ngram_n, num_words - words)  # clipped at the last word

    num_tokens = tf.reduce_sum(tf.cast(features["input_mask"] > 0, tf.float64), axis=1)
    budget = tf.cast(tf.round(num_tokens * config.masked_lm_prob), tf.int32)  # half to even, as Python
    budget = tf.minimum(max_pred, tf.maximum(1, budget))[:, tf.newaxis]  # [B, 1]
    priority = draws["priority"]

    def round_fn(covered, count, last, active, ngram_counts):
        room = budget - count  # [B, 1]
        covered_before = _exclusive_prefix(tf.cast(covered, tf.int32), max_n)
        fit = tf.zeros_like(ids)
        for m in range(1, max_n + 1):
            fit += tf.cast(tf.logical_and(m <= ngram_n, span_len[m - 1] <= room), tf.int32)
        # The shrunk n-gram: the longest that fits (span lengths grow with m).
        chosen_len = tf.zeros_like(ids)
        overlap = tf.zeros_like(ids, dtype=tf.bool)
        for m in range(1, max_n + 1):
            is_m = tf.equal(fit, m)
            chosen_len = tf.where(is_m, span_len[m - 1], chosen_len)
            overlaps_m = covered_before[:, m : m + length] - covered_before[:, :length] > 0
            overlap = tf.logical_or(overlap, tf.logical_and(is_m, overlaps_m))
        candidate = word_valid & (priority > last) & (fit > 0) & tf.logical_not(overlap) & active
        key = tf.where(candidate, priority, _INT64_MAX)
        pick = tf.argmin(key, axis=1, output_type=tf.int32)[:, tf.newaxis]  # [B, 1]
        found = tf.reduce_any(candidate, axis=1, keepdims=True)
        picked_m = tf.gather(fit, pick, batch_dims=1)
        picked_len = tf.gather(chosen_len, pick, batch_dims=1)
        newly = (words >= pick) & (words < pick + picked_m) & found
        covered = tf.logical_or(covered, newly)
        count = count + tf.where(found, picked_len, 0)
        last = tf.where(found, tf.gather(priority, pick, batch_dims=1), last)
        active = tf.logical_and(found, count < budget)
        ngram_counts += tf.one_hot(picked_m[:, 0] - 1, max_n, dtype=tf.int32) * tf.cast(found, tf.int32)
        return covered, count, last, active, ngram_counts

    state = (
        tf.zeros_like(ids, dtype=tf.bool),
        tf.zeros([batch, 1], tf.int32),
        tf.fill([batch, 1], tf.constant(_INT64_MIN, tf.int64)),
        tf.ones([batch, 1], tf.bool),
        tf.zeros([batch, max_n], tf.int32),
    )
    covered, _, _, _, ngram_counts = tf.while_loop(
        lambda covered, count, last, active, ngram_counts: tf.reduce_any(active),
        round_fn,
        state,
        maximum_iterations=max_pred,
    )

    covered_piece = tf.logical_and(is_cand, tf.gather(covered, tf.maximum(word_of_piece, 0), batch_dims=1))
    replaced = tf.where(
        draws["replace_u"] < 0.8,
        tf.fill(tf.shape(ids), tf.constant(config.mask_id, ids.dtype)),
        tf.where(draws["keep_u"] < 0.5, ids, tf.cast(draws["random_ids"], ids.dtype)),
    )
    masked_ids = tf.where(covered_piece, replaced, ids)

    # Ascending masked positions: top_k of (length - position) over covered pieces.
    order_key = tf.where(covered_piece, length - positions, 0)
    top_values, top_positions = tf.math.top_k(order_key, k=max_pred, sorted=True)
    real = top_values > 0
    out_positions = tf.where(real, top_positions, 0)
    out = dict(features)
    out["input_ids"] = masked_ids
    out["masked_lm_positions"] = out_positions
    out["masked_lm_ids"] = tf.where(real, tf.gather(ids, out_positions, batch_dims=1), 0)
    out["masked_lm_weights"] = tf.cast(real, tf.float32)
    if with_ngram_counts:
        out["masked_lm_ngram_counts"] = ngram_counts
    return out


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
            the pipeline id is folded into the seeds.
        num_parallel_calls: parallelism of the two maps.
        with_ngram_counts: add ``masked_lm_ngram_counts`` (see `mask_batch`).

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
        return epoch_ds.enumerate().map(lambda index, record: (epoch, index, record))

    if num_epochs is None:
        epochs = tf.data.Dataset.counter(start_epoch, dtype=tf.int64)
    else:
        epochs = tf.data.Dataset.range(start_epoch, start_epoch + num_epochs, dtype=tf.int64)
    dataset = epochs.flat_map(epoch_records)
    if is_training:
        dataset = dataset.shuffle(shuffle_buffer_size, seed=seed, reshuffle_each_iteration=True)

    def draw(epoch, index, record):
        return record, random_draws(config, record_seed(seed, epoch, index, shard))

    def parse_and_mask(records, draws):
        features = parse_examples(records, config.max_seq_length, config.max_predictions_per_seq)
        features["input_ids"] = restore_original_ids(features)
        return mask_batch(features, draws, config, with_ngram_counts)

    dataset = dataset.map(draw, num_parallel_calls=num_parallel_calls)
    dataset = dataset.batch(batch_size, drop_remainder=drop_remainder)
    dataset = dataset.map(parse_and_mask, num_parallel_calls=num_parallel_calls)
    return dataset.prefetch(tf.data.AUTOTUNE)
