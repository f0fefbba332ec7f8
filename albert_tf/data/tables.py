"""Task tables: TSV / CSV / JSONL files of labelled (or unlabelled) texts, read into `TextExample`s,
and the split files of a data directory.

A table is a `.tsv` / `.csv` file with a header (fields quoted the CSV way where needed, as
Python's `csv` and pandas write them; `tsv_quoting="none"` reads a TSV whose quotes are literal),
or a `.jsonl` file of objects, with the text in `text_column`, an optional second text in
`text_b_column` and the label in `label_column`; the splits of a data directory are `train.*`,
`dev.*` (or `validation.*`) and `test.*` (`find_split_file`). `detect_file_format` tells a
file's format from the file itself (its extension, else its first line), so that data read after
training need not be in the training files' format.

Every reader reports bad input as `DataFormatError` naming the file and line: invalid UTF-8, a row
with too few columns, a header without a needed column, an empty text, an empty line in the middle
of a file, a JSON line that is not an object. Classification, regression, tagging, distillation
and the pipeline's steps all read their tables here.

Files in another encoding are read with `encoding=` (any Python codec: "gbk", "cp1252", ...). A
file that is not in its encoding is `EncodingError`, one line naming the file, the line, the byte
offset and an encoding that reads the whole file where one of the common ones does. With
`on_error="skip"`, a file whose lines outside ASCII are mostly valid in its encoding keeps its
rows, and a row whose used fields hold invalid bytes is a bad row like any other; each bad row's
error carries its `reason` (`BAD_ROW_REASONS`) and `column`, and `read_table(..., rejected=[])`
collects them (the pipeline's ExampleGen counts them per reason).
"""

from __future__ import annotations

import codecs
import csv
import dataclasses
import io
import json
import logging
import os
from typing import Iterator, List, Optional, Sequence, Tuple, Union

logger = logging.getLogger(__name__)

ColumnRef = Union[str, int]
TABLE_FORMATS = ("tsv", "csv", "jsonl")
TSV_QUOTING = ("csv", "none")
_EXTENSIONS = {".tsv": "tsv", ".txt": "tsv", ".csv": "csv", ".jsonl": "jsonl", ".json": "jsonl"}
SPLIT_ALIASES = {"train": ("train",), "dev": ("dev", "validation", "valid", "val"), "test": ("test",)}
ON_ERROR = ("raise", "skip")
# Why a row cannot be used (`DataFormatError.reason`), and how messages name each reason.
BAD_ROW_REASONS = {
    "empty_text": "empty or missing text",
    "bad_label": "missing or unparsable label",
    "undecodable": "undecodable bytes",
    "malformed_row": "unparsable row",
}
# Tried in order when a file is not in the encoding it is read with: the first that decodes it
# all is named in the error (UTF-16 is told by its byte-order mark).
_CANDIDATE_ENCODINGS = ("utf-8", "gbk", "big5", "shift_jis", "euc-kr", "cp1252")


class DataFormatError(ValueError):
    """Malformed task data; the message starts with `file:line:`."""

    def __init__(self, message: str, path: Optional[str] = None, line: Optional[int] = None,
                 reason: str = "malformed_row", column: Optional[ColumnRef] = None):
        where = f"{path}:{line}: " if path is not None and line is not None else (f"{path}: " if path else "")
        super().__init__(where + message)
        self.path = path
        self.line = line
        self.reason = reason  # a key of BAD_ROW_REASONS when the error is one row's
        self.column = column  # the column at fault, None for the whole row


class EncodingError(DataFormatError):
    """A file that is not in the encoding it is read with.

    Attributes:
        offset: The byte offset (from 0) of the first byte that does not decode.
        encoding: The encoding it was read with.
        readable_as: An encoding that decodes the whole file, or None when none of the common
            ones does.
    """

    def __init__(self, path: str, line: int, offset: int, encoding: str, bad: bytes, readable_as: Optional[str]):
        hint = (f"it reads as {readable_as}: set encoding: {readable_as}" if readable_as
                else "set encoding: to the file's encoding (e.g. encoding: cp1252)")
        super().__init__(f"not valid {_encoding_name(encoding)} at byte {offset} ({bad!r}); {hint}", path, line,
                         reason="undecodable")
        self.offset = offset
        self.encoding = encoding
        self.readable_as = readable_as


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


def _encoding_name(encoding: str) -> str:
    return "UTF-8" if codecs.lookup(encoding).name == "utf-8" else encoding


def check_encoding(encoding: str) -> str:
    """`encoding` if Python has a codec of that name; else `ValueError` naming it."""
    try:
        codecs.lookup(encoding)
    except (LookupError, TypeError):
        raise ValueError(f"unknown encoding {encoding!r} (a Python codec name: utf-8, gbk, cp1252, ...)") from None
    return encoding


