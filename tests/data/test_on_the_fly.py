"""Tests for albert_tf.data.on_the_fly: the vectorized masking equals the sequential algorithm (with and
without XLA), masks are fresh per epoch, reproducible and the same after a resume, unmasked and masked
records give the same masks, and the statistics match the offline (Beam) path's within tolerances
derived from the sample sizes."""

import collections
import dataclasses
import functools
import random
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.data import beam_pipeline as B
from albert_tf.data import on_the_fly as O
from albert_tf.data import pretraining_instances as P
from albert_tf.tokenization import SentencePieceTokenizer, train_sentencepiece
from albert_tf.training.pretraining_config import TokenizerFile

SAMPLE = Path(__file__).resolve().parents[2] / "albert_tf" / "resources" / "sample" / "sotu"
SEQ, PRED = 128, 20
# Every statistical comparison allows Z standard errors: a two-sided false alarm of 6e-5 each, under
# 0.2 % for the ~25 comparisons below together.
Z = 4.0


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """The bundled 12 addresses: a SentencePiece model, and the Beam pipeline's records for them
    masked (the offline path, ~2,600 instances) and unmasked (``masked_lm_prob=0``)."""
    work = tmp_path_factory.mktemp("otf")
    files = sorted(str(p) for p in SAMPLE.glob("*.txt"))
    train_sentencepiece(files, str(work / "spm"), 2000, seed=1, num_threads=1)
    spm = str(work / "spm.model")

    def make(name, masked_lm_prob):
        config = B.PipelineConfig(
            instance=P.InstanceConfig(max_seq_length=SEQ, max_predictions_per_seq=PRED, masked_lm_prob=masked_lm_prob),
            tokenizer=B.TokenizerSpec(spm_model=spm),
            dupe_factor=3,
            seed=5,
            input_format="paragraphs",
            num_shards=2,
        )
        return B.make_pretraining_data(files, str(work / name), config)

    return {"spm": spm, "masked": make("masked", 0.15), "unmasked": make("unmasked", 0.0), "dir": work}


@pytest.fixture(scope="module")
def config(corpus):
    instance = P.InstanceConfig(max_seq_length=SEQ, max_predictions_per_seq=PRED)
    return O.MaskingConfig.from_tokenizer(corpus["spm"], instance)


def _batches(dataset, limit=None):
    batches = list(dataset if limit is None else dataset.take(limit))
    return {k: np.concatenate([b[k].numpy() for b in batches]) for k in batches[0]}


def _parsed(files):
    return _batches(tf.data.TFRecordDataset(files).batch(256).map(lambda r: O.parse_examples(r, SEQ, PRED)))


def _sequential_reference(ids, input_mask, boundary, draws, config, thresholds):
    """The original walk, one candidate at a time, visiting words in ascending priority."""
    special = {config.cls_id, config.sep_id}
    words = []
    for i, t in enumerate(ids):
        if not input_mask[i] or t in special:
            continue
        if boundary[i] or not words:
            words.append([i])
        else:
            words[-1].append(i)
    budget = min(PRED, max(1, int(round(int(input_mask.sum()) * config.masked_lm_prob))))
    order = sorted(range(len(words)), key=lambda k: draws["priority"][k])
    covered, count = set(), 0
    for k in order:
        if count >= budget:
            break
        n = 1 + sum(draws["ngram_u"][k] >= t for t in thresholds)
        m = min(n, len(words) - k)
        while m > 0 and sum(len(w) for w in words[k : k + m]) > budget - count:
            m -= 1
        if m == 0 or any(w in covered for w in range(k, k + m)):
            continue
        covered.update(range(k, k + m))
        count += sum(len(w) for w in words[k : k + m])
    positions = sorted(p for w in covered for p in words[w])
    out = ids.copy()
    for p in positions:
        if draws["replace_u"][p] < 0.8:
            out[p] = config.mask_id
        elif draws["replace_u"][p] >= 0.9:
            out[p] = draws["random_ids"][p]
    return out, positions


