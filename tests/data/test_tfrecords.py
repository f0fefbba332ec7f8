"""Tests for albert_tf.data.tfrecords: the original feature spec, hand-written serialization, the reader,
the record-file scan and the data description read from metadata.json."""

import json

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.data import tfrecords as R
from albert_tf.data.pretraining_instances import TrainingInstance

# The features google-research/albert create_pretraining_data.py writes, in its order.
ORIGINAL_SPEC = [
    ("input_ids", "int64", "seq"),
    ("input_mask", "int64", "seq"),
    ("segment_ids", "int64", "seq"),
    ("token_boundary", "int64", "seq"),
    ("masked_lm_positions", "int64", "pred"),
    ("masked_lm_ids", "int64", "pred"),
    ("masked_lm_weights", "float32", "pred"),
    ("next_sentence_labels", "int64", "one"),
]


def _instance(seed=0, length=40, vocab=30000, num_masked=6, label=1):
    rng = np.random.default_rng(seed)
    ids = [2] + rng.integers(5, vocab, length - 4).tolist() + [3] + [int(rng.integers(5, vocab))] + [3]
    sep = length - 3
    positions = sorted(rng.choice(np.arange(1, sep), num_masked, replace=False).tolist())
    return TrainingInstance(
        input_ids=ids,
        segment_ids=[0] * (sep + 1) + [1] * (length - sep - 1),
        token_boundary=rng.integers(0, 2, length).tolist(),
        masked_lm_positions=positions,
        masked_lm_ids=[ids[p] for p in positions],
        next_sentence_label=label,
    )


def _original_example(inst, max_seq_length, max_pred):
    """A tf.train.Example built the way the original script builds it."""
    n = len(inst.input_ids)
    pad = [0] * (max_seq_length - n)
    k = len(inst.masked_lm_positions)

    def ints(v):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=list(v)))

    features = {
        "input_ids": ints(inst.input_ids + pad),
        "input_mask": ints([1] * n + pad),
        "segment_ids": ints(inst.segment_ids + pad),
        "token_boundary": ints(inst.token_boundary + pad),
        "masked_lm_positions": ints(inst.masked_lm_positions + [0] * (max_pred - k)),
        "masked_lm_ids": ints(inst.masked_lm_ids + [0] * (max_pred - k)),
        "masked_lm_weights": tf.train.Feature(float_list=tf.train.FloatList(value=[1.0] * k + [0.0] * (max_pred - k))),
        "next_sentence_labels": ints([inst.next_sentence_label]),
    }
    return tf.train.Example(features=tf.train.Features(feature=features))


def test_feature_shapes_match_the_original():
    shapes = R.feature_shapes(512, 20)
    lengths = {"seq": 512, "pred": 20, "one": 1}
    assert [(f.name, f.dtype, f.length) for f in shapes] == [(n, d, lengths[k]) for n, d, k in ORIGINAL_SPEC]
    assert R.FEATURE_NAMES == tuple(n for n, _, _ in ORIGINAL_SPEC)
    spec = R.feature_spec(128, 20)
    assert spec["masked_lm_weights"].dtype == tf.float32 and spec["input_ids"].dtype == tf.int64
    assert spec["next_sentence_labels"].shape == [1] and spec["token_boundary"].shape == [128]


@pytest.mark.parametrize("vocab", [300, 30000, 200000])
def test_serialization_parses_to_the_original_example(vocab):
    inst = _instance(seed=vocab, vocab=vocab)
    data = R.serialize_instance(inst, 64, 10)
    parsed = tf.train.Example.FromString(data)
    assert parsed == _original_example(inst, 64, 10)
    assert data == R.encode_example(R.instance_features(inst, 64, 10))


def test_encode_example_general_values():
    features = {"big": np.array([-1, 0, 127, 128, 2**40, 2**63 - 1]), "f": np.array([0.5, -2.0], np.float32)}
    parsed = tf.train.Example.FromString(R.encode_example(features)).features.feature
    assert list(parsed["big"].int64_list.value) == [-1, 0, 127, 128, 2**40, 2**63 - 1]
    assert list(parsed["f"].float_list.value) == [0.5, -2.0]
    with pytest.raises(ValueError, match="1-D"):
        R.encode_example({"x": np.zeros((2, 2))})
    with pytest.raises(ValueError, match="dtype"):
        R.encode_example({"x": np.array(["a"])})