def readable_as(data: bytes, exclude: str = "") -> Optional[str]:
    """The first common encoding that decodes all of `data` (other than `exclude`), or None."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "utf-16"
    skip = codecs.lookup(exclude).name if exclude else ""
    for candidate in _CANDIDATE_ENCODINGS:
        if codecs.lookup(candidate).name == skip:
            continue
        try:
            data.decode(candidate)
        except UnicodeDecodeError:
            continue
        return candidate
    return None


def _mostly_other_encoding(data: bytes, encoding: str) -> bool:
    """True when most of the lines holding non-ASCII bytes do not decode in `encoding`: the file
    is in another encoding, rather than in this one with a few damaged rows."""
    valid = invalid = 0
    for line in data.split(b"\n"):
        if not any(b > 0x7F for b in line):
            continue
        try:
            line.decode(encoding)
            valid += 1
        except UnicodeDecodeError:
            invalid += 1
    return invalid >= valid


def _undecodable(value: str) -> bool:
    """True when `value` holds bytes kept undecoded (`surrogateescape`)."""
    return any("\udc80" <= ch <= "\udcff" for ch in value)


def read_text(path: str, encoding: str = "utf-8", undecodable: str = "raise") -> str:
    """The file decoded strictly as `encoding` (UTF-8 by default; a BOM is dropped).

    Args:
        path: The file.
        encoding: A Python codec name.
        undecodable: "raise" (default): bytes that do not decode raise `EncodingError`. "keep":
            a file whose non-ASCII lines are mostly valid keeps its invalid bytes as lone
            surrogates (`surrogateescape`) for the row readers to find; a file mostly in another
            encoding still raises.

    Raises:
        EncodingError: naming the file, the line, the byte offset and an encoding that reads it.
        DataFormatError: a missing file or a directory.
    """
    path = os.fspath(path)
    check_encoding(encoding)
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
        text = data.decode(encoding)
    except UnicodeDecodeError as e:
        if undecodable == "raise" or _mostly_other_encoding(data, encoding):
            line = data[: e.start].count(b"\n") + 1
            raise EncodingError(path, line, e.start, encoding, data[e.start:e.end], readable_as(data, encoding)) from None
        text = data.decode(encoding, errors="surrogateescape")
    return text[1:] if text.startswith("\ufeff") else text


def tsv_rows(path: str, encoding: str = "utf-8", skip: bool = False) -> Iterator[Tuple[int, List[str]]]:
    """`(line_number, fields)` of a tab-separated file without quote processing.

    A last empty line (a final newline) is fine; an empty line elsewhere is an error (with
    `skip`: yielded, for the row reader to count; undecodable bytes are then kept too).
    """
    lines = read_text(path, encoding, "keep" if skip else "raise").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for number, line in enumerate(lines, 1):
        line = line.rstrip("\r")
        if not line.strip() and not skip:
            raise DataFormatError("empty line", path, number)
        yield number, line.split("\t")


def _csv_rows(path: str, delimiter: str = ",", encoding: str = "utf-8", skip: bool = False) -> Iterator[Tuple[int, List[str]]]:
    """`(line_number, fields)` of a delimited file with standard CSV quoting (a quoted field may
    hold delimiters, doubled quotes and newlines), as Python's `csv` and pandas write it. With
    `skip`, empty rows are yielded (for the row reader to count) and undecodable bytes kept."""
    text = read_text(path, encoding, "keep" if skip else "raise")
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)
    start = 1
    try:
        for row in reader:
            if (not row or not any(field.strip() for field in row)) and not skip:
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


def _field(row: List[str], index: int, column: ColumnRef, path: str, line: int, reason: str = "malformed_row") -> str:
    if index >= len(row):
        raise DataFormatError(
            f"expected at least {index + 1} columns (for column {column!r}), found {len(row)}", path, line,
            reason=reason, column=column,
        )
    return row[index]


def _check_decoded(value: str, column: ColumnRef, path: str, line: int) -> str:
    if _undecodable(value):
        raise DataFormatError(f"undecodable bytes in column {column!r}", path, line, reason="undecodable", column=column)
    return value


def _check_text(text: str, column: ColumnRef, path: str, line: int) -> str:
    _check_decoded(text, column, path, line)
    if not text.strip():
        raise DataFormatError(f"empty text in column {column!r}", path, line, reason="empty_text", column=column)
    return text


def _check_on_error(on_error: str) -> None:
    if on_error not in ON_ERROR:
        raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")


class _Collector:
    """Collects examples; with on_error="skip" a bad row is logged and left out instead (and its
    error appended to `rejected` when given)."""

    def __init__(self, path: str, on_error: str, rejected: Optional[List[DataFormatError]] = None):
        _check_on_error(on_error)
        self.path = path
        self.on_error = on_error
        self.examples: List[TextExample] = []
        self.skipped = 0
        self.first: Optional[DataFormatError] = None
        self.rejected = rejected

    def add(self, make) -> None:
        try:
            self.examples.append(make())
        except DataFormatError as e:
            if self.on_error == "raise":
                raise
            self.skipped += 1
            self.first = self.first or e
            if self.rejected is not None:
                self.rejected.append(e)
            if self.skipped <= 5:
                logger.warning("skipping: %s", e)

    def result(self) -> List[TextExample]:
        if self.skipped:
            logger.warning("%s: skipped %d malformed row(s)", self.path, self.skipped)
        if not self.examples:
            skipped = f" ({self.skipped} malformed row(s) skipped, the first: {self.first})" if self.skipped else ""
            raise DataFormatError("no examples" + skipped, self.path)
        return self.examples


def read_delimited(
    path: str,
    rows: Iterator[Tuple[int, List[str]]],
    *,
    text_a: ColumnRef,
    text_b: Optional[ColumnRef],
    label: Optional[ColumnRef],
    guid: Optional[ColumnRef],
    has_header: bool,
    on_error: str,
    rejected: Optional[List[DataFormatError]] = None,
) -> List[TextExample]:
    collector = _Collector(path, on_error, rejected)
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
            if not any(field.strip() for field in row):  # only yielded when skipping
                raise DataFormatError("empty row", path, number)
            a = _check_text(_field(row, index_a, text_a, path, number, "empty_text"), text_a, path, number)
            b = None
            if index_b is not None:
                b = _check_text(_field(row, index_b, text_b, path, number, "empty_text"), text_b, path, number)
            value = None
            if index_label is not None:
                value = _check_decoded(_field(row, index_label, label, path, number, "bad_label"), label, path, number).strip()
                if not value:
                    raise DataFormatError(f"empty label in column {label!r}", path, number, reason="bad_label", column=label)
            example_id = _field(row, index_guid, guid, path, number) if index_guid is not None else f"{path}:{number}"
            return TextExample(a, b, value, path, number, example_id)

        collector.add(make)
    return collector.result()


def _read_jsonl(
    path: str, *, text_a: str, text_b: Optional[str], label: Optional[str], guid: Optional[str], on_error: str,
    encoding: str = "utf-8", rejected: Optional[List[DataFormatError]] = None,
) -> List[TextExample]:
    collector = _Collector(path, on_error, rejected)
    lines = read_text(path, encoding, "keep" if on_error == "skip" else "raise").split("\n")
    if lines and lines[-1].strip() == "":
        lines.pop()

    def text_of(record, column, number):
        if column not in record:
            error = MissingColumnError(column, list(record), path, number, what="key")
            error.reason, error.column = "empty_text", column
            raise error
        value = record[column]
        if not isinstance(value, str):
            raise DataFormatError(f"{column!r} must be a string, got {type(value).__name__}", path, number,
                                  reason="empty_text", column=column)
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
                    error = MissingColumnError(label, list(record), path, number, what="key")
                    error.reason, error.column = "bad_label", label
                    raise error
                raw = record[label]
                if isinstance(raw, bool) or not isinstance(raw, (str, int, float)):
                    raise DataFormatError(
                        f"label {label!r} must be a string or a number, got {json.dumps(raw)}", path, number,
                        reason="bad_label", column=label,
                    )
                value = _check_decoded(str(raw), label, path, number).strip()
                if not value:
                    raise DataFormatError(f"empty label in {label!r}", path, number, reason="bad_label", column=label)
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
    encoding: str = "utf-8",
    rejected: Optional[List[DataFormatError]] = None,
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
        on_error: "raise" (default) or "skip" malformed rows (logged with their line). Skipping
            also keeps the rows of a file with a few undecodable rows (see `read_text`).
        encoding: The file's encoding (a Python codec name; default UTF-8).
        rejected: With on_error="skip", receives each skipped row's `DataFormatError` (its
            `reason`, `column`, `path` and `line`).

    Returns:
        The examples, in file order.

    Raises:
        EncodingError: A file not in `encoding`, naming the byte offset and an encoding that reads it.
        DataFormatError: For malformed input, naming the file and line.
    """
    path = os.fspath(path)
    kind = detect_format(path, table_format)
    skip = on_error == "skip"
    if kind == "jsonl":
        return _read_jsonl(path, text_a=text_column, text_b=text_b_column, label=label_column, guid=id_column,
                           on_error=on_error, encoding=encoding, rejected=rejected)
    if tsv_quoting not in TSV_QUOTING:
        raise ValueError(f"tsv_quoting must be 'csv' or 'none', got {tsv_quoting!r}")
    if kind == "csv":
        rows = _csv_rows(path, ",", encoding, skip)
    else:
        rows = _csv_rows(path, "\t", encoding, skip) if tsv_quoting == "csv" else tsv_rows(path, encoding, skip)
    return read_delimited(
        path, rows, text_a=text_column, text_b=text_b_column, label=label_column, guid=id_column,
        has_header=True, on_error=on_error, rejected=rejected,
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
