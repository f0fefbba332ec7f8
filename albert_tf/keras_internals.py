"""Every private Keras / TensorFlow attribute this package relies on, in one place.

Keras 3 has no public hook for what the optimizers and the pretraining loop need (a global-norm
clip after the cross-replica sum, gradient accumulation under tf.distribute, a `fit` that does not
eat a batch to build a model under a strategy). Those hooks are private and can change in any
Keras release, so they are listed here, `check_keras_internals()` verifies them (the test suite
runs it, and the optimizers run it on import), and the helpers below raise `KerasInternalsError`
naming the attribute and the Keras version instead of silently doing nothing when one is gone.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, List, Tuple

import keras
import tensorflow as tf

# (where, attribute, what this package uses it for). Optimizer hooks are overridden in
# `albert_tf.training.optimizers`: if Keras stopped calling them, the overrides would be dead code.
OPTIMIZER_INTERNALS: Tuple[Tuple[str, str], ...] = (
    ("_backend_update_step", "global-norm clipping after the cross-replica gradient sum"),
    ("_backend_apply_gradients", "gradient accumulation without replica sync inside a cond"),
    ("_clip_gradients", "disabled per replica, applied after the all-reduce"),
    ("_all_reduce_sum_gradients", "the cross-replica gradient sum"),
    ("_distributed_tf_update_step", "the per-variable update under a strategy"),
    ("_get_current_learning_rate", "schedules driven by optimizer updates, not micro-batches"),
    ("_get_variable_index", "per-variable weight-decay / trust-ratio flags and moments"),
    ("_update_model_variables_moving_average", "EMA under gradient accumulation"),
    ("_overwrite_model_variables_with_average_value", "EMA under gradient accumulation"),
)
# Instance attributes of a built Keras model (TensorFlow trainer).
MODEL_INTERNALS: Tuple[Tuple[str, str], ...] = (
    ("_distribute_strategy", "hidden during fit so Keras does not consume a batch to build the model"),
    ("_compile_loss", "a recompile without a loss (Keras keeps the previous compile's)"),
    ("_compile_metrics", "a recompile without a loss (Keras keeps the previous compile's metrics)"),
)

# Keras' `.keras` / `.weights.h5` weight stores, whose `get` / `has_path` `albert_tf.legacy_names`
# wraps so that files saved before a class rename load.
WEIGHT_STORES = ("H5IOStore", "ShardedH5IOStore")


class KerasInternalsError(RuntimeError):
    """A private Keras / TensorFlow attribute this package needs is missing (a Keras upgrade?)."""


def _missing(name: str, where: str, purpose: str) -> KerasInternalsError:
    return KerasInternalsError(
        f"{where} has no attribute {name!r} in Keras {keras.__version__} / TensorFlow {tf.__version__}; "
        f"albert_tf uses it for {purpose} (see albert_tf/keras_internals.py)"
    )


def merge_call_function():
    """`tf.__internal__.distribute.interim.maybe_merge_call` (cross-replica merge inside a step)."""
    try:
        return tf.__internal__.distribute.interim.maybe_merge_call
    except AttributeError:
        raise _missing("__internal__.distribute.interim.maybe_merge_call", "tensorflow",
                       "the optimizers' cross-replica updates") from None


def serializing_keras_archive() -> bool:
    """Whether Keras is serializing a model for a `.keras` archive right now.

    Keras' archive saver serializes the model inside an `ObjectSharingScope` and then calls every
    layer's `save_assets`; layers that store a file as an asset (the tokenizer's vocabulary) leave
    it out of their config only then.

    Raises:
        KerasInternalsError: Keras moved the global state this reads.
    """
    try:
        from keras.src.backend.common import global_state
    except ImportError:
        raise _missing("src.backend.common.global_state", "keras", "saving vocabularies as .keras assets") from None
    return global_state.get_global_attribute("shared_objects/id_to_config_map") is not None


@contextlib.contextmanager
def traced_as_saved() -> Iterator[None]:
    """Traces the `tf.function`s called in the block as `tf.saved_model.save` (default
    `SaveOptions`) looks them up, so that the save reuses those traces.

    A `tf.function`'s trace cache is keyed on the save context's variable policy. So every
    function attribute of a saved object that was traced outside a save is traced again during
    it, and its graph is stored a second time: for an export's serving functions, about half the
    export's time and a third or more of `saved_model.pb`. A nested use inside a save is a no-op.

    Raises:
        KerasInternalsError: TensorFlow moved `tensorflow.python.saved_model.save_context`.
    """
    context = _save_context_module()
    if context.in_save_context():
        yield
        return
    with context.save_context(tf.saved_model.SaveOptions()):
        yield


def _save_context_module():
    try:
        from tensorflow.python.saved_model import save_context
    except ImportError:
        save_context = None
    if save_context is None or not all(hasattr(save_context, name) for name in ("save_context", "in_save_context")):
        raise _missing("python.saved_model.save_context", "tensorflow",
                       "tracing the export's functions once, as tf.saved_model.save traces them") from None
    return save_context


def missing_internals() -> List[str]:
    """The listed private attributes that the installed Keras / TensorFlow lack (empty: all there)."""
    missing = [f"keras.optimizers.Optimizer.{name}" for name, _ in OPTIMIZER_INTERNALS
               if not hasattr(keras.optimizers.Optimizer, name)]
    try:
        merge_call_function()
    except KerasInternalsError:
        missing.append("tf.__internal__.distribute.interim.maybe_merge_call")
    try:
        serializing_keras_archive()
    except KerasInternalsError:
        missing.append("keras.src.backend.common.global_state")
    try:
        _save_context_module()
    except KerasInternalsError:
        missing.append("tensorflow.python.saved_model.save_context")
    try:
        from keras.src.saving import saving_lib

        # Wrapped by `albert_tf.legacy_names.install`: weights saved under renamed classes' names.
        missing += [f"keras.src.saving.saving_lib.{store}.{method}" for store in WEIGHT_STORES for method in ("get", "has_path")
                    if method not in vars(getattr(saving_lib, store, object))]
    except ImportError:
        missing.append("keras.src.saving.saving_lib")
    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    missing += [f"keras.Model instance .{name}" for name, _ in MODEL_INTERNALS if not hasattr(model, name)]
    return missing


def check_keras_internals() -> None:
    """Raises `KerasInternalsError` listing every private attribute the installed Keras lacks."""
    missing = missing_internals()
    if missing:
        raise KerasInternalsError(
            f"Keras {keras.__version__} / TensorFlow {tf.__version__} lack private attributes albert_tf needs: "
            + ", ".join(missing) + " (see albert_tf/keras_internals.py)"
        )


def check_optimizer_hooks() -> None:
    """The optimizer-class part of `check_keras_internals` (cheap: no model is built)."""
    for name, purpose in OPTIMIZER_INTERNALS:
        if not hasattr(keras.optimizers.Optimizer, name):
            raise _missing(name, "keras.optimizers.Optimizer", purpose)
    merge_call_function()


@contextlib.contextmanager
def strategy_hidden_from_build(model: Any) -> Iterator[None]:
    """Within the block `model._distribute_strategy` is None, and restored afterwards.

    Keras 3's TensorFlow trainer takes one batch off the iterator to build a model created under
    a strategy (`_maybe_symbolic_build`); a model that is already built loses that batch for
    nothing, so callers hide the strategy while they `fit` inside its scope.

    Raises:
        KerasInternalsError: The model has no `_distribute_strategy` (Keras changed).
    """
    name, purpose = MODEL_INTERNALS[0]
    if name not in vars(model) and not hasattr(model, name):
        raise _missing(name, f"the {type(model).__name__} model", purpose)
    saved = getattr(model, name)
    setattr(model, name, None)
    try:
        yield
    finally:
        setattr(model, name, saved)


def forget_compiled_loss(model: Any) -> None:
    """Drops the loss and metrics of an earlier `compile` of `model` (`compile(loss=None)` keeps
    them in Keras 3), so that it computes its own loss, as a model compiled without one does.

    Raises:
        KerasInternalsError: The model has no `_compile_loss` / `_compile_metrics` (Keras changed).
    """
    for name, purpose in MODEL_INTERNALS[1:]:
        if not hasattr(model, name):
            raise _missing(name, f"the {type(model).__name__} model", purpose)
        setattr(model, name, None)
    model.loss = None
