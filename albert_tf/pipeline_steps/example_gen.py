"""ExampleGen: raw corpus and labelled files -> `train` / `eval` splits as TFRecords of tf.Examples.

Output layout (TFX's ExampleGen layout, one folder per split)::

    corpus/Split-train/documents.tfrecord     features text (the document, paragraphs on lines), source
    corpus/Split-eval/documents.tfrecord
    examples/Split-train/examples.tfrecord    features text (, text_b), label
    examples/Split-eval/examples.tfrecord
    summary.json                              counts, sources, the split rule; for the examples
                                              also `bad_rows` (below)

Corpus documents are split by a hash of their file name (a document never changes split when
others are added); labelled data uses its own `dev` file as the eval split. Every input is read
in full and checked before anything is written: malformed text (not in `encoding`, binary, an
empty file) stops the step in one line naming the file and line (for an encoding, also the byte
offset and an `encoding:` that reads the file).

Bad rows of the task tables do not stop it (TFX's way: ExampleGen ingests, the ExampleValidator
judges): every readable row is ingested, and a row that cannot be used (an empty or missing text,
a missing or unparsable label, undecodable bytes, an unparsable row) is left out of the examples
and counted per split and per reason in the summary's `bad_rows`::

    {"train": {"rows": 240, "bad": 1, "reasons": [{"reason": "empty_text", "feature": "text",
               "count": 1, "first": "/data/train.tsv:200", "message": "..."}]}, "eval": {...}}

(`feature`: the example feature the rows lack; null for an unparsable row, which lacks them all.)
StatisticsGen puts them into the statistics (`data_validation.statistics.account_bad_rows`), and
the ExampleValidator judges them against the schema's presence and the `on_error` setting.
"""

from __future__ import annotations

import glob
import hashlib
import os
from typing import Dict, List, Optional, Sequence

from albert_tf.pipeline_steps.staging import staged_directory, write_summary

SPLITS = ("train", "eval")
CORPUS_FILE = "documents.tfrecord"
EXAMPLES_FILE = "examples.tfrecord"
TEXT_FEATURE = "text"
TEXT_B_FEATURE = "text_b"
LABEL_FEATURE = "label"
SOURCE_FEATURE = "source"


def split_dir(root: str, split: str) -> str:
    """The folder of `split` in an ExampleGen output (TFX names them `Split-<name>`)."""
    return os.path.join(root, f"Split-{split}")


def expand_corpus(patterns: str) -> List[str]:
    """The files matching comma-separated globs, sorted; FileNotFoundError naming an empty pattern."""
    files: List[str] = []
    for pattern in [p.strip() for p in patterns.split(",") if p.strip()]:
        matched = sorted(glob.glob(pattern))
        if not matched:
            raise FileNotFoundError(f"the corpus pattern {pattern!r} matches no file")
        files.extend(matched)
    if not files:
        raise FileNotFoundError("no corpus files given")
    return sorted(set(files))


def corpus_split(path: str, eval_fraction: float) -> str:
    """"eval" for the documents whose file-name hash falls in the first `eval_fraction`, else "train"."""
    digest = hashlib.sha256(os.path.basename(path).encode("utf-8")).digest()
    return "eval" if int.from_bytes(digest[:8], "big") / 2**64 < eval_fraction else "train"


def _read_document(path: str, encoding: str = "utf-8") -> str:
    """The file's text as written (blank lines separate documents within it), after the checks
    the pretraining reader makes (`encoding`, no binary data, not empty), which name file and line."""
    import io

    from albert_tf.data.documents import MalformedInputError, read_documents
    from albert_tf.data.tables import read_text

    # Not in `encoding`: one line with the byte offset and an encoding that reads the file.
    text = read_text(path, encoding)
    opener = None if encoding == "utf-8" else (lambda p: io.BytesIO(text.encode("utf-8")))
    if not any(True for _ in read_documents(path, input_format="paragraphs", opener=opener)):
        raise MalformedInputError(path, None, "the file holds no text")
    if encoding == "utf-8":
        with open(path, "rb") as f:
            text = f.read().decode("utf-8")
    return "\n".join(line.rstrip("\r") for line in text.strip("\n").split("\n"))


