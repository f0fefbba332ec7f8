"""Fine-tuning tasks: the task layer (families, the `finetune` run, scoring and prediction with a
model directory) and the task models, all built from one template (`albert_tf.tasks.base.AlbertTaskModel`).

The task layer:

* `family` -- the task template (`TaskFamily`) and the lookup `task_family(task name or
  TaskSpec)` over every task folder (no list of tasks: a folder is found, its family registers);
* `runner` -- `finetune(FinetuneSettings(...))`, a whole fine-tuning run, and `train_task_model`,
  the driver it shares with the pipeline's Trainer (the run's configuration is the one
  `albert_tf.training.finetuning_config.FinetuningConfig`);
* `inference` -- `evaluate_model_dir` and `predict_model_dir` on a fine-tuned model directory;
* `resources` -- tokenizer, encoder config, `init` checks and model loading;
* `spec` -- `task.json` (`TaskSpec`); `errors` -- `TaskError`, what all of them raise.

The models and their pieces:

* `classification/`, `tagging/`, `squad/`, `multiple_choice/` -- one folder per task, each laid
  out the same way. Its raw-text Keras model (`text_model.py`) is the task; it reaches the rest of
  the folder: `head.py` (the head on token ids, its `task_model`), `serving.py` (its TF Serving
  signatures, registered with `albert_tf.export`), `family.py` (its `family`: how `albert-tf
  finetune`, `evaluate` and `predict` run it), `data.py` (reading and encoding) and its metrics
  (`metrics.py`; SQuAD's n-best and EM/F1 in `postprocessing.py`; SQuAD and RACE keep prediction
  and scoring in `evaluation.py`). The folder's `__init__` names its task kinds. Adding a task is
  adding a folder (README, "Adding a task");
* `text_task` -- the raw-text template
  (`AlbertTextTask`); `base` -- the head template (`AlbertTaskModel`); `pretrained` -- what
  `from_pretrained` reads of a pretrained checkpoint; `model_dir` -- the one model directory every
  producer writes and `from_pretrained` reads whole;
* `presets` -- the original README's GLUE hyper-parameters;
* the raw-text Keras models, one per task folder (`<task>/text_model.py`, strings in, keras-hub
  style): `AlbertTextClassifier`, `AlbertTextRegressor`, `AlbertTextTagger`, `AlbertMultipleChoice`,
  `AlbertQuestionAnswerer`, with `from_pretrained`, `fit`/`predict` on strings, `.keras` saving
  and `export`.

The names above are importable from here; they are imported on first use, so that importing
`albert_tf.tasks.spec` (light entry points) does not load TensorFlow.
"""

from albert_tf._lazy import lazy_attributes as _lazy_attributes

_LAZY = {
    "AlbertTextClassifier": "albert_tf.tasks.classification.text_model",
    "AlbertTextRegressor": "albert_tf.tasks.classification.text_model",
    "AlbertTextTagger": "albert_tf.tasks.tagging.text_model",
    "AlbertMultipleChoice": "albert_tf.tasks.multiple_choice.text_model",
    "AlbertQuestionAnswerer": "albert_tf.tasks.squad.text_model",
    "TaskError": "albert_tf.tasks.errors",
    "TaskFamily": "albert_tf.tasks.family",
    "ClassificationFamily": "albert_tf.tasks.classification.family",
    "TaggingFamily": "albert_tf.tasks.tagging.family",
    "SquadFamily": "albert_tf.tasks.squad.family",
    "MultipleChoiceFamily": "albert_tf.tasks.multiple_choice.family",
    "task_family": "albert_tf.tasks.family",
    "task_names": "albert_tf.tasks.family",
    "FinetuneSettings": "albert_tf.tasks.runner",
    "FinetuneOutcome": "albert_tf.tasks.runner",
    "finetune": "albert_tf.tasks.runner",
    "evaluate_model_dir": "albert_tf.tasks.inference",
    "predict_model_dir": "albert_tf.tasks.inference",
}

__all__ = sorted(_LAZY)
__getattr__, __dir__ = _lazy_attributes(__name__, _LAZY, globals())
