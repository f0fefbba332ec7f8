"""Sentence(-pair) classification data: the GLUE file layouts and generic TSV / CSV / JSONL tables,
read into examples and encoded into model features.

Every reader returns `TextExample`s (`text_a`, optional `text_b`, optional `label`, and the file
and line the example came from) and reports bad input as `DataFormatError` naming the file and
line: invalid UTF-8, a row with too few columns, a header without a needed column, an empty text,
an empty line in the middle of a file, a label outside the task's label list, a regression label
that is not a number, a JSON line that is not an object.

The GLUE layouts (as distributed by the GLUE benchmark and read by google-research/albert
`classifier_utils.py`):

=======  =====================================  =================================  ==================
task     train / dev files                      text(s), label                      labels
=======  =====================================  =================================  ==================
CoLA     train.tsv, dev.tsv (no header)         column 3; column 1                  0, 1
SST-2    train.tsv, dev.tsv                     sentence; label                     0, 1
MRPC     train.tsv, dev.tsv                     #1 String, #2 String; Quality       0, 1
STS-B    train.tsv, dev.tsv                     sentence1, sentence2; score         (regression)
QQP      train.tsv, dev.tsv                     question1, question2; is_duplicate  0, 1
MNLI     train.tsv, dev_matched.tsv,            sentence1, sentence2; gold_label    contradiction,
         dev_mismatched.tsv                                                         entailment, neutral
QNLI     train.tsv, dev.tsv                     question, sentence; label           entailment,
                                                                                    not_entailment
RTE      train.tsv, dev.tsv                     sentence1, sentence2; label         entailment,
                                                                                    not_entailment
WNLI     train.tsv, dev.tsv                     sentence1, sentence2; label         0, 1
=======  =====================================  =================================  ==================

Test files (`test.tsv`, MNLI's `test_matched.tsv` / `test_mismatched.tsv`) have a header (also
CoLA's), the texts and an id column, and no label. GLUE TSV files are read without quote
processing (fields never span lines and quotes are literal text), as the original does.

Generic tables: a `.tsv` / `.csv` file with a header (fields quoted the CSV way where needed,
as Python's `csv` and pandas write them; `tsv_quoting="none"` reads a TSV whose quotes are
literal), or a `.jsonl` file of objects, with the
text in `text_column`, an optional second text in `text_b_column` and the label in
`label_column`; the splits of a generic data directory are `train.*`, `dev.*` (or
`validation.*`) and `test.*`. `detect_file_format` tells a file's format from the file itself
(its extension, else its first line), so that data read after training need not be in the
training files' format.

Encoding: `encode_examples` tokenizes and packs `TextExample`s into model features with the
Python tokenizers, `examples_dataset` makes a `tf.data.Dataset` of them (through a TFRecord
file, `write_features_tfrecord` / `features_tfrecord_dataset`, when they are too large to embed).
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import logging
import os
import uuid
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

logger = logging.getLogger(__name__)

ColumnRef = Union[str, int]
TABLE_FORMATS = ("tsv", "csv", "jsonl")
TSV_QUOTING = ("csv", "none")
_EXTENSIONS = {".tsv": "tsv", ".txt": "tsv", ".csv": "csv", ".jsonl": "jsonl", ".json": "jsonl"}
SPLIT_ALIASES = {"train": ("train",), "dev": ("dev", "validation", "valid", "val"), "test": ("test",)}
ON_ERROR = ("raise", "skip")
FEATURE_NAMES = ("input_ids", "input_mask", "segment_ids")


class DataFormatError(ValueError):
    """Malformed task data; the message starts with `file:line:`."""

    def __init__(self, message: str, path: Optional[str] = None, line: Optional[int] = None):
        where = f"{path}:{line}: " if path is not None and line is not None else (f"{path}: " if path else "")
        super().__init__(where + message)
        self.path = path
        self.line = line


class MissingColumnError(DataFormatError):
    """A column (JSON key, with `what="key"`) the reader needs is not in the file.

    Attributes:
        column: The column asked for.
        available: The columns (keys) the file has.
    """

    def __init__(
        self, column: ColumnRef, available: Sequence[str], path: Optional[str] = None, line: Optional[int] = None,
        what: str = "column",
    ):
        shown = ", ".join(map(str, available)) if available else "none"
        super().__init__(f"no {what} {column!r} (the file has: {shown})", path, line)
        self.column = column
        self.available = list(available)


@dataclasses.dataclass(frozen=True)
class TextExample:
    """One classification / regression example.

    Attributes:
        text_a: The (first) text.
        text_b: The second text of a pair task, else None.
        label: The label as written in the file (a string; None in test files).
        source: The file it was read from.
        line: Its line number there (1-based; for JSONL the line, for CSV the record's first line).
        guid: An id: the file's id column where it has one, else `source:line`.
    """

    text_a: str
    text_b: Optional[str] = None
    label: Optional[str] = None
    source: str = ""
    line: int = 0
    guid: str = ""

    @property
    def where(self) -> str:
        return f"{self.source}:{self.line}"


@dataclasses.dataclass(frozen=True)
class GlueLayout:
    """How one GLUE task's files are laid out (see the module docstring).

    Columns are header names, or 0-based indices for files without a header (CoLA train/dev).
    """

    name: str
    dev_files: Dict[str, str]
    test_files: Dict[str, str]
    text_a: ColumnRef
    text_b: Optional[ColumnRef]
    label: ColumnRef
    labels: Optional[Tuple[str, ...]]
    has_header: bool = True
    test_text_a: Optional[ColumnRef] = None
    test_text_b: Optional[ColumnRef] = None
    test_id: ColumnRef = "index"
    train_file: str = "train.tsv"

    @property
    def is_regression(self) -> bool:
        return self.labels is None

    @property
    def splits(self) -> Tuple[str, ...]:
        return ("train",) + tuple(self.dev_files) + tuple(self.test_files)


_BINARY = ("0", "1")
_NLI3 = ("contradiction", "entailment", "neutral")
_NLI2 = ("entailment", "not_entailment")
_DEV = {"dev": "dev.tsv"}
_TEST = {"test": "test.tsv"}


def _pair(name, a, b, label, labels, dev=_DEV, test=_TEST, test_id="index"):
    return GlueLayout(
        name=name, dev_files=dict(dev), test_files=dict(test), text_a=a, text_b=b, label=label, labels=labels,
        test_text_a=a, test_text_b=b, test_id=test_id,
    )


GLUE_LAYOUTS: Dict[str, GlueLayout] = {
    "cola": GlueLayout(
        name="cola", dev_files=dict(_DEV), test_files=dict(_TEST), text_a=3, text_b=None, label=1,
        labels=_BINARY, has_header=False, test_text_a="sentence",
    ),
    "sst-2": GlueLayout(
        name="sst-2", dev_files=dict(_DEV), test_files=dict(_TEST), text_a="sentence", text_b=None,
        label="label", labels=_BINARY, test_text_a="sentence",
    ),
    "mrpc": _pair("mrpc", "#1 String", "#2 String", "Quality", _BINARY),
    "sts-b": _pair("sts-b", "sentence1", "sentence2", "score", None),
    "qqp": _pair("qqp", "question1", "question2", "is_duplicate", _BINARY, test_id="id"),
    "mnli": _pair(
        "mnli", "sentence1", "sentence2", "gold_label", _NLI3,
        dev={"dev_matched": "dev_matched.tsv", "dev_mismatched": "dev_mismatched.tsv"},
        test={"test_matched": "test_matched.tsv", "test_mismatched": "test_mismatched.tsv"},
    ),
    "qnli": _pair("qnli", "question", "sentence", "label", _NLI2),
    "rte": _pair("rte", "sentence1", "sentence2", "label", _NLI2),
    "wnli": _pair("wnli", "sentence1", "sentence2", "label", _BINARY),
}

_TASK_ALIASES = {"sst2": "sst-2", "stsb": "sts-b", "sts": "sts-b", "mnli-m": "mnli", "mnli-mm": "mnli"}


def glue_layout(task: str) -> GlueLayout:
    """The layout of a GLUE task ("cola", "sst-2", "mrpc", "sts-b", "qqp", "mnli", "qnli", "rte",
    "wnli"; case-insensitive, "sst2"/"stsb" accepted)."""
    key = task.lower()
    key = _TASK_ALIASES.get(key, key)
    if key not in GLUE_LAYOUTS:
        raise ValueError(f"unknown GLUE task {task!r}; expected one of {', '.join(GLUE_LAYOUTS)}")
    return GLUE_LAYOUTS[key]


# --- low-level file reading ----------------------------------------------------------------------


def read_text(path: str) -> str:
    """The file as strict UTF-8 (a BOM is dropped); invalid bytes raise naming the line."""
    path = os.fspath(path)
    if "://" in path:
        import tensorflow as tf

        with tf.io.gfile.GFile(path, "rb") as f:
            data = f.read()
    else:
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            raise DataFormatError("file not found", path) from None
        except IsADirectoryError:
            raise DataFormatError("is a directory, not a data file", path) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise DataFormatError(f"not valid UTF-8 (byte {data[e.start:e.end]!r})", path, line) from None
    return text[1:] if text.startswith("\ufeff") else text


def _tsv_rows(path: str) -> Iterator[Tuple[int, List[str]]]:
    """`(line_number, fields)` of a tab-separated file without quote processing.

    A last empty line (a final newline) is fine; an empty line elsewhere is an error.
    """
    lines = read_text(path).split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for number, line in enumerate(lines, 1):
        line = line.rstrip("\r")
        if not line.strip():
            raise DataFormatError("empty line", path, number)
        yield number, line.split("\t")


def _csv_rows(path: str, delimiter: str = ",") -> Iterator[Tuple[int, List[str]]]:
    """`(line_number, fields)` of a delimited file with standard CSV quoting (a quoted field may
    hold delimiters, doubled quotes and newlines), as Python's `csv` and pandas write it."""
    reader = csv.reader(io.StringIO(read_text(path), newline=""), delimiter=delimiter, strict=True)
    start = 1
    try:
        for row in reader:
            if not row or not any(field.strip() for field in row):
                raise DataFormatError("empty row", path, start)
            yield start, row
            start = reader.line_num + 1
    except csv.Error as e:
        kind = "CSV" if delimiter == "," else "quoted TSV"
        raise DataFormatError(
            f"malformed {kind}: {e} (for a TSV whose quotes are literal text, read it with quoting 'none')",
            path,
            reader.line_num,
        ) from None


def detect_format(path: str, table_format: Optional[str] = None) -> str:
    """"tsv", "csv" or "jsonl": `table_format` if given, else from the file extension."""
    if table_format is not None:
        if table_format not in TABLE_FORMATS:
            raise ValueError(f"unknown table format {table_format!r}; expected one of {', '.join(TABLE_FORMATS)}")
        return table_format
    extension = os.path.splitext(os.fspath(path))[1].lower()
    if extension not in _EXTENSIONS:
        raise DataFormatError(
            f"cannot tell the format from the extension {extension!r}; use .tsv, .csv or .jsonl "
            f"(or pass the format explicitly)",
            os.fspath(path),
        )
    return _EXTENSIONS[extension]


def _first_line(path: str) -> str:
    """The first non-empty line of a file (from its first 64 KiB), "" when there is none."""
    path = os.fspath(path)
    try:
        if "://" in path:
            import tensorflow as tf

            with tf.io.gfile.GFile(path, "rb") as f:
                head = f.read(65536)
        else:
            with open(path, "rb") as f:
                head = f.read(65536)
    except OSError:
        return ""  # the reader reports the missing file with its own message
    text = head.decode("utf-8", errors="replace").lstrip("\ufeff")
    return next((line for line in text.splitlines() if line.strip()), "")


def detect_file_format(path: str, recorded: Optional[str] = None) -> str:
    """The format of a table file, from the file: "tsv", "csv" or "jsonl".

    The extension decides when it is `.tsv`, `.csv`, `.jsonl` or `.json`. For any other name
    (`.txt`, none) the first line does: a JSON object means JSON lines; otherwise `recorded` (the
    format the model was trained on, when it was a delimited one), else a tab means TSV and
    anything else CSV. The format recorded at training time never overrides a telling extension:
    a model trained on JSONL scores a `dev.tsv` as TSV.

    Args:
        path: The file.
        recorded: The training files' format, consulted only for names without a telling
            extension.
    """
    extension = os.path.splitext(os.fspath(path))[1].lower()
    if extension in (".tsv", ".csv", ".jsonl", ".json"):
        return _EXTENSIONS[extension]
    first = _first_line(path)
    if first.lstrip().startswith("{"):
        return "jsonl"
    if recorded in ("tsv", "csv"):
        return recorded
    return "tsv" if "\t" in first else "csv"


# --- column selection ----------------------------------------------------------------------------


def _column_index(column: ColumnRef, header: Optional[List[str]], path: str) -> int:
    if isinstance(column, int):
        return column
    if header is None:
        raise DataFormatError(f"column {column!r} is named, but the file has no header", path)
    if column not in header:
        raise MissingColumnError(column, header, path, 1)
    return header.index(column)


def _field(row: List[str], index: int, column: ColumnRef, path: str, line: int) -> str:
    if index >= len(row):
        raise DataFormatError(
            f"expected at least {index + 1} columns (for column {column!r}), found {len(row)}", path, line
        )
    return row[index]


def _check_text(text: str, column: ColumnRef, path: str, line: int) -> str:
    if not text.strip():
        raise DataFormatError(f"empty text in column {column!r}", path, line)
    return text


def _check_on_error(on_error: str) -> None:
    if on_error not in ON_ERROR:
        raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")


class _Collector:
    """Collects examples; with on_error="skip" a bad row is logged and left out instead."""

    def __init__(self, path: str, on_error: str):
        _check_on_error(on_error)
        self.path = path
        self.on_error = on_error
        self.examples: List[TextExample] = []
        self.skipped = 0

    def add(self, make) -> None:
        try:
            self.examples.append(make())
        except DataFormatError as e:
            if self.on_error == "raise":
                raise
            self.skipped += 1
            if self.skipped <= 5:
                logger.warning("skipping: %s", e)

    def result(self) -> List[TextExample]:
        if self.skipped:
            logger.warning("%s: skipped %d malformed row(s)", self.path, self.skipped)
        if not self.examples:
            raise DataFormatError("no examples", self.path)
        return self.examples


def _read_delimited(
    path: str,
    rows: Iterator[Tuple[int, List[str]]],
    *,
    text_a: ColumnRef,
    text_b: Optional[ColumnRef],
    label: Optional[ColumnRef],
    guid: Optional[ColumnRef],
    has_header: bool,
    on_error: str,
) -> List[TextExample]:
    collector = _Collector(path, on_error)
    header = None
    if has_header:
        first = next(rows, None)
        if first is None:
            raise DataFormatError("empty file (no header)", path)
        header = [h.strip() for h in first[1]]
    index_a = _column_index(text_a, header, path)
    index_b = _column_index(text_b, header, path) if text_b is not None else None
    index_label = _column_index(label, header, path) if label is not None else None
    index_guid = _column_index(guid, header, path) if guid is not None else None

    for number, row in rows:
        def make(number=number, row=row):
            a = _check_text(_field(row, index_a, text_a, path, number), text_a, path, number)
            b = None
            if index_b is not None:
                b = _check_text(_field(row, index_b, text_b, path, number), text_b, path, number)
            value = None
            if index_label is not None:
                value = _field(row, index_label, label, path, number).strip()
                if not value:
                    raise DataFormatError(f"empty label in column {label!r}", path, number)
            example_id = _field(row, index_guid, guid, path, number) if index_guid is not None else f"{path}:{number}"
            return TextExample(a, b, value, path, number, example_id)

        collector.add(make)
    return collector.result()


def _read_jsonl(
    path: str, *, text_a: str, text_b: Optional[str], label: Optional[str], guid: Optional[str], on_error: str
) -> List[TextExample]:
    collector = _Collector(path, on_error)
    lines = read_text(path).split("\n")
    if lines and lines[-1].strip() == "":
        lines.pop()

    def text_of(record, column, number):
        if column not in record:
            raise MissingColumnError(column, list(record), path, number, what="key")
        value = record[column]
        if not isinstance(value, str):
            raise DataFormatError(f"{column!r} must be a string, got {type(value).__name__}", path, number)
        return _check_text(value, column, path, number)

    for number, line in enumerate(lines, 1):
        def make(number=number, line=line):
            if not line.strip():
                raise DataFormatError("empty line", path, number)
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                raise DataFormatError(f"not valid JSON: {e.msg} (column {e.colno})", path, number) from None
            if not isinstance(record, dict):
                raise DataFormatError(f"expected a JSON object, got {type(record).__name__}", path, number)
            a = text_of(record, text_a, number)
            b = text_of(record, text_b, number) if text_b is not None else None
            value = None
            if label is not None:
                if label not in record:
                    raise MissingColumnError(label, list(record), path, number, what="key")
                raw = record[label]
                if isinstance(raw, bool) or not isinstance(raw, (str, int, float)):
                    raise DataFormatError(
                        f"label {label!r} must be a string or a number, got {json.dumps(raw)}", path, number
                    )
                value = str(raw).strip()
                if not value:
                    raise DataFormatError(f"empty label in {label!r}", path, number)
            example_id = str(record.get(guid, f"{path}:{number}")) if guid else f"{path}:{number}"
            return TextExample(a, b, value, path, number, example_id)

        collector.add(make)
    return collector.result()


# --- public readers ------------------------------------------------------------------------------


def read_table(
    path: str,
    *,
    text_column: str,
    text_b_column: Optional[str] = None,
    label_column: Optional[str] = None,
    id_column: Optional[str] = None,
    table_format: Optional[str] = None,
    tsv_quoting: str = "csv",
    on_error: str = "raise",
) -> List[TextExample]:
    """Examples from a TSV / CSV file with a header, or a JSONL file of objects.

    Args:
        path: The file.
        text_column: Column (key) of the text.
        text_b_column: Column of the second text, for pair tasks.
        label_column: Column of the label; None for unlabelled data (prediction).
        id_column: Column of an example id (default `file:line`).
        table_format: "tsv", "csv" or "jsonl"; default from the extension.
        tsv_quoting: "csv" (default): a TSV field may be quoted as Python's `csv` / pandas write
            it (so it can hold tabs and newlines); "none": quotes are literal text and every line
            is one row (the GLUE files).
        on_error: "raise" (default) or "skip" malformed rows (logged with their line).

    Returns:
        The examples, in file order.

    Raises:
        DataFormatError: For malformed input, naming the file and line.
    """
    path = os.fspath(path)
    kind = detect_format(path, table_format)
    if kind == "jsonl":
        return _read_jsonl(path, text_a=text_column, text_b=text_b_column, label=label_column, guid=id_column, on_error=on_error)
    if tsv_quoting not in TSV_QUOTING:
        raise ValueError(f"tsv_quoting must be 'csv' or 'none', got {tsv_quoting!r}")
    if kind == "csv":
        rows = _csv_rows(path)
    else:
        rows = _csv_rows(path, "\t") if tsv_quoting == "csv" else _tsv_rows(path)
    return _read_delimited(
        path, rows, text_a=text_column, text_b=text_b_column, label=label_column, guid=id_column,
        has_header=True, on_error=on_error,
    )


def glue_split_file(task: str, data_dir: str, split: str) -> str:
    """The path of `split` ("train", "dev", "dev_matched", "test", ...) of a GLUE task."""
    layout = glue_layout(task)
    if split == "train":
        name = layout.train_file
    elif split in layout.dev_files:
        name = layout.dev_files[split]
    elif split in layout.test_files:
        name = layout.test_files[split]
    elif split == "dev" and layout.dev_files:
        name = next(iter(layout.dev_files.values()))
    elif split == "test" and layout.test_files:
        name = next(iter(layout.test_files.values()))
    else:
        raise ValueError(f"{layout.name} has no split {split!r}; splits: {', '.join(layout.splits)}")
    return os.path.join(os.fspath(data_dir), name)


def read_glue_split(task: str, data_dir: str, split: str, on_error: str = "raise") -> List[TextExample]:
    """Examples of one split of a GLUE task from its standard file in `data_dir`.

    `split` is "train", "dev" (MNLI: "dev_matched"; "dev_mismatched"), or "test" ("test_matched",
    "test_mismatched"); test examples have no label and take the file's id column as `guid`.

    Raises:
        DataFormatError: A missing or malformed file (naming the file and line).
    """
    layout = glue_layout(task)
    path = glue_split_file(task, data_dir, split)
    is_test = split.startswith("test")
    if is_test:
        return _read_delimited(
            path, _tsv_rows(path), text_a=layout.test_text_a, text_b=layout.test_text_b, label=None,
            guid=layout.test_id, has_header=True, on_error=on_error,
        )
    return _read_delimited(
        path, _tsv_rows(path), text_a=layout.text_a, text_b=layout.text_b, label=layout.label, guid=None,
        has_header=layout.has_header, on_error=on_error,
    )


def find_split_file(data_dir: str, split: str) -> str:
    """The file of `split` in a generic data directory: `SPLIT.tsv|csv|jsonl` (dev also as
    `validation`, `valid` or `val`).

    Raises:
        DataFormatError: When there is none, or several candidates.
    """
    data_dir = os.fspath(data_dir)
    names = SPLIT_ALIASES.get(split, (split,))
    candidates = [
        os.path.join(data_dir, f"{name}{extension}")
        for name in names
        for extension in (".tsv", ".csv", ".jsonl")
        if os.path.isfile(os.path.join(data_dir, f"{name}{extension}"))
    ]
    if not candidates:
        tried = ", ".join(f"{n}.{{tsv,csv,jsonl}}" for n in names)
        raise DataFormatError(f"no {split} file in {data_dir} (looked for {tried})")
    if len(candidates) > 1:
        raise DataFormatError(f"several {split} files in {data_dir}: {', '.join(map(os.path.basename, candidates))}")
    return candidates[0]


# --- labels --------------------------------------------------------------------------------------


def _label_sort_key(label: str):
    try:
        return (0, float(label), label)
    except ValueError:
        return (1, 0.0, label)


class LabelVocab:
    """The label list of a classification task: label string <-> id (its position in the list).

    Args:
        labels: The labels in id order (non-empty, unique, non-empty strings).
    """

    def __init__(self, labels: Sequence[str]):
        labels = [str(label) for label in labels]
        if not labels:
            raise ValueError("a label list must not be empty")
        if any(not label.strip() for label in labels):
            raise ValueError(f"labels must be non-empty strings, got {labels!r}")
        duplicates = sorted({label for label in labels if labels.count(label) > 1})
        if duplicates:
            raise ValueError(f"duplicate labels {duplicates}")
        self.labels: Tuple[str, ...] = tuple(labels)
        self._ids = {label: i for i, label in enumerate(labels)}

    @classmethod
    def from_examples(cls, examples: Sequence[TextExample]) -> "LabelVocab":
        """The labels found in `examples`, sorted (numerically when they are all numbers)."""
        found = {e.label for e in examples if e.label is not None}
        if not found:
            raise ValueError("the examples have no labels")
        return cls(sorted(found, key=_label_sort_key))

    def __len__(self) -> int:
        return len(self.labels)

    def __contains__(self, label) -> bool:
        return label in self._ids

    def __eq__(self, other) -> bool:
        return isinstance(other, LabelVocab) and other.labels == self.labels

    def __repr__(self) -> str:
        return f"LabelVocab({list(self.labels)!r})"

    def id_of(self, example: TextExample) -> int:
        """The id of `example.label`.

        Raises:
            DataFormatError: Unlabelled example or unknown label (naming its file and line).
        """
        if example.label is None:
            raise DataFormatError("example has no label", example.source, example.line)
        try:
            return self._ids[example.label]
        except KeyError:
            raise DataFormatError(
                f"unknown label {example.label!r}; the task's labels are {', '.join(self.labels)}",
                example.source,
                example.line,
            ) from None

    def label_of(self, label_id: int) -> str:
        return self.labels[int(label_id)]


def regression_target(example: TextExample) -> float:
    """`example.label` as a float (a regression task's target).

    Raises:
        DataFormatError: Unlabelled example, or a label that is not a finite number.
    """
    if example.label is None:
        raise DataFormatError("example has no label", example.source, example.line)
    try:
        value = float(example.label)
    except ValueError:
        raise DataFormatError(f"label {example.label!r} is not a number", example.source, example.line) from None
    if value != value or value in (float("inf"), float("-inf")):
        raise DataFormatError(f"label {example.label!r} is not a finite number", example.source, example.line)
    return value


# --- features ------------------------------------------------------------------------------------


def encode_examples(
    examples: Sequence[TextExample],
    tokenizer,
    *,
    seq_length: int,
    label_vocab: Optional[LabelVocab] = None,
    regression: bool = False,
    with_labels: bool = True,
) -> Dict[str, np.ndarray]:
    """Tokenizes and packs examples the original way (`[CLS] a [SEP] b [SEP]`, pair truncation).

    Args:
        examples: The examples.
        tokenizer: A `SentencePieceTokenizer` or `WordPieceTokenizer` (anything with
            `encode_inputs(text_a, text_b, seq_length=...)`).
        seq_length: The model's sequence length.
        label_vocab: The label list of a classification task.
        regression: Labels are float targets (no `label_vocab`).
        with_labels: Add `labels` (int32 ids, or float32 targets); False for prediction.

    Returns:
        int32 arrays `input_ids`, `input_mask`, `segment_ids` [n, seq_length], and `labels` [n].

    Raises:
        DataFormatError: An unknown label or non-numeric target, naming the example's file and line.
        ValueError: Empty `examples`, or labels requested without a way to encode them.
    """
    if not examples:
        raise ValueError("no examples to encode")
    if with_labels and not regression and label_vocab is None:
        raise ValueError("classification labels need a label_vocab")
    columns: Dict[str, List] = {name: [] for name in FEATURE_NAMES}
    labels: List = []
    for example in examples:
        packed = tokenizer.encode_inputs(example.text_a, example.text_b, seq_length=seq_length)
        for name in FEATURE_NAMES:
            columns[name].append(packed[name])
        if with_labels:
            labels.append(regression_target(example) if regression else label_vocab.id_of(example))
    features = {name: np.asarray(values, dtype=np.int32) for name, values in columns.items()}
    if with_labels:
        features["labels"] = np.asarray(labels, dtype=np.float32 if regression else np.int32)
    return features


# Above this size the features go through a TFRecord file instead of in-memory tensors: a
# `from_tensor_slices` dataset embeds its arrays in the dataset graph, which cannot exceed the
# 2 GB protobuf limit when a distribution strategy serializes it (GLUE's MNLI at length 512 is
# 2.4 GB of int32 features).
DEFAULT_MAX_IN_MEMORY_BYTES = 512 * 1024 * 1024


def write_features_tfrecord(features: Dict[str, np.ndarray], path: str) -> Dict[str, Dict[str, Any]]:
    """Writes encoded features (one tf.Example per row) to the TFRecord file `path`.

    Returns:
        The layout `{name: {"shape": [...], "dtype": "int32"|"float32"}}` that
        `features_tfrecord_dataset` needs to read the file back with the same shapes and dtypes.
    """
    import tensorflow as tf

    names = sorted(features)
    count = len(features[names[0]])
    with tf.io.TFRecordWriter(path) as writer:
        for i in range(count):
            feature = {}
            for name in names:
                value = features[name][i].reshape(-1)
                if np.issubdtype(value.dtype, np.floating):
                    feature[name] = tf.train.Feature(float_list=tf.train.FloatList(value=value))
                else:
                    feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=value))
            writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    return {name: {"shape": list(features[name].shape[1:]), "dtype": np.dtype(features[name].dtype).name} for name in names}


