"""The fine-tuning run: `run_finetuning` trains any task model with `model.fit` and keeps the best.

The run is task-agnostic. A task supplies its model (a raw-text `AlbertTextTask`, which trains as
its head on feature dicts with the labels inside, as `albert-tf finetune` runs it; or an
`AlbertTaskModel` head alone), its datasets, and an
`eval_fn(model, eval_dataset) -> {metric: value}`; the settings are one typed
`FinetuningRunConfig` (`run_finetuning(model, train, dev, config)`; its fields as keywords work
too). The run

* compiles the model with the original fine-tuning optimizer, `create_optimizer("adamw", ...)`
  (AdamW without bias correction, weight decay 0.01 inside the update, gradients clipped to
  global norm 1, linear warmup then linear decay to 0 at `num_train_steps`);
* trains with `model.fit`, one Keras epoch per evaluation interval of `eval_every_n_steps`
  optimizer updates, and after every interval evaluates on the dev data;
* keeps the weights of the best evaluation by `best_metric` (`best_mode` "max" or "min"),
  written atomically (temporary name, then rename) whenever the metric improves, and restores
  them into the model at the end, as the original `run_classifier.py` picks its best checkpoint
  by dev accuracy;
* writes everything into a staging directory beside `model_dir` and renames it to `model_dir`
  only when complete, with `COMPLETE` the last file written in it. A run that fails or is
  interrupted removes its staging directory; one that is killed leaves only a hidden
  ``.NAME.partial-*`` directory, never a `model_dir` that looks finished.

Collapse: given the best constant answer on the dev data (`constant_baseline`, from
`albert_tf.evaluation.baselines`), every evaluation is checked by
`albert_tf.evaluation.check_collapse` (constant dev predictions, or the metric within
`collapse_margin` of the constant's) and a collapsed one is logged as a warning. The kept
evaluation's verdict is `FinetuningResult.collapse` and the `collapse` entry of
`finetuning.json`; with `on_collapse="raise"` a collapsed run fails with `FinetuningCollapsed`
instead of writing a model that answers like a constant.

The output directory holds `model.keras` (the task model with the best weights),
`finetuning.json` (the run's settings, the evaluation history and the best result),
`eval_history.jsonl` (one JSON object per evaluation), TensorBoard `logs/`, whatever the task's
`save_assets(directory, model)` writes (tokenizer, label list, ...), and `COMPLETE`.

Units: a *step* is one optimizer update; with `gradient_accumulation_steps=A` one step consumes
A batches, as in `albert_tf.training.pretraining`. An *epoch* is `steps_per_epoch`: the full
batches of one pass over the training examples (a last partial batch is not a step of its own);
`steps_for_epochs` turns epochs into steps on that count, so that a run of 2 epochs shows 2.

Progress (`verbose`): a Keras progress bar per evaluation interval on a terminal, one line per
interval otherwise (logs stay free of carriage returns and colour codes), each evaluation on its own
line after it; an evaluation that runs longer than a few seconds shows how far it has got, through
the Keras callbacks of `progress_callbacks`, which the run passes to an `eval_fn` that takes a
``callbacks`` keyword (the task modules' all do).
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import logging
import math
import os
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

from albert_tf import file_io
from albert_tf.training.finetuning_config import FinetuningConfig, FinetuningError, steps_per_epoch
from albert_tf.training.progress import interval_progress, is_tty, progress_callbacks
from albert_tf.training.run_directory import (
    BEST_WEIGHTS_FILE,
    COMPLETE_FILE,
    EVAL_HISTORY_FILE,
    LOG_SUBDIR,
    MODEL_FILE,
    RUN_INFO_FILE,
    check_writable_target,
    publish,
)
from albert_tf.training.recipes import FinetuningRecipe
from albert_tf.training.strategies import PRECISIONS

logger = logging.getLogger(__name__)

BEST_MODES = ("max", "min")

EvalFn = Callable[[Any, Any], Mapping[str, float]]



class FinetuningCollapsed(FinetuningError):
    """The run's best evaluation is no better than the best constant answer (`on_collapse="raise"`)."""

    def __init__(self, check):
        super().__init__(f"fine-tuning collapsed: {check.reason}")
        self.check = check


@dataclasses.dataclass
class FinetuningResult:
    """What `run_finetuning` did and wrote.

    Attributes:
        model: The task model, holding the best weights (the last ones without evaluation).
        model_dir: The completed output directory (None on non-chief workers).
        best_metrics: The evaluation whose weights were kept ({} without evaluation).
        best_step: The step of that evaluation (`final_step` without evaluation).
        final_step: The number of optimizer updates done (`num_train_steps`).
        history: One record per evaluation interval: `step`, the training logs of the interval
            (`train_*`), the evaluation metrics (`eval_*`) and `is_best`.
        artifacts: Paths of the files written ("model", "run_info", "eval_history", "logs").
        collapse: The `CollapseCheck` of the kept evaluation (None without `constant_baseline`
            or evaluation).
        initial_step: The step an interrupted run was resumed from (0: started afresh).
    """

    model: Any
    model_dir: Optional[str]
    best_metrics: Dict[str, float]
    best_step: int
    final_step: int
    history: List[Dict[str, Any]]
    artifacts: Dict[str, str]
    collapse: Optional[Any] = None
    initial_step: int = 0

    @property
    def collapsed(self) -> bool:
        return bool(self.collapse is not None and self.collapse.collapsed)


