"""Fine-tuning hyper-parameters: `resolve_hyperparameters`, the one place their defaults are decided.

`albert-tf finetune` (`albert_tf.tasks.runner.finetune`), the pipeline's Trainer, its TFX module,
`PipelineSettings`, `albert-tf distill` and the raw-text models' `compile("auto")` all resolve
here, in this order, each layer over the one before:

1. the task's preset (`TaskFamily.preset()`: the original release's GLUE, SQuAD and RACE values),
   else `GENERIC_DEFAULTS`;
2. the recipe for the model's size (`albert_tf.training.recipes.recommended_recipe`): the pooling,
   Adam's bias correction, the learning rate unless a preset gives one for a base-size model (the
   presets' rates are the paper's, for base-size models and larger; smaller encoders collapse at
   them: BENCHMARKS.md, "Fine-tuning recipes"), and token tagging's epochs;
3. the user's values.

The length of the run is counted by one formula: epochs become optimizer updates with
`albert_tf.training.finetuning.steps_for_epochs` (full batches, as the run trains), once the
training-set size is known (`FinetuningHyperparameters.schedule`).
"""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Any, Dict, NamedTuple, Optional

from albert_tf.kinds import RECIPE_TAGGING
from albert_tf.tasks.errors import TaskError, param
from albert_tf.tasks.presets import TaskPreset

if TYPE_CHECKING:
    from albert_tf.training.recipes import FinetuningRecipe

# Defaults of the non-GLUE tasks: the BERT/ALBERT fine-tuning recipe's usual values.
GENERIC_DEFAULTS = dict(learning_rate=2e-5, batch_size=32, num_epochs=3.0, warmup_proportion=0.1, max_seq_length=128)

# The user's values `resolve_hyperparameters` takes, named as `albert_tf.tasks.runner.FinetuneSettings`
# (the flags of `albert-tf finetune`) names them.
USER_VALUES = (
    "learning_rate", "batch_size", "eval_batch_size", "max_seq_length", "dropout", "encoder_dropout", "pooling",
    "bias_correction", "num_train_steps", "num_epochs", "warmup_steps", "warmup_proportion",
    "gradient_accumulation_steps",
)


class TrainingSchedule(NamedTuple):
    """The length of a run in optimizer updates."""

    num_train_steps: int
    warmup_steps: int


@dataclasses.dataclass(frozen=True)
class FinetuningHyperparameters:
    """The resolved hyper-parameters of one fine-tuning run.

    The length is one of `num_train_steps` and `num_epochs` (the other None), the warmup one of
    `warmup_steps` and `warmup_proportion`; `schedule` turns them into updates.

    Attributes:
        learning_rate: Peak AdamW learning rate.
        batch_size, eval_batch_size: Training and evaluation batch sizes.
        max_seq_length: Sequence length.
        dropout: Dropout before the task head.
        encoder_dropout: Dropout inside the encoder (None: the encoder configuration's).
        pooling: The classifier's pooling, "mean" or "cls".
        bias_correction: Adam's bias correction in the AdamW update.
        num_train_steps: Optimizer updates, when fixed (the user's or the preset's).
        num_epochs: Passes over the training data, when the length is counted in epochs.
        warmup_steps: Warmup updates, when fixed (the user's, or the preset's with its steps).
        warmup_proportion: Share of the updates spent in warmup, otherwise.
        gradient_accumulation_steps: Batches per update (an epoch's updates count them).
        preset: The task's preset, if it has one.
        recipe: The recipe for the model's size.
    """

    learning_rate: float
    batch_size: int
    eval_batch_size: int
    max_seq_length: int
    dropout: float
    encoder_dropout: Optional[float]
    pooling: str
    bias_correction: bool
    num_train_steps: Optional[int]
    num_epochs: Optional[float]
    warmup_steps: Optional[int]
    warmup_proportion: Optional[float]
    gradient_accumulation_steps: int
    preset: Optional[TaskPreset]
    recipe: FinetuningRecipe

    def schedule(self, num_train: int) -> TrainingSchedule:
        """The run's updates and warmup updates for `num_train` training elements.

        Raises:
            TaskError: The warmup is longer than the run.
        """
        # `albert_tf.training` loads TensorFlow: imported here, so that the task template, which
        # re-exports GENERIC_DEFAULTS, stays light.
        from albert_tf.training.finetuning import steps_for_epochs

        steps = self.num_train_steps
        if steps is None:
            steps = steps_for_epochs(num_train, self.num_epochs, self.batch_size, self.gradient_accumulation_steps)
        warmup = self.warmup_steps if self.warmup_steps is not None else int(steps * self.warmup_proportion)
        if warmup > steps:
            raise TaskError(f"{param('warmup_steps')} ({warmup}) exceeds the number of training steps ({steps})")
        return TrainingSchedule(steps, warmup)

    def to_dict(self) -> Dict[str, Any]:
        """The resolved values as JSON-ready data (what a model directory's `task.json` records as
        `training`), the preset and recipe nested."""
        return json.loads(json.dumps(dataclasses.asdict(self), default=str))

    def for_plan(self) -> Dict[str, Any]:
        """The mapping a family's `plan` reads (`albert_tf.tasks.family.TaskFamily.plan`)."""
        preset = self.preset
        return {
            "preset": preset,
            "learning_rate": self.learning_rate,
            "batch_size": self.batch_size,
            "eval_batch_size": self.eval_batch_size,
            "max_seq_length": self.max_seq_length,
            "dropout": self.dropout,
            "encoder_dropout": self.encoder_dropout,
            "metrics": list(preset.metrics) if preset else None,
            "best_metric": preset.best_metric if preset else None,
            "pooling": self.pooling,
            "bias_correction": self.bias_correction,
        }


