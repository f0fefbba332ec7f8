"""The texts a bulk inference scores: one text per line (`.txt`), a table's text column (TSV, CSV,
JSONL, read by `albert_tf.data.tables`), or TFRecord files of tf.Examples with a bytes feature
`text` (`.tfrecord`, `.tfrecords`; GZIP-compressed when the name ends in `.gz`, as TFX's
ExampleGen writes them).

Text files and tables are read exactly as `albert-tf predict --input` reads them (the same
readers of the task's family, the same guids), so the answers line up with its output. Every
problem is a one-line `TaskError` naming the file and line or record: a missing file, a missing
column, invalid UTF-8, a record without the feature, no text at all.
"""

from __future__ import annotations

import dataclasses
import os
from typing import List, Optional, Sequence

from albert_tf.data.tables import DataFormatError, detect_file_format, read_table
from albert_tf.tasks.errors import TaskError
from albert_tf.tasks.spec import TaskSpec

TEXT_FEATURE = "text"
TFRECORD_SUFFIXES = (".tfrecord", ".tfrecords", ".tfrecord.gz", ".tfrecords.gz", ".gz")


@dataclasses.dataclass(frozen=True)
class InputText:
    """One text to score.

    Attributes:
        text: The text.
        guid: Its id as `albert-tf predict` writes it in an `index<TAB>prediction` file (the
            table's id, else the line number less one for `.txt`, else the record number).
    """

    text: str
    guid: str


def is_tfrecord(path: str) -> bool:
    return path.lower().endswith(TFRECORD_SUFFIXES)


def expand_input_paths(paths: Sequence[str]) -> List[str]:
    """The input files: each path as given (a glob expands, sorted), in the order given.

    Raises:
        TaskError: No path, or one that matches no file.
    """
    import glob

    files: List[str] = []
    for path in paths:
        path = os.fspath(path)
        if "://" in path:
            import tensorflow as tf

            matched = sorted(tf.io.gfile.glob(path))
        elif any(c in path for c in "*?["):
            matched = sorted(glob.glob(path))
        else:
            matched = [path] if os.path.exists(path) else []
        if not matched:
            raise TaskError(f"input not found: {path}")
        for found in matched:
            if os.path.isdir(found):
                raise TaskError(f"{found} is a directory; give the input files (a glob such as {found}/*.tsv works)")
        files.extend(matched)
    if not files:
        raise TaskError("no input given")
    return files


def _read_tfrecord(path: str) -> List[InputText]:
    import tensorflow as tf

    compression = "GZIP" if path.lower().endswith(".gz") else ""
    texts: List[InputText] = []
    record = 0
    try:
        for serialized in tf.data.TFRecordDataset(path, compression_type=compression).as_numpy_iterator():
            record += 1
            example = tf.train.Example.FromString(serialized)
            feature = example.features.feature.get(TEXT_FEATURE)
            values = feature.bytes_list.value if feature is not None else []
            if len(values) != 1:
                present = ", ".join(sorted(example.features.feature)) or "none"
                raise TaskError(f"{path}: record {record}: needs one bytes feature {TEXT_FEATURE!r} (the record has: {present})")
            try:
                text = values[0].decode("utf-8")
            except UnicodeDecodeError:
                raise TaskError(f"{path}: record {record}: feature {TEXT_FEATURE!r} is not valid UTF-8") from None
            if text.strip():
                texts.append(InputText(text, str(record - 1)))
    except tf.errors.OpError as e:
        message = (e.message or type(e).__name__).splitlines()[0]
        raise TaskError(f"{path}: not a readable TFRecord file after record {record}: {message}") from None
    except Exception as e:  # noqa: BLE001 - a non-Example record fails to parse in protobuf's own type
        if isinstance(e, TaskError):
            raise
        raise TaskError(f"{path}: record {record} is not a tf.Example ({type(e).__name__})") from None
    return texts


def read_file(path: str, spec: TaskSpec, family, text_column: Optional[str] = None) -> List[InputText]:
    """The texts of one input file, for the model of `spec` (its `family`).

    Raises:
        TaskError: The file is missing or malformed (naming file and line or record).
    """
    if is_tfrecord(path):
        return _read_tfrecord(path)
    try:
        if text_column and not path.lower().endswith(".txt"):
            columns = spec.columns or {}
            examples = read_table(path, text_column=text_column,
                                  table_format=detect_file_format(path, columns.get("format")),
                                  tsv_quoting=columns.get("quoting") or "csv")
        else:
            # `albert-tf predict --input`'s own reader: the same texts and guids.
            examples = family.examples_from_file(spec, path)
    except DataFormatError as e:
        raise TaskError(str(e)) from None
    return [InputText(e.text_a, e.guid) for e in examples]


def read_inputs(paths: Sequence[str], spec: TaskSpec, family, text_column: Optional[str] = None) -> List[InputText]:
    """Every text of the input files, in order (files as given, texts in file order).

    Raises:
        TaskError: A missing or malformed file, or no text in any of them.
    """
    texts: List[InputText] = []
    files = expand_input_paths(paths)
    for path in files:
        texts.extend(read_file(path, spec, family, text_column))
    if not texts:
        raise TaskError(f"no text to score in {', '.join(files)}")
    return texts