@pytest.mark.parametrize("jit_compile", [True, False])
@pytest.mark.slow
def test_vectorized_masking_equals_the_sequential_walk(corpus, config, jit_compile):
    records = tf.data.TFRecordDataset(corpus["masked"].files).take(64).batch(64)
    keys = O.record_keys(0, tf.range(64))
    features = O.parse_examples(next(iter(records)), SEQ, PRED)
    out = O.masking_function(config, 3, with_ngram_counts=True, jit_compile=jit_compile)(keys, features)
    ids_all = O.restore_original_ids(features).numpy()
    np_draws = {k: v.numpy() for k, v in O.batch_draws(config, keys, 3).items()}
    thresholds = config.ngram_thresholds()
    for r in range(64):
        row_draws = {k: v[r] for k, v in np_draws.items()}
        ids = ids_all[r]
        expected_ids, expected_positions = _sequential_reference(
            ids, features["input_mask"][r].numpy(), features["token_boundary"][r].numpy(), row_draws, config, thresholds
        )
        n = int(out["masked_lm_weights"][r].numpy().sum())
        assert out["masked_lm_positions"][r, :n].numpy().tolist() == expected_positions
        np.testing.assert_array_equal(out["input_ids"][r].numpy(), expected_ids)
        np.testing.assert_array_equal(out["masked_lm_ids"][r, :n].numpy(), ids[expected_positions])
        assert (out["masked_lm_positions"][r, n:].numpy() == 0).all()
    assert out["masked_lm_ngram_counts"].shape == [64, 3]


def test_restore_original_ids(corpus):
    batch = next(iter(tf.data.TFRecordDataset(corpus["masked"].files).batch(16)))
    features = O.parse_examples(batch, SEQ, PRED)
    restored = O.restore_original_ids(features).numpy()
    positions, ids, weights = (
        features[k].numpy() for k in ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights")
    )
    masked = features["input_ids"].numpy()
    for r in range(16):
        n = int(weights[r].sum())
        assert n > 0
        np.testing.assert_array_equal(restored[r, positions[r, :n]], ids[r, :n])
        untouched = np.setdiff1d(np.arange(SEQ), positions[r, :n])
        np.testing.assert_array_equal(restored[r, untouched], masked[r, untouched])


def _in_instance_order(files, path):
    """The records of `files` in one file, sorted by their unmasked content: two Beam runs write
    the same instances, but in an order (and shard assignment) of the runner's choosing."""
    raw = list(tf.data.TFRecordDataset(files).as_numpy_iterator())
    parsed = _parsed(files)
    ids = O.restore_original_ids({k: tf.constant(v) for k, v in parsed.items()}).numpy()
    keys = [ids[i].tobytes() + parsed["segment_ids"][i].tobytes() + parsed["next_sentence_labels"][i].tobytes()
            for i in range(len(raw))]
    with tf.io.TFRecordWriter(str(path)) as writer:
        for i in sorted(range(len(raw)), key=keys.__getitem__):
            writer.write(raw[i])
    return [str(path)]


@pytest.mark.slow
def test_unmasked_and_masked_records_get_the_same_masks(corpus, config):
    """`--masked-lm-prob 0` records are the masked ones' instances without masks; either is masked alike."""
    masked_files = _in_instance_order(corpus["masked"].files, corpus["dir"] / "masked_in_order.tfrecord")
    unmasked_files = _in_instance_order(corpus["unmasked"].files, corpus["dir"] / "unmasked_in_order.tfrecord")
    masked, unmasked = _parsed(masked_files), _parsed(unmasked_files)
    assert (unmasked["masked_lm_weights"] == 0).all()
    np.testing.assert_array_equal(
        O.restore_original_ids({k: tf.constant(v) for k, v in masked.items()}).numpy(), unmasked["input_ids"]
    )
    make = functools.partial(O.make_on_the_fly_dataset, batch_size=64, config=config, seed=4, is_training=False)
    from_masked = _batches(make(masked_files), 5)
    from_unmasked = _batches(make(unmasked_files), 5)
    for k in from_masked:
        np.testing.assert_array_equal(from_masked[k], from_unmasked[k], err_msg=k)


