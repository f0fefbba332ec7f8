"""Tests of `albert_tf.training.schedules.WarmupPolynomialDecay` against hand-computed values of
the original `optimization.create_optimizer` learning rate."""

import json

import numpy as np
import pytest

import albert_tf  # noqa: F401  (selects the TensorFlow backend)
import keras
import tensorflow as tf

from albert_tf.training import PRETRAINING_PEAK_LEARNING_RATE, WarmupPolynomialDecay

# peak 1e-3, 100 train steps, 10 warmup steps. Warmup: 1e-3 * step / 10; afterwards the decay is
# counted from step 0: 1e-3 * (1 - step / 100), so step 10 gives 9e-4, not the peak.
TABLE = [
    (0, 0.0),
    (1, 1e-4),
    (5, 5e-4),
    (9, 9e-4),
    (10, 9e-4),
    (11, 8.9e-4),
    (50, 5e-4),
    (99, 1e-5),
    (100, 0.0),
    (250, 0.0),
]


def make(**overrides):
    kwargs = dict(num_train_steps=100, num_warmup_steps=10, peak_learning_rate=1e-3)
    kwargs.update(overrides)
    return WarmupPolynomialDecay(**kwargs)


@pytest.mark.parametrize("dtype", [tf.int32, tf.int64, tf.float32])
def test_hand_computed_table_eager(dtype):
    schedule = make()
    for step, want in TABLE:
        got = float(schedule(tf.constant(step, dtype)))
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-12, err_msg=f"step {step}")


@pytest.mark.parametrize("dtype", [tf.int64, tf.float32])
def test_hand_computed_table_under_xla(dtype):
    schedule = make()
    compiled = tf.function(lambda step: schedule(step), jit_compile=True)
    steps = tf.constant([s for s, _ in TABLE], dtype)
    got = compiled(steps).numpy()
    # XLA turns the division by num_train_steps into a multiplication by its float32 reciprocal:
    # (1 - step/100) is then off by ~2e-8 absolute, i.e. 2e-11 in the rate.
    np.testing.assert_allclose(got, [w for _, w in TABLE], rtol=1e-5, atol=1e-10)
    assert got.dtype == np.float32


def test_fractional_step_and_python_int_step():
    schedule = make()
    np.testing.assert_allclose(float(schedule(tf.constant(2.5))), 2.5e-4, rtol=1e-6)
    np.testing.assert_allclose(float(schedule(20)), 8e-4, rtol=1e-6)


def test_no_warmup_starts_at_peak():
    schedule = make(num_warmup_steps=0)
    np.testing.assert_allclose(float(schedule(0)), 1e-3, rtol=1e-7)
    np.testing.assert_allclose(float(schedule(25)), 7.5e-4, rtol=1e-6)


def test_polynomial_power():
    schedule = make(power=2.0)
    np.testing.assert_allclose(float(schedule(5)), 5e-4, rtol=1e-6)  # warmup is linear
    np.testing.assert_allclose(float(schedule(50)), 2.5e-4, rtol=1e-6)  # 1e-3 * 0.5**2


def test_default_peak_is_the_pretraining_constant():
    assert PRETRAINING_PEAK_LEARNING_RATE == 0.00176
    schedule = WarmupPolynomialDecay(num_train_steps=125000, num_warmup_steps=3125)
    assert schedule.peak_learning_rate == 0.00176
    np.testing.assert_allclose(float(schedule(3125)), 0.00176 * (1 - 3125 / 125000), rtol=1e-6)
    np.testing.assert_allclose(float(schedule(3124)), 0.00176 * 3124 / 3125, rtol=1e-6)


def test_serialization_round_trip():
    schedule = make(power=1.5)
    config = schedule.get_config()
    clone = WarmupPolynomialDecay.from_config(json.loads(json.dumps(config)))
    assert clone.get_config() == config
    restored = keras.optimizers.schedules.deserialize(keras.optimizers.schedules.serialize(schedule))
    assert isinstance(restored, WarmupPolynomialDecay)
    for step in (0, 7, 60):
        assert float(restored(step)) == float(schedule(step))


def test_drives_a_keras_optimizer():
    optimizer = keras.optimizers.SGD(learning_rate=make())
    variable = keras.Variable([1.0])
    np.testing.assert_allclose(float(optimizer.learning_rate), 0.0, atol=0)
    for _ in range(5):
        optimizer.apply([tf.constant([1.0])], [variable])
    np.testing.assert_allclose(float(optimizer.learning_rate), 5e-4, rtol=1e-6)
    # Steps 0..4 used rates 0, 1e-4, ..., 4e-4.
    np.testing.assert_allclose(variable.numpy(), [1.0 - 1e-3], rtol=1e-6)


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        (dict(num_train_steps=0), ValueError, "num_train_steps"),
        (dict(num_train_steps=10.0), TypeError, "num_train_steps"),
        (dict(num_warmup_steps=-1), ValueError, "num_warmup_steps"),
        (dict(num_warmup_steps=101), ValueError, "exceeds"),
        (dict(peak_learning_rate=0.0), ValueError, "peak_learning_rate"),
        (dict(peak_learning_rate="1e-3"), TypeError, "peak_learning_rate"),
        (dict(power=-1.0), ValueError, "power"),
    ],
)
def test_rejects_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        make(**kwargs)