def features_tfrecord_dataset(paths, layout: Dict[str, Dict[str, Any]], count: Optional[int] = None):
    """An unbatched dataset of the feature dicts `write_features_tfrecord` wrote (in file order)."""
    import tensorflow as tf

    spec = {
        name: tf.io.FixedLenFeature(entry["shape"], tf.float32 if entry["dtype"].startswith("float") else tf.int64)
        for name, entry in layout.items()
    }
    dtypes = {name: tf.as_dtype(entry["dtype"]) for name, entry in layout.items()}

    def parse(record):
        parsed = tf.io.parse_single_example(record, spec)
        return {name: tf.cast(parsed[name], dtypes[name]) for name in layout}

    dataset = tf.data.TFRecordDataset(paths).map(parse, num_parallel_calls=tf.data.AUTOTUNE)
    return dataset if count is None else dataset.apply(tf.data.experimental.assert_cardinality(count))


def _spill_to_tfrecord(features: Dict[str, np.ndarray], directory: Optional[str]):
    import atexit
    import shutil
    import tempfile

    if directory is None:
        directory = tempfile.mkdtemp(prefix="albert_features_")
        atexit.register(shutil.rmtree, directory, True)
    path = os.path.join(directory, f"features-{uuid.uuid4().hex}.tfrecord")
    layout = write_features_tfrecord(features, path)
    return features_tfrecord_dataset(path, layout, count=len(next(iter(features.values()))))


def examples_dataset(
    features: Dict[str, np.ndarray],
    *,
    max_in_memory_bytes: int = DEFAULT_MAX_IN_MEMORY_BYTES,
    spill_dir: Optional[str] = None,
):
    """An unbatched `tf.data.Dataset` of feature dicts (in file order, with a known length).

    Small feature sets are sliced from memory; larger ones (over `max_in_memory_bytes`) are
    written once to a TFRecord file in `spill_dir` (default: a temporary directory removed at
    exit) and read from there, which works under every distribution strategy.
    """
    import tensorflow as tf

    lengths = {len(v) for v in features.values()}
    if len(lengths) != 1 or not lengths.pop():
        raise ValueError("features must be non-empty arrays of one common length")
    if sum(np.asarray(v).nbytes for v in features.values()) <= max_in_memory_bytes:
        return tf.data.Dataset.from_tensor_slices(dict(features))
    return _spill_to_tfrecord({k: np.asarray(v) for k, v in features.items()}, spill_dir)
