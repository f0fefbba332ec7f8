"""`DistillSettings`: everything a distillation run takes (the flags of `albert-tf distill`), and
their check before any data or model is read.

Bad settings raise `DistillError` (a `TaskError`: the command reports it as one line, exit 2).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Optional

from albert_tf.tasks.classification import CLASSIFICATION, REGRESSION
from albert_tf.tasks.tagging import TAGGING
from albert_tf.tasks.errors import TaskError

TRANSFERS = ("none", "hidden", "attention")
# The task kinds a student can be distilled for; SQuAD / RACE heads are refused.
DISTILLABLE_KINDS = (CLASSIFICATION, REGRESSION, TAGGING)


class DistillError(TaskError):
    """A distillation setting, teacher or student that cannot make a run."""


@dataclasses.dataclass
class DistillSettings:
    """A distillation run: a fine-tuned teacher, a student architecture and the transfer set.

    Attributes:
        teacher: A model directory written by `albert-tf finetune` or the pipeline's Trainer.
        student: A preset name (`albert_tf.config.PRESETS`; it takes the teacher's vocabulary
            size), an `albert_config.json` path (its `vocab_size` must be the teacher's), or
            `shared:N`: the teacher's own shared block run N times, initialised from the teacher
            (embeddings, blocks, pooler and head copied).
        data: The data directory of the task (train and dev, optionally test), in the teacher's
            layout (its `task.json` columns, or the ones given here).
        model_dir: The student's output directory, a normal model directory.
        text_column, label_column: Override the teacher's table columns.
        unlabeled: Unlabelled text for the teacher to label: a `.txt` file (one text per line) or
            a TSV/CSV/JSONL table (`unlabeled_column`, default the text column).
        max_labeled: Keep the labels of only this many training examples (a seeded sample).
        unlabeled_from_train: The training examples beyond `max_labeled` join the transfer set
            as unlabelled text.
        temperature: The softmax temperature of the soft targets.
        alpha: The weight of the soft loss; the hard-label loss on labelled examples gets
            `1 - alpha` (alpha 0: plain supervised training of the student).
        transfer: "none", "hidden" (TinyBERT hidden states, uniform layer map, a learned
            projection when the widths differ) or "attention" (MiniLM: the last layer's
            attention distributions and value relations).
        transfer_weight: The weight of the transfer loss.
        student_init: A pretrained checkpoint for a config student (`init` resolution of
            `albert-tf finetune`); default random weights.
        dropout: Dropout before the student's head (default: the teacher's).
        pooling: The student's classifier input, "cls" or "mean" (default: the teacher's).
        The rest are the run's training options, as `FinetuneSettings`; those left None are
        resolved into the run's `FinetuningConfig` (without the task's preset: a student learns
        from soft labels at the rate for its own size).
    """

    teacher: str
    student: str
    data: str
    model_dir: str
    text_column: Optional[str] = None
    label_column: Optional[str] = None
    unlabeled: Optional[str] = None
    unlabeled_column: Optional[str] = None
    max_labeled: Optional[int] = None
    unlabeled_from_train: bool = False
    temperature: float = 2.0
    alpha: float = 0.5
    transfer: str = "none"
    transfer_weight: float = 1.0
    student_init: Optional[str] = None
    dropout: Optional[float] = None
    pooling: Optional[str] = None
    num_epochs: Optional[float] = None
    num_train_steps: Optional[int] = None
    batch_size: Optional[int] = None
    eval_batch_size: Optional[int] = None
    learning_rate: Optional[float] = None
    warmup_proportion: Optional[float] = None
    max_seq_length: Optional[int] = None
    eval_every: Optional[int] = None
    seed: int = 12345
    overwrite: bool = False
    quiet: bool = False

    @classmethod
    def from_namespace(cls, namespace) -> "DistillSettings":
        """The settings of an `argparse.Namespace` (or any object) with these attribute names."""
        return cls(**{f.name: getattr(namespace, f.name) for f in dataclasses.fields(cls) if hasattr(namespace, f.name)})

    def to_dict(self):
        return dataclasses.asdict(self)


def check_settings(s: DistillSettings) -> None:
    """Refuses settings that cannot make a run, naming the flag.

    Raises:
        DistillError: The first problem found.
    """
    if s.teacher and os.path.isfile(s.teacher) and s.teacher.endswith(".keras"):
        raise DistillError(
            f"--teacher {s.teacher} is a .keras file; distillation reads a model directory (the output of "
            f"albert-tf finetune or the pipeline's Trainer), whose task.json gives the labels, columns and tokenizer"
        )
    if not s.teacher or not os.path.isdir(s.teacher):
        raise DistillError(f"--teacher must be a fine-tuned model directory; not found: {s.teacher}")
    if not os.path.isdir(s.data):
        raise DistillError(f"--data must be a directory: {s.data}")
    if s.transfer not in TRANSFERS:
        raise DistillError(f"--transfer must be one of {', '.join(TRANSFERS)}, got {s.transfer!r}")
    if s.pooling not in (None, "cls", "mean"):
        raise DistillError(f"--pooling must be cls or mean, got {s.pooling!r}")
    if not s.temperature > 0:
        raise DistillError(f"--temperature must be > 0, got {s.temperature}")
    if not 0 <= s.alpha <= 1:
        raise DistillError(f"--alpha must be in [0, 1], got {s.alpha}")
    if not s.transfer_weight >= 0:
        raise DistillError(f"--transfer-weight must be >= 0, got {s.transfer_weight}")
    for name in ("max_labeled", "batch_size", "num_train_steps", "max_seq_length", "eval_every", "eval_batch_size"):
        value = getattr(s, name)
        if value is not None and value < 1:
            raise DistillError(f"--{name.replace('_', '-')} must be >= 1, got {value}")
    if s.num_epochs is not None and not s.num_epochs > 0:
        raise DistillError(f"--num-epochs must be > 0, got {s.num_epochs}")
    if s.warmup_proportion is not None and not 0 <= s.warmup_proportion <= 1:
        raise DistillError(f"--warmup-proportion must be in [0, 1], got {s.warmup_proportion}")
    if s.unlabeled is not None and not os.path.isfile(s.unlabeled):
        raise DistillError(f"--unlabeled file not found: {s.unlabeled}")
    if s.unlabeled_column and not s.unlabeled:
        raise DistillError("--unlabeled-column goes with --unlabeled")
    if s.unlabeled_from_train and s.max_labeled is None:
        raise DistillError("--unlabeled-from-train needs --max-labeled (the examples beyond it become unlabelled)")
    if s.alpha == 0 and (s.unlabeled or s.unlabeled_from_train):
        raise DistillError("--alpha 0 trains on labels only: unlabelled text would add nothing")
