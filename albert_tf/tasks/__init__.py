"""Fine-tuning tasks: the task layer (families, the `finetune` run, scoring and prediction with a
model directory) and the task models, all built from one template (`albert_tf.tasks.base.AlbertTaskModel`).

The task layer:

* `families` -- one class per task family (`ClassificationFamily`, `TaggingFamily`,
  `SquadFamily`, `MultipleChoiceFamily`) and the lookup `task_family(task name or TaskSpec)`;
* `runner` -- `finetune(FinetuneSettings(...))`, a whole fine-tuning run;
* `inference` -- `evaluate_model_dir` and `predict_model_dir` on a fine-tuned model directory;
* `resources` -- tokenizer, encoder config, `init` checks and model loading;
* `spec` -- `task.json` (`TaskSpec`); `errors` -- `TaskError`, what all of them raise.

The models and their pieces:

* `classification` -- sentence(-pair) classifier and regressor (GLUE-style);
* `tagging` -- token classifier (NER, BIO tags);
* `squad` -- extractive QA, one folder: the SQuAD v1.1 head and the original v2.0 head, the data,
  n-best and EM/F1 (`squad.postprocessing`; `squad_postprocessing` forwards to it), the raw-text
  model, the export and `SquadFamily`;
* `multiple_choice` -- RACE-style softmax over choices, one folder: head, data, raw-text model,
  export and `MultipleChoiceFamily`;
* `presets` -- the original README's GLUE hyper-parameters;
* `text_models` -- the raw-text Keras models on top of them (strings in, keras-hub style):
  `AlbertTextClassifier`, `AlbertTextRegressor`, `AlbertTextTagger`, `AlbertMultipleChoice`,
  `AlbertQuestionAnswerer`, with `from_pretrained`, `fit`/`predict` on strings, `.keras` saving
  and `export`.

The names above are importable from here; they are imported on first use, so that importing
`albert_tf.tasks.spec` (light entry points) does not load TensorFlow.
"""

from albert_tf._lazy import lazy_attributes as _lazy_attributes

_LAZY = {
    "AlbertTextClassifier": "albert_tf.tasks.text_models",
    "AlbertTextRegressor": "albert_tf.tasks.text_models",
    "AlbertTextTagger": "albert_tf.tasks.text_models",
    "AlbertMultipleChoice": "albert_tf.tasks.text_models",
    "AlbertQuestionAnswerer": "albert_tf.tasks.text_models",
    "TaskError": "albert_tf.tasks.errors",
    "TaskFamily": "albert_tf.tasks.families",
    "ClassificationFamily": "albert_tf.tasks.families",
    "TaggingFamily": "albert_tf.tasks.families",
    "SquadFamily": "albert_tf.tasks.families",
    "MultipleChoiceFamily": "albert_tf.tasks.families",
    "TASKS": "albert_tf.tasks.families",
    "task_family": "albert_tf.tasks.families",
    "FinetuneSettings": "albert_tf.tasks.runner",
    "FinetuneOutcome": "albert_tf.tasks.runner",
    "finetune": "albert_tf.tasks.runner",
    "evaluate_model_dir": "albert_tf.tasks.inference",
    "predict_model_dir": "albert_tf.tasks.inference",
}

__all__ = sorted(_LAZY)
__getattr__, __dir__ = _lazy_attributes(__name__, _LAZY, globals())
