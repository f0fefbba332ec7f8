"""The one fine-tuning configuration, `FinetuningConfig(task, optimization, data, runtime)`, and
`resolve_finetuning_config`, the one place its defaults are decided.

Every fine-tuning run is described by one resolved `FinetuningConfig`: `albert-tf finetune`,
`model.finetune`, the pipeline's Trainer and its TFX module, `albert-tf distill` and the
benchmarks build it here and hand it to the one driver (`albert_tf.training.finetuning.run_finetuning`,
through `FinetuningRunConfig.from_config`). The run prints it first (`describe`), the model directory
stores it (`task.json`'s `training`) and `from_pretrained` reads it back (`model.training_config`).

`resolve_finetuning_config` layers, each over the one before:

1. the task's preset (`TaskPreset`: the original release's GLUE, SQuAD and RACE values,
   `albert_tf.tasks.presets`), else the recipe's length, batch, warmup, dropout and sequence length;
2. the recipe for the model's size (`albert_tf.training.recipes.recommended_recipe`): the pooling,
   Adam's bias correction, the weight decay and clipping, the learning rate unless a preset gives
   one for a base-size model (the presets' rates are the paper's, for base-size models and
   larger; smaller encoders collapse at them: BENCHMARKS.md, "Fine-tuning recipes"), and token
   tagging's epochs;
3. the user's values.

The length of a run is counted by one formula, `steps_for_epochs` (full batches, as the run
trains), once the training-set size is known (`FinetuningConfig.schedule`).

This module is plain Python: building a configuration loads no TensorFlow.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Tuple

from albert_tf.errors import ParameterError, param

PRECISIONS = ("float32", "mixed_bfloat16")

# The user's values `resolve_finetuning_config` takes, by the section of the tree they land in.
USER_VALUES: Dict[str, Tuple[str, ...]] = {
    "task": ("dropout", "encoder_dropout", "pooling"),
    "optimization": ("learning_rate", "weight_decay", "bias_correction", "clipnorm", "num_train_steps", "num_epochs",
                     "warmup_steps", "warmup_proportion", "gradient_accumulation_steps"),
    "data": ("batch_size", "eval_batch_size", "max_seq_length"),
    "runtime": ("precision", "strategy", "jit_compile", "seed"),
}
USER_NAMES = tuple(name for names in USER_VALUES.values() for name in names)


class FinetuningError(ParameterError):
    """A fine-tuning run that cannot proceed as configured: one line naming the value to change."""


def steps_per_epoch(num_examples: int, batch_size: int, gradient_accumulation_steps: int = 1) -> int:
    """Optimizer updates in one pass over `num_examples`: full batches only, at least 1.

    The run batches a repeated stream with the remainder dropped, so a last partial batch is no
    step of its own; counting it (rounding up) gave a run of 2 epochs a third, 1-step interval.
    """
    return max(1, int(num_examples) // (int(batch_size) * int(gradient_accumulation_steps)))


def steps_for_epochs(num_examples: int, epochs: float, batch_size: int, gradient_accumulation_steps: int = 1) -> int:
    """`epochs` passes over `num_examples` in optimizer updates (at least 1), on `steps_per_epoch`."""
    per_epoch = steps_per_epoch(num_examples, batch_size, gradient_accumulation_steps)
    # Rounded first: 2.2 * 5 is 11.000000000000002 in floating point, which is 11 steps, not 12.
    return max(1, math.ceil(round(float(epochs) * per_epoch, 6)))


class TrainingSchedule(NamedTuple):
    """The length of a run in optimizer updates."""

    num_train_steps: int
    warmup_steps: int


@dataclasses.dataclass(frozen=True)
class TaskPreset:
    """Fine-tuning defaults of one task, from its original release (`albert_tf.tasks.presets`
    holds the GLUE, SQuAD and RACE values).

    Attributes:
        name: Task name ("sst-2", "mnli", ...).
        learning_rate: Peak learning rate (AdamW, linear warmup then linear decay).
        batch_size: Training batch size.
        num_train_steps: Optimizer updates.
        warmup_steps: Warmup updates.
        max_seq_length: Sequence length.
        encoder_dropout: Dropout inside the encoder during fine-tuning (the paper's "ALBERT DR").
        classifier_dropout: Dropout before the task head ("Classifier DR").
        save_checkpoints_steps: Interval between the original's checkpoints (each evaluated).
        metrics: The metrics the benchmark reports for the task.
        best_metric: The dev metric that selects the kept weights.
    """

    name: str
    learning_rate: float
    batch_size: int
    num_train_steps: int
    warmup_steps: int
    max_seq_length: int = 512
    encoder_dropout: float = 0.0
    classifier_dropout: float = 0.1
    save_checkpoints_steps: int = 100
    metrics: Tuple[str, ...] = ("accuracy",)
    best_metric: str = "accuracy"


@dataclasses.dataclass(frozen=True)
class TaskConfig:
    """What the task's head is built and judged with.

    Attributes:
        name: The task ("sst-2", "classification", ...) or, for a raw-text model fine-tuned in
            Python, its recipe kind.
        dropout: Dropout before the task head.
        encoder_dropout: Dropout inside the encoder (None: the encoder configuration's).
        pooling: The classifier's pooling, "mean" or "cls".
        metrics: The metrics the preset reports (None: the task's own).
        best_metric: The dev metric that keeps the weights (None: the task's own).
    """

    name: str
    dropout: float
    encoder_dropout: Optional[float]
    pooling: str
    metrics: Optional[Tuple[str, ...]] = None
    best_metric: Optional[str] = None


@dataclasses.dataclass(frozen=True)
class OptimizationConfig:
    """AdamW and its schedule. The length is one of `num_train_steps` and `num_epochs` (the other
    None), the warmup one of `warmup_steps` and `warmup_proportion`.

    Attributes:
        learning_rate: Peak learning rate (linear warmup, then linear decay).
        weight_decay: AdamW's in-update weight-decay rate.
        bias_correction: Adam's bias correction in the AdamW update.
        clipnorm: Global-norm gradient clipping (None: off).
        num_train_steps: Optimizer updates, when fixed.
        num_epochs: Passes over the training data, when the length is counted in epochs.
        warmup_steps: Warmup updates, when fixed.
        warmup_proportion: Share of the updates spent in warmup, otherwise.
        gradient_accumulation_steps: Batches per update (an epoch's updates count them).
    """

    learning_rate: float
    weight_decay: float
    bias_correction: bool
    clipnorm: Optional[float]
    num_train_steps: Optional[int]
    num_epochs: Optional[float]
    warmup_steps: Optional[int]
    warmup_proportion: Optional[float]
    gradient_accumulation_steps: int = 1


@dataclasses.dataclass(frozen=True)
class DataConfig:
    """How examples reach the model.

    Attributes:
        batch_size, eval_batch_size: Training and evaluation batch sizes.
        max_seq_length: Sequence length.
    """

    batch_size: int
    eval_batch_size: int
    max_seq_length: int


@dataclasses.dataclass(frozen=True)
class RuntimeConfig:
    """Where and how the run computes.

    Attributes:
        precision: "float32" or "mixed_bfloat16".
        strategy: The `tf.distribute` strategy (`albert_tf.training.strategies.get_strategy`).
        jit_compile: XLA for the train step; None: the device's default
            (`albert_tf.training.strategies.default_jit_compile`).
        seed: Seeds the shuffling, the dropout and a new head.
    """

    precision: str = "float32"
    strategy: str = "default"
    jit_compile: Optional[bool] = None
    seed: int = 12345


@dataclasses.dataclass(frozen=True)
class FinetuningConfig:
    """One resolved fine-tuning run (`resolve_finetuning_config`).

    Attributes:
        task, optimization, data, runtime: The four sections.
        preset: The task's `TaskPreset` it started from, if any (what was decided where).
        recipe: The `albert_tf.training.recipes.FinetuningRecipe` for the model's size.
    """

    task: TaskConfig
    optimization: OptimizationConfig
    data: DataConfig
    runtime: RuntimeConfig
    preset: Any = None
    recipe: Any = None

    def schedule(self, num_train: int) -> TrainingSchedule:
        """The run's updates and warmup updates for `num_train` training elements.

        Raises:
            FinetuningError: The warmup is longer than the run.
        """
        o = self.optimization
        steps = o.num_train_steps
        if steps is None:
            steps = steps_for_epochs(num_train, o.num_epochs, self.data.batch_size, o.gradient_accumulation_steps)
        warmup = o.warmup_steps if o.warmup_steps is not None else int(steps * o.warmup_proportion)
        if warmup > steps:
            raise FinetuningError(f"{param('warmup_steps')} ({warmup}) exceeds the number of training steps ({steps})")
        return TrainingSchedule(steps, warmup)

    def replace(self, **values: Any) -> "FinetuningConfig":
        """A copy with user values replaced, each in its section (`USER_NAMES`)."""
        sections: Dict[str, Dict[str, Any]] = {}
        for name, value in values.items():
            sections.setdefault(_section_of(name), {})[name] = value
        return dataclasses.replace(self, **{s: dataclasses.replace(getattr(self, s), **v) for s, v in sections.items()})

    def describe(self, num_train: Optional[int] = None) -> List[str]:
        """The configuration as the run prints it first: one line a section."""
        t, o, d, r = self.task, self.optimization, self.data, self.runtime
        if num_train is not None:
            steps, warmup = self.schedule(num_train)
            length = f"{steps} steps (warmup {warmup})"
        elif o.num_train_steps is not None:
            length = f"{o.num_train_steps} steps"
        else:
            length = f"{o.num_epochs:g} epochs"
        origin = f"preset {self.preset.name}, " if self.preset is not None else ""
        size = f"{self.recipe.size_class} recipe" if self.recipe is not None else "no recipe"
        return [
            f"config task: {t.name}, pooling {t.pooling}, dropout {t.dropout:g}"
            + ("" if t.encoder_dropout is None else f", encoder dropout {t.encoder_dropout:g}")
            + f" ({origin}{size})",
            f"config optimization: {length}, lr {o.learning_rate:g}, "
            f"{'bias-corrected' if o.bias_correction else 'uncorrected'} AdamW, weight decay {o.weight_decay:g}"
            + ("" if o.clipnorm is None else f", clipnorm {o.clipnorm:g}")
            + ("" if o.gradient_accumulation_steps == 1 else f", {o.gradient_accumulation_steps} batches an update"),
            f"config data: batch {d.batch_size} (eval {d.eval_batch_size}), seq {d.max_seq_length}",
            f"config runtime: {r.precision}, strategy {r.strategy}, "
            f"XLA {'device default' if r.jit_compile is None else ('on' if r.jit_compile else 'off')}, seed {r.seed}",
        ]

    def to_dict(self) -> Dict[str, Any]:
        """JSON-ready data (what `task.json` records as `training`)."""
        out: Dict[str, Any] = {s: dataclasses.asdict(getattr(self, s)) for s in ("task", "optimization", "data", "runtime")}
        if out["task"]["metrics"] is not None:
            out["task"]["metrics"] = list(out["task"]["metrics"])
        out["preset"] = None if self.preset is None else dataclasses.asdict(self.preset)
        out["recipe"] = None if self.recipe is None else dataclasses.asdict(self.recipe)
        return out

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> "FinetuningConfig":
        """The configuration `to_dict` wrote (the preset and the recipe come back as their types)."""
        from albert_tf.training.recipes import FinetuningRecipe

        if "optimization" not in values and "learning_rate" in values:
            values = _from_flat(values)
        try:
            task = dict(values["task"])
            if task.get("metrics") is not None:
                task["metrics"] = tuple(task["metrics"])
            preset = values.get("preset")
            if preset is not None:
                preset = TaskPreset(**{**preset, "metrics": tuple(preset.get("metrics", ("accuracy",)))})
            recipe = values.get("recipe")
            return cls(
                task=TaskConfig(**task), optimization=OptimizationConfig(**values["optimization"]),
                data=DataConfig(**values["data"]), runtime=RuntimeConfig(**values["runtime"]),
                preset=preset, recipe=None if recipe is None else FinetuningRecipe(**recipe),
            )
        except (KeyError, TypeError) as e:
            raise FinetuningError(f"not a fine-tuning configuration ({type(e).__name__}: {e})") from None


def _from_flat(values: Mapping[str, Any]) -> Dict[str, Any]:
    """The tree of a `training` record written flat (model directories of 2026-12-06 morning's
    main); what it did not record (the runtime, the weight decay) takes today's defaults."""
    from albert_tf.training.recipes import FinetuningRecipe

    preset, recipe = values.get("preset"), values.get("recipe") or {}
    name = preset["name"] if isinstance(preset, dict) else "unknown"
    flat = {k: values.get(k) for k in USER_NAMES if k in values}
    return {
        "task": {"name": name, **{k: flat.get(k) for k in USER_VALUES["task"]},
                 "metrics": preset.get("metrics") if isinstance(preset, dict) else None,
                 "best_metric": preset.get("best_metric") if isinstance(preset, dict) else None},
        "optimization": {**{k: flat.get(k) for k in USER_VALUES["optimization"]},
                         "weight_decay": recipe.get("weight_decay", FinetuningRecipe.weight_decay),
                         "clipnorm": recipe.get("clipnorm", FinetuningRecipe.clipnorm)},
        "data": {k: flat.get(k) for k in USER_VALUES["data"]},
        "runtime": {},
        "preset": preset if isinstance(preset, dict) else None,
        "recipe": recipe or None,
    }


def _section_of(name: str) -> str:
    for section, names in USER_VALUES.items():
        if name in names:
            return section
    close = difflib.get_close_matches(name, USER_NAMES, n=1)
    hint = f"did you mean {close[0]!r}?" if close else f"the settings are {', '.join(USER_NAMES)}"
    raise FinetuningError(f"unknown fine-tuning setting {name!r}; {hint}")


def resolve_finetuning_config(task, model_config, *, use_preset: bool = True, **user: Any) -> FinetuningConfig:
    """The configuration of a run of `task` on an encoder of `model_config`: the task's preset,
    then the recipe for the model's size, then the values given here (None: not given).

    Args:
        task: The task's family (anything with `preset()` and `kinds`: its `task` names it,
            its first kind picks the recipe), or a task kind (`TaskSpec.kind`) for a model
            without a task preset (the raw-text models).
        model_config: The encoder's `AlbertConfig` (anything with `hidden_size`).
        use_preset: False skips layer 1 (the recipe's run stands in for it). Distillation
            does: the presets are the paper's values for fine-tuning a pretrained encoder of
            base size and up, a student learns from soft labels at the rate for its own size.
        **user: The user's values, by the names of `USER_NAMES`.

    Raises:
        FinetuningError: An unknown name or an impossible value.
    """
    from albert_tf.training.recipes import LONG_RUN_KINDS, recommended_recipe

    for name in user:
        _section_of(name)
    u = {name: value for name, value in user.items() if value is not None}
    if isinstance(task, str):
        name, preset, kind = task, None, task
    else:
        name, preset, kind = task.task, (task.preset() if use_preset else None), task.kinds[0]
    recipe = recommended_recipe(model_config, kind)

    # 1. The task's preset, else the recipe's run.
    if preset is not None:
        rate, batch, length = preset.learning_rate, preset.batch_size, preset.max_seq_length
        dropout, encoder_dropout = preset.classifier_dropout, preset.encoder_dropout
        steps, epochs, preset_warmup = preset.num_train_steps, None, preset.warmup_steps
    else:
        rate, batch, length = recipe.learning_rate, recipe.batch_size, recipe.max_seq_length
        dropout, encoder_dropout = recipe.dropout, None
        steps, epochs, preset_warmup = None, recipe.epochs, None

    # 2. The recipe for the model's size.
    if recipe.size_class != "base":
        rate = recipe.learning_rate
    if kind in LONG_RUN_KINDS:
        # Entity tags are sparse: a small tagger finds entities only after the recipe's longer run.
        steps, epochs, preset_warmup = None, recipe.epochs, None

    # 3. The user's values. A preset's warmup belongs to its steps: a length given drops it.
    if "num_train_steps" in u:
        steps, epochs, preset_warmup = u["num_train_steps"], None, None
    elif "num_epochs" in u:
        steps, epochs, preset_warmup = None, u["num_epochs"], None
    if "warmup_steps" in u:
        warmup, proportion = u["warmup_steps"], None
    elif "warmup_proportion" in u:
        warmup, proportion = None, u["warmup_proportion"]
    elif preset_warmup is not None:
        warmup, proportion = preset_warmup, None
    else:
        warmup, proportion = None, recipe.warmup_fraction
    batch = u.get("batch_size", batch)
    config = FinetuningConfig(
        task=TaskConfig(
            name=name, dropout=u.get("dropout", dropout), encoder_dropout=u.get("encoder_dropout", encoder_dropout),
            pooling=u.get("pooling", recipe.pooling),
            metrics=tuple(preset.metrics) if preset is not None else None,
            best_metric=preset.best_metric if preset is not None else None,
        ),
        optimization=OptimizationConfig(
            learning_rate=u.get("learning_rate", rate), weight_decay=u.get("weight_decay", recipe.weight_decay),
            bias_correction=u.get("bias_correction", recipe.bias_correction),
            clipnorm=user["clipnorm"] if "clipnorm" in user else recipe.clipnorm,
            num_train_steps=steps, num_epochs=epochs, warmup_steps=warmup, warmup_proportion=proportion,
            gradient_accumulation_steps=u.get("gradient_accumulation_steps", 1),
        ),
        # An eval batch size of 0 is unset, as the command line reads it.
        data=DataConfig(batch_size=batch, eval_batch_size=u.get("eval_batch_size") or batch,
                        max_seq_length=u.get("max_seq_length", length)),
        runtime=RuntimeConfig(**{k: u[k] for k in USER_VALUES["runtime"] if k in u}),
        preset=preset,
        recipe=recipe,
    )
    check_config(config)
    return config


def check_config(config: FinetuningConfig) -> None:
    """Raises `FinetuningError` naming the first impossible value."""
    o, d, r = config.optimization, config.data, config.runtime
    for name, value in (("batch_size", d.batch_size), ("eval_batch_size", d.eval_batch_size),
                        ("max_seq_length", d.max_seq_length), ("num_train_steps", o.num_train_steps),
                        ("gradient_accumulation_steps", o.gradient_accumulation_steps)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise FinetuningError(f"{param(name)} must be an integer >= 1, got {value!r}")
    if o.num_epochs is not None and not o.num_epochs > 0:
        raise FinetuningError(f"{param('num_epochs')} must be > 0, got {o.num_epochs}")
    if o.warmup_proportion is not None and not 0 <= o.warmup_proportion <= 1:
        raise FinetuningError(f"{param('warmup_proportion')} must be in [0, 1], got {o.warmup_proportion}")
    if o.warmup_steps is not None and o.warmup_steps < 0:
        raise FinetuningError(f"{param('warmup_steps')} must be >= 0, got {o.warmup_steps}")
    if not o.learning_rate > 0:
        raise FinetuningError(f"{param('learning_rate')} must be > 0, got {o.learning_rate}")
    if o.weight_decay < 0:
        raise FinetuningError(f"{param('weight_decay')} must be >= 0, got {o.weight_decay}")
    if config.task.pooling not in ("mean", "cls"):
        raise FinetuningError(f"{param('pooling')} must be one of mean, cls, got {config.task.pooling!r}")
    if r.precision not in PRECISIONS:
        raise FinetuningError(f"{param('precision')} must be one of {', '.join(PRECISIONS)}, got {r.precision!r}")