def _write_examples(path: str, rows: Sequence[Dict[str, str]]) -> None:
    # Written and read without TensorFlow: the data steps that need nothing else of it start seconds
    # sooner (TensorFlow reads these files as it wrote them: tests/pipeline_steps/test_pipeline_steps.py).
    from albert_tf.data.tfrecords import frame_record
    from albert_tf.data_validation.records import serialize_bytes_example

    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        for row in rows:
            features = {k: [v.encode("utf-8")] for k, v in row.items() if v is not None}
            f.write(frame_record(serialize_bytes_example(features)))


def read_examples(path: str) -> List[Dict[str, str]]:
    """The string features of every tf.Example in a TFRecord file, in order."""
    from albert_tf.data.tfrecords import read_records
    from albert_tf.data_validation.records import bytes_features

    return [{k: v[0].decode("utf-8") for k, v in bytes_features(record).items() if v} for record in read_records(path)]


def read_split(root: str, split: str, file_name: str = EXAMPLES_FILE) -> List[Dict[str, str]]:
    return read_examples(os.path.join(split_dir(root, split), file_name))


def _corpus_rows(files: Sequence[str], eval_fraction: float, encoding: str = "utf-8") -> Dict[str, List[Dict[str, str]]]:
    rows: Dict[str, List[Dict[str, str]]] = {s: [] for s in SPLITS}
    for path in files:
        rows[corpus_split(path, eval_fraction)].append(
            {TEXT_FEATURE: _read_document(path, encoding), SOURCE_FEATURE: os.path.basename(path)})
    if not rows["train"]:
        # Tiny corpora: keep at least one training document (the eval split may then be empty).
        rows["train"], rows["eval"] = rows["eval"][:1], rows["eval"][1:]
    if not rows["eval"] and len(rows["train"]) > 1:
        rows["eval"].append(rows["train"].pop())
    return rows


def count_bad_rows(rejected: Sequence, rows: int, features: Dict[str, str]) -> Dict[str, object]:
    """The `bad_rows` entry of one split: the rows read, the bad ones, and per (reason, feature)
    their count and the first one's `file:line` and message, in the order first seen.

    Args:
        rejected: The skipped rows' `DataFormatError`s (`tables.read_table(..., rejected=)`).
        rows: The usable rows.
        features: {column: example feature} of the table's columns.
    """
    groups: Dict[tuple, Dict[str, object]] = {}
    for error in rejected:
        feature = features.get(error.column) if error.reason != "malformed_row" else None
        key = (error.reason, feature)
        if key not in groups:
            groups[key] = {"reason": error.reason, "feature": feature, "count": 0,
                           "first": f"{error.path}:{error.line}", "message": str(error)}
        groups[key]["count"] += 1
    return {"rows": rows + len(rejected), "bad": len(rejected), "reasons": list(groups.values())}


def merge_bad_rows(first: Dict[str, object], later: Dict[str, object]) -> Dict[str, object]:
    """Two spans' `bad_rows` entries of one split as one (the first occurrence kept)."""
    reasons = [dict(r) for r in first["reasons"]]
    for entry in later["reasons"]:
        same = next((r for r in reasons if (r["reason"], r["feature"]) == (entry["reason"], entry["feature"])), None)
        if same is None:
            reasons.append(dict(entry))
        else:
            same["count"] += entry["count"]
    return {"rows": first["rows"] + later["rows"], "bad": first["bad"] + later["bad"], "reasons": reasons}


