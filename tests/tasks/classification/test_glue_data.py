"""Tests of `albert_tf.tasks.classification.data`: the GLUE layouts, generic TSV/CSV/JSONL tables, labels and errors."""

import csv
import json
from pathlib import Path

import pytest

from albert_tf.data import tables
from albert_tf.tasks.classification import data as glue
from albert_tf.data.tables import DataFormatError
from albert_tf.tasks.classification.data import LabelVocab

SHARED_DATA = Path(__file__).resolve().parents[3].parent / "shared" / "data"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def tsv(*rows):
    return "".join("\t".join(row) + "\n" for row in rows)


def test_cola_train_has_no_header_and_test_has_one(tmp_path):
    write(tmp_path / "train.tsv", tsv(["gj04", "1", "", "Our friends won't buy this analysis."], ["gj04", "0", "*", "They drank the pub."]))
    write(tmp_path / "dev.tsv", tsv(["cj99", "1", "", "The sailors rode the breeze."]))
    write(tmp_path / "test.tsv", tsv(["index", "sentence"], ["0", "Bill whistled past the house."]))
    train = glue.read_glue_split("cola", tmp_path, "train")
    assert [(e.text_a, e.label, e.line) for e in train] == [
        ("Our friends won't buy this analysis.", "1", 1),
        ("They drank the pub.", "0", 2),
    ]
    assert train[0].text_b is None and train[0].where.endswith("train.tsv:1")
    test = glue.read_glue_split("cola", tmp_path, "test")
    assert (test[0].text_a, test[0].label, test[0].guid) == ("Bill whistled past the house.", None, "0")


def test_pair_tasks_use_their_header_columns(tmp_path):
    write(
        tmp_path / "mrpc" / "train.tsv",
        tsv(["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"], ["1", "7", "8", 'He said "yes".', "He agreed."]),
    )
    mrpc = glue.read_glue_split("MRPC", tmp_path / "mrpc", "train")
    # Quotes are literal in GLUE files.
    assert (mrpc[0].text_a, mrpc[0].text_b, mrpc[0].label) == ('He said "yes".', "He agreed.", "1")

    header = ["index", "promptID", "pairID", "genre", "s1bp", "s2bp", "s1p", "s2p", "sentence1", "sentence2", "label1", "gold_label"]
    row = ["0", "1", "2", "fiction", "(", "(", "(", "(", "A man sleeps.", "Someone rests.", "entailment", "entailment"]
    write(tmp_path / "mnli" / "train.tsv", tsv(header, row))
    dev_header = header[:-1] + ["label2", "label3", "label4", "label5", "gold_label"]
    dev_row = row[:-1] + ["neutral"] * 4 + ["neutral"]
    write(tmp_path / "mnli" / "dev_mismatched.tsv", tsv(dev_header, dev_row))
    assert glue.read_glue_split("mnli", tmp_path / "mnli", "train")[0].label == "entailment"
    mismatched = glue.read_glue_split("mnli", tmp_path / "mnli", "dev_mismatched")
    assert (mismatched[0].text_a, mismatched[0].text_b, mismatched[0].label) == ("A man sleeps.", "Someone rests.", "neutral")

    write(
        tmp_path / "stsb" / "dev.tsv",
        tsv(["index", "genre", "filename", "year", "old_index", "source1", "source2", "sentence1", "sentence2", "score"],
            ["0", "main", "f", "2012", "1", "s", "s", "A plane takes off.", "An air plane is taking off.", "5.000"]),
    )
    sts = glue.read_glue_split("sts-b", tmp_path / "stsb", "dev")
    assert glue.regression_target(sts[0]) == 5.0 and glue.glue_layout("stsb").is_regression

    write(tmp_path / "qqp" / "test.tsv", tsv(["id", "question1", "question2"], ["17", "Why?", "How?"]))
    qqp = glue.read_glue_split("qqp", tmp_path / "qqp", "test")
    assert (qqp[0].guid, qqp[0].text_a, qqp[0].text_b, qqp[0].label) == ("17", "Why?", "How?", None)


