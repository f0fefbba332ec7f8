"""Training components of the original ALBERT recipe: LAMB and AdamW optimizers, the warmup +
linear-decay learning-rate schedule, and `create_optimizer` that combines them.

The names below load their modules (and Keras, and TensorFlow) when first read: the fine-tuning
recipes and run configurations (`recipes.py`, `finetuning.py`) need neither, and a command that
only resolves settings (`albert-tf pipeline run` refusing a bad path) should not pay for them."""

_OPTIMIZERS = ("ALBERT_EXCLUDE_FROM_WEIGHT_DECAY", "DEFAULT_GLOBAL_CLIPNORM", "DEFAULT_WEIGHT_DECAY_RATE",
               "AdamWeightDecayOptimizer", "LAMBOptimizer", "create_optimizer")
_SCHEDULES = ("PRETRAINING_PEAK_LEARNING_RATE", "WarmupPolynomialDecay")

__all__ = sorted(_OPTIMIZERS + _SCHEDULES)


def __getattr__(name):
    if name in _OPTIMIZERS:
        from albert_tf.training import optimizers

        return getattr(optimizers, name)
    if name in _SCHEDULES:
        from albert_tf.training import schedules

        return getattr(schedules, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
