"""Tests for albert_tf.data.on_the_fly: the vectorized masking equals the sequential algorithm, masks are
fresh per epoch and reproducible, and its statistics agree with the Beam path's."""

import collections
import functools
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.data import beam_pipeline as B
from albert_tf.data import on_the_fly as O
from albert_tf.data import pretraining_instances as P
from albert_tf.data.documents import read_documents

SOTU = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "en" / "sotu"
SEQ, PRED = 128, 20


@pytest.fixture(scope="module")
def beam_output(tmp_path_factory):
    """Masked records from the Beam pipeline on a sotu slice, with a tiny SentencePiece model."""
    files = sorted(str(f) for f in SOTU.glob("200*.txt"))[:3]
    if not files:
        pytest.skip(f"shared data not found at {SOTU}")
    import sentencepiece as spm
    from official.nlp.tools.tokenization import FullSentencePieceTokenizer

    prefix = tmp_path_factory.mktemp("spm") / "sp"
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter([s for f in files for d in read_documents(f, "paragraphs") for s in d.sentences]),
        model_prefix=str(prefix),
        vocab_size=2000,
        model_type="unigram",
        pad_id=0,
        unk_id=1,
        bos_id=-1,
        eos_id=-1,
        control_symbols=["[CLS]", "[SEP]", "[MASK]"],
        minloglevel=2,
        num_threads=1,
    )
    config = B.PipelineConfig(
        instance=P.InstanceConfig(max_seq_length=SEQ, max_predictions_per_seq=PRED),
        tokenizer=functools.partial(FullSentencePieceTokenizer, f"{prefix}.model"),
        dupe_factor=3,
        seed=5,
        input_format="paragraphs",
        num_shards=2,
    )
    out = tmp_path_factory.mktemp("beam") / "out"
    summary = B.make_pretraining_data(files, str(out), config)
    return summary, O.MaskingConfig.from_output_dir(str(out))


def _batches(dataset, limit=None):
    batches = list(dataset if limit is None else dataset.take(limit))
    return {k: np.concatenate([b[k].numpy() for b in batches]) for k in batches[0]}


def _stats(rows, config):
    """Masking rate, replacement rates, n-gram run lengths (maximal masked word runs) and labels."""
    weights = rows["masked_lm_weights"]
    masked = weights.sum()
    kinds = collections.Counter()
    runs = collections.Counter()
    for r in range(len(weights)):
        n = int(weights[r].sum())
        positions = rows["masked_lm_positions"][r, :n]
        for p, original in zip(positions, rows["masked_lm_ids"][r, :n]):
            token = rows["input_ids"][r, p]
            kinds["mask" if token == config.mask_id else "kept" if token == original else "random"] += 1
        # Runs of consecutive masked words (adjacent n-grams merge; equally so on both paths).
        length = int(rows["input_mask"][r].sum())
        first_sep = int((rows["segment_ids"][r, :length] == 0).sum()) - 1
        covered = np.zeros(SEQ, bool)
        covered[positions] = True
        word_starts = [i for i in range(1, length - 1) if i != first_sep and rows["token_boundary"][r, i] == 1]
        run = 0
        for i in word_starts:
            if covered[i]:
                run += 1
            elif run:
                runs[run] += 1
                run = 0
        if run:
            runs[run] += 1
    total_runs = sum(runs.values())
    return {
        "rate": masked / rows["input_mask"].sum(),
        "mask": kinds["mask"] / masked,
        "kept": kinds["kept"] / masked,
        "random": kinds["random"] / masked,
        "run1": runs[1] / total_runs,
        "run2": runs[2] / total_runs,
        "run3+": sum(v for k, v in runs.items() if k >= 3) / total_runs,
        "label": rows["next_sentence_labels"].mean(),
    }


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
        elif draws["keep_u"][p] >= 0.5:
            out[p] = draws["random_ids"][p]
    return out, positions


def test_vectorized_masking_equals_the_sequential_walk(beam_output):
    summary, config = beam_output
    records = tf.data.TFRecordDataset(summary.files).take(48).batch(48)
    features = O.parse_examples(next(iter(records)), SEQ, PRED)
    features["input_ids"] = O.restore_original_ids(features)
    rows = []
    for i in range(48):
        rows.append(O.random_draws(config, O.record_seed(3, 0, i)))
    draws = {k: tf.stack([r[k] for r in rows]) for k in rows[0]}
    out = O.mask_batch(features, draws, config, with_ngram_counts=True)
    thresholds = config.ngram_thresholds()
    np_draws = {k: v.numpy() for k, v in draws.items()}
    for r in range(48):
        row_draws = {k: v[r] for k, v in np_draws.items()}
        ids = features["input_ids"][r].numpy()
        expected_ids, expected_positions = _sequential_reference(
            ids, features["input_mask"][r].numpy(), features["token_boundary"][r].numpy(), row_draws, config, thresholds
        )
        n = int(out["masked_lm_weights"][r].numpy().sum())
        assert out["masked_lm_positions"][r, :n].numpy().tolist() == expected_positions
        np.testing.assert_array_equal(out["input_ids"][r].numpy(), expected_ids)
        np.testing.assert_array_equal(out["masked_lm_ids"][r, :n].numpy(), ids[expected_positions])
        assert (out["masked_lm_positions"][r, n:].numpy() == 0).all()
    assert out["masked_lm_ngram_counts"].shape == [48, 3]


def test_restore_original_ids(beam_output):
    summary, _ = beam_output
    batch = next(iter(tf.data.TFRecordDataset(summary.files).batch(16)))
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


