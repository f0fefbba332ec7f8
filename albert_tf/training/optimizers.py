"""The original ALBERT optimizers, LAMB and AdamW, as Keras 3 optimizers (TensorFlow backend).

Both follow google-research/albert (`lamb_optimizer.LAMBOptimizer` and
`optimization.AdamWeightDecayOptimizer`, the latter inherited from BERT) update for update:

```
m = beta_1 * m + (1 - beta_1) * g
v = beta_2 * v + (1 - beta_2) * g**2
update = m / (sqrt(v) + epsilon)              # no bias correction
update += weight_decay_rate * w               # unless w is excluded from weight decay
LAMB:  r = ||w|| / ||update||  (1 if either norm is 0; 1 if w is excluded from layer adaptation)
       w -= lr * r * update
AdamW: w -= lr * update
```

Keras's own `keras.optimizers.Lamb` / `AdamW` differ (bias correction, decoupled decay applied
before the update, no exclusion from layer adaptation), hence these classes. Keras's base-class
`weight_decay` is never used: the decay is part of the update, before the trust ratio.

What the Keras base class provides and how it is used here:

* Gradient clipping: `global_clipnorm=1.0` is the original `tf.clip_by_global_norm(grads, 1.0)`.
  Unlike stock Keras 3, which clips each replica's gradients before the cross-replica sum, these
  optimizers clip the aggregated gradients under `tf.distribute`, so a multi-replica step equals
  a single-device step on the whole batch.
* Gradient accumulation: `gradient_accumulation_steps=N` applies one update every N calls with the
  mean of the N gradients (clipped after averaging), exactly one step on the mean gradient, so N
  micro-batches of B examples train like batches of N*B. The learning-rate schedule is evaluated
  at the number of *updates* done (`optimizer.iterations`), not at the number of micro-batches as
  stock Keras does, so `num_train_steps`/`num_warmup_steps` keep counting optimizer updates as in
  the original. Stock Keras 3 cannot accumulate under tf.distribute (its update sits in a `cond`
  that would synchronise replicas); here the gradients are summed across replicas at every
  micro-batch and only the per-device writes are conditional, so it works under
  MirroredStrategy too, at the price of one all-reduce per micro-batch.
* Sparse (`tf.IndexedSlices`) gradients, e.g. of embedding lookups, are densified: the original
  updates the whole table every step too (its moments decay everywhere and the trust ratio needs
  the full update's norm).

`create_optimizer` assembles an optimizer the way `optimization.create_optimizer` does.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Sequence

import keras
import tensorflow as tf
from keras import ops

from albert_tf.keras_internals import check_optimizer_hooks, merge_call_function
from albert_tf.training.schedules import PRETRAINING_PEAK_LEARNING_RATE, WarmupPolynomialDecay

# The optimizers below override private Keras hooks: fail here, loudly, if a Keras upgrade removed one.
check_optimizer_hooks()

# Variable-name patterns (regular expressions, searched) excluded from weight decay and, by
# default, from LAMB's layer adaptation, as in the original `create_optimizer`.
ALBERT_EXCLUDE_FROM_WEIGHT_DECAY = ("LayerNorm", "layer_norm", "bias")
DEFAULT_WEIGHT_DECAY_RATE = 0.01
DEFAULT_GLOBAL_CLIPNORM = 1.0

_TENSOR_SUFFIX = re.compile(r"^(.*):\d+$")


def _variable_name(variable) -> str:
    """The name patterns are matched against: the Keras path (`embeddings/LayerNorm/gamma`), else
    the `tf.Variable` name without its `:0` suffix."""
    name = getattr(variable, "path", None) or variable.name
    match = _TENSOR_SUFFIX.match(name)
    return match.group(1) if match else name


def _check_patterns(arg_name: str, patterns) -> tuple[str, ...] | None:
    if patterns is None:
        return None
    if isinstance(patterns, (str, bytes)) or not isinstance(patterns, Sequence):
        raise TypeError(
            f"`{arg_name}` must be a list of regular-expression strings, got {patterns!r}."
        )
    checked = []
    for pattern in patterns:
        if not isinstance(pattern, str):
            raise TypeError(f"`{arg_name}` must contain only strings, got {pattern!r}.")
        try:
            re.compile(pattern)
        except re.error as error:
            raise ValueError(f"`{arg_name}` holds an invalid regular expression {pattern!r}: {error}") from None
        checked.append(pattern)
    return tuple(checked)


def _matches_any(name: str, patterns: tuple[str, ...] | None) -> bool:
    return bool(patterns) and any(re.search(pattern, name) is not None for pattern in patterns)


def _check_rate(name: str, value, low: float, high: float | None) -> float:
    """`value` as a float in `[low, high)` (`[low, inf)` without `high`)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"`{name}` must be a real number, got {value!r} ({type(value).__name__}).")
    value = float(value)
    if not value >= low or (high is not None and not value < high):
        bounds = f">= {low}" if high is None else f"in [{low}, {high})"
        raise ValueError(f"`{name}` must be {bounds}; got {value}.")
    return value