def test_every_glue_task_has_a_layout():
    for task in ("cola", "sst-2", "mrpc", "sts-b", "qqp", "mnli", "qnli", "rte", "wnli"):
        layout = glue.glue_layout(task)
        assert layout.labels is None if task == "sts-b" else len(layout.labels) >= 2
    assert glue.glue_layout("mnli").labels == ("contradiction", "entailment", "neutral")
    assert glue.glue_layout("qnli").labels == ("entailment", "not_entailment")
    with pytest.raises(ValueError, match="unknown GLUE task"):
        glue.glue_layout("squad")
    with pytest.raises(ValueError, match="no split"):
        glue.glue_split_file("mnli", "/x", "dev_other")


def test_glue_errors_name_file_and_line(tmp_path):
    write(tmp_path / "train.tsv", tsv(["sentence", "label"], ["good", "1"], ["bad"]))
    with pytest.raises(DataFormatError, match=r"train\.tsv:3: expected at least 2 columns"):
        glue.read_glue_split("sst-2", tmp_path, "train")
    write(tmp_path / "train.tsv", tsv(["text", "label"], ["good", "1"]))
    with pytest.raises(DataFormatError, match=r"train\.tsv:1: no column 'sentence'"):
        glue.read_glue_split("sst-2", tmp_path, "train")
    write(tmp_path / "train.tsv", "sentence\tlabel\ngood\t1\n\nfine\t1\n")
    with pytest.raises(DataFormatError, match=r"train\.tsv:3: empty line"):
        glue.read_glue_split("sst-2", tmp_path, "train")
    write(tmp_path / "train.tsv", "sentence\tlabel\n \t1\n")
    with pytest.raises(DataFormatError, match=r"train\.tsv:2: empty text in column 'sentence'"):
        glue.read_glue_split("sst-2", tmp_path, "train")
    (tmp_path / "train.tsv").write_bytes(b"sentence\tlabel\ngood\t1\nbad \xff\t0\n")
    with pytest.raises(DataFormatError, match=r"train\.tsv:3: not valid UTF-8"):
        glue.read_glue_split("sst-2", tmp_path, "train")
    with pytest.raises(DataFormatError, match=r"dev\.tsv: file not found"):
        glue.read_glue_split("sst-2", tmp_path, "dev")


def test_on_error_skip_drops_bad_rows(tmp_path):
    write(tmp_path / "train.tsv", tsv(["sentence", "label"], ["good", "1"], ["bad"], ["fine", "0"]))
    examples = glue.read_glue_split("sst-2", tmp_path, "train", on_error="skip")
    assert [e.text_a for e in examples] == ["good", "fine"]


def test_generic_tsv_csv_jsonl(tmp_path):
    # TSV as csv/pandas write it: a quoted field holding a tab, a newline and doubled quotes.
    with open(tmp_path / "train.tsv", "w", encoding="utf-8", newline="") as f:
        csv.writer(f, delimiter="\t").writerows([["label", "review"], ["1", 'two\nlines, "quoted"\tand a tab'], ["0", "plain"]])
    examples = tables.read_table(tmp_path / "train.tsv", text_column="review", label_column="label")
    assert [(e.text_a, e.label, e.line) for e in examples] == [('two\nlines, "quoted"\tand a tab', "1", 2), ("plain", "0", 4)]
    # Read with literal quotes, every physical line is a row.
    literal = tables.read_table(tmp_path / "train.tsv", text_column="review", label_column="label", tsv_quoting="none")
    assert [e.text_a for e in literal] == ['"two', 'and a tab"', "plain"]

    write(tmp_path / "pairs.csv", 'q,a,y\n"Is it, really?",Yes,pos\nNo,"Maybe ""so""",neg\n')
    pairs = tables.read_table(tmp_path / "pairs.csv", text_column="q", text_b_column="a", label_column="y")
    assert [(e.text_a, e.text_b, e.label) for e in pairs] == [("Is it, really?", "Yes", "pos"), ("No", 'Maybe "so"', "neg")]

    write(tmp_path / "data.jsonl", json.dumps({"t": "hi", "y": 1}) + "\n" + json.dumps({"t": "yo", "y": 0, "id": 9}) + "\n")
    rows = tables.read_table(tmp_path / "data.jsonl", text_column="t", label_column="y", id_column="id")
    assert [(e.text_a, e.label) for e in rows] == [("hi", "1"), ("yo", "0")]
    assert rows[1].guid == "9"


