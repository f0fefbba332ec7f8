"""The task families: what each kind of fine-tuning task does, from its files to its export.

One class per family, one instance per task name, each in its task's folder:

* `ClassificationFamily` -- the GLUE tasks and any `classification` / `regression` table
  (`albert_tf.tasks.classification.family`);
* `TaggingFamily` -- token classification (`conll`, `peoples-daily`; `albert_tf.tasks.tagging.family`);
* `SquadFamily` -- extractive question answering (`squad-v1`, `squad-v2`; `albert_tf.tasks.squad.family`);
* `MultipleChoiceFamily` -- `race` (`albert_tf.tasks.multiple_choice.family`).

A family reads its splits, encodes features, builds the task's raw-text model (its folder's
`text_model`, which trains on the encoded features as its head), gives the best constant answer and
the dev `eval_fn` of a run (`plan`), evaluates and predicts with a fine-tuned model directory
(`evaluate_splits`, `predict`), writes predictions, and says how the model exports
(`export_arguments`, `export_kind`); the template is `albert_tf.tasks.family.TaskFamily`.
`task_family(task name, TaskSpec or model)` is the one lookup; `albert_tf.tasks.runner.finetune`
and `albert_tf.tasks.inference` drive it.

Every user-facing problem is a one-line `albert_tf.tasks.errors.TaskError`.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Union

from albert_tf.kinds import SPEC_KINDS
from albert_tf.tasks.errors import TaskError
from albert_tf.tasks.spec import TaskSpec

# Each family lives in its task's folder; the template and its shared pieces in `albert_tf.tasks.family`.
from albert_tf.tasks.family import TaskFamily
from albert_tf.tasks.classification.family import GLUE_TASKS, TABLE_TASKS, ClassificationFamily
from albert_tf.tasks.multiple_choice.family import RACE_TASKS, MultipleChoiceFamily
from albert_tf.tasks.squad.family import SQUAD_TASKS, SquadFamily
from albert_tf.tasks.tagging.family import TAGGING_TASKS, TaggingFamily

READING_TASKS = SQUAD_TASKS + RACE_TASKS
TASKS = GLUE_TASKS + TABLE_TASKS + TAGGING_TASKS + READING_TASKS


# --- the lookup ------------------------------------------------------------------------------------

# In the order a model's export kind is looked up (a more specific model class first).
FAMILIES = (TaggingFamily, MultipleChoiceFamily, SquadFamily, ClassificationFamily)
_BY_TASK = {task: family for family in FAMILIES for task in family.tasks}
_BY_KIND = {kind: family for family in FAMILIES for kind in family.kinds}


def task_family(task: Union[str, TaskSpec]) -> TaskFamily:
    """The family of a task name (`TASKS`, case-insensitive) or of a model directory's `TaskSpec`
    (by its kind: the pipeline's specs carry the generic task name).

    Raises:
        TaskError: An unknown task name or kind.
    """
    if isinstance(task, TaskSpec):
        family = _BY_KIND.get(task.kind)
        if family is None:
            raise TaskError(f"unknown task kind {task.kind!r} in task.json; kinds: {', '.join(_BY_KIND)}")
        return family(task.task)
    if not isinstance(task, str):
        raise TaskError(f"task_family takes a task name or a TaskSpec, got {type(task).__name__}")
    name = task.lower()
    family = _BY_TASK.get(name)
    if family is None:
        raise TaskError(f"unknown task {task!r}; tasks: {', '.join(TASKS)}")
    return family(name)


def export_arguments(task_spec: TaskSpec) -> Dict[str, Any]:
    """The task-specific `albert_tf.export.export_saved_model` keyword arguments of a fine-tuned
    model directory.

    Args:
      task_spec: its `TaskSpec` (`task.json`).

    Returns:
      `labels`, `pair`, `qa_settings` and `task_settings`: classification — the labels and
      whether inputs are pairs; regression — pairs; SQuAD — the conversion and post-processing
      settings (a missing `null_score_diff_threshold` is the export's default, 0); tagging — the
      tags and `token_unit`; multiple choice — `max_qa_length`.

    Raises:
      ValueError: a task kind outside `albert_tf.kinds.SPEC_KINDS`.
    """
    kind = task_spec.kind
    if kind not in SPEC_KINDS:
        raise ValueError(f"export supports {', '.join(SPEC_KINDS)} models, not {kind}")
    return task_family(task_spec).export_arguments(task_spec)


def model_export_kind(model) -> Optional[str]:
    """The export kind of a fine-tuned task model (`TaskFamily.export_kind`), None for any other
    model (an encoder, a pretrainer, ...)."""
    for family in FAMILIES:
        kind = family.export_kind(model)
        if kind is not None:
            return kind
    return None