def _task_rows(task_data: str, text_column: str, text_b_column: Optional[str], label_column: str, encoding: str = "utf-8"):
    from albert_tf.data.tables import find_split_file, read_table

    if not os.path.isdir(task_data):
        raise FileNotFoundError(f"task_data is not a directory: {task_data}")
    columns = {text_column: TEXT_FEATURE, label_column: LABEL_FEATURE}
    if text_b_column is not None:
        columns[text_b_column] = TEXT_B_FEATURE
    rows, sources, bad = {}, {}, {}
    for split, name in (("train", "train"), ("eval", "dev")):
        path = find_split_file(task_data, name)
        rejected: list = []
        # Bad rows are left out and counted (the ExampleValidator judges them); an unreadable
        # file, or one without a usable row, stops the step.
        examples = read_table(path, text_column=text_column, text_b_column=text_b_column, label_column=label_column,
                              on_error="skip", encoding=encoding, rejected=rejected)
        rows[split] = [{TEXT_FEATURE: e.text_a, TEXT_B_FEATURE: e.text_b, LABEL_FEATURE: e.label} for e in examples]
        sources[split] = path
        bad[split] = count_bad_rows(rejected, len(examples), columns)
    return rows, sources, bad


def run_example_gen(
    corpus: str,
    task_data: str,
    corpus_output: str,
    examples_output: str,
    *,
    text_column: str = "text",
    text_b_column: Optional[str] = None,
    label_column: str = "label",
    eval_fraction: float = 0.1,
    span: int = -1,
    num_spans: int = 1,
    encoding: str = "utf-8",
) -> Dict[str, Dict[str, int]]:
    """Writes the corpus and the labelled examples as train/eval TFRecord splits.

    `task_data` may hold TFX's `{SPAN}` (and `{VERSION}`): the latest span is read, or `span`
    when it is not -1, and with `num_spans` > 1 the spans before it too (`spans.resolve_spans`);
    the examples' summary records which. Every file is read as `encoding` (a Python codec name).
    Bad rows of the task tables are left out and counted (the module's docstring).

    Returns:
        {"corpus": {split: documents}, "examples": {split: examples}, "span": {"span": n, "version": v},
        "bad_rows": {split: {"rows", "bad", "reasons"}}}.

    Raises:
        FileNotFoundError: a corpus pattern matching nothing, a missing task directory or split file.
        EncodingError: a file not in `encoding`: the file, line, byte offset and an encoding that reads it.
        MalformedInputError / DataFormatError: unreadable input, with the file and line.
    """
    from albert_tf.data.tables import check_encoding
    from albert_tf.pipeline_steps.spans import resolve_spans

    check_encoding(encoding)
    spans = resolve_spans(task_data, span, num_spans)
    files = expand_corpus(corpus)
    corpus_rows = _corpus_rows(files, eval_fraction, encoding)
    task_rows, sources, bad_rows = _task_rows(spans[0].path, text_column, text_b_column, label_column, encoding)
    for later in spans[1:]:
        rows, paths, bad = _task_rows(later.path, text_column, text_b_column, label_column, encoding)
        for split in SPLITS:
            task_rows[split] += rows[split]
            sources[split] += "," + paths[split]
            bad_rows[split] = merge_bad_rows(bad_rows[split], bad[split])
    resolved = spans[-1]
    counts = {"corpus": {s: len(corpus_rows[s]) for s in SPLITS}, "examples": {s: len(task_rows[s]) for s in SPLITS}}
    with staged_directory(corpus_output) as staging:
        for split in SPLITS:
            _write_examples(os.path.join(split_dir(staging, split), CORPUS_FILE), corpus_rows[split])
        write_summary(staging, {
            "counts": counts["corpus"], "files": {s: [r[SOURCE_FEATURE] for r in corpus_rows[s]] for s in SPLITS},
            "split_rule": f"sha256(file name) < {eval_fraction} -> eval",
        })
    with staged_directory(examples_output) as staging:
        for split in SPLITS:
            _write_examples(os.path.join(split_dir(staging, split), EXAMPLES_FILE), task_rows[split])
        labels = sorted({r[LABEL_FEATURE] for r in task_rows["train"]})
        write_summary(staging, {
            "counts": counts["examples"], "sources": sources, "labels": labels, "pair": text_b_column is not None,
            "span": resolved.span, "version": resolved.version, "spans": [s.span for s in spans],
            "encoding": encoding, "bad_rows": bad_rows,
        })
    return {**counts, "span": {"span": resolved.span, "version": resolved.version}, "bad_rows": bad_rows}