def test_generic_errors(tmp_path):
    write(tmp_path / "a.jsonl", '{"t": "hi", "y": 1}\n[1, 2]\n')
    with pytest.raises(DataFormatError, match=r"a\.jsonl:2: expected a JSON object"):
        tables.read_table(tmp_path / "a.jsonl", text_column="t", label_column="y")
    write(tmp_path / "b.jsonl", '{"t": "hi", "y": 1}\n{"t": "hi"\n')
    with pytest.raises(DataFormatError, match=r"b\.jsonl:2: not valid JSON"):
        tables.read_table(tmp_path / "b.jsonl", text_column="t", label_column="y")
    write(tmp_path / "c.jsonl", '{"text": "hi", "y": 1}\n')
    with pytest.raises(DataFormatError, match=r"c\.jsonl:1: no key 't'"):
        tables.read_table(tmp_path / "c.jsonl", text_column="t", label_column="y")
    write(tmp_path / "d.jsonl", '{"t": 5, "y": 1}\n')
    with pytest.raises(DataFormatError, match=r"d\.jsonl:1: 't' must be a string"):
        tables.read_table(tmp_path / "d.jsonl", text_column="t", label_column="y")
    write(tmp_path / "e.csv", "t,y\n")
    with pytest.raises(DataFormatError, match=r"e\.csv: no examples"):
        tables.read_table(tmp_path / "e.csv", text_column="t", label_column="y")
    write(tmp_path / "f.csv", 't,y\n"unterminated,1\n')
    with pytest.raises(DataFormatError, match=r"f\.csv:\d+: malformed CSV"):
        tables.read_table(tmp_path / "f.csv", text_column="t", label_column="y")
    write(tmp_path / "g.parquet", "x")
    with pytest.raises(DataFormatError, match="cannot tell the format"):
        tables.read_table(tmp_path / "g.parquet", text_column="t")


def test_find_split_file(tmp_path):
    write(tmp_path / "train.csv", "t,y\na,1\n")
    write(tmp_path / "validation.jsonl", '{"t": "a", "y": 1}\n')
    assert tables.find_split_file(tmp_path, "train").endswith("train.csv")
    assert tables.find_split_file(tmp_path, "dev").endswith("validation.jsonl")
    with pytest.raises(DataFormatError, match="no test file"):
        tables.find_split_file(tmp_path, "test")
    write(tmp_path / "train.tsv", "t\ty\na\t1\n")
    with pytest.raises(DataFormatError, match="several train files"):
        tables.find_split_file(tmp_path, "train")


def test_label_vocab():
    examples = [tables.TextExample("a", label=label, source="f.tsv", line=i + 2) for i, label in enumerate(["10", "2", "2", "1"])]
    vocab = LabelVocab.from_examples(examples)
    assert vocab.labels == ("1", "2", "10")  # numeric order, not "1", "10", "2"
    assert [vocab.id_of(e) for e in examples] == [2, 1, 1, 0]
    with pytest.raises(DataFormatError, match=r"f\.tsv:7: unknown label '3'; the task's labels are 1, 2, 10"):
        vocab.id_of(tables.TextExample("x", label="3", source="f.tsv", line=7))
    assert LabelVocab.from_examples([tables.TextExample("a", label="pos"), tables.TextExample("b", label="neg")]).labels == ("neg", "pos")
    with pytest.raises(ValueError, match="duplicate"):
        LabelVocab(["a", "a"])
    with pytest.raises(DataFormatError, match=r"f\.tsv:4: label 'high' is not a number"):
        glue.regression_target(tables.TextExample("x", label="high", source="f.tsv", line=4))
    with pytest.raises(DataFormatError, match="not a finite number"):
        glue.regression_target(tables.TextExample("x", label="nan", source="f.tsv", line=4))


def test_rotten_tomatoes_reads_completely():
    path = SHARED_DATA / "en" / "rotten_tomatoes" / "train.tsv"
    if not path.exists():
        pytest.skip(f"shared data not available: {path}")
    examples = tables.read_table(path, text_column="text", label_column="label")
    assert len(examples) == 10271  # the README's count: quoted multi-line fields are one row each
    assert LabelVocab.from_examples(examples).labels == ("0", "1")
    positive = sum(e.label == "1" for e in examples) / len(examples)
    assert 0.5 < positive < 0.65
