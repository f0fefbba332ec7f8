"""Sentence(-pair) classification and regression (GLUE-style tasks), all in this folder:

* `head` -- the heads on token ids, `AlbertClassifier` and `AlbertRegressor`;
* `data` -- the GLUE files and generic tables read into `TextExample`s, and their encoding into
  model features (`encode_examples`, `examples_dataset`);
* `text_model` -- the raw-text models `AlbertTextClassifier` and `AlbertTextRegressor`;
* `serving` -- their serving modules `ClassifierServing` and `RegressorServing` (registered with
  the export when this package is imported);
* `family` -- `ClassificationFamily`, what `albert-tf finetune` / `evaluate` / `predict` run;
* `metrics` -- predictions on features, the GLUE metrics of a task and the dev `make_eval_fn`.

The names of the former module `albert_tf.tasks.classification` are importable from here.
"""

from albert_tf.tasks.classification import serving  # noqa: F401 (registers the serving classes)
from albert_tf.tasks.classification.data import (  # noqa: F401
    DEFAULT_MAX_IN_MEMORY_BYTES,
    FEATURE_NAMES,
    encode_examples,
    examples_dataset,
    features_tfrecord_dataset,
    write_features_tfrecord,
)
from albert_tf.tasks.classification.family import ClassificationFamily  # noqa: F401
from albert_tf.tasks.classification.head import (  # noqa: F401
    POOLING_MODES,
    AlbertClassifier,
    AlbertRegressor,
    build_task_model,
    masked_mean,
    pooled_features,
)
from albert_tf.tasks.classification.metrics import make_eval_fn, predict_scores, score_predictions  # noqa: F401
from albert_tf.tasks.classification.serving import ClassifierServing, RegressorServing  # noqa: F401
from albert_tf.tasks.classification.text_model import AlbertTextClassifier, AlbertTextRegressor  # noqa: F401
