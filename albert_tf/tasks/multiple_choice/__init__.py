"""Multiple choice (RACE): everything of the task in one folder.

* `head` -- the head on token ids (`MultipleChoiceModel`, one score per choice);
* `data` -- reading the RACE files and the original conversion of each choice;
* `metrics` -- `race_accuracy`;
* `evaluation` -- running a head: `predict_race`, `predict_race_examples` and the data of a
  fine-tuning run (`prepare_race_task`);
* `text_model` -- `AlbertMultipleChoice`, the raw-text Keras model;
* `serving` -- the export (`MultipleChoiceServing`) and its in-graph packing (`MultipleChoiceGraph`);
* `family` -- `MultipleChoiceFamily`, the task `race` of `albert-tf finetune`.

The names of `head`, `metrics` and `evaluation` are importable from here (as from the former
module `albert_tf.tasks.multiple_choice`); importing the package registers the serving class.
"""

from albert_tf.tasks.multiple_choice import serving  # noqa: F401  (registers the export kind multiple_choice)
from albert_tf.tasks.multiple_choice.evaluation import (  # noqa: F401
    RaceTaskData,
    predict_race,
    predict_race_examples,
    prepare_race_task,
)
from albert_tf.tasks.multiple_choice.family import MultipleChoiceFamily  # noqa: F401
from albert_tf.tasks.multiple_choice.head import MultipleChoiceModel  # noqa: F401
from albert_tf.tasks.multiple_choice.metrics import race_accuracy  # noqa: F401
from albert_tf.tasks.multiple_choice.text_model import AlbertMultipleChoice  # noqa: F401
