"""The transfer set: the labelled training examples plus unlabelled text, with the teacher's
outputs on all of it computed once (one batched predict), not per step.

Unlabelled text comes from a file (`.txt`, one text per line, or a table column) and, with
`unlabeled_from_train`, from the training examples beyond a seeded sample of `max_labeled`.
Every example carries `label_weight` (1 labelled, 0 not) for the hard-label loss.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Optional

import numpy as np

from albert_tf.distillation.objective import LABEL_WEIGHT, TEACHER_OUTPUTS
from albert_tf.distillation.settings import DistillError
from albert_tf.tasks.classification import REGRESSION
from albert_tf.tasks.tagging import TAGGING
from albert_tf.tasks.errors import TaskError


@dataclasses.dataclass
class TransferSet:
    """Encoded transfer examples.

    Attributes:
        features: `input_ids`, `input_mask`, `segment_ids`, `labels`, `label_weight` and, after
            `label_with_teacher`, `teacher_outputs`, one row per example.
        labeled: The labelled training examples (for the constant answer and the record).
        num_unlabeled: Rows without a label.
    """

    features: Dict[str, np.ndarray]
    labeled: List[Any]
    num_unlabeled: int

    @property
    def size(self) -> int:
        return int(self.features["input_ids"].shape[0])


def split_labeled(examples: List[Any], max_labeled: Optional[int], seed: int):
    """(labelled, rest): a seeded sample of `max_labeled` examples (in file order) and the others."""
    if max_labeled is None or max_labeled >= len(examples):
        return list(examples), []
    order = np.random.RandomState(seed).permutation(len(examples))
    keep = set(int(i) for i in order[:max_labeled])
    return [e for i, e in enumerate(examples) if i in keep], [e for i, e in enumerate(examples) if i not in keep]


def read_unlabeled(family, spec, path: str, column: Optional[str]):
    """The unlabelled examples of the family's type in `path` (`.txt`: a text per line; a table:
    `column`, default the teacher's text column)."""
    if spec.kind == TAGGING:
        from albert_tf.data.tables import read_text
        from albert_tf.tasks.tagging.data import TaggedSentence, split_with_offsets

        if not path.lower().endswith(".txt"):
            raise DistillError(f"--unlabeled for a tagger is a .txt file, one sentence per line: {path}")
        sentences = []
        for number, line in enumerate(read_text(path).split("\n"), 1):
            units = tuple(u for u, _, _ in split_with_offsets(line.strip(), spec.token_unit))
            if units:
                # Tags are never read: the rows are encoded without labels.
                sentences.append(TaggedSentence(units, ("O",) * len(units), path, number))
        if not sentences:
            raise DistillError(f"--unlabeled {path} has no text")
        return sentences
    if column:
        columns = {**spec.columns, "text": column, "text_b": None, "label": None}
        spec = dataclasses.replace(spec, columns=columns)
    return family.examples_from_file(spec, path)


def encode(spec, tokenizer, examples, labeled: bool) -> Dict[str, np.ndarray]:
    """Model features of `examples`, with `labels` (zeros / ignored when not `labeled`) and
    `label_weight`."""
    from albert_tf.data.tables import DataFormatError

    n = len(examples)
    try:
        if spec.kind == TAGGING:
            from albert_tf.tasks.tagging import TagVocab, encode_sentences

            features = dict(encode_sentences(examples, tokenizer, seq_length=spec.max_seq_length, tag_vocab=TagVocab(spec.labels),
                                             with_labels=labeled).features)
            if not labeled:
                from albert_tf.tasks.tagging import IGNORE_LABEL

                features["labels"] = np.full(features["input_ids"].shape, IGNORE_LABEL, "int32")
        else:
            from albert_tf.tasks.classification import encode_examples
            from albert_tf.tasks.classification.family import ClassificationFamily

            regression = spec.kind == REGRESSION
            features = encode_examples(examples, tokenizer, seq_length=spec.max_seq_length, label_vocab=ClassificationFamily.label_vocab(spec),
                                       regression=regression, with_labels=labeled)
            if not labeled:
                features["labels"] = np.zeros((n,), "float32" if regression else "int32")
    except DataFormatError as e:
        raise TaskError(str(e)) from None
    features[LABEL_WEIGHT] = np.full((n,), 1.0 if labeled else 0.0, "float32")
    return features


def build_transfer_set(family, spec, tokenizer, train_examples, *, max_labeled: Optional[int], unlabeled_from_train: bool,
                       unlabeled: Optional[str], unlabeled_column: Optional[str], seed: int) -> TransferSet:
    """The labelled sample of `train_examples` and the unlabelled text, encoded."""
    labeled, rest = split_labeled(train_examples, max_labeled, seed)
    extra = list(rest) if unlabeled_from_train else []
    if unlabeled:
        extra.extend(read_unlabeled(family, spec, unlabeled, unlabeled_column))
    parts = [encode(spec, tokenizer, labeled, True)]
    if extra:
        parts.append(encode(spec, tokenizer, extra, False))
    features = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    return TransferSet(features, labeled, len(extra))


def teacher_outputs(teacher, features: Dict[str, np.ndarray], batch_size: int) -> np.ndarray:
    """The teacher's logits (regression: predictions) on every row, in one batched predict."""
    from albert_tf.modeling import ENCODER_INPUTS

    outputs = teacher.predict({k: features[k] for k in ENCODER_INPUTS}, batch_size=batch_size, verbose=0)
    key = "predictions" if "predictions" in outputs else "logits"
    return np.asarray(outputs[key], "float32")


def label_with_teacher(transfer: TransferSet, teacher, batch_size: int) -> TransferSet:
    transfer.features[TEACHER_OUTPUTS] = teacher_outputs(teacher, transfer.features, batch_size)
    return transfer
