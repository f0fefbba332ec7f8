"""Bad rows the TFX way (issue 37): ExampleGen ingests every readable row and counts what it cannot
use, StatisticsGen puts the counts into the statistics, the ExampleValidator judges them against the
schema's presence and `on_error`; files in another encoding; texts longer than `max_seq_length`.

The steps are called directly (no kfp), with a whitespace "tokenizer" for the statistics."""

from __future__ import annotations

import json
import os
import random
import shutil
import sys
from pathlib import Path

import pytest

from albert_tf.data import tables
from albert_tf.data_validation.schema import infer_schema
from albert_tf.data_validation.statistics import StatsOptions, bad_row_counts, feature_stats, statistics_from_records
from albert_tf.data_validation.validation import DataValidationError
from albert_tf.pipeline_steps import example_gen, example_validator, schema_gen
from albert_tf.pipeline_steps.settings import PipelineSettings, SettingsError
from albert_tf.pipeline_steps.staging import read_summary, write_summary

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _pipeline_helpers import POSITIVE, NEGATIVE, WORDS, write_corpus  # noqa: E402


def keyword_rows(count, seed=0, length=5):
    rng = random.Random(seed)
    rows = []
    for i in range(count):
        words = [rng.choice(POSITIVE if i % 2 else NEGATIVE)] + [rng.choice(WORDS) for _ in range(length)]
        rows.append((str(i % 2), " ".join(words)))
    return rows


def write_table(path, rows, encoding="utf-8"):
    """`label<TAB>text` rows under a header; line n of the file is rows[n - 2]."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(("label\ttext\n" + "".join(f"{l}\t{t}\n" for l, t in rows)).encode(encoding))
    return path


def task_with_bad_rows(root, bad=None):
    """240 train rows (line 200 of the file an empty text unless `bad` says otherwise: {line: row}), 60 dev rows."""
    rows = keyword_rows(239)
    for line, row in sorted((bad if bad is not None else {200: ("1", "")}).items()):
        rows.insert(line - 2, row)
    write_table(root / "task" / "train.tsv", rows)
    write_table(root / "task" / "dev.tsv", keyword_rows(60, seed=1))
    return root / "task"


class Words:
    """A whitespace tokenizer standing in for VocabGen's (the statistics only count pieces)."""

    unk_token = "<unk>"

    def tokenize(self, text):
        return text.split()


def _records(path):
    import tensorflow as tf

    return list(tf.data.TFRecordDataset(path).as_numpy_iterator())


def statistics_dir(root, examples_dir, options=StatsOptions()):
    """StatisticsGen's output, computed without Beam (the examples' with `options` and ExampleGen's
    bad rows, as `run_statistics_gen` does; `test_statistics_gen_carries_the_bad_rows` runs that)."""
    from tensorflow_metadata.proto.v0 import statistics_pb2

    from albert_tf.data_validation.statistics import STATS_FILE
    from albert_tf.pipeline_steps.statistics_gen import stats_dir

    info = read_summary(str(examples_dir))
    out = root / "statistics"
    shutil.rmtree(out, ignore_errors=True)
    for split in example_gen.SPLITS:
        for dataset, source, file_name in (("examples", examples_dir, example_gen.EXAMPLES_FILE),
                                           ("corpus", root / "c", example_gen.CORPUS_FILE)):
            records = _records(os.path.join(example_gen.split_dir(str(source), split), file_name))
            if dataset == "examples":
                stats = statistics_from_records(split, records, options, Words(), info["bad_rows"][split])
            else:
                stats = statistics_from_records(split, records, StatsOptions(), Words())
            directory = stats_dir(str(out), split, dataset)
            os.makedirs(directory)
            Path(directory, STATS_FILE).write_bytes(
                statistics_pb2.DatasetFeatureStatisticsList(datasets=[stats]).SerializeToString())
    write_summary(str(out), {"span": 0, "examples": info["counts"]})
    return out


def run_gen(root, task, **kwargs):
    corpus = write_corpus(root / "corpus", 3) if not (root / "corpus").exists() else str(root / "corpus" / "*.txt")
    return example_gen.run_example_gen(corpus, str(task), str(root / "c"), str(root / "e"), **kwargs)