def test_invalid_instances_are_rejected():
    inst = _instance(length=40)
    with pytest.raises(ValueError, match="more than max_seq_length=32"):
        R.serialize_instance(inst, 32, 10)
    with pytest.raises(ValueError, match="more than max_predictions_per_seq=5"):
        R.serialize_instance(inst, 64, 5)
    bad = TrainingInstance(inst.input_ids, [2] * 40, inst.token_boundary, [], [], 0)
    with pytest.raises(ValueError, match="segment_ids must hold only 0 and 1"):
        R.serialize_instance(bad, 64, 10)
    bad = TrainingInstance(inst.input_ids, inst.segment_ids[:-1], inst.token_boundary, [], [], 0)
    with pytest.raises(ValueError, match="differ in length"):
        R.serialize_instance(bad, 64, 10)


def _write(path, records):
    with tf.io.TFRecordWriter(str(path)) as writer:
        for r in records:
            writer.write(r)


def test_dataset_reads_ours_and_original_records(tmp_path):
    ours = [_instance(seed=i, length=20 + i, num_masked=i % 7, label=i % 2) for i in range(10)]
    _write(tmp_path / "a.tfrecord", [R.serialize_instance(x, 32, 8) for x in ours[:5]])
    _write(tmp_path / "b.tfrecord", [_original_example(x, 32, 8).SerializeToString() for x in ours[5:]])
    ds = R.make_pretraining_dataset(str(tmp_path / "*.tfrecord"), 32, 8, batch_size=4, is_training=False)
    batches = list(ds)
    assert [b["input_ids"].shape[0] for b in batches] == [4, 4, 2]
    first = batches[0]
    for name, dtype, kind in ORIGINAL_SPEC:
        expected_dtype = tf.float32 if dtype == "float32" else tf.int32
        assert first[name].dtype == expected_dtype, name
        assert first[name].shape[1] == {"seq": 32, "pred": 8, "one": 1}[kind]
    rows = {k: np.concatenate([b[k].numpy() for b in batches]) for k in first}
    for i, inst in enumerate(ours):
        expected = R.instance_features(inst, 32, 8)
        for name, values in expected.items():
            np.testing.assert_array_equal(rows[name][i], values, err_msg=name)


def test_training_dataset_shapes_and_errors(tmp_path):
    _write(tmp_path / "a.tfrecord", [R.serialize_instance(_instance(seed=i, length=30), 32, 8) for i in range(6)])
    ds = R.make_pretraining_dataset([str(tmp_path / "a.tfrecord")], 32, 8, batch_size=4, seed=1)
    assert ds.element_spec["input_ids"].shape == [4, 32]
    batch = next(iter(ds))
    assert batch["masked_lm_weights"].shape == [4, 8]
    with pytest.raises(FileNotFoundError, match="no file matches"):
        R.make_pretraining_dataset(str(tmp_path / "missing-*"), 32, 8, batch_size=4)


# --- checking record files and metadata before training -------------------------------------------

RECORD = 100  # bytes of data per test record; framed, a record takes RECORD + 16 bytes


def _framed_file(path, count=10):
    records = [bytes([i]) * RECORD for i in range(count)]
    _write(path, records)
    assert path.stat().st_size == count * (RECORD + 16)
    return records


def test_scan_counts_the_records_of_an_intact_file(tmp_path):
    records = _framed_file(tmp_path / "a.tfrecord")
    scan = R.scan_record_file(str(tmp_path / "a.tfrecord"))
    assert (scan.num_records, scan.num_bytes, scan.first_record) == (10, 10 * (RECORD + 16), records[0])
    _write(tmp_path / "empty.tfrecord", [])
    assert R.scan_record_file(str(tmp_path / "empty.tfrecord")).first_record is None


def test_a_file_truncated_to_60_percent_is_named_with_the_record_and_offset(tmp_path):
    path = tmp_path / "part-00000.tfrecord"
    _framed_file(path, 7)
    size = int(path.stat().st_size * 0.6)  # 487 of 812 bytes: 23 bytes into record 4 (464..579)
    with open(path, "r+b") as f:
        f.truncate(size)
    with pytest.raises(R.PretrainingDataError) as error:
        R.scan_record_file(str(path))
    assert str(error.value) == f"{path}: truncated record 4 at byte 464: the file ends (487 bytes) inside it"
    with open(path, "r+b") as f:
        f.truncate(464 + 3)  # not even the 12-byte header of record 4
    with pytest.raises(R.PretrainingDataError, match=r"record 4 at byte 464: .* \(467 bytes\) inside its header$"):
        R.scan_record_file(str(path))