class _AlbertAdamBase(keras.optimizers.Optimizer):
    """Shared machinery of the two original optimizers: un-bias-corrected Adam moments, weight
    decay inside the update, clipping after cross-replica aggregation, dense gradients and a
    schedule that counts optimizer updates."""

    def __init__(
        self,
        learning_rate,
        weight_decay_rate: float,
        beta_1: float,
        beta_2: float,
        epsilon: float,
        exclude_from_weight_decay,
        global_clipnorm,
        name,
        bias_correction: bool = False,
        **kwargs,
    ):
        # Keras's decoupled `weight_decay` would shrink the weights before `update_step`, which is
        # not the original algorithm; `from_config` of our own configs never carries it.
        weight_decay = kwargs.pop("weight_decay", None)
        if weight_decay is not None:
            raise ValueError(
                f"{type(self).__name__} applies weight decay inside its update as the original "
                f"does; pass `weight_decay_rate` instead of Keras's `weight_decay` (got {weight_decay!r})."
            )
        super().__init__(
            learning_rate=learning_rate,
            weight_decay=None,
            global_clipnorm=global_clipnorm,
            name=name,
            **kwargs,
        )
        self.weight_decay_rate = _check_rate("weight_decay_rate", weight_decay_rate, 0.0, None)
        self.beta_1 = _check_rate("beta_1", beta_1, 0.0, 1.0)
        self.beta_2 = _check_rate("beta_2", beta_2, 0.0, 1.0)
        self.epsilon = _check_rate("epsilon", epsilon, 0.0, None)
        if not isinstance(bias_correction, bool):
            raise TypeError(f"`bias_correction` must be a bool; got {bias_correction!r}.")
        self.bias_correction = bias_correction
        # Not named `exclude_from_weight_decay`: that is a method of the Keras base class.
        self.weight_decay_exclusions = _check_patterns("exclude_from_weight_decay", exclude_from_weight_decay)
        self._excluded_variable_keys = frozenset()

    def exclude_from_weight_decay(self, var_list=None, var_names=None):
        """Excludes more variables from weight decay (the Keras `Optimizer` API).

        Must be called before the optimizer is built. `var_names` are added to the name patterns
        (and so are saved by `get_config`); `var_list` variables are excluded by identity. For
        `LAMBOptimizer` without an explicit `exclude_from_layer_adaptation`, both also exclude
        from layer adaptation, as the constructor's list does.

        Args:
            var_list: Variables to exclude.
            var_names: Regular expressions searched in the variables' paths.

        Raises:
            ValueError: If the optimizer is already built or a pattern is invalid.
        """
        if self.built:
            raise ValueError("`exclude_from_weight_decay()` must be called before the optimizer is built.")
        added = _check_patterns("var_names", list(var_names or ()))
        if added:
            self.weight_decay_exclusions = (self.weight_decay_exclusions or ()) + added
        self._excluded_variable_keys = self._excluded_variable_keys | {
            self._var_key(variable) for variable in (var_list or ())
        }

    def _excluded_from_weight_decay(self, variable, name: str) -> bool:
        return self._var_key(variable) in self._excluded_variable_keys or _matches_any(
            name, self.weight_decay_exclusions
        )

    def _uses_layer_adaptation(self, variable, name: str) -> bool:
        return False

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self._adam_m, self._adam_v = self.add_optimizer_variables(var_list, ["adam_m", "adam_v"])
        # Decided once from the Keras paths: inside `update_step` the TF backend hands over the
        # raw `tf.Variable` (or a replica's component of it), whose name lacks the layer path.
        names = [_variable_name(variable) for variable in var_list]
        self._decay_flags = tuple(
            bool(self.weight_decay_rate) and not self._excluded_from_weight_decay(variable, name)
            for variable, name in zip(var_list, names)
        )
        self._adaptation_flags = tuple(
            self._uses_layer_adaptation(variable, name) for variable, name in zip(var_list, names)
        )

    def _built_index(self, variable) -> int:
        if not self.built:
            raise ValueError(f"{self.name} is not built yet: call `build(variables)` or train first.")
        return self._get_variable_index(variable)

    def uses_weight_decay(self, variable) -> bool:
        """Whether `variable` (one the optimizer was built with) gets weight decay."""
        index = self._built_index(variable)
        return self._decay_flags[index]

    def uses_layer_adaptation(self, variable) -> bool:
        """Whether `variable` (one the optimizer was built with) gets LAMB's trust ratio."""
        index = self._built_index(variable)
        return self._adaptation_flags[index]

    def apply(self, grads, trainable_variables=None):
        grads = [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g for g in grads]
        return super().apply(grads, trainable_variables)

    def _clip_gradients(self, grads):
        # Clipping is deferred to `_backend_update_step`, after the cross-replica sum; the base
        # class would clip each replica's partial gradients, which is not a global-norm clip.
        return grads

    def _backend_update_step(self, grads, trainable_variables, learning_rate):
        trainable_variables = [
            v.value if isinstance(v, keras.Variable) else v for v in trainable_variables
        ]
        grads_and_vars = self._all_reduce_sum_gradients(list(zip(grads, trainable_variables)))
        grads = super()._clip_gradients([g for g, _ in grads_and_vars])
        merge_call_function()(
            self._distributed_tf_update_step,
            self._distribution_strategy,
            list(zip(grads, trainable_variables)),
            learning_rate,
        )

    def _backend_apply_gradients(self, grads, trainable_variables):
        if not self.gradient_accumulation_steps:
            super()._backend_apply_gradients(grads, trainable_variables)
            return
        # The base class branches with a `cond` between "accumulate" and "update", both of which
        # synchronise replicas, which tf.distribute forbids inside control flow. Here the
        # cross-replica sum and the clipping run unconditionally and only the per-device writes
        # are conditional. Accumulating the already-summed gradients keeps the accumulators of
        # all replicas identical.
        steps = self.gradient_accumulation_steps
        is_update_step = ops.equal(ops.mod(self._iterations + 1, steps), 0)
        accumulators = [
            self._accumulated_gradients[self._get_variable_index(v)].value for v in trainable_variables
        ]
        variables = [v.value if isinstance(v, keras.Variable) else v for v in trainable_variables]
        grads_and_vars = self._all_reduce_sum_gradients(list(zip(grads, variables)))
        grads = [g for g, _ in grads_and_vars]
        mean_grads = super()._clip_gradients(
            [ops.divide(ops.add(g, ops.cast(acc, g.dtype)), steps) for g, acc in zip(grads, accumulators)]
        )
        merge_call_function()(
            self._distributed_accumulate_or_update,
            self._distribution_strategy,
            grads,
            mean_grads,
            variables,
            accumulators,
            is_update_step,
            self.learning_rate,
        )
        if self.use_ema:
            self._update_model_variables_moving_average(self._trainable_variables)
            if self.ema_overwrite_frequency:
                ops.cond(
                    ops.equal(ops.mod(self.iterations + 1, self.ema_overwrite_frequency), 0),
                    lambda: self._overwrite_model_variables_with_average_value(self._trainable_variables),
                    lambda: None,
                )

    def _distributed_accumulate_or_update(
        self, distribution, grads, mean_grads, variables, accumulators, is_update_step, learning_rate
    ):
        def maybe_update(variable, mean_grad, is_update, lr):
            return tf.cond(
                is_update, lambda: self.update_step(mean_grad, variable, lr), lambda: None
            )

        def accumulate_or_reset(accumulator, grad, is_update):
            return accumulator.assign(
                tf.where(is_update, tf.zeros_like(accumulator), accumulator + tf.cast(grad, accumulator.dtype))
            )

        for grad, mean_grad, variable, accumulator in zip(grads, mean_grads, variables, accumulators):
            distribution.extended.update(
                variable, maybe_update, args=(mean_grad, is_update_step, learning_rate), group=False
            )
            distribution.extended.update(
                accumulator, accumulate_or_reset, args=(grad, is_update_step), group=False
            )

    def _get_current_learning_rate(self):
        # `self.iterations` counts optimizer updates even under gradient accumulation (the base
        # class would feed the schedule the micro-batch count).
        if isinstance(self._learning_rate, keras.optimizers.schedules.LearningRateSchedule):
            return self._learning_rate(self.iterations)
        return super()._get_current_learning_rate()

    def _adam_update(self, gradient, variable):
        """Advances the moments of `variable` and returns `m / (sqrt(v) + eps) [+ wd * w]`."""
        index = self._get_variable_index(variable)
        dtype = variable.dtype
        gradient = ops.cast(gradient, dtype)
        # `1 - beta` is formed in Python double precision as in the original: in float32,
        # 1 - 0.999 is off by 1.3e-5 relative.
        m = self._adam_m[index]
        v = self._adam_v[index]
        next_m = ops.add(
            ops.multiply(ops.cast(self.beta_1, dtype), m),
            ops.multiply(ops.cast(1.0 - self.beta_1, dtype), gradient),
        )
        next_v = ops.add(
            ops.multiply(ops.cast(self.beta_2, dtype), v),
            ops.multiply(ops.cast(1.0 - self.beta_2, dtype), ops.square(gradient)),
        )
        if self.bias_correction:
            # Adam's correction of the zero-initialised moments (`iterations` counts the updates
            # done before this one). Without it the first updates are ~sqrt(1 - beta_2) / (1 -
            # beta_1) = 0.3x too small and then overshoot, which Mosbach et al. (2021) found makes
            # BERT fine-tuning on small data collapse to the majority class in many seeds.
            # 1 - beta**t as -expm1(t * log(beta)), the log taken in double precision: in float32,
            # 1 - 0.999**t loses ~1e-5 relative at small t.
            step = ops.cast(self.iterations + 1, dtype)
            m_hat = ops.divide(next_m, -ops.expm1(step * ops.cast(math.log(self.beta_1), dtype)))
            v_hat = ops.divide(next_v, -ops.expm1(step * ops.cast(math.log(self.beta_2), dtype)))
            update = ops.divide(m_hat, ops.add(ops.sqrt(v_hat), ops.cast(self.epsilon, dtype)))
        else:
            update = ops.divide(next_m, ops.add(ops.sqrt(next_v), ops.cast(self.epsilon, dtype)))
        if self._decay_flags[index]:
            update = ops.add(update, ops.multiply(ops.cast(self.weight_decay_rate, dtype), variable))
        self.assign(m, next_m)
        self.assign(v, next_v)
        return update

    def get_config(self):
        config = super().get_config()
        config.pop("weight_decay", None)
        config.update(
            {
                "weight_decay_rate": self.weight_decay_rate,
                "beta_1": self.beta_1,
                "beta_2": self.beta_2,
                "epsilon": self.epsilon,
                "bias_correction": self.bias_correction,
                "exclude_from_weight_decay": (
                    None if self.weight_decay_exclusions is None else list(self.weight_decay_exclusions)
                ),
            }
        )
        return config


