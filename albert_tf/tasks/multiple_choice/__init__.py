"""Multiple choice (RACE), all in this folder:

* `head` -- the head on token ids, `AlbertForMultipleChoice` (one score per choice);
* `data` -- the RACE files read into `RaceExample`s and the original conversion of each choice
  (`convert_race_examples`, `make_race_dataset`);
* `metrics` -- `race_accuracy`;
* `evaluation` -- a head run on RACE data: `predict_race`, `predict_race_examples` and the data
  of a fine-tuning run (`prepare_race_task`);
* `text_model` -- the raw-text model `AlbertMultipleChoice`;
* `serving` -- the serving module `MultipleChoiceServing`, registered with the export by `head`
  (whatever builds a multiple-choice model has imported it), and the in-graph choice packing
  `MultipleChoiceGraph`;
* `family` -- `MultipleChoiceFamily`, what `albert-tf finetune` / `evaluate` / `predict` run for
  `race`.

The names of the former module `albert_tf.tasks.multiple_choice` are importable from here, with
the folder's main classes. They are imported on first use, so that the family registry (and with
it `albert-tf --help`) does not load TensorFlow.
"""

from albert_tf._lazy import lazy_attributes as _lazy_attributes

# The task kind of this folder (`TaskSpec.kind`, `export.json`'s "kind").
MULTIPLE_CHOICE = "multiple_choice"

_LAZY = {
    "AlbertForMultipleChoice": "albert_tf.tasks.multiple_choice.head",
    **{name: "albert_tf.tasks.multiple_choice.evaluation" for name in (
        "RaceTaskData", "predict_race", "predict_race_examples", "prepare_race_task")},
    "race_accuracy": "albert_tf.tasks.multiple_choice.metrics",
    "AlbertMultipleChoice": "albert_tf.tasks.multiple_choice.text_model",
    "MultipleChoiceGraph": "albert_tf.tasks.multiple_choice.serving",
    "MultipleChoiceServing": "albert_tf.tasks.multiple_choice.serving",
    "MultipleChoiceFamily": "albert_tf.tasks.multiple_choice.family",
}

__all__ = sorted(_LAZY)
__getattr__, __dir__ = _lazy_attributes(__name__, _LAZY, globals())
