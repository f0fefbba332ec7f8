"""Fine-tuning recipes that learn, chosen by model size: `recommended_recipe(config)`.

The original fine-tuning recipe (AdamW without bias correction, learning rates of 1e-5 to 5e-5,
the `[CLS]` pooler) is tuned for ALBERT-base and larger, pretrained for days. Applied to the
small encoders a user can train here it collapses: the model answers the majority class for
every input. What `benchmarks/finetune_recipes.py` measured (BENCHMARKS.md, "Fine-tuning
recipes"), and what the recipes below therefore do:

* **bias-corrected AdamW**. Without Adam's correction the zero-initialised second moment makes
  the first few hundred updates up to ~3x larger than the learning rate says; at the learning
  rates small models need, that throws them onto the label prior (Mosbach et al., 2021, saw the
  same with BERT on small data). Corrected, the same rates learn in every seed measured.
* **a learning rate by size**: 1e-3 for hidden sizes up to 256, 1e-4 up to 512, the paper's
  2e-5 for base and larger.
* **mean pooling for small encoders**: the mean of the last layer over the real tokens learns
  from the first steps, where the `[CLS]` pooler of a small or briefly pretrained encoder gives
  nearly the same vector for every text and needs many more updates to leave the prior. Large
  pretrained encoders keep the original `[CLS]` pooler (their checkpoints are trained for it).
* 10 % linear warmup, then linear decay; 3 epochs; batch 32; the best dev evaluation is kept.

A recipe is a plain dataclass: override any field with `dataclasses.replace`.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Dict

# Hidden sizes up to these bounds use the recipe beside them.
_SIZE_CLASSES = (
    (256, "tiny", 1e-3, "mean"),
    (512, "small", 1e-4, "mean"),
    (math.inf, "base", 2e-5, "cls"),
)


@dataclasses.dataclass(frozen=True)
class FinetuningRecipe:
    """The fine-tuning hyperparameters of one run.

    Attributes:
        size_class: "tiny", "small" or "base" (what the recipe was chosen for).
        learning_rate: Peak AdamW learning rate.
        epochs: Passes over the training data.
        batch_size: Training batch size.
        warmup_fraction: Share of the updates spent in linear warmup.
        bias_correction: Adam's bias correction in the AdamW update.
        pooling: The classifier's pooling, "mean" or "cls".
        dropout: Dropout before the task head.
        weight_decay: AdamW's in-update weight decay.
    """

    size_class: str
    learning_rate: float
    epochs: float = 3.0
    batch_size: int = 32
    warmup_fraction: float = 0.1
    bias_correction: bool = True
    pooling: str = "mean"
    dropout: float = 0.1
    weight_decay: float = 0.01

    def num_train_steps(self, num_examples: int) -> int:
        """Optimizer updates for `epochs` passes over `num_examples` (at least 1)."""
        return max(1, math.ceil(self.epochs * num_examples / self.batch_size))

    def warmup_steps(self, num_train_steps: int) -> int:
        return int(num_train_steps * self.warmup_fraction)

    def to_dict(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)


def size_class(hidden_size: int) -> str:
    """"tiny" (H <= 256), "small" (H <= 512) or "base" (larger)."""
    for bound, name, _, _ in _SIZE_CLASSES:
        if hidden_size <= bound:
            return name
    raise AssertionError("unreachable: the last bound is infinite")


def recommended_recipe(config) -> FinetuningRecipe:
    """The measured default recipe for an encoder of `config` (an `AlbertConfig`, or anything
    with `hidden_size`)."""
    hidden = int(config.hidden_size)
    for bound, name, learning_rate, pooling in _SIZE_CLASSES:
        if hidden <= bound:
            return FinetuningRecipe(size_class=name, learning_rate=learning_rate, pooling=pooling)
    raise AssertionError("unreachable: the last bound is infinite")
