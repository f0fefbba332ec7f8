"""Sentence(-pair) classification and regression (GLUE-style tasks), all in this folder:

* `head` -- the heads on token ids, `AlbertForClassification` and `AlbertForRegression`;
* `data` -- the GLUE files read into `TextExample`s (generic tables: `albert_tf.data.tables`),
  the label list, and their encoding into model features (`encode_examples`; as a dataset:
  `albert_tf.data.features.examples_dataset`);
* `text_model` -- the raw-text models `AlbertTextClassifier` and `AlbertTextRegressor`;
* `serving` -- their serving modules `ClassifierServing` and `RegressorServing`, registered with
  the export by `head` (whatever builds a classifier or regressor has imported it);
* `family` -- `ClassificationFamily`, what `albert-tf finetune` / `evaluate` / `predict` run;
* `metrics` -- predictions on features, the GLUE metrics of a task and the dev `make_eval_fn`.

The names of the former module `albert_tf.tasks.classification` are importable from here, with
the folder's main classes. They are imported on first use, so that the family registry (and
with it `albert-tf --help`) does not load TensorFlow.
"""

from albert_tf._lazy import lazy_attributes as _lazy_attributes

# The task kinds of this folder (`TaskSpec.kind`, `export.json`'s "kind").
CLASSIFICATION = "classification"
REGRESSION = "regression"

_LAZY = {
    **{name: "albert_tf.tasks.classification.head" for name in (
        "POOLING_MODES", "AlbertForClassification", "AlbertForRegression", "build_task_model", "masked_mean", "pooled_features")},
    "encode_examples": "albert_tf.tasks.classification.data",
    **{name: "albert_tf.tasks.classification.metrics" for name in (
        "make_eval_fn", "predict_scores", "score_predictions")},
    "AlbertTextClassifier": "albert_tf.tasks.classification.text_model",
    "AlbertTextRegressor": "albert_tf.tasks.classification.text_model",
    "ClassifierServing": "albert_tf.tasks.classification.serving",
    "RegressorServing": "albert_tf.tasks.classification.serving",
    "ClassificationFamily": "albert_tf.tasks.classification.family",
}

__all__ = sorted(_LAZY)
__getattr__, __dir__ = _lazy_attributes(__name__, _LAZY, globals())