# --- progress --------------------------------------------------------------------------


def resolve_verbose(verbose: Union[int, str]) -> int:
    """0 (silent), 1 (progress bars) or 2 (one line per interval); "auto" is 1 on a terminal, else 2."""
    if verbose == "auto":
        return 1 if is_tty(sys.stdout) else 2
    if verbose not in (0, 1, 2):  # True and False count as 1 and 0, as Keras reads them
        raise FinetuningError(f"verbose must be 0, 1, 2 or 'auto', got {verbose!r}")
    return int(verbose)


# --- evaluation and the best checkpoint ----------------------------------------------------------


def _to_float(name: str, value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise FinetuningError(f"eval_fn returned a non-numeric value for {name!r}: {value!r}") from None


def default_eval_fn(model, eval_dataset, callbacks=None) -> Dict[str, float]:
    """`model.evaluate` on the dev data: the loss and the model's Keras metrics."""
    results = model.evaluate(eval_dataset, return_dict=True, verbose=0, callbacks=callbacks)
    return {k: float(v) for k, v in results.items()}


def _takes_callbacks(eval_fn) -> bool:
    """Whether `eval_fn` accepts a ``callbacks`` keyword (or any keyword)."""
    try:
        parameters = inspect.signature(eval_fn).parameters.values()
    except (TypeError, ValueError):  # builtins and some C callables have no signature
        return False
    return any(p.name == "callbacks" or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


def resolve_best_mode(best_metric: str, best_mode: str) -> str:
    """`best_mode`, with "auto" meaning "min" for losses and errors and "max" for the rest."""
    if best_mode == "auto":
        lowered = best_metric.lower()
        return "min" if ("loss" in lowered or "error" in lowered or lowered in ("mse", "mae")) else "max"
    if best_mode not in BEST_MODES:
        raise FinetuningError(f"best_mode must be 'max', 'min' or 'auto', got {best_mode!r}")
    return best_mode


def _is_better(value: float, best: Optional[float], mode: str) -> bool:
    if math.isnan(value):
        return False
    if best is None:
        return True
    return value > best if mode == "max" else value < best


def _make_callback(keras):
    class EvaluateAndKeepBest(keras.callbacks.Callback):
        """After every interval: evaluate, log, and save the weights when the metric improves;
        stop at `num_train_steps` in a last interval shorter than the others."""

        def __init__(self, run: "_Run"):
            super().__init__()
            self.run = run
            self.epoch = 0

        def on_epoch_begin(self, epoch, logs=None):
            self.epoch = epoch

        def on_train_batch_end(self, batch, logs=None):
            done = self.epoch * self.run.batches_per_interval + batch + 1
            if done >= self.run.total_batches:
                self.model.stop_training = True

        def on_epoch_end(self, epoch, logs=None):
            self.run.end_interval(self.model, epoch, logs or {})

    return EvaluateAndKeepBest


class _Run:
    """The bookkeeping of one run (history, best result, files in the staging directory)."""

    def __init__(self, *, staging, eval_dataset, eval_fn, best_metric, best_mode, num_train_steps,
                 eval_every, accumulation, verbose, collapse_check=None, resume=None):
        self.staging = staging
        # (settings, checkpoint) when interval checkpoints are written, else None.
        self.resume = resume
        self.best_weights_name: Optional[str] = None
        self.eval_dataset = eval_dataset
        self.eval_fn = eval_fn
        self.eval_fn_takes_callbacks = _takes_callbacks(eval_fn)
        self.best_metric = best_metric
        self.best_mode = best_mode
        self.num_train_steps = num_train_steps
        self.eval_every = eval_every
        self.accumulation = accumulation
        self.batches_per_interval = eval_every * accumulation
        self.total_batches = num_train_steps * accumulation
        self.verbose = verbose
        self.collapse_check = collapse_check
        self.collapsed_in_a_row = 0
        self.history: List[Dict[str, Any]] = []
        self.best_value: Optional[float] = None
        self.best_metrics: Dict[str, float] = {}
        self.best_step: Optional[int] = None
        self.started = time.time()

    @property
    def best_weights_path(self) -> str:
        return os.path.join(self.staging, BEST_WEIGHTS_FILE)

    def evaluate(self, model, step: int) -> Dict[str, float]:
        if self.eval_dataset is None:
            return {}
        callbacks = progress_callbacks(f"evaluating at step {step}", verbose=self.verbose)
        if callbacks and self.eval_fn_takes_callbacks:
            metrics = self.eval_fn(model, self.eval_dataset, callbacks=callbacks)
        else:
            metrics = self.eval_fn(model, self.eval_dataset)
        if not isinstance(metrics, Mapping):
            raise FinetuningError(f"eval_fn must return a dict of metrics, got {type(metrics).__name__}")
        metrics = {str(k): _to_float(str(k), v) for k, v in metrics.items()}
        if self.best_metric not in metrics:
            raise FinetuningError(
                f"best_metric {self.best_metric!r} is not among the evaluation metrics {sorted(metrics)}"
            )
        return metrics

    def end_interval(self, model, epoch: int, logs: Mapping[str, Any]) -> None:
        step = min((epoch + 1) * self.eval_every, self.num_train_steps)
        record: Dict[str, Any] = {"step": step, "elapsed_s": round(time.time() - self.started, 3)}
        for name, value in logs.items():
            try:
                record[f"train_{name}"] = float(value)
            except (TypeError, ValueError):
                continue
        metrics = self.evaluate(model, step)
        record.update({f"eval_{k}": v for k, v in metrics.items()})
        is_best = False
        if metrics:
            value = metrics[self.best_metric]
            is_best = _is_better(value, self.best_value, self.best_mode)
            if is_best:
                self.best_value, self.best_metrics, self.best_step = value, metrics, step
                self.best_weights_name = f"best-{step}.weights.h5"
                # Keras insists on the ".weights.h5" ending, temporary name included.
                with file_io.atomic_output(self.best_weights_path, suffix=".weights.h5") as tmp:
                    weights_of(model).save_weights(tmp)
            shown = ", ".join(f"{k}={v:.4f}" for k, v in sorted(metrics.items()))
            logger.info("step %d: %s%s", step, shown, " (best)" if is_best else "")
            if self.verbose:
                print(f"eval at step {step}: {shown}{'  [best]' if is_best else ''}", flush=True)
            if self.collapse_check is not None:
                check = self.collapse_check(metrics)
                record["collapsed"] = check.collapsed
                self.collapsed_in_a_row = self.collapsed_in_a_row + 1 if check.collapsed else 0
                # One early evaluation at the baseline is normal; two in a row is a run that is stuck.
                if self.collapsed_in_a_row >= 2:
                    logger.warning("step %d: the model looks collapsed (%d evaluations in a row): %s",
                                   step, self.collapsed_in_a_row, check.reason)
                elif check.collapsed:
                    logger.info("step %d: not above the constant answer yet: %s", step, check.reason)
        record["is_best"] = is_best
        self.history.append(record)
        file_io.append_line(os.path.join(self.staging, EVAL_HISTORY_FILE), json.dumps(record, sort_keys=True))
        if self.resume is not None and step < self.num_train_steps:
            self.checkpoint(epoch, step)

    def checkpoint(self, epoch: int, step: int) -> None:
        from albert_tf.training import finetune_resume

        settings, make_checkpoint = self.resume
        finetune_resume.write_state(
            self.staging,
            make_checkpoint(),
            finetune_resume.ResumeState(
                settings=settings, epoch=epoch + 1, step=step, checkpoint=f"ckpt-{step}",
                best_weights=self.best_weights_name, history=self.history, best_value=self.best_value,
                best_metrics=self.best_metrics, best_step=self.best_step,
                collapsed_in_a_row=self.collapsed_in_a_row,
            ),
            self.best_weights_path if self.best_weights_name else None,
        )

    def restore(self, state) -> None:
        """The bookkeeping of a resumed run, up to the interval `state` ended."""
        from albert_tf.training import finetune_resume

        self.history = list(state.history)
        self.best_value, self.best_metrics, self.best_step = state.best_value, dict(state.best_metrics), state.best_step
        self.best_weights_name = state.best_weights
        self.collapsed_in_a_row = state.collapsed_in_a_row
        saved = finetune_resume.best_weights_path(self.staging, state)
        if saved is not None:
            with file_io.atomic_output(self.best_weights_path, suffix=".weights.h5") as tmp:
                with open(saved, "rb") as src, open(tmp, "wb") as dst:
                    dst.write(src.read())
        file_io.atomic_write_text(
            os.path.join(self.staging, EVAL_HISTORY_FILE),
            "".join(json.dumps(r, sort_keys=True) + "\n" for r in self.history),
        )


# --- the run -------------------------------------------------------------------------------------


def _collapse_check(constant_baseline, metric: str, margin: Optional[float]):
    """`metrics -> CollapseCheck` against `constant_baseline`, or None without one."""
    if constant_baseline is None:
        return None
    from albert_tf.evaluation.collapse import DEFAULT_MARGIN, check_collapse

    if metric not in constant_baseline.metrics:
        raise FinetuningError(f"collapse metric {metric!r} is not among the constant baseline's {sorted(constant_baseline.metrics)}")
    margin = DEFAULT_MARGIN if margin is None else margin
    return lambda metrics: check_collapse(metrics, constant_baseline, metric, margin)


def _check_positive_int(name: str, value, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise FinetuningError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise FinetuningError(f"{name} must be >= {minimum}, got {value}")
    return value


def _model_precision(model) -> str:
    policy = getattr(model, "dtype_policy", None)
    encoder = getattr(model, "encoder", None)
    if encoder is not None and hasattr(encoder, "embeddings"):
        policy = encoder.embeddings.dtype_policy
    return getattr(policy, "name", "float32")


def _build(model, strategy, precision: Optional[str]):
    """The model, created under the strategy's scope (and the precision policy) when it is a
    callable; an instance is checked against `precision`."""
    import keras

    if isinstance(model, keras.Model):
        if precision is not None and _model_precision(model) != precision:
            raise FinetuningError(
                f"the model was built with precision {_model_precision(model)!r}, not {precision!r}; "
                f"pass a model-building function to let the run set the precision"
            )
        return model
    if not callable(model):
        raise FinetuningError(f"model must be a keras.Model or a function returning one, got {type(model).__name__}")
    with strategy.scope():
        previous = keras.mixed_precision.global_policy()
        if precision is not None:
            keras.mixed_precision.set_global_policy(precision)
        try:
            built = model()
        finally:
            keras.mixed_precision.set_global_policy(previous)
    if not isinstance(built, keras.Model):
        raise FinetuningError(f"the model function returned {type(built).__name__}, not a keras.Model")
    return built


def _multi_worker(strategy) -> bool:
    in_multi_worker_mode = getattr(strategy.extended, "_in_multi_worker_mode", None)
    return bool(in_multi_worker_mode()) if callable(in_multi_worker_mode) else False


def weights_of(model):
    """The part of `model` whose weights a run checkpoints and keeps the best of: a raw-text
    model's head (`task_model`; its tokenizer holds none, so they are all of its weights, laid out
    as a head's), else the model."""
    return getattr(model, "task_model", model)


def _training_state(model, optimizer):
    from albert_tf.training.checkpointing import training_state

    return training_state(weights_of(model), optimizer)


def _labels_inside(dataset) -> bool:
    """Whether a training dataset yields feature dicts that hold their labels (the heads' form)
    rather than `(x, y)` pairs."""
    return isinstance(dataset.element_spec, dict)


def _build_for_restore(model, optimizer, train_dataset) -> None:
    """Creates every variable a checkpoint restores into: the model's, by calling it on a batch
    (training=False draws no dropout seed), and the optimizer's slots, as `fit` would."""
    for batch in train_dataset.take(1):
        model(batch, training=False)
    optimizer.build(model.trainable_variables)


def _batch_datasets(train_dataset, eval_dataset, batch_size, eval_batch_size, shuffle_buffer, seed):
    train = train_dataset
    if shuffle_buffer:
        train = train.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
    train = train.repeat().batch(batch_size, drop_remainder=True)
    if eval_dataset is not None:
        eval_dataset = eval_dataset.batch(eval_batch_size or batch_size)
    return train, eval_dataset


def _default_eval_interval(train_dataset, accumulation: int, num_train_steps: int) -> int:
    """One pass over the (batched) training data when its length is known, else the whole run."""
    cardinality = int(train_dataset.cardinality())
    if cardinality == 0:
        raise FinetuningError("the training dataset is empty")
    if cardinality > 0:
        return max(1, cardinality // accumulation)
    return num_train_steps


@dataclasses.dataclass
class FinetuningRunConfig:
    """The settings of one fine-tuning run: what `run_finetuning` trains with. The objects it
    trains (the model, the datasets, `eval_fn`, the strategy, ...) are the call's arguments.

    Attributes:
        num_train_steps: Optimizer updates in the run.
        warmup_steps: Linear-warmup updates (the original: 10% of `num_train_steps` by default).
        learning_rate: Peak learning rate.
        model_dir: The output directory (local, or any `tf.io.gfile` filesystem).
        best_metric: The metric that selects the kept weights.
        best_mode: "max", "min", or "auto" ("min" for names with "loss"/"error", else "max").
        eval_every_n_steps: Updates between evaluations; default one pass over the training
            data when its length is known, else only at the end.
        batch_size: When given, the datasets are unbatched examples: the training set is
            shuffled (`shuffle_buffer`), repeated and batched (remainder dropped), the dev set
            batched by `eval_batch_size` (default `batch_size`).
        eval_batch_size: See `batch_size`.
        shuffle_buffer: Shuffle buffer of the training examples when `batch_size` is given.
        weight_decay: AdamW's in-update weight-decay rate (the recipe's, 0.01 as the original).
        clipnorm: Global-norm gradient clipping (the recipe's, 1.0 as the original); None disables it.
        gradient_accumulation_steps: Batches per update.
        steps_per_execution: Batches per `tf.function` call; must divide the batches of every
            evaluation interval and of the whole run.
        jit_compile: XLA for the train step; None picks
            `albert_tf.training.strategies.default_jit_compile` for the device and precision.
        precision: "float32" or "mixed_bfloat16" for a model built by a function; for a model
            instance, only checked against the precision it was built with.
        seed: Seeds Python, NumPy, TensorFlow and Keras before the model is built and trained.
        metadata: Extra JSON-serializable information stored in `finetuning.json` ("task").
        overwrite: Replace an existing non-empty `model_dir` (only once the new run completes).
        tensorboard: Write TensorBoard logs to `model_dir/logs`.
        verbose: 0: silent; 1: a progress bar per evaluation interval; 2: one line per interval;
            "auto": 1 when stdout is a terminal, else 2. Unless 0, each evaluation is printed on
            a line of its own and evaluations longer than a few seconds show their progress on
            stderr (`progress_callbacks`, passed to an `eval_fn` that takes ``callbacks``).
        bias_correction: Adam's bias correction in the AdamW update (the recipe's, True; False:
            the original's update).
        collapse_metric: The metric compared with the constant answer's (default `best_metric`).
        collapse_margin: How far past the constant the metric must be (default
            `albert_tf.evaluation.collapse.DEFAULT_MARGIN`).
        on_collapse: "warn" (log it, record it, keep the model) or "raise" (`FinetuningCollapsed`,
            nothing written).
        resume: Build in ``.NAME.resume`` with a checkpoint after every evaluation interval, and
            continue an interrupted run found there (`albert_tf.training.finetune_resume`); the
            result is that of an uninterrupted run. Single-worker runs only; False: a fresh
            staging directory, removed on failure.
        resume_settings: The caller's settings (JSON-serializable), compared with the interrupted
            run's before the run's own; the first that differs is named.
    """

    num_train_steps: int
    warmup_steps: int
    learning_rate: float
    model_dir: str
    best_metric: str = "loss"
    best_mode: str = "auto"
    eval_every_n_steps: Optional[int] = None
    batch_size: Optional[int] = None
    eval_batch_size: Optional[int] = None
    shuffle_buffer: int = 0
    # The optimizer's defaults are the recipe's: they are decided there alone.
    weight_decay: float = FinetuningRecipe.weight_decay
    clipnorm: Optional[float] = FinetuningRecipe.clipnorm
    gradient_accumulation_steps: int = 1
    steps_per_execution: int = 1
    jit_compile: Optional[bool] = None
    precision: Optional[str] = None
    seed: Optional[int] = None
    metadata: Optional[Mapping[str, Any]] = None
    overwrite: bool = False
    tensorboard: bool = True
    verbose: Union[int, str] = "auto"
    bias_correction: bool = FinetuningRecipe.bias_correction
    collapse_metric: Optional[str] = None
    collapse_margin: Optional[float] = None
    on_collapse: str = "warn"
    resume: bool = True
    resume_settings: Optional[Mapping[str, Any]] = None

    def __post_init__(self):
        self.validate()

    @classmethod
    def from_config(cls, config: FinetuningConfig, num_train: int, model_dir: str, **run: Any) -> "FinetuningRunConfig":
        """The settings of a run of the resolved `config` on `num_train` training elements: the
        schedule, the optimizer, the batch sizes, the precision, XLA and the seed from `config`;
        `run` adds what belongs to one run (`best_metric`, `metadata`, `verbose`, ...). Datasets
        already batched pass `batch_size=None`."""
        steps, warmup = config.schedule(num_train)
        o, d = config.optimization, config.data
        fields = dict(
            num_train_steps=steps, warmup_steps=warmup, learning_rate=o.learning_rate, model_dir=model_dir,
            weight_decay=o.weight_decay, bias_correction=o.bias_correction, clipnorm=o.clipnorm,
            gradient_accumulation_steps=o.gradient_accumulation_steps, batch_size=d.batch_size,
            eval_batch_size=d.eval_batch_size, precision=config.runtime.precision, jit_compile=config.runtime.jit_compile,
            seed=config.runtime.seed,
        )
        if config.task.best_metric:
            fields["best_metric"] = config.task.best_metric
        return cls(**{**fields, **run})

    def validate(self) -> None:
        """Raises `FinetuningError` naming the first impossible setting."""
        _check_positive_int("num_train_steps", self.num_train_steps)
        _check_positive_int("warmup_steps", self.warmup_steps, minimum=0)
        if self.warmup_steps > self.num_train_steps:
            raise FinetuningError(f"warmup_steps ({self.warmup_steps}) exceeds num_train_steps ({self.num_train_steps})")
        _check_positive_int("gradient_accumulation_steps", self.gradient_accumulation_steps)
        _check_positive_int("steps_per_execution", self.steps_per_execution)
        if self.precision is not None and self.precision not in PRECISIONS:
            raise FinetuningError(f"precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}")
        if not isinstance(self.best_metric, str) or not self.best_metric:
            raise FinetuningError(f"best_metric must be a metric name, got {self.best_metric!r}")
        resolve_best_mode(self.best_metric, self.best_mode)
        resolve_verbose(self.verbose)
        for name in ("batch_size", "eval_every_n_steps"):
            if getattr(self, name) is not None:
                _check_positive_int(name, getattr(self, name))
        if not isinstance(self.model_dir, (str, os.PathLike)) or not os.fspath(self.model_dir):
            raise FinetuningError(f"model_dir must be a path, got {self.model_dir!r}")
        self.model_dir = os.fspath(self.model_dir)
        if self.on_collapse not in ("warn", "raise"):
            raise FinetuningError(f"on_collapse must be 'warn' or 'raise', got {self.on_collapse!r}")


def run_finetuning(
    model: Union[Any, Callable[[], Any]],
    train_dataset,
    eval_dataset=None,
    config: Optional[FinetuningRunConfig] = None,
    *,
    eval_fn: Optional[EvalFn] = None,
    strategy=None,
    save_assets: Optional[Callable[[str, Any], None]] = None,
    callbacks: Optional[Sequence[Any]] = None,
    constant_baseline=None,
    saved_model: Optional[Callable[[Any], Any]] = None,
    **settings: Any,
) -> FinetuningResult:
    """Fine-tunes `model` with `model.fit` and keeps the best weights by a dev metric.

    Args:
        model: The task model: a head (labels travel inside its input dicts), a raw-text
            `AlbertTextTask` (on such dicts it trains as its head; on `(x, y)` batches with its
            compiled loss; its head is what is checkpointed), or a function that builds one; a
            function is called under `strategy.scope()` with `config.precision` as the
            global dtype policy, which is how to fine-tune under a distribution strategy.
        train_dataset: A `tf.data.Dataset` of feature dicts: batched (and repeated, if it holds
            fewer than `num_train_steps * gradient_accumulation_steps` batches; a finite one is
            repeated here), or unbatched examples when `config.batch_size` is given.
        eval_dataset: The dev data (batched, or unbatched with `batch_size`), or None to train
            without evaluation (the last weights are kept).
        config: The run's settings (`FinetuningRunConfig`).
        eval_fn: `eval_fn(model, eval_dataset) -> {name: value}`; defaults to `model.evaluate`
            (loss and the model's metrics). One that takes a ``callbacks`` keyword gets the
            progress callbacks to pass on to its `model.predict` / `model.evaluate`.
        strategy: A `tf.distribute.Strategy` (default: the current one).
        save_assets: `save_assets(directory, model)` writes the task's files (tokenizer, labels,
            final evaluations, ...) into the staging directory before it is completed; the model
            holds the best weights by then.
        callbacks: Extra Keras callbacks for `fit`.
        constant_baseline: The best constant answer on the dev data (a `ConstantBaseline`);
            enables the collapse check of every evaluation.
        saved_model: `saved_model(model)` -> the part of the trained model written as
            `model.keras` and handed to `save_assets` (default: the model itself); a
            distillation wrapper trains its student with extra losses and keeps only the student.
        **settings: The fields of `FinetuningRunConfig` as keywords, in place of `config`
            (``run_finetuning(model, train, dev, num_train_steps=..., ...)``).

    Returns:
        A `FinetuningResult`; the model holds the best weights.

    Raises:
        FinetuningError: Invalid settings, `best_metric` not among the evaluation's metrics.
        ModelDirExistsError: `model_dir` exists, is not empty and `overwrite` is False.
        ResumeSettingsDiffer: an interrupted run of other settings waits to resume into
            `model_dir` (and `overwrite` is False).
    """
    import keras
    import tensorflow as tf

    from albert_tf.training import finetune_resume
    from albert_tf.training.strategies import is_chief

    config = _resolved_config(config, settings)
    model_dir, mode = config.model_dir, resolve_best_mode(config.best_metric, config.best_mode)
    verbose = resolve_verbose(config.verbose)
    check_writable_target(model_dir, config.overwrite)
    if strategy is None:
        strategy = tf.distribute.get_strategy()
    chief = is_chief(strategy)
    if config.seed is not None:
        keras.utils.set_random_seed(config.seed)
    train_dataset, eval_dataset, schedule = _schedule(train_dataset, eval_dataset, config)
    collapse_check = _collapse_check(constant_baseline, config.collapse_metric or config.best_metric, config.collapse_margin)
    resumable = bool(config.resume) and chief and not _multi_worker(strategy)
    run_settings = _run_settings(config, schedule, mode)
    state = _resume_state(model_dir, run_settings, config.overwrite) if resumable else None

    model = _build(model, strategy, config.precision)
    run_precision = config.precision or _model_precision(model)
    jit_compile = _jit_compile(config, strategy, run_precision)
    # The chief builds beside `model_dir` (a local build area for a remote one); other workers'
    # copies are private and thrown away.
    if resumable:
        staging = finetune_resume.resume_dir(model_dir)
        os.makedirs(staging, exist_ok=True)
    else:
        staging = file_io.make_staging_dir(model_dir) if chief else tempfile.mkdtemp(prefix="albert_finetune_worker_")
    succeeded = False
    try:
        optimizer = _compile(model, strategy, config, jit_compile, _labels_inside(train_dataset))
        run = _Run(
            staging=staging, eval_dataset=eval_dataset, eval_fn=eval_fn or default_eval_fn,
            best_metric=config.best_metric, best_mode=mode, num_train_steps=config.num_train_steps,
            eval_every=schedule.eval_every, accumulation=config.gradient_accumulation_steps, verbose=verbose,
            collapse_check=collapse_check,
            resume=(run_settings, lambda: _training_state(model, optimizer)) if resumable else None,
        )
        _fit(model, optimizer, run, train_dataset, schedule, config, state, staging, chief, verbose, callbacks)
        final_step, best_step, collapse = _keep_best(model, optimizer, run, config, collapse_check, verbose)
        kept = model if saved_model is None else saved_model(model)
        if save_assets is not None:
            # First: the assets may settle what the saved model holds (SQuAD v2's tuned threshold).
            save_assets(staging, kept)
        kept.save(os.path.join(staging, MODEL_FILE))
        info = _run_info(config, schedule, mode, run, run_precision, jit_compile, best_step, collapse,
                         constant_baseline)
        file_io.atomic_write_json(os.path.join(staging, RUN_INFO_FILE), info, ensure_ascii=True)
        if resumable:
            finetune_resume.finish(staging)
        file_io.atomic_write_text(os.path.join(staging, COMPLETE_FILE), f"step {final_step}\n")
        if chief:
            publish(staging, model_dir, config.overwrite)
        succeeded = True
    except FinetuningError:
        # The run's own verdict (a collapse, a bad metric) would be the same on a rerun.
        resumable = False
        raise
    finally:
        # An interrupted or crashed build with a committed state is kept for the rerun.
        if not chief or (not succeeded and not (resumable and finetune_resume.read_state(staging))):
            file_io.remove_tree(staging)
    return FinetuningResult(
        model=model,
        model_dir=model_dir if chief else None,
        best_metrics=run.best_metrics,
        best_step=best_step,
        final_step=final_step,
        history=run.history,
        artifacts=_artifacts(model_dir, config.tensorboard) if chief else {},
        collapse=collapse,
        initial_step=state.step if state is not None else 0,
    )


# --- the parts of a run (`run_finetuning`) ----------------------------------------------------------


def _resolved_config(config: Optional["FinetuningRunConfig"], settings: Dict[str, Any]) -> "FinetuningRunConfig":
    if config is None:
        return FinetuningRunConfig(**settings)
    if settings:
        raise FinetuningError(f"pass the settings in config or as keywords, not both (got {', '.join(sorted(settings))})")
    config.validate()  # its fields may have been set since it was made
    return config


@dataclasses.dataclass(frozen=True)
class _Schedule:
    """When a run evaluates: every `eval_every` updates, `batches_per_interval` batches apart;
    `epoch_steps` is an epoch's updates (None for an endless dataset)."""

    eval_every: int
    batches_per_interval: int
    epoch_steps: Optional[int]


def _schedule(train_dataset, eval_dataset, config: "FinetuningRunConfig"):
    """The datasets as `fit` takes them (batched, the training data repeated) and the schedule of
    evaluations.

    Raises:
        FinetuningError: An empty training set, or `steps_per_execution` not dividing an interval.
    """
    import tensorflow as tf

    accumulation, num_train_steps = config.gradient_accumulation_steps, config.num_train_steps
    if config.batch_size is not None:
        examples = int(train_dataset.cardinality())
        if examples == 0:
            raise FinetuningError("the training dataset is empty")
        epoch_steps = steps_per_epoch(examples, config.batch_size, accumulation) if examples > 0 else None
        eval_default = epoch_steps or num_train_steps
        train_dataset, eval_dataset = _batch_datasets(
            train_dataset, eval_dataset, config.batch_size, config.eval_batch_size, config.shuffle_buffer, config.seed
        )
    else:
        eval_default = _default_eval_interval(train_dataset, accumulation, num_train_steps)
        epoch_steps = eval_default if int(train_dataset.cardinality()) > 0 else None
        if int(train_dataset.cardinality()) != tf.data.INFINITE_CARDINALITY:
            # Keras would stop at the end of a finite dataset; the run counts steps, not epochs.
            train_dataset = train_dataset.repeat()
    eval_every = config.eval_every_n_steps if config.eval_every_n_steps is not None else eval_default
    eval_every = min(eval_every, num_train_steps)
    batches_per_interval = eval_every * accumulation
    last_interval = (num_train_steps * accumulation) - (math.ceil(num_train_steps / eval_every) - 1) * batches_per_interval
    per_execution = config.steps_per_execution
    if batches_per_interval % per_execution or last_interval % per_execution:
        raise FinetuningError(
            f"steps_per_execution ({per_execution}) must divide the batches of every evaluation "
            f"interval ({batches_per_interval}, last {last_interval})"
        )
    return train_dataset, eval_dataset, _Schedule(eval_every, batches_per_interval, epoch_steps)


def _run_settings(config: "FinetuningRunConfig", schedule: _Schedule, mode: str) -> Dict[str, Any]:
    """What a resumed run must share with the interrupted one (a snapshot: `metadata` may change)."""
    from albert_tf.training import finetune_resume

    run_settings = dict(config.resume_settings or {})
    run_settings.update(
        num_train_steps=config.num_train_steps, warmup_steps=config.warmup_steps, learning_rate=config.learning_rate,
        batch_size=config.batch_size, eval_batch_size=config.eval_batch_size, shuffle_buffer=config.shuffle_buffer,
        weight_decay=config.weight_decay, clipnorm=config.clipnorm, bias_correction=config.bias_correction,
        gradient_accumulation_steps=config.gradient_accumulation_steps,
        steps_per_execution=config.steps_per_execution, eval_every_n_steps=schedule.eval_every,
        precision=config.precision, seed=config.seed, best_metric=config.best_metric, best_mode=mode,
        jit_compile=config.jit_compile, metadata=dict(config.metadata or {}),
    )
    return finetune_resume.jsonable(run_settings)


def _resume_state(model_dir: str, run_settings: Dict[str, Any], overwrite: bool):
    """The committed state of an interrupted run of the same settings, or None (its build area
    then removed: a run killed before its first checkpoint left nothing to continue)."""
    from albert_tf.training import finetune_resume

    build_dir = finetune_resume.resume_dir(model_dir)
    state = finetune_resume.read_state(build_dir)
    if state is not None:
        try:
            finetune_resume.check_same_settings(build_dir, model_dir, state, run_settings)
        except finetune_resume.ResumeSettingsDiffer:
            if not overwrite:
                raise
            state = None
    if state is None:
        file_io.remove_tree(build_dir)
    return state


def _jit_compile(config: "FinetuningRunConfig", strategy, run_precision: str) -> bool:
    from albert_tf.training.strategies import default_jit_compile, strategy_device_kind

    if config.jit_compile is not None:
        return config.jit_compile
    return default_jit_compile(strategy_device_kind(strategy), run_precision if run_precision in PRECISIONS else "float32")


def _compile(model, strategy, config: "FinetuningRunConfig", jit_compile: bool, labels_inside: bool):
    """Compiles `model` with the run's AdamW (warmup, decay, clipping, accumulation); returns it."""
    from albert_tf.training.optimizers import create_optimizer

    accumulation = config.gradient_accumulation_steps
    with strategy.scope():
        optimizer = create_optimizer(
            "adamw", config.learning_rate, num_train_steps=config.num_train_steps,
            num_warmup_steps=config.warmup_steps, weight_decay=config.weight_decay, clipnorm=config.clipnorm,
            gradient_accumulation_steps=accumulation if accumulation > 1 else None,
            bias_correction=config.bias_correction,
        )
        # Feature dicts carry their labels: the model computes its own loss (a raw-text model
        # then trains as its head), whatever loss its `compile` would default to.
        no_compiled_loss = {"loss": None, "metrics": None} if labels_inside else {}
        model.compile(optimizer=optimizer, jit_compile=jit_compile, steps_per_execution=config.steps_per_execution,
                      **no_compiled_loss)
    return optimizer


def _fit(model, optimizer, run: "_Run", train_dataset, schedule: _Schedule, config: "FinetuningRunConfig", state,
         staging: str, chief: bool, verbose: int, callbacks) -> None:
    """`model.fit` over the run's intervals, from the resumed `state`'s if there is one."""
    import keras

    from albert_tf.training import finetune_resume

    initial_epoch = 0
    if state is not None:
        _build_for_restore(model, optimizer, train_dataset)
        finetune_resume.restore(staging, _training_state(model, optimizer), state)
        run.restore(state)
        initial_epoch = state.epoch
        # The training data's order is seeded: the batches already trained on are skipped.
        train_dataset = train_dataset.skip(initial_epoch * schedule.batches_per_interval)
        logger.info("resuming %s from step %d (%s)", config.model_dir, state.step, staging)
        if verbose:
            print(f"resuming from step {state.step} of {config.num_train_steps} ({staging})", flush=True)
    fit_callbacks: List[Any] = []
    if verbose:
        # First, so that an interval's progress is finished before its evaluation prints.
        fit_callbacks.append(interval_progress(run, schedule.epoch_steps))
    fit_callbacks.append(_make_callback(keras)(run))
    if config.tensorboard and chief:
        fit_callbacks.append(
            keras.callbacks.TensorBoard(log_dir=os.path.join(staging, LOG_SUBDIR), write_graph=False, profile_batch=0)
        )
    fit_callbacks.extend(callbacks or ())
    model.fit(
        train_dataset,
        epochs=math.ceil(config.num_train_steps / schedule.eval_every),
        initial_epoch=initial_epoch,
        steps_per_epoch=schedule.batches_per_interval,
        callbacks=fit_callbacks,
        verbose=0,  # the progress callback above reports, in steps and epochs
        shuffle=False,
    )


def _keep_best(model, optimizer, run: "_Run", config: "FinetuningRunConfig", collapse_check, verbose: int):
    """Loads the best evaluation's weights into `model` and judges them against the constant answer.

    Returns:
        `(final step, best step, the collapse verdict or None)`.

    Raises:
        FinetuningError: Training stopped early. FinetuningCollapsed: a collapse with `on_collapse="raise"`.
    """
    final_step = int(optimizer.iterations.numpy())
    if final_step != config.num_train_steps:
        raise FinetuningError(f"training stopped at step {final_step} of {config.num_train_steps}")
    if run.best_step is not None:
        weights_of(model).load_weights(run.best_weights_path)
        os.remove(run.best_weights_path)
    best_step = run.best_step if run.best_step is not None else final_step
    collapse = collapse_check(run.best_metrics) if (collapse_check and run.best_metrics) else None
    if collapse is not None and collapse.collapsed:
        logger.warning("fine-tuning collapsed: %s", collapse.reason)
        if config.on_collapse == "raise":
            raise FinetuningCollapsed(collapse)
        if verbose:
            print(f"WARNING: fine-tuning collapsed: {collapse.reason}", flush=True)
    return final_step, best_step, collapse


def _run_info(config: "FinetuningRunConfig", schedule: _Schedule, mode: str, run: "_Run", run_precision: str,
              jit_compile: bool, best_step: int, collapse, constant_baseline) -> Dict[str, Any]:
    """`finetuning.json`: the run's settings, its best evaluation and its verdict."""
    return {
        "num_train_steps": config.num_train_steps,
        "warmup_steps": config.warmup_steps,
        "learning_rate": config.learning_rate,
        "batch_size": config.batch_size,
        "weight_decay": config.weight_decay,
        "clipnorm": config.clipnorm,
        "bias_correction": config.bias_correction,
        "gradient_accumulation_steps": config.gradient_accumulation_steps,
        "eval_every_n_steps": schedule.eval_every,
        "precision": run_precision,
        "jit_compile": bool(jit_compile),
        "seed": config.seed,
        "best_metric": config.best_metric,
        "best_mode": mode,
        "best_step": best_step,
        "best_metrics": run.best_metrics,
        "history": run.history,
        "collapse": None if collapse is None else collapse.to_dict(),
        "constant_baseline": None if constant_baseline is None else constant_baseline.to_dict(),
        "metadata": dict(config.metadata or {}),
    }


def _artifacts(model_dir: str, tensorboard: bool) -> Dict[str, str]:
    artifacts = {
        "model": os.path.join(model_dir, MODEL_FILE),
        "run_info": os.path.join(model_dir, RUN_INFO_FILE),
        "eval_history": os.path.join(model_dir, EVAL_HISTORY_FILE),
    }
    if tensorboard:
        artifacts["logs"] = os.path.join(model_dir, LOG_SUBDIR)
    return artifacts