def validate(root, on_error="skip", schema_from=None, **kwargs):
    stats = statistics_dir(root, root / "e", **kwargs)
    for name in ("schema", "anomalies"):
        shutil.rmtree(root / name, ignore_errors=True)
    schema_gen.run_schema_gen(str(schema_from or stats), str(root / "schema"))
    return example_validator.run_example_validator(str(stats), str(root / "schema"), str(root / "anomalies"),
                                                   on_error=on_error)


# --- ExampleGen counts, StatisticsGen carries, the ExampleValidator judges ------------------------


def test_an_empty_text_at_line_200_is_counted_passed_on_and_accepted_within_tolerance(tmp_path, capsys):
    task = task_with_bad_rows(tmp_path)
    counts = run_gen(tmp_path, task)
    assert counts["examples"] == {"train": 239, "eval": 60}
    train = example_gen.read_split(str(tmp_path / "e"), "train")
    assert len(train) == 239 and all(r["text"].strip() for r in train)
    bad = read_summary(str(tmp_path / "e"))["bad_rows"]
    assert bad["eval"] == {"rows": 60, "bad": 0, "reasons": []}
    assert bad["train"]["rows"] == 240 and bad["train"]["bad"] == 1
    [entry] = bad["train"]["reasons"]
    assert (entry["reason"], entry["feature"], entry["count"]) == ("empty_text", "text", 1)
    assert entry["first"] == f"{task / 'train.tsv'}:200"

    stats = statistics_dir(tmp_path, tmp_path / "e")
    from albert_tf.pipeline_steps.statistics_gen import load_split_statistics

    dataset = load_split_statistics(str(stats), "train")
    text, label = feature_stats(dataset, "text"), feature_stats(dataset, "label")
    assert dataset.num_examples == 240
    assert (text.string_stats.common_stats.num_non_missing, text.string_stats.common_stats.num_missing) == (239, 1)
    assert label.string_stats.common_stats.num_non_missing == 240  # the row had its label
    assert bad_row_counts(text) == [("empty_text", 1, entry["first"])] and bad_row_counts(label) == []

    # The schema inferred from these statistics tolerates 1 % of the texts missing; 1 of 240 passes.
    summary = validate(tmp_path)
    assert summary["passed"]
    out = capsys.readouterr().out
    warning = [line for line in out.splitlines() if "train.tsv:200" in line]
    assert warning == [f"WARNING: data validation: train: 1 of 240 rows with empty or missing text in 'text' "
                       f"left out by ExampleGen, the first at {task / 'train.tsv'}:200."]
    assert "1 warnings" in summary["line"]
    report = (tmp_path / "anomalies" / "report.html").read_text(encoding="utf-8")
    assert "bad rows (empty or missing text): 1, the first at" in report


def test_statistics_gen_carries_the_bad_rows(tmp_path, tiny_spm_model):
    """The real step (Beam, VocabGen's tokenizer): ExampleGen's bad rows reach the statistics, and
    the examples (not the corpus documents) are measured against `max_seq_length`."""
    from albert_tf.pipeline_steps.statistics_gen import load_split_statistics, run_statistics_gen

    task = task_with_bad_rows(tmp_path)
    run_gen(tmp_path, task)
    vocab = tmp_path / "vocab"
    vocab.mkdir()
    write_summary(str(vocab), {"type": "sentencepiece", "file": tiny_spm_model, "lower_case": True})
    summary = run_statistics_gen(str(tmp_path / "c"), str(tmp_path / "e"), str(vocab), str(tmp_path / "s"),
                                 max_seq_length=8)
    assert summary["bad_rows"] == {"train": 1, "eval": 0}
    train = load_split_statistics(str(tmp_path / "s"), "train")
    text = feature_stats(train, "text")
    assert train.num_examples == 240 and text.string_stats.common_stats.num_missing == 1
    assert bad_row_counts(text) == [("empty_text", 1, f"{task / 'train.tsv'}:200")]
    custom = {c.name: c.num for c in text.custom_stats}
    assert custom["max_seq_length"] == 8 and 0 < custom["too_long_count"] <= 239
    corpus = feature_stats(load_split_statistics(str(tmp_path / "s"), "train", "corpus"), "text")
    assert not any(c.name.startswith("too_long") for c in corpus.custom_stats)