@keras.saving.register_keras_serializable(package="albert_tf")
class LAMBOptimizer(_AlbertAdamBase):
    """LAMB exactly as google-research/albert `lamb_optimizer.LAMBOptimizer` (no bias correction).

    Per variable `w` with gradient `g`:

    ```
    m = beta_1 * m + (1 - beta_1) * g
    v = beta_2 * v + (1 - beta_2) * g**2
    update = m / (sqrt(v) + epsilon) + weight_decay_rate * w    # decay unless excluded
    r = ||w|| / ||update||  if both norms are > 0 else 1          # 1 if excluded from adaptation
    w = w - learning_rate * r * update
    ```

    A variable is excluded when one of the patterns is found (`re.search`) in its Keras path, e.g.
    `embeddings/LayerNorm/gamma` or `group_0_inner_group_0_attention_1/query/bias`.

    Args:
        learning_rate: A float, a `LearningRateSchedule` (see `WarmupPolynomialDecay`) or a
            callable; schedules see the number of optimizer updates.
        weight_decay_rate: Coefficient of `w` added to the update.
        beta_1: Decay of the first moment.
        beta_2: Decay of the second moment.
        epsilon: Added to `sqrt(v)`.
        exclude_from_weight_decay: Name patterns without weight decay; defaults to
            `ALBERT_EXCLUDE_FROM_WEIGHT_DECAY` (`LayerNorm`, `layer_norm`, `bias`). `[]` or
            `None` excludes nothing.
        exclude_from_layer_adaptation: Name patterns updated without the trust ratio; `None` (the
            default) means the same as `exclude_from_weight_decay`, as in the original; `[]`
            adapts every variable.
        global_clipnorm: Clip the aggregated gradients to this global norm (the original's
            `tf.clip_by_global_norm(grads, 1.0)`); `None` disables clipping.
        name: Optimizer name (prefix of its variables).
        **kwargs: Other `keras.optimizers.Optimizer` arguments, e.g. `gradient_accumulation_steps`
            (see the module docstring), `use_ema`, `loss_scale_factor`. Keras's `weight_decay` is
            rejected: use `weight_decay_rate`.

    Raises:
        TypeError / ValueError: For out-of-range hyperparameters, pattern lists that are not lists
            of valid regular expressions, or a non-`None` Keras `weight_decay`.
    """

    def __init__(
        self,
        learning_rate=0.001,
        weight_decay_rate: float = DEFAULT_WEIGHT_DECAY_RATE,
        beta_1: float = 0.9,
        beta_2: float = 0.999,
        epsilon: float = 1e-6,
        exclude_from_weight_decay=ALBERT_EXCLUDE_FROM_WEIGHT_DECAY,
        exclude_from_layer_adaptation=None,
        global_clipnorm=DEFAULT_GLOBAL_CLIPNORM,
        name: str = "LAMBOptimizer",
        **kwargs,
    ):
        super().__init__(
            learning_rate=learning_rate,
            weight_decay_rate=weight_decay_rate,
            beta_1=beta_1,
            beta_2=beta_2,
            epsilon=epsilon,
            exclude_from_weight_decay=exclude_from_weight_decay,
            global_clipnorm=global_clipnorm,
            name=name,
            **kwargs,
        )
        self.layer_adaptation_exclusions = _check_patterns(
            "exclude_from_layer_adaptation", exclude_from_layer_adaptation
        )

    def _uses_layer_adaptation(self, variable, name: str) -> bool:
        if self.layer_adaptation_exclusions is None:
            # As the original: the weight-decay exclusions, whatever the decay rate.
            return not self._excluded_from_weight_decay(variable, name)
        return not _matches_any(name, self.layer_adaptation_exclusions)

    def update_step(self, gradient, variable, learning_rate):
        """Applies one LAMB update to `variable`."""
        update = self._adam_update(gradient, variable)
        if self._adaptation_flags[self._get_variable_index(variable)]:
            w_norm = ops.sqrt(ops.sum(ops.square(variable)))
            u_norm = ops.sqrt(ops.sum(ops.square(update)))
            one = ops.ones_like(w_norm)
            # The inner `where` picks 1 before a 0/0 or x/0 could be used.
            ratio = ops.where(
                ops.greater(w_norm, 0.0),
                ops.where(ops.greater(u_norm, 0.0), ops.divide(w_norm, u_norm), one),
                one,
            )
            update = ops.multiply(ratio, update)
        self.assign_sub(variable, ops.multiply(ops.cast(learning_rate, variable.dtype), update))

    def get_config(self):
        config = super().get_config()
        config["exclude_from_layer_adaptation"] = (
            None if self.layer_adaptation_exclusions is None else list(self.layer_adaptation_exclusions)
        )
        return config