@pytest.mark.slow
def test_fresh_masks_per_epoch_and_reproducible(corpus, config):
    files = corpus["unmasked"].files
    make = functools.partial(O.make_on_the_fly_dataset, files, 32, config, seed=9, is_training=False)
    both = _batches(make(num_epochs=2))
    half = len(both["input_ids"]) // 2
    epoch0 = {k: v[:half] for k, v in both.items()}
    epoch1 = {k: v[half:] for k, v in both.items()}
    again = _batches(make(num_parallel_calls=1, jit_compile=False), 6)
    for k in again:
        np.testing.assert_array_equal(epoch0[k][: len(again[k])], again[k])
    # Every record gets new masks in the next epoch (the same masks twice would be a 1 in 10^9 event).
    same = (epoch0["masked_lm_positions"] == epoch1["masked_lm_positions"]).all(axis=1)
    assert same.mean() < 0.05
    # Masking changes nothing but the ids at the masked positions.
    for k in ("input_mask", "segment_ids", "token_boundary", "next_sentence_labels"):
        np.testing.assert_array_equal(epoch0[k], epoch1[k])
    assert epoch0["input_ids"].dtype == np.int32 and epoch0["masked_lm_weights"].dtype == np.float32

    keys = O.record_keys(tf.constant([0, 0, 1, 0]), tf.constant([0, 1, 0, 0]))
    rows = [O.batch_draws(config, keys, seed, shard)["priority"].numpy() for seed, shard in ((9, 0), (10, 0), (9, 1))]
    # Keys (0, 0), (0, 1), (1, 0) of seed 9, key (0, 0) of seed 10 and of input pipeline 1.
    streams = [rows[0][0], rows[0][1], rows[0][2], rows[1][0], rows[2][0]]
    assert len({row.tobytes() for row in streams}) == 5
    np.testing.assert_array_equal(rows[0][3], rows[0][0])  # the same key, the same numbers


@pytest.mark.slow
def test_a_resumed_dataset_sees_the_masks_of_an_uninterrupted_one(corpus, config):
    """What `run_pretraining` does on resume: a fresh dataset, skipping the batches trained on."""
    files = corpus["unmasked"].files
    batches_per_epoch = corpus["unmasked"].counters["instances"] // 64
    make = functools.partial(O.make_on_the_fly_dataset, files, 64, config, seed=3, shuffle_buffer_size=500)
    total = batches_per_epoch * 2 + 3  # into the third epoch
    uninterrupted = [b["input_ids"].numpy() for b in make().take(total)]
    for resume_at in (batches_per_epoch - 1, batches_per_epoch * 2 + 1):
        resumed = [b["input_ids"].numpy() for b in make().skip(resume_at).take(total - resume_at)]
        np.testing.assert_array_equal(np.stack(uninterrupted[resume_at:]), np.stack(resumed))
    # `start_epoch` gives the masks a run would use in that epoch.
    plain = functools.partial(O.make_on_the_fly_dataset, files, 64, config, seed=3, is_training=False)
    second = _batches(plain(num_epochs=2))
    start_1 = _batches(plain(start_epoch=1))
    np.testing.assert_array_equal(second["input_ids"][len(start_1["input_ids"]) :], start_1["input_ids"])


def _ratio(numerator, denominator):
    """Σ numerator / Σ denominator and its standard error, rows as independent clusters."""
    numerator, denominator = np.asarray(numerator, float), np.asarray(denominator, float)
    p = numerator.sum() / denominator.sum()
    return p, np.sqrt(((numerator - p * denominator) ** 2).sum()) / denominator.sum()


def _assert_same(offline, on_the_fly, what):
    tolerance = Z * np.hypot(offline[1], on_the_fly[1])
    message = f"{what}: {offline[0]:.4f} vs {on_the_fly[0]:.4f} ± {tolerance:.4f}"
    assert abs(offline[0] - on_the_fly[0]) <= tolerance, message


def _assert_expected(observed, expected, what):
    tolerance = Z * observed[1]
    message = f"{what}: {observed[0]:.4f}, expected {expected:.4f} ± {tolerance:.4f}"
    assert abs(observed[0] - expected) <= tolerance, message


def _words(ids, input_mask, boundary, config):
    """The word of every position (-1 for [CLS], [SEP], padding), grouped as the masker groups them."""
    candidate = (input_mask > 0) & (ids != config.cls_id) & (ids != config.sep_id)
    starts = candidate & ((boundary > 0) | (np.cumsum(candidate) == 1))
    return np.where(candidate, np.cumsum(starts) - 1, -1)


