"""Fine-tuning task models, all built from one template (`albert_tf.tasks.base.AlbertTaskModel`).

* `classification` -- sentence(-pair) classifier and regressor (GLUE-style);
* `tagging` -- token classifier (NER, BIO tags);
* `squad`, `squad_postprocessing` -- extractive QA, SQuAD v1.1 head and the original v2.0 head, n-best, EM/F1;
* `multiple_choice` -- RACE-style softmax over choices;
* `presets` -- the original README's GLUE hyper-parameters;
* `text_models` -- the raw-text Keras models on top of them (strings in, keras-hub style):
  `AlbertTextClassifier`, `AlbertTextRegressor`, `AlbertTextTagger`, `AlbertMultipleChoice`,
  `AlbertQuestionAnswerer`, with `from_pretrained`, `fit`/`predict` on strings, `.keras` saving
  and `export`.

The `text_models` classes are importable from here; they are imported on first use, so that
importing `albert_tf.tasks.spec` (light entry points) does not load TensorFlow.
"""

import importlib as _importlib

_LAZY = {
    "AlbertTextClassifier": "albert_tf.tasks.text_models",
    "AlbertTextRegressor": "albert_tf.tasks.text_models",
    "AlbertTextTagger": "albert_tf.tasks.text_models",
    "AlbertMultipleChoice": "albert_tf.tasks.text_models",
    "AlbertQuestionAnswerer": "albert_tf.tasks.text_models",
}

__all__ = sorted(_LAZY)


def __getattr__(name):
    if name in _LAZY:
        value = getattr(_importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'albert_tf.tasks' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