@keras.saving.register_keras_serializable(package="albert_tf")
class AdamWeightDecayOptimizer(_AlbertAdamBase):
    """BERT/ALBERT's `AdamWeightDecayOptimizer`: Adam without bias correction, decay in the update.

    Per variable `w` with gradient `g`:

    ```
    m = beta_1 * m + (1 - beta_1) * g
    v = beta_2 * v + (1 - beta_2) * g**2
    update = m / (sqrt(v) + epsilon) + weight_decay_rate * w    # decay unless excluded
    w = w - learning_rate * update
    ```

    The original recommends it for fine-tuning (also of LAMB-pretrained models).

    Args:
        learning_rate: A float, a `LearningRateSchedule` or a callable; schedules see the number
            of optimizer updates.
        weight_decay_rate: Coefficient of `w` added to the update.
        beta_1: Decay of the first moment.
        beta_2: Decay of the second moment.
        epsilon: Added to `sqrt(v)`.
        exclude_from_weight_decay: Name patterns (`re.search` on the Keras path) without weight
            decay; defaults to `ALBERT_EXCLUDE_FROM_WEIGHT_DECAY`.
        global_clipnorm: Clip the aggregated gradients to this global norm; `None` disables it.
        name: Optimizer name (prefix of its variables).
        bias_correction: Divide the moments by `1 - beta**t` as Adam does (False: the original
            BERT/ALBERT update). `albert_tf.training.recipes` turns it on for fine-tuning.
        **kwargs: Other `keras.optimizers.Optimizer` arguments (`gradient_accumulation_steps`, ...);
            Keras's `weight_decay` is rejected.

    Raises:
        TypeError / ValueError: As `LAMBOptimizer`.
    """

    def __init__(
        self,
        learning_rate=0.001,
        weight_decay_rate: float = DEFAULT_WEIGHT_DECAY_RATE,
        beta_1: float = 0.9,
        beta_2: float = 0.999,
        epsilon: float = 1e-6,
        exclude_from_weight_decay=ALBERT_EXCLUDE_FROM_WEIGHT_DECAY,
        global_clipnorm=DEFAULT_GLOBAL_CLIPNORM,
        name: str = "AdamWeightDecayOptimizer",
        bias_correction: bool = False,
        **kwargs,
    ):
        super().__init__(
            learning_rate=learning_rate,
            weight_decay_rate=weight_decay_rate,
            beta_1=beta_1,
            beta_2=beta_2,
            epsilon=epsilon,
            exclude_from_weight_decay=exclude_from_weight_decay,
            global_clipnorm=global_clipnorm,
            name=name,
            bias_correction=bias_correction,
            **kwargs,
        )

    def update_step(self, gradient, variable, learning_rate):
        """Applies one AdamW update to `variable`."""
        update = self._adam_update(gradient, variable)
        self.assign_sub(variable, ops.multiply(ops.cast(learning_rate, variable.dtype), update))


