"""albert_tf: ALBERT for TensorFlow 2 / Keras 3 — models, tokenization, data, training, export.

Top-level names are imported lazily so that light entry points (the CLI's `--help`, config
tools) do not pay for importing TensorFlow.
"""

import os as _os
import sys as _sys

from albert_tf._lazy import lazy_attributes as _lazy_attributes

# Keras 3 must run on TensorFlow: the whole package (tf.data, SavedModel export, tf.distribute) assumes it.
_os.environ.setdefault("KERAS_BACKEND", "tensorflow")

if "tensorflow" not in _sys.modules:
    # The command line's quiet start (no C++ INFO lines, no GPU probing without a driver) for
    # Python sessions too; a variable the user set is kept.
    from albert_tf.runtime_env import quiet_tensorflow_startup as _quiet_tensorflow_startup

    _quiet_tensorflow_startup()

__version__ = "0.1.0"

# `keras.saving.load_model` finds the package's classes without importing them first.
from albert_tf.keras_registry import install as _install_keras_registry

_install_keras_registry()

_LAZY = {
    "AlbertConfig": "albert_tf.config",
    "ConfigError": "albert_tf.config",
    "PRESETS": "albert_tf.config",
    "count_parameters": "albert_tf.config",
    "load_config": "albert_tf.config",
    "AlbertAttention": "albert_tf.modeling",
    "AlbertEmbeddings": "albert_tf.modeling",
    "AlbertEncoder": "albert_tf.modeling",
    "AlbertFeedForward": "albert_tf.modeling",
    "AlbertMLMHead": "albert_tf.modeling",
    "AlbertSOPHead": "albert_tf.modeling",
    "AlbertTextClassifier": "albert_tf.tasks.classification.text_model",
    "AlbertTextRegressor": "albert_tf.tasks.classification.text_model",
    "AlbertTextTagger": "albert_tf.tasks.tagging.text_model",
    "AlbertMultipleChoice": "albert_tf.tasks.multiple_choice.text_model",
    "AlbertQuestionAnswerer": "albert_tf.tasks.squad.text_model",
}

__all__ = sorted(_LAZY)
__getattr__, __dir__ = _lazy_attributes(__name__, _LAZY, globals())
