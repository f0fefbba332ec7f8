"""The original ALBERT learning-rate schedule as a Keras 3 `LearningRateSchedule`.

google-research/albert `optimization.create_optimizer` builds the learning rate as

* `decayed = polynomial_decay(peak, step, num_train_steps, end_learning_rate=0.0, power=poly_power)`,
  i.e. `peak * (1 - min(step, num_train_steps) / num_train_steps) ** power`, counted from step 0
  (not from the end of warmup), and
* during warmup (`step < num_warmup_steps`) the linear ramp `peak * step / num_warmup_steps`
  replaces it.

So the rate is 0 at step 0, climbs to just below `peak` at the last warmup step, and at
`step == num_warmup_steps` it is `peak * (1 - num_warmup_steps / num_train_steps)`, not `peak`.
`WarmupPolynomialDecay` reproduces that exactly.
"""

from __future__ import annotations

import numbers

import keras
from keras import ops

# The peak learning rate of ALBERT pretraining with LAMB (batch 4096, 125k steps).
PRETRAINING_PEAK_LEARNING_RATE = 0.00176


def _check_int(name: str, value, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"`{name}` must be an integer, got {value!r} ({type(value).__name__}).")
    if value < minimum:
        raise ValueError(f"`{name}` must be >= {minimum}, got {value}.")
    return int(value)


def _check_float(name: str, value, *, positive: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"`{name}` must be a real number, got {value!r} ({type(value).__name__}).")
    value = float(value)
    if positive and not value > 0.0:
        raise ValueError(f"`{name}` must be > 0, got {value}.")
    return value


@keras.saving.register_keras_serializable(package="albert_tf")
class WarmupPolynomialDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warmup, then polynomial (linear by default) decay to 0, both counted from step 0.

    Exactly the schedule of google-research/albert `optimization.create_optimizer` (with its
    default `start_warmup_step=0`):

    ```
    decayed(step) = peak * (1 - min(step, num_train_steps) / num_train_steps) ** power
    lr(step)      = peak * step / num_warmup_steps   if step < num_warmup_steps
                    decayed(step)                    otherwise
    ```

    The decay part is Keras's own `PolynomialDecay` (which has the semantics of TF1's
    `tf.train.polynomial_decay` with `cycle=False`). The step may be any integer or float tensor
    (Keras optimizers pass their int64 `iterations`); the schedule is pure tensor arithmetic and
    compiles under XLA.

    Args:
        num_train_steps: Total number of optimizer updates; the rate reaches 0 there and stays 0.
        num_warmup_steps: Length of the linear warmup; 0 disables warmup, as in the original.
        peak_learning_rate: The learning rate the warmup climbs towards (`init_lr` of the
            original); defaults to `PRETRAINING_PEAK_LEARNING_RATE` (0.00176).
        power: Exponent of the polynomial decay (`poly_power` of the original); 1.0 is linear.
        name: Name scope of the ops.

    Raises:
        TypeError: If a step count is not an integer or a rate is not a real number.
        ValueError: If `num_train_steps < 1`, `num_warmup_steps < 0`,
            `num_warmup_steps > num_train_steps`, or `peak_learning_rate`/`power` is not positive.
    """

    def __init__(
        self,
        *,
        num_train_steps: int,
        num_warmup_steps: int,
        peak_learning_rate: float = PRETRAINING_PEAK_LEARNING_RATE,
        power: float = 1.0,
        name: str = "WarmupPolynomialDecay",
    ):
        super().__init__()
        self.peak_learning_rate = _check_float("peak_learning_rate", peak_learning_rate, positive=True)
        self.num_train_steps = _check_int("num_train_steps", num_train_steps, 1)
        self.num_warmup_steps = _check_int("num_warmup_steps", num_warmup_steps, 0)
        if self.num_warmup_steps > self.num_train_steps:
            raise ValueError(
                f"`num_warmup_steps` ({self.num_warmup_steps}) exceeds `num_train_steps` "
                f"({self.num_train_steps}): the learning rate would drop to 0 right after warmup."
            )
        self.power = _check_float("power", power, positive=True)
        self.name = name
        self._decay = keras.optimizers.schedules.PolynomialDecay(
            initial_learning_rate=self.peak_learning_rate,
            decay_steps=self.num_train_steps,
            end_learning_rate=0.0,
            power=self.power,
            cycle=False,
            name=f"{name}_decay",
        )

    def __call__(self, step):
        with keras.name_scope(self.name):
            decayed = self._decay(step)
            if not self.num_warmup_steps:
                return decayed
            step_float = ops.cast(step, decayed.dtype)
            warmup_steps = ops.cast(self.num_warmup_steps, decayed.dtype)
            warmup = ops.multiply(ops.divide(step_float, warmup_steps), self.peak_learning_rate)
            return ops.where(ops.less(step_float, warmup_steps), warmup, decayed)

    def get_config(self):
        return {
            "peak_learning_rate": self.peak_learning_rate,
            "num_train_steps": self.num_train_steps,
            "num_warmup_steps": self.num_warmup_steps,
            "power": self.power,
            "name": self.name,
        }
