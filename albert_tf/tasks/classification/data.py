"""Sentence(-pair) classification data: the GLUE file layouts, the label list, and the encoding of
`TextExample`s into model features.

Generic TSV / CSV / JSONL tables are read by `albert_tf.data.tables` (`read_table`, into
`TextExample`s); the GLUE files here (`read_glue_split`), with the same `DataFormatError`s naming
the file and line, plus a label outside the task's label list and a regression label that is not
a number.

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

Encoding: `encode_examples` tokenizes and packs `TextExample`s into model features with the
Python tokenizers; `albert_tf.data.features.examples_dataset` makes a `tf.data.Dataset` of them.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from albert_tf.data.features import FEATURE_NAMES
from albert_tf.data.tables import ColumnRef, DataFormatError, TextExample, read_delimited, tsv_rows

logger = logging.getLogger(__name__)

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
        return read_delimited(
            path, tsv_rows(path), text_a=layout.test_text_a, text_b=layout.test_text_b, label=None,
            guid=layout.test_id, has_header=True, on_error=on_error,
        )
    return read_delimited(
        path, tsv_rows(path), text_a=layout.text_a, text_b=layout.text_b, label=layout.label, guid=None,
        has_header=layout.has_header, on_error=on_error,
    )


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
