"""The student: its architecture from a preset, a config file or `shared:N`, and its task model.

`shared:N` is what only an all-shared ALBERT offers: the teacher's own transformer block(s) run N
times instead of L. Every weight of such a student (embeddings, blocks, pooler, head) exists in
the teacher with the same shape, so it starts as a copy of the teacher; with N = L it *is* the
teacher. A preset or config student has an architecture of its own and starts from random
weights, or from a pretrained checkpoint (`student_init`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

from albert_tf.distillation.settings import DistillError

SHARED_PREFIX = "shared:"


@dataclasses.dataclass
class StudentPlan:
    """What `resolve_student` settled.

    Attributes:
        config: The student's `AlbertConfig`.
        source: How it was given, for messages and the run record.
        from_teacher: The student starts as a copy of the teacher's weights (`shared:N`).
    """

    config: Any
    source: str
    from_teacher: bool = False


def resolve_student(student: str, teacher_config) -> StudentPlan:
    """The student architecture `student` names, for a teacher of `teacher_config`.

    Raises:
        DistillError: An unknown preset or missing file, a `shared:N` the teacher cannot give
            (N not a positive multiple of its groups, blocks not shared), or a config whose
            vocabulary is not the teacher's (the student reads the teacher's tokenizer).
    """
    import os

    from albert_tf.config import PRESETS, ConfigError, load_config

    if not isinstance(student, str) or not student:
        raise DistillError(f"--student must be a preset, an albert_config.json or shared:N, got {student!r}")
    if student.startswith(SHARED_PREFIX):
        count = student[len(SHARED_PREFIX):]
        if not count.isdigit() or int(count) < 1:
            raise DistillError(f"--student shared:N takes a positive layer count N, got {student!r}")
        layers = int(count)
        if teacher_config.sharing != "all":
            raise DistillError(
                f"--student {student}: the teacher shares {teacher_config.sharing!r}, not all of its blocks; "
                f"shared:N reruns one shared block, so it needs sharing 'all'"
            )
        groups = teacher_config.num_hidden_groups
        if layers % groups:
            raise DistillError(f"--student {student}: N must be a multiple of the teacher's {groups} hidden groups")
        return StudentPlan(teacher_config.replace(num_hidden_layers=layers), student, from_teacher=True)
    if student in PRESETS:
        # A preset is a shape; the vocabulary is the teacher's tokenizer's.
        config = load_config(student).replace(vocab_size=teacher_config.vocab_size)
        return StudentPlan(config, f"preset {student}")
    if not os.path.isfile(student):
        raise DistillError(
            f"--student {student!r} is neither a preset ({', '.join(sorted(PRESETS))}), shared:N, nor an existing config file"
        )
    try:
        config = load_config(student)
    except ConfigError as e:
        raise DistillError(str(e)) from None
    if config.vocab_size != teacher_config.vocab_size:
        raise DistillError(
            f"--student {student} has vocab_size {config.vocab_size}, the teacher {teacher_config.vocab_size}: "
            f"a student reads the teacher's tokenizer, so the vocabularies must be the same"
        )
    return StudentPlan(config, f"config {student}")


def dummy_inputs(length: int = 8):
    """A one-row batch of the encoder inputs, to build a model's weights."""
    import numpy as np

    from albert_tf.modeling import ENCODER_INPUTS

    return {name: np.zeros((1, length), "int32") for name in ENCODER_INPUTS}


def build_student(plan: StudentPlan, family, spec, teacher_model, *, dropout: float, pooling: Optional[str],
                  init: Optional[str] = None):
    """The student task model of the teacher's family (`family.build_task_model`), built; a
    `shared:N` student holds a copy of the teacher's weights, a config one is random or from `init`.

    Raises:
        DistillError: An `init` that does not load into the student.
    """
    from albert_tf.modeling import AlbertEncoder

    encoder = AlbertEncoder.from_albert_config(plan.config)
    if init:
        from albert_tf.checkpoints.any_format import init_encoder
        from albert_tf.checkpoints.original import CheckpointError

        try:
            init_encoder(encoder, init)
        except (CheckpointError, ValueError) as e:
            raise DistillError(f"--student-init {init}: {e}") from None
    model = family.build_task_model(encoder, spec, dropout=dropout, pooling=pooling or "cls")
    model(dummy_inputs(), training=False)
    if plan.from_teacher:
        # Same layer names and shapes in the same order: only the schedule of the blocks differs.
        teacher_weights = teacher_model.get_weights()
        if [tuple(w.shape) for w in model.weights] != [w.shape for w in teacher_weights]:
            raise DistillError("the shared:N student's weights do not line up with the teacher's")
        model.set_weights(teacher_weights)
    return model
