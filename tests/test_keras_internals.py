"""The private Keras / TensorFlow attributes the package relies on are there, and are used."""

import types

import keras
import numpy as np
import pytest

from albert_tf import keras_internals
from albert_tf.keras_internals import KerasInternalsError


def test_every_listed_internal_exists():
    assert keras_internals.missing_internals() == []
    keras_internals.check_keras_internals()


def test_a_missing_internal_is_a_loud_error(monkeypatch):
    monkeypatch.setattr(keras_internals, "OPTIMIZER_INTERNALS",
                        keras_internals.OPTIMIZER_INTERNALS + (("_no_such_hook", "a test"),))
    with pytest.raises(KerasInternalsError, match="Keras .* lack .*_no_such_hook"):
        keras_internals.check_keras_internals()
    with pytest.raises(KerasInternalsError, match="_no_such_hook"):
        keras_internals.check_optimizer_hooks()


def test_hiding_the_strategy_needs_the_attribute():
    with pytest.raises(KerasInternalsError, match="_distribute_strategy"):
        with keras_internals.strategy_hidden_from_build(types.SimpleNamespace()):
            pass
    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    before = model._distribute_strategy
    with keras_internals.strategy_hidden_from_build(model):
        assert model._distribute_strategy is None
    assert model._distribute_strategy is before


def test_keras_still_calls_the_overridden_optimizer_hooks(monkeypatch):
    """An override Keras no longer calls would be dead code: count the calls in a real step."""
    from albert_tf.training.optimizers import AdamWeightDecayOptimizer, _AlbertAdamBase

    calls = {"_backend_update_step": 0, "_clip_gradients": 0, "_get_current_learning_rate": 0}
    for name in calls:
        original = getattr(_AlbertAdamBase, name)

        def counted(self, *args, _original=original, _name=name, **kwargs):
            calls[_name] += 1
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(_AlbertAdamBase, name, counted)
    variable = keras.Variable(np.ones((2, 2), np.float32))
    optimizer = AdamWeightDecayOptimizer(learning_rate=0.1)
    optimizer.apply([np.full((2, 2), 5.0, np.float32)], [variable])
    assert all(count >= 1 for count in calls.values()), calls
    assert not np.allclose(variable.numpy(), 1.0)


def test_archive_serialization_flag_is_readable():
    assert keras_internals.serializing_keras_archive() is False


def test_functions_traced_as_saved_are_not_traced_again_by_the_save(tmp_path):
    import tensorflow as tf

    class Scale(tf.Module):
        def __init__(self):
            super().__init__()
            self.weight = tf.Variable(2.0)
            self.scale = tf.function(lambda x: x * self.weight, input_signature=[tf.TensorSpec([None], tf.float32)])

    plain, traced = Scale(), Scale()
    plain_function = plain.scale.get_concrete_function()
    with keras_internals.traced_as_saved():
        traced_function = traced.scale.get_concrete_function()
        with keras_internals.traced_as_saved():  # nested (as inside a save): a no-op
            assert traced.scale.get_concrete_function() is traced_function
    tf.saved_model.save(plain, str(tmp_path / "plain"), signatures={"serving_default": plain_function})
    tf.saved_model.save(traced, str(tmp_path / "traced"), signatures={"serving_default": traced_function})
    assert plain.scale.experimental_get_tracing_count() == 2  # the save traced it again
    assert traced.scale.experimental_get_tracing_count() == 1
    loaded = tf.saved_model.load(str(tmp_path / "traced"))
    assert loaded.scale(tf.constant([1.5])).numpy().tolist() == [3.0]
