"""ExampleGen: raw corpus and labelled files -> `train` / `eval` splits as TFRecords of tf.Examples.

Output layout (TFX's ExampleGen layout, one folder per split)::

    corpus/Split-train/documents.tfrecord     features text (the document, paragraphs on lines), source
    corpus/Split-eval/documents.tfrecord
    examples/Split-train/examples.tfrecord    features text (, text_b), label
    examples/Split-eval/examples.tfrecord
    summary.json                              counts, sources, the split rule

Corpus documents are split by a hash of their file name (a document never changes split when
others are added); labelled data uses its own `dev` file as the eval split. Every input is read
in full and checked before anything is written: malformed text (invalid UTF-8, binary, an empty
file) and malformed rows stop the step with the file and line named.
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


def _read_document(path: str) -> str:
    """The file's text as written (blank lines separate documents within it), after the checks
    the pretraining reader makes (UTF-8, no binary data, not empty), which name file and line."""
    from albert_tf.data.documents import MalformedInputError, read_documents

    if not any(True for _ in read_documents(path, input_format="paragraphs")):
        raise MalformedInputError(path, None, "the file holds no text")
    with open(path, "rb") as f:
        text = f.read().decode("utf-8")
    return "\n".join(line.rstrip("\r") for line in text.strip("\n").split("\n"))


def _bytes_feature(value: str):
    import tensorflow as tf

    return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value.encode("utf-8")]))


def _write_examples(path: str, rows: Sequence[Dict[str, str]]) -> None:
    import tensorflow as tf

    os.makedirs(os.path.dirname(path), exist_ok=True)
    with tf.io.TFRecordWriter(path) as writer:
        for row in rows:
            feature = {k: _bytes_feature(v) for k, v in row.items() if v is not None}
            writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())


def read_examples(path: str) -> List[Dict[str, str]]:
    """The string features of every tf.Example in a TFRecord file, in order."""
    import tensorflow as tf

    rows = []
    for record in tf.data.TFRecordDataset(path).as_numpy_iterator():
        example = tf.train.Example.FromString(record)
        rows.append({k: v.bytes_list.value[0].decode("utf-8") for k, v in example.features.feature.items() if v.bytes_list.value})
    return rows


def read_split(root: str, split: str, file_name: str = EXAMPLES_FILE) -> List[Dict[str, str]]:
    return read_examples(os.path.join(split_dir(root, split), file_name))


def _corpus_rows(files: Sequence[str], eval_fraction: float) -> Dict[str, List[Dict[str, str]]]:
    rows: Dict[str, List[Dict[str, str]]] = {s: [] for s in SPLITS}
    for path in files:
        rows[corpus_split(path, eval_fraction)].append({TEXT_FEATURE: _read_document(path), SOURCE_FEATURE: os.path.basename(path)})
    if not rows["train"]:
        # Tiny corpora: keep at least one training document (the eval split may then be empty).
        rows["train"], rows["eval"] = rows["eval"][:1], rows["eval"][1:]
    if not rows["eval"] and len(rows["train"]) > 1:
        rows["eval"].append(rows["train"].pop())
    return rows


def _task_rows(task_data: str, text_column: str, text_b_column: Optional[str], label_column: str):
    from albert_tf.data.tables import DataFormatError, find_split_file, read_table

    if not os.path.isdir(task_data):
        raise FileNotFoundError(f"task_data is not a directory: {task_data}")
    rows, sources = {}, {}
    for split, name in (("train", "train"), ("eval", "dev")):
        path = find_split_file(task_data, name)
        examples = read_table(path, text_column=text_column, text_b_column=text_b_column, label_column=label_column)
        if not examples:
            raise DataFormatError("the file holds no examples", path)
        missing = [e for e in examples if e.label is None or e.label == ""]
        if missing:
            raise DataFormatError(f"empty {label_column!r} label", missing[0].source, missing[0].line)
        rows[split] = [{TEXT_FEATURE: e.text_a, TEXT_B_FEATURE: e.text_b, LABEL_FEATURE: e.label} for e in examples]
        sources[split] = path
    return rows, sources


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
) -> Dict[str, Dict[str, int]]:
    """Writes the corpus and the labelled examples as train/eval TFRecord splits.

    `task_data` may hold TFX's `{SPAN}` (and `{VERSION}`): the latest span is read, or `span`
    when it is not -1, and with `num_spans` > 1 the spans before it too (`spans.resolve_spans`);
    the examples' summary records which.

    Returns:
        {"corpus": {split: documents}, "examples": {split: examples}, "span": {"span": n, "version": v}}.

    Raises:
        FileNotFoundError: a corpus pattern matching nothing, a missing task directory or split file.
        MalformedInputError / DataFormatError: bad input, with the file and line.
    """
    from albert_tf.pipeline_steps.spans import resolve_spans

    spans = resolve_spans(task_data, span, num_spans)
    files = expand_corpus(corpus)
    corpus_rows = _corpus_rows(files, eval_fraction)
    task_rows, sources = _task_rows(spans[0].path, text_column, text_b_column, label_column)
    for later in spans[1:]:
        rows, paths = _task_rows(later.path, text_column, text_b_column, label_column)
        for split in SPLITS:
            task_rows[split] += rows[split]
            sources[split] += "," + paths[split]
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
        })
    return {**counts, "span": {"span": resolved.span, "version": resolved.version}}
