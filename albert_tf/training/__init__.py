"""Training components of the original ALBERT recipe: LAMB and AdamW optimizers, the warmup +
linear-decay learning-rate schedule, and `create_optimizer` that combines them.

The names below load their modules (and Keras, and TensorFlow) when first read: the fine-tuning
recipes and run configurations (`recipes.py`, `finetuning.py`) need neither, and a command that
only resolves settings (`albert-tf pipeline run` refusing a bad path) should not pay for them."""

from albert_tf._lazy import lazy_attributes as _lazy_attributes

_LAZY = {
    **{name: "albert_tf.training.optimizers" for name in (
        "ALBERT_EXCLUDE_FROM_WEIGHT_DECAY", "DEFAULT_GLOBAL_CLIPNORM", "DEFAULT_WEIGHT_DECAY_RATE",
        "AdamWeightDecayOptimizer", "LAMBOptimizer", "create_optimizer")},
    **{name: "albert_tf.training.schedules" for name in ("PRETRAINING_PEAK_LEARNING_RATE", "WarmupPolynomialDecay")},
}

__all__ = sorted(_LAZY)

__getattr__, __dir__ = _lazy_attributes(__name__, _LAZY, globals())