def _row_counts(rows, config):
    """Per-row counts: tokens, masked pieces, their replacement kinds, masked-word runs, violations."""
    originals = O.restore_original_ids({k: tf.constant(v) for k, v in rows.items()}).numpy()
    counts = collections.defaultdict(lambda: np.zeros(len(originals)))
    for r in range(len(originals)):
        n = int(rows["masked_lm_weights"][r].sum())
        positions = rows["masked_lm_positions"][r, :n]
        tokens, before = rows["input_ids"][r, positions], originals[r, positions]
        counts["tokens"][r] = rows["input_mask"][r].sum()
        counts["masked"][r] = n
        counts["at budget"][r] = n == min(PRED, max(1, round(counts["tokens"][r] * config.masked_lm_prob)))
        counts["mask"][r] = (tokens == config.mask_id).sum()
        counts["kept"][r] = ((tokens == before) & (tokens != config.mask_id)).sum()
        counts["random"][r] = n - counts["mask"][r] - counts["kept"][r]
        words = _words(originals[r], rows["input_mask"][r], rows["token_boundary"][r], config)
        counts["specials or padding"][r] = (words[positions] < 0).sum()
        covered = np.zeros(words.max() + 2, bool)
        covered[words[positions]] = True
        sizes = np.bincount(words[words >= 0], minlength=len(covered))
        masked_sizes = np.bincount(words[positions], minlength=len(covered))
        counts["split words"][r] = ((masked_sizes > 0) & (masked_sizes != sizes)).sum()
        # Runs of consecutive masked words (adjacent n-grams merge, equally on both paths).
        edges = np.diff(np.concatenate([[0], covered.astype(int), [0]]))
        lengths = np.flatnonzero(edges == -1) - np.flatnonzero(edges == 1)
        counts["runs"][r] = len(lengths)
        for size in (1, 2):
            counts[f"run{size}"][r] = (lengths == size).sum()
        counts["run3+"][r] = (lengths >= 3).sum()
    return counts


def _offline_ngram_counts(rows, config, spm):
    """The n-grams (in words) the offline masking chooses for these instances: its own walk
    (`select_ngram_spans`, which the Beam path runs), one seeded stream per instance."""
    instance = P.InstanceConfig(max_seq_length=SEQ, max_predictions_per_seq=PRED)
    vocab = P.VocabInfo.from_tokenizer(SentencePieceTokenizer(spm))
    originals = O.restore_original_ids({k: tf.constant(v) for k, v in rows.items()}).numpy()
    counts = np.zeros((len(originals), config.ngram))
    for r, ids in enumerate(originals):
        ids = ids[: int(rows["input_mask"][r].sum())].tolist()
        words = P.word_candidates(ids, vocab, True)
        budget = instance.num_to_predict(len(ids))
        for _, num_words in P.select_ngram_spans(words.sizes, budget, instance, random.Random(r)):
            counts[r, num_words - 1] += 1
    return counts


@pytest.mark.slow
def test_statistics_match_the_offline_path(corpus, config):
    offline_rows = _parsed(corpus["masked"].files)
    fly = O.make_on_the_fly_dataset(
        corpus["unmasked"].files, 64, config, seed=1, is_training=False, num_epochs=2, with_ngram_counts=True
    )
    fly_rows = _batches(fly)
    assert len(fly_rows["input_ids"]) == 2 * len(offline_rows["input_ids"]) > 5000
    offline, on_the_fly = _row_counts(offline_rows, config), _row_counts(fly_rows, config)

    for counts in (offline, on_the_fly):
        # Never [CLS], [SEP] or padding; a word is masked whole or not at all; never over budget.
        assert counts["specials or padding"].sum() == 0 and counts["split words"].sum() == 0
        assert (counts["masked"] <= np.minimum(PRED, np.maximum(1, np.round(counts["tokens"] * 0.15)))).all()
    rate = _ratio(offline["masked"], offline["tokens"]), _ratio(on_the_fly["masked"], on_the_fly["tokens"])
    _assert_same(*rate, "rate")
    ones = np.ones(len(offline["tokens"])), np.ones(len(on_the_fly["tokens"]))
    _assert_same(_ratio(offline["at budget"], ones[0]), _ratio(on_the_fly["at budget"], ones[1]), "rows at budget")

    # 80 % [MASK], 10 % kept, 10 % random; a random id is the original or [MASK] with p = 1/V each.
    v = config.vocab_size
    expected = {"mask": 0.8 + 0.1 / v, "kept": 0.1 + 0.1 / v, "random": 0.1 * (1 - 2 / v)}
    for kind, p in expected.items():
        for name, counts in (("offline", offline), ("on the fly", on_the_fly)):
            _assert_expected(_ratio(counts[kind], counts["masked"]), p, f"{kind} ({name})")
        _assert_same(_ratio(offline[kind], offline["masked"]), _ratio(on_the_fly[kind], on_the_fly["masked"]), kind)
    for run in ("run1", "run2", "run3+"):
        _assert_same(_ratio(offline[run], offline["runs"]), _ratio(on_the_fly[run], on_the_fly["runs"]), run)

    # The chosen n-grams: drawn with p(n) ∝ 1/n (6/11, 3/11, 2/11), shifted shorter by shrinking and
    # overlaps, alike on both paths.
    chosen_offline = _offline_ngram_counts(offline_rows, config, corpus["spm"])
    chosen_fly = fly_rows["masked_lm_ngram_counts"]
    for n in range(3):
        shares = _ratio(chosen_offline[:, n], chosen_offline.sum(1)), _ratio(chosen_fly[:, n], chosen_fly.sum(1))
        _assert_same(*shares, f"{n + 1}-grams")
    assert chosen_fly[:, 0].sum() / chosen_fly.sum() > 6 / 11


