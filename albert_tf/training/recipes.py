"""Fine-tuning recipes that learn, chosen by model size: `recommended_recipe(config)`.

The original fine-tuning recipe (AdamW without bias correction, learning rates of 1e-5 to 5e-5,
the `[CLS]` pooler) is tuned for ALBERT-base and larger, pretrained for days. Applied to the
small encoders a user can train here it collapses: the model answers the majority class for
every input. Measured by `benchmarks/finetune_recipes.py` (BENCHMARKS.md, "Fine-tuning
recipes"; a tiny encoder on 4,000 Rotten Tomatoes snippets, 5 seeds each): the original recipe
collapsed in 5 of 5 runs, uncorrected AdamW at 1e-3 in 5 of 5 with `[CLS]` and 1 of 5 with the
token mean (+0.03 over the majority class), bias-corrected AdamW at 1e-3 in 0 of 5 (+0.14 with
`[CLS]`, +0.15 with the mean). Hence:

* **bias-corrected AdamW**. Without Adam's correction the zero-initialised second moment makes
  the first few hundred updates up to ~3x larger than the learning rate says, which throws a
  small model onto the label prior (Mosbach et al., 2021, saw the same with BERT on small data).
* **a learning rate by size**: 1e-3 for hidden sizes up to 256 (measured at H=128 and H=256),
  the paper's 2e-5 for base and larger; 1e-4 in between is interpolated, not measured.
* **mean pooling for small encoders**: the mean of the last layer over the real tokens. The
  `[CLS]` pooled output of a small random or briefly pretrained encoder is the same vector for
  every text (mean pairwise cosine 0.9997), so the head has nothing to read until attention
  learns to route the words into it; the token mean carries them from the first step. Base-size
  and larger keep the `[CLS]` pooler their checkpoints were trained with.
* 10 % linear warmup, then linear decay; batch 32; the best dev evaluation is kept; 3 epochs for
  sentence tasks, 10 for token tagging. Entity tags are sparse (94 % of People's Daily characters
  are "O"): after 3 epochs of 4,000 sentences a tiny encoder from random weights still tags
  everything "O" (entity F1 0 in 5 of 5 seeds); after 10 it finds entities.

A recipe is a plain dataclass: override any field with `dataclasses.replace`.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Dict, Optional


# Hidden sizes up to these bounds use the recipe beside them.
_SIZE_CLASSES = (
    (256, "tiny", 1e-3, "mean"),
    (512, "small", 1e-4, "mean"),
    (math.inf, "base", 2e-5, "cls"),
)


@dataclasses.dataclass(frozen=True)
class FinetuningRecipe:
    """The fine-tuning defaults for a model size: what a run of a task without a preset takes
    (`albert_tf.training.finetuning_config.resolve_finetuning_config`); with a preset, its
    learning rate (below base size), pooling, bias correction, weight decay and clipping.

    Attributes:
        size_class: "tiny", "small" or "base" (what the recipe was chosen for).
        learning_rate: Peak AdamW learning rate.
        epochs: Passes over the training data.
        batch_size: Training batch size.
        warmup_fraction: Share of the updates spent in linear warmup.
        bias_correction: Adam's bias correction in the AdamW update.
        pooling: The classifier's pooling, "mean" or "cls".
        dropout: Dropout before the task head.
        max_seq_length: Sequence length.
        weight_decay: AdamW's in-update weight decay.
        clipnorm: Global-norm gradient clipping (1.0 as the original; None: off).
    """

    size_class: str
    learning_rate: float
    epochs: float = 3.0
    batch_size: int = 32
    warmup_fraction: float = 0.1
    bias_correction: bool = True
    pooling: str = "mean"
    dropout: float = 0.1
    max_seq_length: int = 128
    weight_decay: float = 0.01
    clipnorm: Optional[float] = 1.0

    def to_dict(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)


def size_class(hidden_size: int) -> str:
    """"tiny" (H <= 256), "small" (H <= 512) or "base" (larger)."""
    for bound, name, _, _ in _SIZE_CLASSES:
        if hidden_size <= bound:
            return name
    raise AssertionError("unreachable: the last bound is infinite")


# The task kinds (`TaskSpec.kind`) whose targets are sparse token tags: they train for
# `TAGGING_EPOCHS`, every other kind for `EPOCHS`.
LONG_RUN_KINDS = ("tagging",)
EPOCHS = 3.0
TAGGING_EPOCHS = 10.0


def recommended_recipe(config, task: str = "classification") -> FinetuningRecipe:
    """The measured default recipe for an encoder of `config` (an `AlbertConfig`, or anything
    with `hidden_size`) on a task of kind `task` (`TaskSpec.kind`: "classification",
    "tagging", ...; the recipe differs only in the length of a tagging run)."""
    if not isinstance(task, str) or not task:
        raise ValueError(f"task must be a task kind such as 'classification', got {task!r}")
    hidden = int(config.hidden_size)
    epochs = TAGGING_EPOCHS if task in LONG_RUN_KINDS else EPOCHS
    for bound, name, learning_rate, pooling in _SIZE_CLASSES:
        if hidden <= bound:
            return FinetuningRecipe(size_class=name, learning_rate=learning_rate, pooling=pooling, epochs=epochs)
    raise AssertionError("unreachable: the last bound is infinite")