def test_on_error_raise_stops_at_the_validator_in_one_line(tmp_path, capsys):
    task = task_with_bad_rows(tmp_path)
    run_gen(tmp_path, task)
    with pytest.raises(DataValidationError) as raised:
        validate(tmp_path, on_error="raise")
    errors = [line for line in capsys.readouterr().out.splitlines() if line.startswith("ERROR")]
    assert errors == [f"ERROR: data validation: train: 1 of 240 rows with empty or missing text in 'text', the first at "
                      f"{task / 'train.tsv'}:200: on_error is raise (skip leaves them out within the schema's "
                      f"presence.min_fraction)."]
    assert errors[0][len("ERROR: data validation: "):] in str(raised.value)
    assert not read_summary(str(tmp_path / "anomalies"))["passed"]


def test_too_many_bad_rows_are_refused_by_the_presence(tmp_path, capsys):
    # The schema comes from a clean span (text present in every row: min_fraction 0.99); in the new
    # span 5 of 244 rows cannot be used: 3 empty texts, a missing label, a text with a stray byte.
    clean = tmp_path / "clean"
    run_gen(clean, task_with_bad_rows(clean, bad={}))
    clean_stats = statistics_dir(clean, clean / "e")
    lines = [f"{label}\t{text}".encode("utf-8") for label, text in keyword_rows(234)]
    for number in (20, 60, 100):
        lines.insert(number - 2, b"0\t  ")
    lines.insert(150 - 2, b"\tno label here")
    lines.insert(201 - 2, b"1\tgood but broken \xff here")
    # Valid non-ASCII rows outnumber the damaged one: UTF-8 with a bad row, not another encoding.
    lines += [f"1\tgood café n°{i}".encode("utf-8") for i in range(5)]
    train = tmp_path / "task" / "train.tsv"
    train.parent.mkdir()
    train.write_bytes(b"label\ttext\n" + b"\n".join(lines) + b"\n")
    write_table(tmp_path / "task" / "dev.tsv", keyword_rows(60, seed=1))
    run_gen(tmp_path, tmp_path / "task")
    bad = read_summary(str(tmp_path / "e"))["bad_rows"]["train"]
    assert (bad["rows"], bad["bad"]) == (244, 5)
    assert {(r["reason"], r["feature"]): (r["count"], r["first"]) for r in bad["reasons"]} == {
        ("empty_text", "text"): (3, f"{train}:20"), ("bad_label", "label"): (1, f"{train}:150"),
        ("undecodable", "text"): (1, f"{train}:201")}
    with pytest.raises(DataValidationError):
        validate(tmp_path, schema_from=clean_stats)
    errors = [line for line in capsys.readouterr().out.splitlines() if line.startswith("ERROR")]
    assert f"ERROR: data validation: train: text: expected at most 1.0 % of the examples missing or empty " \
           f"(presence.min_fraction 0.99), found 1.6 % (4 of 244; rows ExampleGen could not use: " \
           f"empty or missing text 3 (the first at {train}:20), undecodable bytes 1 (the first at {train}:201))." in errors
    assert f"ERROR: data validation: train: label: expected at most 0.0 % of the examples missing " \
           f"(presence.min_fraction 1), found 0.4 % (1 of 244; rows ExampleGen could not use: " \
           f"missing or unparsable label 1 (the first at {train}:150))." in errors
    assert len(errors) == 2


# --- encodings -----------------------------------------------------------------------------------


CHINESE = ["这部电影非常好看", "剧情太无聊了", "演员表演很出色", "音乐很美", "不推荐"]


def test_a_gbk_file_is_one_line_and_reads_with_encoding_gbk(tmp_path):
    rows = keyword_rows(10) + [(str(i % 2), text) for i, text in enumerate(CHINESE)]
    task = tmp_path / "task"
    write_table(task / "train.tsv", rows, encoding="gbk")
    write_table(task / "dev.tsv", keyword_rows(4, seed=1), encoding="gbk")
    offset = len(("label\ttext\n" + "".join(f"{l}\t{t}\n" for l, t in keyword_rows(10))).encode("gbk")) + 2
    with pytest.raises(tables.EncodingError) as raised:
        run_gen(tmp_path, task)
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith(f"{task / 'train.tsv'}:12: not valid UTF-8 at byte {offset} ")
    assert message.endswith("it reads as gbk: set encoding: gbk")
    assert not (tmp_path / "e").exists()

    counts = run_gen(tmp_path, task, encoding="gbk")
    assert counts["examples"] == {"train": 15, "eval": 4}
    assert [r["text"] for r in example_gen.read_split(str(tmp_path / "e"), "train")][-5:] == CHINESE
    assert read_summary(str(tmp_path / "e"))["encoding"] == "gbk"