_OPTIMIZERS = {"lamb": LAMBOptimizer, "adamw": AdamWeightDecayOptimizer}


def create_optimizer(
    name: str = "lamb",
    learning_rate: float = PRETRAINING_PEAK_LEARNING_RATE,
    *,
    num_train_steps: int,
    num_warmup_steps: int,
    weight_decay: float = DEFAULT_WEIGHT_DECAY_RATE,
    clipnorm: float | None = DEFAULT_GLOBAL_CLIPNORM,
    beta_1: float = 0.9,
    beta_2: float = 0.999,
    epsilon: float = 1e-6,
    exclude_from_weight_decay: Sequence[str] | None = ALBERT_EXCLUDE_FROM_WEIGHT_DECAY,
    power: float = 1.0,
    gradient_accumulation_steps: int | None = None,
    bias_correction: bool = False,
) -> LAMBOptimizer | AdamWeightDecayOptimizer:
    """Builds the optimizer of google-research/albert `optimization.create_optimizer`.

    The learning rate is `WarmupPolynomialDecay(num_train_steps, num_warmup_steps, learning_rate,
    power)` and the gradients are clipped to global norm `clipnorm` before the update.

    Args:
        name: `"lamb"` (pretraining) or `"adamw"` (fine-tuning).
        learning_rate: Peak learning rate; defaults to `PRETRAINING_PEAK_LEARNING_RATE`.
        num_train_steps: Number of optimizer updates over which the rate decays to 0.
        num_warmup_steps: Number of linear-warmup updates (0: none).
        weight_decay: The optimizer's `weight_decay_rate` (in-update, not Keras's decoupled one).
        clipnorm: Global-norm clipping threshold; `None` or 0 disables clipping.
        beta_1: Decay of the first moment.
        beta_2: Decay of the second moment.
        epsilon: Added to `sqrt(v)`.
        exclude_from_weight_decay: Name patterns without weight decay (and, for LAMB, without layer
            adaptation).
        power: Exponent of the polynomial decay (`poly_power` of the original).
        gradient_accumulation_steps: Micro-batches per update (>= 2), or `None` for one.
        bias_correction: Adam's bias correction of the moments (False: the original update).

    Returns:
        A `LAMBOptimizer` or `AdamWeightDecayOptimizer`.

    Raises:
        ValueError: For an unknown `name` or invalid hyperparameters.
    """
    if not isinstance(name, str) or name.lower() not in _OPTIMIZERS:
        raise ValueError(f"Unsupported optimizer {name!r}; expected one of {sorted(_OPTIMIZERS)}.")
    key = name.lower()
    if clipnorm is not None:
        clipnorm = _check_rate("clipnorm", clipnorm, 0.0, None) or None
    schedule = WarmupPolynomialDecay(
        num_train_steps=num_train_steps,
        num_warmup_steps=num_warmup_steps,
        peak_learning_rate=learning_rate,
        power=power,
    )
    return _OPTIMIZERS[key](
        learning_rate=schedule,
        weight_decay_rate=weight_decay,
        beta_1=beta_1,
        beta_2=beta_2,
        epsilon=epsilon,
        exclude_from_weight_decay=exclude_from_weight_decay,
        global_clipnorm=clipnorm,
        gradient_accumulation_steps=gradient_accumulation_steps,
        bias_correction=bias_correction,
    )