def test_64_corrupted_bytes_are_named_with_the_record_and_offset(tmp_path):
    path = tmp_path / "part-00001.tfrecord"
    _framed_file(path)
    with open(path, "r+b") as f:
        f.seek(580)  # mid-file: inside record 5 (580..695)
        f.write(b"\xab" * 64)
    with pytest.raises(R.PretrainingDataError) as error:
        R.scan_record_file(str(path))
    assert str(error.value) == f"{path}: corrupted record 5 at byte 580: a checksum does not match"


def test_a_cut_at_a_record_boundary_shows_in_the_metadata_count(tmp_path):
    _framed_file(tmp_path / "a.tfrecord", 10)
    _framed_file(tmp_path / "b.tfrecord", 4)
    files = [str(tmp_path / "a.tfrecord"), str(tmp_path / "b.tfrecord")]
    assert sum(s.num_records for s in R.scan_record_files(files, expected_records=14)) == 14
    with pytest.raises(R.PretrainingDataError, match=r"14 records but metadata.json counts 20 .*: 10, b.tfrecord: 4"):
        R.scan_record_files(files, expected_records=20)


def test_first_record_reads_past_empty_files_only(tmp_path):
    _write(tmp_path / "a.tfrecord", [])
    records = _framed_file(tmp_path / "b.tfrecord")
    files = [str(tmp_path / "a.tfrecord"), str(tmp_path / "b.tfrecord")]
    assert R.first_record(files) == (files[1], records[0])
    assert R.first_record(files[:1]) is None
    with open(tmp_path / "b.tfrecord", "r+b") as f:
        f.seek(20)
        f.write(b"\xff" * 8)
    with pytest.raises(R.PretrainingDataError, match="b.tfrecord: corrupted record 0 at byte 0"):
        R.first_record(files)


def _metadata(directory, files, seq=32, predictions=5, vocab=500, instances=14, **extra):
    metadata = {
        "format": "albert-pretraining-tfrecord",
        "instance_config": {"max_seq_length": seq, "max_predictions_per_seq": predictions},
        "vocab": {"vocab_size": vocab},
        "counters": {"instances": instances},
        "files": files,
        **extra,
    }
    (directory / "metadata.json").write_text(json.dumps(metadata))


def test_find_pretraining_data_reads_the_metadata_of_a_directory_or_its_globs(tmp_path):
    _framed_file(tmp_path / "part-0.tfrecord", 10)
    _framed_file(tmp_path / "part-1.tfrecord", 4)
    _metadata(tmp_path, ["part-0.tfrecord", "part-1.tfrecord"], tokenizer={"spm_model": "x.model", "lower_case": False})
    data = R.find_pretraining_data(str(tmp_path))
    assert data.files == [str(tmp_path / "part-0.tfrecord"), str(tmp_path / "part-1.tfrecord")]
    assert (data.max_seq_length, data.max_predictions_per_seq, data.vocab_size, data.num_records) == (32, 5, 500, 14)
    assert data.metadata_path == str(tmp_path / "metadata.json")
    assert data.tokenizer == {"spm_model": "x.model", "lower_case": False}
    # A glob inside the directory brings the metadata, but the count only when it matches all files.
    assert R.find_pretraining_data(str(tmp_path / "part-*.tfrecord")).num_records == 14
    part = R.find_pretraining_data(str(tmp_path / "part-0.tfrecord"))
    assert part.max_seq_length == 32 and part.num_records is None


def test_find_pretraining_data_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="holds no \\*.tfrecord files"):
        R.find_pretraining_data(str(tmp_path))
    _framed_file(tmp_path / "part-0.tfrecord", 2)
    plain = R.find_pretraining_data(str(tmp_path))
    assert plain.metadata_path is None and plain.max_seq_length is None
    _metadata(tmp_path, ["part-0.tfrecord", "part-1.tfrecord"])
    with pytest.raises(FileNotFoundError, match=r"part-1.tfrecord is missing: .*metadata.json lists 2 file\(s\)"):
        R.find_pretraining_data(str(tmp_path))
    _metadata(tmp_path, ["part-0.tfrecord"], seq="long")
    with pytest.raises(R.PretrainingDataError, match="max_seq_length must be a positive integer, got 'long'"):
        R.find_pretraining_data(str(tmp_path))
    (tmp_path / "metadata.json").write_text("{not json")
    with pytest.raises(R.PretrainingDataError, match="metadata.json is not valid JSON"):
        R.find_pretraining_data(str(tmp_path))