def test_encoding_setting_is_checked_and_passed_to_the_pipeline():
    from pipelines.albert_pipeline import pipeline_arguments

    settings = PipelineSettings.from_dict({"encoding": "gbk", "on_error": "raise", "max_truncated_fraction": 0.1})
    arguments = pipeline_arguments(settings)
    assert (arguments["encoding"], arguments["on_error"], arguments["max_truncated_fraction"]) == ("gbk", "raise", 0.1)
    defaults = PipelineSettings()
    assert (defaults.encoding, defaults.on_error, defaults.max_truncated_fraction) == ("utf-8", "skip", 0.05)
    with pytest.raises(SettingsError, match="encoding: unknown encoding 'klingon'"):
        PipelineSettings.from_dict({"encoding": "klingon"})
    with pytest.raises(SettingsError, match="on_error must be skip or raise"):
        PipelineSettings.from_dict({"on_error": "ignore"})
    with pytest.raises(SettingsError, match="max_truncated_fraction must be in"):
        PipelineSettings.from_dict({"max_truncated_fraction": 2})


def test_read_table_reasons_and_strict_mode(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in (
        {"text": "ok", "label": 1}, {"text": "", "label": 0}, {"text": "x", "label": [1]}, {"label": 1}, "[1]",
    )) + "\nnot json\n", encoding="utf-8")
    rejected = []
    examples = tables.read_table(path, text_column="text", label_column="label", on_error="skip", rejected=rejected)
    assert [e.text_a for e in examples] == ["ok"]
    assert [(e.reason, e.column, e.line) for e in rejected] == [
        ("empty_text", "text", 2), ("bad_label", "label", 3), ("empty_text", "text", 4), ("malformed_row", None, 5),
        ("malformed_row", None, 6)]
    # Strict reading is unchanged: the first bad row stops it.
    with pytest.raises(tables.DataFormatError, match=r"t.jsonl:2: empty text in column 'text'"):
        tables.read_table(path, text_column="text", label_column="label")


# --- texts longer than max_seq_length ------------------------------------------------------------


def test_long_texts_above_the_threshold_warn_in_one_line(tmp_path, capsys):
    # 30 of 100 texts have 40 words ([CLS] + 40 + [SEP] > 32); the rest 6.
    rows = keyword_rows(70) + keyword_rows(30, seed=2, length=39)
    random.Random(0).shuffle(rows)
    write_table(tmp_path / "task" / "train.tsv", rows)
    write_table(tmp_path / "task" / "dev.tsv", keyword_rows(20, seed=1))
    run_gen(tmp_path, tmp_path / "task")
    summary = validate(tmp_path, options=StatsOptions(max_seq_length=32))
    assert summary["passed"]
    warnings = [line for line in capsys.readouterr().out.splitlines() if "max_seq_length" in line]
    assert warnings == ["WARNING: data validation: train: text: 30.0 % of the texts (30) are longer than "
                        "max_seq_length 32 pieces, 16 pieces on average, and are truncated; expected at most "
                        "5.0 % (max_truncated_fraction)."]
    report = (tmp_path / "anomalies" / "report.html").read_text(encoding="utf-8")
    assert "longer than max_seq_length 32 pieces: 30.0 % (30)" in report
    # At a sequence that holds them all: nothing to say.
    assert "no anomalies" in validate(tmp_path, options=StatsOptions(max_seq_length=64))["line"]


def test_pair_texts_are_measured_together():
    from albert_tf.data_validation.records import serialize_bytes_example

    records = [serialize_bytes_example({"text": [b"a b c"], "text_b": [b"d e"], "label": [b"1"]}),
               serialize_bytes_example({"text": [b"a b"], "text_b": [b"d"], "label": [b"0"]})]
    # [CLS] 3 [SEP] 2 [SEP] = 8 > 7; [CLS] 2 [SEP] 1 [SEP] = 6.
    dataset = statistics_from_records("train", records, StatsOptions(max_seq_length=7), Words())
    text = feature_stats(dataset, "text")
    custom = {c.name: c.num for c in text.custom_stats}
    assert (custom["too_long_count"], custom["too_long_fraction"], custom["max_seq_length"]) == (1, 0.5, 7)
    assert not any(c.name.startswith("too_long") for c in feature_stats(dataset, "text_b").custom_stats)
    assert infer_schema(dataset) is not None