def resolve_hyperparameters(
    family,
    model_config,
    *,
    use_preset: bool = True,
    learning_rate: Optional[float] = None,
    batch_size: Optional[int] = None,
    eval_batch_size: Optional[int] = None,
    max_seq_length: Optional[int] = None,
    dropout: Optional[float] = None,
    encoder_dropout: Optional[float] = None,
    pooling: Optional[str] = None,
    bias_correction: Optional[bool] = None,
    num_train_steps: Optional[int] = None,
    num_epochs: Optional[float] = None,
    warmup_steps: Optional[int] = None,
    warmup_proportion: Optional[float] = None,
    gradient_accumulation_steps: int = 1,
) -> FinetuningHyperparameters:
    """The hyper-parameters of a run of `family`'s task on an encoder of `model_config`: the
    task's preset, then the recipe for the model's size, then the values given here (None: not
    given).

    Args:
        family: The task's `albert_tf.tasks.family.TaskFamily` (its `preset()` and `recipe_kind`),
            or a recipe kind (`albert_tf.kinds.RECIPE_*`) for a model that has no task preset
            (the raw-text models).
        model_config: The encoder's `AlbertConfig` (anything with `hidden_size`).
        use_preset: False skips layer 1 (the generic defaults stand in for it). Distillation
            does: the presets are the paper's values for fine-tuning a pretrained encoder of
            base size and up, a student learns from soft labels at the rate for its own size.
        learning_rate, ...: The user's values, as `FinetuneSettings` names them.
    """
    from albert_tf.training.recipes import recommended_recipe  # TensorFlow: see `schedule`

    if isinstance(family, str):
        preset, recipe_kind = None, family
    else:
        preset, recipe_kind = (family.preset() if use_preset else None), family.recipe_kind
    recipe = recommended_recipe(model_config, recipe_kind)

    # 1. The task's preset, else the generic defaults.
    if preset is not None:
        rate, batch, length = preset.learning_rate, preset.batch_size, preset.max_seq_length
        head_dropout, inner_dropout = preset.classifier_dropout, preset.encoder_dropout
        steps, epochs, preset_warmup = preset.num_train_steps, None, preset.warmup_steps
    else:
        rate, batch, length = GENERIC_DEFAULTS["learning_rate"], GENERIC_DEFAULTS["batch_size"], GENERIC_DEFAULTS["max_seq_length"]
        head_dropout, inner_dropout = 0.1, None
        steps, epochs, preset_warmup = None, GENERIC_DEFAULTS["num_epochs"], None

    # 2. The recipe for the model's size.
    if preset is None or recipe.size_class != "base":
        rate = recipe.learning_rate
    if recipe_kind == RECIPE_TAGGING:
        # Entity tags are sparse: a small tagger finds entities only after the recipe's longer run.
        steps, epochs, preset_warmup = None, recipe.epochs, None

    # 3. The user's values. A preset's warmup belongs to its steps: a length given drops it.
    if num_train_steps is not None:
        steps, epochs, preset_warmup = num_train_steps, None, None
    elif num_epochs is not None:
        steps, epochs, preset_warmup = None, num_epochs, None
    if warmup_steps is not None:
        warmup, proportion = warmup_steps, None
    elif warmup_proportion is not None:
        warmup, proportion = None, warmup_proportion
    elif preset_warmup is not None:
        warmup, proportion = preset_warmup, None
    else:
        warmup, proportion = None, GENERIC_DEFAULTS["warmup_proportion"]
    batch = batch if batch_size is None else batch_size
    return FinetuningHyperparameters(
        learning_rate=rate if learning_rate is None else learning_rate,
        batch_size=batch,
        eval_batch_size=eval_batch_size or batch,
        max_seq_length=length if max_seq_length is None else max_seq_length,
        dropout=head_dropout if dropout is None else dropout,
        encoder_dropout=inner_dropout if encoder_dropout is None else encoder_dropout,
        pooling=pooling or recipe.pooling,
        bias_correction=recipe.bias_correction if bias_correction is None else bias_correction,
        num_train_steps=steps,
        num_epochs=epochs,
        warmup_steps=warmup,
        warmup_proportion=proportion,
        gradient_accumulation_steps=gradient_accumulation_steps,
        preset=preset,
        recipe=recipe,
    )
