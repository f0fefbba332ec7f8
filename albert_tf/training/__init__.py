"""Training components of the original ALBERT recipe: LAMB and AdamW optimizers, the warmup +
linear-decay learning-rate schedule, and `create_optimizer` that combines them."""

from albert_tf.training.optimizers import (
    ALBERT_EXCLUDE_FROM_WEIGHT_DECAY,
    DEFAULT_GLOBAL_CLIPNORM,
    DEFAULT_WEIGHT_DECAY_RATE,
    AdamWeightDecayOptimizer,
    LAMBOptimizer,
    create_optimizer,
)
from albert_tf.training.schedules import PRETRAINING_PEAK_LEARNING_RATE, WarmupPolynomialDecay

__all__ = [
    "ALBERT_EXCLUDE_FROM_WEIGHT_DECAY",
    "DEFAULT_GLOBAL_CLIPNORM",
    "DEFAULT_WEIGHT_DECAY_RATE",
    "PRETRAINING_PEAK_LEARNING_RATE",
    "AdamWeightDecayOptimizer",
    "LAMBOptimizer",
    "WarmupPolynomialDecay",
    "create_optimizer",
]