def test_drawn_ngram_lengths_follow_one_over_n(config):
    draws = O.batch_draws(config, O.record_keys(0, tf.range(512)), seed=2)
    u = draws["ngram_u"].numpy().ravel()
    n = 1 + sum((u >= t).astype(int) for t in config.ngram_thresholds())
    for length, p in zip((1, 2, 3), (6 / 11, 3 / 11, 2 / 11)):
        observed = (n == length).mean()
        assert abs(observed - p) <= Z * np.sqrt(p * (1 - p) / len(n)), (length, observed)
    for name in ("replace_u", "ngram_u"):
        values = draws[name].numpy().ravel()
        assert 0 <= values.min() and values.max() < 1
        assert abs(values.mean() - 0.5) <= Z * np.sqrt(1 / 12 / len(values))
    ids = draws["random_ids"].numpy().ravel()
    assert 0 <= ids.min() and ids.max() < config.vocab_size
    assert abs(ids.mean() - (config.vocab_size - 1) / 2) <= Z * config.vocab_size * np.sqrt(1 / 12 / len(ids))
    priorities = draws["priority"].numpy()
    assert priorities.min() >= 0 and priorities.max() < 2**40
    assert all(len(set(row)) == len(row) for row in priorities)


def test_masking_config_from_the_tokenizer_and_the_metadata(corpus, config, tmp_path):
    tokenizer = SentencePieceTokenizer(corpus["spm"])
    ids = (tokenizer.vocab_size, tokenizer.cls_id, tokenizer.sep_id, tokenizer.mask_id)
    assert (config.vocab_size, config.cls_id, config.sep_id, config.mask_id) == ids
    assert (config.masked_lm_prob, config.ngram, config.do_whole_word_mask) == (0.15, 3, True)
    assert config.ngram_thresholds() == pytest.approx([6 / 11, 9 / 11])
    for source in (tokenizer, TokenizerFile("sentencepiece", corpus["spm"]), Path(corpus["spm"])):
        assert O.MaskingConfig.from_tokenizer(source, P.InstanceConfig(SEQ, PRED)) == config
    # The metadata's instance_config: its settings, 0.15 where its rate is 0 (unmasked data).
    unmasked = O.MaskingConfig.from_output_dir(corpus["unmasked"].output_dir)
    assert unmasked == config
    assert O.MaskingConfig.from_output_dir(corpus["unmasked"].output_dir, masked_lm_prob=0.2).masked_lm_prob == 0.2
    custom = O.MaskingConfig.from_tokenizer(
        corpus["spm"], {"ngram": 2, "do_whole_word_mask": False, "masked_lm_prob": 0.0},
        max_seq_length=64, max_predictions_per_seq=10,
    )
    assert custom == dataclasses.replace(
        config, max_seq_length=64, max_predictions_per_seq=10, ngram=2, do_whole_word_mask=False
    )
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "##b"]) + "\n")
    wordpiece = O.MaskingConfig.from_tokenizer(vocab)
    assert (wordpiece.vocab_size, wordpiece.cls_id, wordpiece.sep_id, wordpiece.mask_id) == (7, 2, 3, 4)
    assert (wordpiece.max_seq_length, wordpiece.max_predictions_per_seq) == (512, 20)  # the original flags

    with pytest.raises(ValueError, match="masked_lm_prob"):
        O.MaskingConfig(128, 20, 100, 2, 3, 4, masked_lm_prob=0.0)
    with pytest.raises(ValueError, match="mask_id 100 is outside the vocabulary"):
        O.MaskingConfig(128, 20, 100, 2, 3, 100)
    no_mask = tmp_path / "no_mask.txt"
    no_mask.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a"]) + "\n")
    with pytest.raises(ValueError, match="MASK"):
        O.MaskingConfig.from_tokenizer(no_mask)
