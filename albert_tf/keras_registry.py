"""Keras finds every albert_tf class after `import albert_tf` alone.

`keras.saving.load_model` looks a saved class up by its registered name
("albert_tf>AlbertTextClassifier") in Keras' global registry, which the
`register_keras_serializable` decorators fill when their module is imported. Importing every such
module with the package would make `import albert_tf` (and the CLI's `--help`) load TensorFlow.
Instead, Keras' registry is made lazy: a name of this package that is not registered yet imports
the module that defines it (`SERIALIZABLE`, the classes outside the task folders; a test checks
it lists every one), or else the `text_model` module of every task folder of `albert_tf.tasks`
(which imports its head): a new task folder's classes are found without being listed here. The
registry is swapped when Keras' registration module loads, or at once when it already has.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys

from albert_tf.legacy_names import RENAMED

PACKAGE = "albert_tf"
_REGISTRY_MODULE = "keras.src.saving.object_registration"

# Registered name (without the "albert_tf>" package) -> the module that registers it.
SERIALIZABLE = {
    "AlbertLayerNorm": "albert_tf.modeling",
    "AlbertEmbeddings": "albert_tf.modeling",
    "AlbertAttention": "albert_tf.modeling",
    "AlbertFeedForward": "albert_tf.modeling",
    "AlbertEncoder": "albert_tf.modeling",
    "AlbertMLMHead": "albert_tf.modeling",
    "AlbertSOPHead": "albert_tf.modeling",
    "AlbertPretrainer": "albert_tf.pretrainer",
    "AlbertTokenizerLayer": "albert_tf.tokenization.in_graph",
    "LAMBOptimizer": "albert_tf.training.optimizers",
    "AdamWeightDecayOptimizer": "albert_tf.training.optimizers",
    "WarmupPolynomialDecay": "albert_tf.training.schedules",
}


def _import_task_folders() -> None:
    """Imports the `text_model` module of every folder of `albert_tf.tasks` that has one."""
    import pkgutil

    import albert_tf.tasks as tasks

    for info in pkgutil.iter_modules(tasks.__path__):
        name = f"{tasks.__name__}.{info.name}.text_model"
        if info.ispkg and importlib.util.find_spec(name) is not None:
            importlib.import_module(name)


class LazyRegistry(dict):
    """Keras' global custom-object registry that imports this package's classes on first look-up,
    and reads a renamed class's old name as its new one (`albert_tf.legacy_names.RENAMED`)."""

    def _current(self, key):
        if isinstance(key, str) and key.startswith(PACKAGE + ">"):
            name = key[len(PACKAGE) + 1:]
            key = f"{PACKAGE}>{RENAMED.get(name, name)}"
            if not dict.__contains__(self, key):
                module = SERIALIZABLE.get(key[len(PACKAGE) + 1:])
                if module is not None:
                    importlib.import_module(module)  # its decorators register into this dict
                else:
                    _import_task_folders()
        return key

    def __contains__(self, key) -> bool:
        return dict.__contains__(self, self._current(key))

    def __getitem__(self, key):
        return dict.__getitem__(self, self._current(key))

    def get(self, key, default=None):
        return dict.get(self, self._current(key), default)


def _make_lazy(registration_module) -> None:
    registry = registration_module.GLOBAL_CUSTOM_OBJECTS
    if not isinstance(registry, LazyRegistry):
        registration_module.GLOBAL_CUSTOM_OBJECTS = LazyRegistry(registry)


class _WhenKerasRegisters(importlib.abc.MetaPathFinder):
    """Makes Keras' registry lazy right after Keras' registration module runs."""

    def find_spec(self, name, path, target=None):
        if name != _REGISTRY_MODULE:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            _make_lazy(module)

        spec.loader.exec_module = exec_module
        return spec


def install() -> None:
    """Makes `keras.saving.load_model` find albert_tf's classes, now or once Keras is imported."""
    module = sys.modules.get(_REGISTRY_MODULE)
    if module is not None:
        _make_lazy(module)
    elif not any(isinstance(f, _WhenKerasRegisters) for f in sys.meta_path):
        sys.meta_path.insert(0, _WhenKerasRegisters())