def test_fresh_masks_per_epoch_and_reproducible(beam_output):
    summary, config = beam_output
    make = functools.partial(O.make_on_the_fly_dataset, summary.files, 32, config, seed=9, is_training=False)
    both = _batches(make(num_epochs=2))
    half = len(both["input_ids"]) // 2
    epoch0 = {k: v[:half] for k, v in both.items()}
    epoch1 = {k: v[half:] for k, v in both.items()}
    again = _batches(make(num_parallel_calls=1), 6)
    for k in again:
        np.testing.assert_array_equal(epoch0[k][: len(again[k])], again[k])
    assert not np.array_equal(epoch0["masked_lm_positions"], epoch1["masked_lm_positions"])
    seeds = [O.record_seed(s, e, i).numpy().tolist() for s, e, i in ((9, 0, 0), (10, 0, 0), (9, 1, 0), (9, 0, 1))]
    assert len({tuple(x) for x in seeds}) == 4
    # Masking changes nothing but the ids at the masked positions.
    for k in ("input_mask", "segment_ids", "token_boundary", "next_sentence_labels"):
        np.testing.assert_array_equal(epoch0[k], epoch1[k])
    assert epoch0["input_ids"].dtype == np.int32 and epoch0["masked_lm_weights"].dtype == np.float32

    train = O.make_on_the_fly_dataset(summary.files, 32, config, seed=9, shuffle_buffer_size=64)
    assert train.element_spec["input_ids"].shape == [32, SEQ]
    first = [b["input_ids"].numpy() for b in train.take(3)]
    train_again = O.make_on_the_fly_dataset(summary.files, 32, config, seed=9, shuffle_buffer_size=64)
    second = [b["input_ids"].numpy() for b in train_again.take(3)]
    np.testing.assert_array_equal(np.stack(first), np.stack(second))


def test_statistics_agree_with_the_beam_path(beam_output):
    summary, config = beam_output
    records = tf.data.TFRecordDataset(summary.files).batch(256)
    beam_rows = _batches(records.map(lambda r: O.parse_examples(r, SEQ, PRED)))
    fly = O.make_on_the_fly_dataset(
        summary.files, 64, config, seed=1, is_training=False, num_epochs=2, with_ngram_counts=True
    )
    fly_rows = _batches(fly)
    assert len(fly_rows["input_ids"]) == 2 * len(beam_rows["input_ids"]) > 1000

    budgets = np.minimum(PRED, np.maximum(1, np.round(fly_rows["input_mask"].sum(1) * 0.15))).astype(int)
    counts = fly_rows["masked_lm_weights"].sum(1)
    assert (counts <= budgets).all() and (counts == budgets).mean() > 0.97
    ids = fly_rows["input_ids"]
    for r in range(len(ids)):
        n = int(counts[r])
        originals = fly_rows["masked_lm_ids"][r, :n]
        assert not np.isin(originals, [config.cls_id, config.sep_id]).any()
        assert (fly_rows["input_mask"][r, fly_rows["masked_lm_positions"][r, :n]] == 1).all()

    beam, otf = _stats(beam_rows, config), _stats(fly_rows, config)
    assert 0.14 < otf["rate"] < 0.155 and abs(beam["rate"] - otf["rate"]) < 0.004
    assert abs(otf["mask"] - 0.8) < 0.015 and abs(otf["kept"] - 0.1) < 0.012 and abs(otf["random"] - 0.1) < 0.012
    for key in ("run1", "run2", "run3+"):
        assert abs(beam[key] - otf[key]) < 0.03, (key, beam, otf)
    # SOP: swapped or kept with p = 0.5; single-sentence chunks (many in documents that drew a short
    # target length, which the original draws once per document) always take label 1.
    random_next = summary.counters["random_next_instances"] / summary.counters["instances"]
    assert abs(beam["label"] - (random_next + (1 - random_next) / 2)) < 0.04, (beam["label"], random_next)
    assert otf["label"] == pytest.approx(beam["label"])

    chosen = fly_rows["masked_lm_ngram_counts"].sum(0) / fly_rows["masked_lm_ngram_counts"].sum()
    # The chosen n-grams: 6/11, 3/11, 2/11 drawn, shifted shorter by overlaps and shrinking.
    assert chosen[0] > 6 / 11 - 0.01 and abs(chosen[1] - 3 / 11) < 0.04 and abs(chosen[2] - 2 / 11) < 0.06


def test_masking_config_validation(beam_output, tmp_path):
    _, config = beam_output
    assert config.ngram_thresholds() == pytest.approx([6 / 11, 9 / 11])
    with pytest.raises(ValueError, match="masked_lm_prob"):
        O.MaskingConfig(128, 20, 100, 2, 3, 4, masked_lm_prob=0.0)
    unmasked_meta = tmp_path / "metadata.json"
    unmasked_meta.write_text(
        '{"instance_config": {"masked_lm_prob": 0.0, "max_seq_length": 8, "max_predictions_per_seq": 2, "ngram": 3,'
        ' "favor_shorter_ngram": true, "do_whole_word_mask": true}, "vocab": {"vocab_size": 9, "cls_id": 2,'
        ' "sep_id": 3, "mask_id": 4}}'
    )
    with pytest.raises(ValueError, match="pass the masked_lm_prob"):
        O.MaskingConfig.from_output_dir(str(tmp_path))
    assert O.MaskingConfig.from_output_dir(str(tmp_path), masked_lm_prob=0.2).masked_lm_prob == 0.2
