"""The pretraining run: `PretrainingRunConfig` and `run_pretraining`, resumable to the exact step.

`run_pretraining(config, dataset_fn)` builds an `AlbertPretrainer` under the configured
`tf.distribute` strategy and trains it with plain `model.fit` (Keras progress bars, a TensorBoard
callback writing to ``model_dir/logs``), checkpointing every `checkpoint_every_n_steps` optimizer
updates. A run that is killed and restarted with the same arguments continues from its newest
readable checkpoint and produces the same weights and losses as a run that was never interrupted:

* the checkpoint holds every model variable (including the dropout layers' seed-generator
  states) and every optimizer variable (iterations, moments, gradient accumulators). Both are
  collected explicitly: `tf.train.Checkpoint(model=keras_model)` does not reach the seed
  generators in Keras 3 and reaches the encoder's weights only through the optimizer;
* one Keras epoch is one checkpoint interval, so the restored step is always an interval
  boundary, and the data position is restored by skipping the batches already trained on (the
  dataset must be deterministic: fixed shuffle seeds; `deterministic=True` is set on it);
* metrics of each interval go to ``model_dir/metrics.jsonl``, one JSON object per line appended
  in one write; on resume, lines after the restored step (an interval trained but not
  checkpointed) are dropped so that the file always describes the run that produced the weights.

A checkpoint that cannot be read (truncated data, missing index, bad checksum) is skipped with a
warning naming it, and the previous one is used. At the end the run writes, each atomically
(temporary name, then rename): the final checkpoint, ``pretrainer.keras`` (model with heads),
``encoder.keras`` and an original-format TF1 checkpoint ``tf1/model.ckpt`` with
``tf1/albert_config.json``.

A run given the tokenizer its data was made with (`PretrainingRunConfig.tokenizer`) copies it into
``model_dir`` and ``tf1/`` (``spm.model`` or ``vocab.txt``, described by ``tokenizer.json``), so
the output is all fine-tuning needs; `tokenizer_of_run` finds it there. Nothing is written into
``model_dir``, and it is not created, until the data and the model have been checked.

Units: a *step* is one optimizer update. With `gradient_accumulation_steps=A` a step consumes A
batches of `batch_size` examples (the global batch, split over replicas), so one update sees
`A * batch_size` examples; `num_train_steps`, `num_warmup_steps` and the checkpoint interval
count updates, as in the original `run_pretraining.py`.

This module is the run's orchestration; its parts are their own modules: the settings
(`albert_tf.training.pretraining_config`), checkpoints and resume (`albert_tf.training.checkpointing`),
the metrics file and the Keras callbacks (`albert_tf.training.pretraining_progress`), the exported
files (`albert_tf.training.pretraining_export`) and the tokenizer the run carries
(`albert_tf.training.pretraining_tokenizer`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
from typing import Any, Callable, Dict, List, Optional, Sequence

from albert_tf import file_io
from albert_tf.config import AlbertConfig
from albert_tf.training.checkpointing import (
    CHECKPOINT_NAME,
    CHECKPOINT_SUBDIR,
    restore_newest_readable,
    training_state,
)
from albert_tf.training.pretraining_config import (
    PretrainingError,
    PretrainingRunConfig,
    check_resumed_config,
    interval_groups,
)
from albert_tf.training.pretraining_export import (
    ENCODER_FILE,
    PRETRAINER_FILE,
    TF1_SUBDIR,
    export_tf1,
    save_keras_atomically,
)
from albert_tf.training.pretraining_progress import LOG_SUBDIR, METRICS_FILE, MetricsLog, make_callbacks, scalar
from albert_tf.training.pretraining_tokenizer import check_tokenizer_of_run, install_tokenizer, tokenizer_of_run
from albert_tf.training.strategies import default_jit_compile, get_strategy, is_chief, strategy_device_kind, task_info

logger = logging.getLogger(__name__)

INT_FEATURES = (
    "input_ids",
    "input_mask",
    "segment_ids",
    "masked_lm_positions",
    "masked_lm_ids",
    "next_sentence_labels",
)
FLOAT_FEATURES = ("masked_lm_weights",)
MODEL_FEATURES = INT_FEATURES + FLOAT_FEATURES

RUN_CONFIG_FILE = "run_config.json"


@dataclasses.dataclass
class PretrainingResult:
    """What `run_pretraining` did and wrote.

    Attributes:
        model: The trained `AlbertPretrainer` (its `encoder` attribute is the encoder).
        strategy: The `tf.distribute.Strategy` it ran under.
        initial_step: The step training started from (restored from a checkpoint, or 0).
        final_step: The step reached (`num_train_steps`).
        history: The metrics records of the intervals trained in this call (as in metrics.jsonl).
        checkpoint: Path prefix of the final checkpoint (on the chief).
        artifacts: Paths of the exported files: "pretrainer", "encoder", "tf1_checkpoint",
            "albert_config", "metrics", "logs" (empty on non-chief workers).
        restored_from: The checkpoint restored at start, or None.
        skipped_checkpoints: Unreadable checkpoints passed over while restoring.
    """

    model: Any
    strategy: Any
    initial_step: int
    final_step: int
    history: List[Dict[str, Any]]
    checkpoint: Optional[str]
    artifacts: Dict[str, str]
    restored_from: Optional[str] = None
    skipped_checkpoints: List[str] = dataclasses.field(default_factory=list)

    @property
    def encoder(self):
        return self.model.encoder


# --- data ---------------------------------------------------------------------------------------


def _check_element_spec(spec, config: PretrainingRunConfig) -> None:
    import tensorflow as tf

    if not isinstance(spec, dict):
        raise PretrainingError(f"the dataset must yield dicts of features, got elements of type {spec!r}")
    missing = [k for k in MODEL_FEATURES if k not in spec]
    if missing:
        raise PretrainingError(f"the dataset lacks feature(s) {', '.join(missing)}; it has {', '.join(sorted(spec))}")
    expected = {
        "input_ids": config.max_seq_length,
        "input_mask": config.max_seq_length,
        "segment_ids": config.max_seq_length,
        "masked_lm_positions": config.max_predictions_per_seq,
        "masked_lm_ids": config.max_predictions_per_seq,
        "masked_lm_weights": config.max_predictions_per_seq,
        "next_sentence_labels": 1,
    }
    for name in MODEL_FEATURES:
        s = spec[name]
        if not isinstance(s, tf.TensorSpec):
            raise PretrainingError(f"feature {name!r} must be a dense tensor, got {s!r}")
        if name in INT_FEATURES and not s.dtype.is_integer:
            raise PretrainingError(f"feature {name!r} must be an integer tensor, got {s.dtype.name}")
        if name in FLOAT_FEATURES and not s.dtype.is_floating:
            raise PretrainingError(f"feature {name!r} must be a floating-point tensor, got {s.dtype.name}")
        rank = s.shape.rank
        if name == "next_sentence_labels" and rank == 1:
            continue
        if rank != 2:
            raise PretrainingError(
                f"feature {name!r} has shape {s.shape}; the dataset must be batched: [batch, {expected[name]}]"
            )
        if s.shape[1] is not None and s.shape[1] != expected[name]:
            raise PretrainingError(f"feature {name!r} has length {s.shape[1]}, the run config says {expected[name]}")
    batch = spec["input_ids"].shape[0]
    if batch is not None and batch != config.batch_size:
        raise PretrainingError(
            f"the dataset's batches have {batch} examples, the run config's batch_size is {config.batch_size}"
        )


def _check_dataset(dataset, config: PretrainingRunConfig) -> None:
    import tensorflow as tf

    if not isinstance(dataset, tf.data.Dataset):
        raise PretrainingError(f"dataset_fn must return a tf.data.Dataset, got {type(dataset).__name__}")
    _check_element_spec(dataset.element_spec, config)


def prepare_pretraining_dataset(dataset, skip_batches: int, config: PretrainingRunConfig):
    """The model's features, as int32/float32, from batch `skip_batches` on, deterministically."""
    import tensorflow as tf

    _check_dataset(dataset, config)

    def select(features):
        out = {k: tf.cast(features[k], tf.int32) for k in INT_FEATURES}
        out["masked_lm_weights"] = tf.cast(features["masked_lm_weights"], tf.float32)
        out["next_sentence_labels"] = tf.reshape(out["next_sentence_labels"], [-1, 1])
        return out

    if skip_batches:
        dataset = dataset.skip(skip_batches)
    dataset = dataset.map(select)
    options = tf.data.Options()
    options.deterministic = True
    return dataset.with_options(options).prefetch(tf.data.AUTOTUNE)


def _dummy_batch(config: PretrainingRunConfig):
    import numpy as np

    seq, preds = config.max_seq_length, config.max_predictions_per_seq
    batch = {k: np.zeros((1, seq), "int32") for k in ("input_ids", "input_mask", "segment_ids")}
    batch.update(
        masked_lm_positions=np.zeros((1, preds), "int32"),
        masked_lm_ids=np.zeros((1, preds), "int32"),
        masked_lm_weights=np.zeros((1, preds), "float32"),
        next_sentence_labels=np.zeros((1, 1), "int32"),
    )
    return batch


# --- the run ------------------------------------------------------------------------------------


def effective_steps_per_execution(strategy, steps_per_execution: int) -> int:
    """`steps_per_execution`, or 1 where Keras cannot run more under this strategy.

    Keras 3 runs several steps per call in a `tf.while_loop` whose body is a `tf.cond`; with
    several replicas under `MirroredStrategy` or `MultiWorkerMirroredStrategy` the cross-replica
    gradient sum inside that `cond` fails with TF's "You must feed a value for ... tensor" error
    (keras-team/keras#19246; reproduced here with plain `keras.optimizers.Adam`). TPUs are not
    affected. One step per call computes exactly the same updates, only with more host round
    trips.
    """
    import tensorflow as tf

    if (
        steps_per_execution > 1
        and strategy.num_replicas_in_sync > 1
        and not isinstance(strategy, tf.distribute.TPUStrategy)
    ):
        logger.warning(
            "steps_per_execution=%d is not supported by Keras under %s with %d replicas "
            "(keras-team/keras#19246); using 1 (the updates are the same)",
            steps_per_execution,
            type(strategy).__name__,
            strategy.num_replicas_in_sync,
        )
        return 1
    return steps_per_execution


def build_pretraining_model(config: PretrainingRunConfig, albert_config: AlbertConfig, strategy, jit_compile: bool):
    """`(AlbertPretrainer, optimizer)` of a run, built and compiled under `strategy` as `run_pretraining` does."""
    import keras

    from albert_tf.modeling import AlbertEncoder
    from albert_tf.pretrainer import AlbertPretrainer
    from albert_tf.training.optimizers import create_optimizer

    with strategy.scope():
        previous_policy = keras.mixed_precision.global_policy()
        # Scoped to the model's construction so the caller's global policy is left as it was;
        # the layers keep the policy they were built with.
        keras.mixed_precision.set_global_policy(config.precision)
        try:
            encoder = AlbertEncoder.from_albert_config(albert_config, dtype=config.precision)
            model = AlbertPretrainer(encoder, sentence_task=config.sentence_task)
        finally:
            keras.mixed_precision.set_global_policy(previous_policy)
        optimizer = create_optimizer(
            config.optimizer,
            config.learning_rate,
            num_train_steps=config.num_train_steps,
            num_warmup_steps=config.num_warmup_steps,
            weight_decay=config.weight_decay,
            clipnorm=config.clipnorm,
            gradient_accumulation_steps=(
                config.gradient_accumulation_steps if config.gradient_accumulation_steps > 1 else None
            ),
        )
        model.compile(
            optimizer=optimizer,
            steps_per_execution=effective_steps_per_execution(strategy, config.steps_per_execution),
            jit_compile=jit_compile,
        )
        # Variables must exist before a checkpoint can be restored into them.
        model(_dummy_batch(config), training=False)
        optimizer.build(model.trainable_variables)
    return model, optimizer


@contextlib.contextmanager
def pretraining_fit_scope(model, strategy):
    """The context `model.fit` runs in: the strategy's scope, without Keras's batch-eating build.

    Keras 3's TensorFlow trainer, for a model created under a strategy, takes one batch off the
    training iterator to build the model symbolically (`_maybe_symbolic_build`), and with
    `steps_per_epoch` that batch is never trained: every `fit` call would silently skip a batch,
    so a strategy run would neither match a single-device run nor resume exactly. The model is
    fully built before `fit` here, so the strategy is hidden from that check for the duration of
    `fit`, which runs inside the strategy's scope, where Keras finds the same strategy through
    `tf.distribute.get_strategy()`.
    """
    from albert_tf.keras_internals import strategy_hidden_from_build

    wrapped = _multi_worker_safe_logs(model, strategy)
    try:
        with strategy_hidden_from_build(model), strategy.scope():
            yield
    finally:
        if wrapped:
            del model.train_step


def _is_scalar_tensor(value) -> bool:
    shape = getattr(value, "shape", None)
    return shape is not None and shape.rank == 0


def _multi_worker_safe_logs(model, strategy) -> bool:
    """Makes the train step's scalar logs shape [1] when Keras reduces them across workers.

    With several `MultiWorkerMirroredStrategy` workers, Keras 3 reduces the per-replica logs
    of `fit` with `strategy.reduce("MEAN", value, axis=0)`, which fails for the scalar metric
    values ("Invalid reduction dimension 0 for input with 0 dimensions",
    tensorflow/tensorflow#72388). A [1]-shaped value reduces to the same mean, as a scalar.
    Returns whether the (instance-level) wrapper was installed.
    """
    import tensorflow as tf

    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy) or task_info(strategy)[0] is None:
        return False
    jobs = strategy.cluster_resolver.cluster_spec().as_dict()
    if sum(len(jobs.get(t, ())) for t in ("chief", "worker")) < 2:
        return False
    train_step = model.train_step

    def train_step_with_rank1_logs(data):
        logs = train_step(data)
        return {k: tf.reshape(v, [1]) if _is_scalar_tensor(v) else v for k, v in logs.items()}

    model.train_step = train_step_with_rank1_logs
    return True


def check_pretraining_memory(config: PretrainingRunConfig, albert_config: AlbertConfig):
    """Refuses a run whose estimated peak host memory exceeds what is free, in one
    `albert_tf.training.memory.TrainingMemoryError` line naming what fits; logs the estimate."""
    from albert_tf.config import PRETRAINING_PRESETS
    from albert_tf.training import memory

    def estimate(model_config, batch_size, seq_length):
        return memory.estimate_training_memory(
            model_config, batch_size, seq_length, precision=config.precision,
            gradient_accumulation_steps=config.gradient_accumulation_steps,
            predictions_per_seq=config.max_predictions_per_seq,
        )

    alternatives = []
    for name in ("small", "tiny"):
        if config.model_config != name:
            preset = PRETRAINING_PRESETS[name]
            smaller = AlbertConfig.preset(name, vocab_size=albert_config.vocab_size)
            alternatives.append((name, estimate(smaller, preset.batch_size, preset.max_seq_length)))
    found = memory.check_fits(
        f"pretraining a {albert_config.num_hidden_layers}-layer, {albert_config.hidden_size}-wide ALBERT",
        lambda batch: estimate(albert_config, batch, config.max_seq_length),
        config.batch_size,
        config.max_seq_length,
        gradient_accumulation_steps=config.gradient_accumulation_steps,
        alternatives=alternatives,
        config_param="model_config",
    )
    logger.info("%s", memory.memory_line(found))
    return found


def run_pretraining(
    config: PretrainingRunConfig,
    dataset_fn: Callable[[], Any],
    *,
    callbacks: Optional[Sequence[Any]] = None,
    strategy=None,
) -> PretrainingResult:
    """Trains (or resumes training of) an ALBERT pretrainer to `config.num_train_steps`.

    Args:
        config: The run.
        dataset_fn: Called with no arguments, returns a `tf.data.Dataset` of batched feature
            dicts (`input_ids`, `input_mask`, `segment_ids`, `masked_lm_positions`,
            `masked_lm_ids` integer [batch, seq]/[batch, predictions], `masked_lm_weights`
            float, `next_sentence_labels` [batch, 1] or [batch]; extra features are ignored),
            with `config.batch_size` examples per batch and enough batches for the run
            (repeat it). It must be deterministic (explicit shuffle seeds): a resumed run
            calls it again and skips the batches already consumed. Called once per `fit`.
        callbacks: Extra Keras callbacks for `fit` (they run after the checkpointing one).
        strategy: A `tf.distribute.Strategy` to use instead of `get_strategy(config.strategy)`.

    Returns:
        A `PretrainingResult`.

    Raises:
        PretrainingError: Settings that cannot work, a dataset that does not match them, a
            checkpoint of another model.
        albert_tf.training.memory.TrainingMemoryError: On a CPU, an estimated peak memory
            above what is free (`check_pretraining_memory`), before anything is written.
        albert_tf.config.ConfigError: An unusable model config.
        albert_tf.training.strategies.StrategyError: A strategy that cannot be created.
    """
    import tensorflow as tf

    albert_config, strategy = _checked_run(config, strategy)
    run = _RunPlaces.of(config, strategy)

    def make_dataset():
        # The same global seed before every call: op-level seeds of `shuffle` and friends are
        # derived from it, so the data order cannot depend on what the process did before.
        tf.random.set_seed(config.seed)
        return dataset_fn()

    # Checked before anything is built or written, so a wrong dataset fails fast.
    first_dataset = make_dataset()
    _check_dataset(first_dataset, config)

    model, optimizer, checkpoint = _built_model(config, albert_config, strategy)
    restored_from, skipped, initial_step = _restore_or_initialise(config, model, optimizer, checkpoint, run)
    metrics_log = _prepare_model_dir(config, run, restored_from, initial_step)
    manager = tf.train.CheckpointManager(
        checkpoint,
        directory=os.path.join(run.write_dir, CHECKPOINT_SUBDIR),
        max_to_keep=config.keep_checkpoints if run.chief else 1,
        checkpoint_name=CHECKPOINT_NAME,
    )
    history: List[Dict[str, Any]] = []
    fits = _Fits(config, model, strategy, run, manager, metrics_log, history, callbacks)
    interval_callback = fits.train(initial_step, make_dataset, first_dataset)

    final_step = int(scalar(optimizer.iterations))
    if final_step != config.num_train_steps:
        raise RuntimeError(f"training stopped at step {final_step} of {config.num_train_steps}")
    # A run restarted after it finished trains nothing: its final checkpoint is the restored one.
    final_checkpoint = interval_callback.last_checkpoint if interval_callback else restored_from
    artifacts = _export_run(config, model, albert_config, run, metrics_log)
    if not run.chief:
        final_checkpoint = None
    return PretrainingResult(
        model=model,
        strategy=strategy,
        initial_step=initial_step,
        final_step=final_step,
        history=history,
        checkpoint=final_checkpoint,
        artifacts=artifacts,
        restored_from=restored_from,
        skipped_checkpoints=skipped,
    )


def _checked_run(config: PretrainingRunConfig, strategy):
    """`(albert_config, strategy)` of a run whose settings, tokenizer and memory need are checked."""
    import tensorflow as tf

    config.validate()
    albert_config = config.albert_config()
    if config.tokenizer is not None:
        config.tokenizer.validate()
    if config.deterministic_ops:
        tf.config.experimental.enable_op_determinism()
    if strategy is None:
        strategy = get_strategy(config.strategy, tpu=config.tpu)
    if strategy_device_kind(strategy) == "CPU":
        check_pretraining_memory(config, albert_config)
    return albert_config, strategy


@dataclasses.dataclass(frozen=True)
class _RunPlaces:
    """Where this worker of a run writes: the chief into `model_dir`, every other worker into a
    private folder removed at the end (saving may involve collectives, so every worker saves, as
    TensorFlow's multi-worker guides do)."""

    model_dir: str
    write_dir: str
    log_dir: str
    chief: bool

    @classmethod
    def of(cls, config: PretrainingRunConfig, strategy) -> "_RunPlaces":
        chief = is_chief(strategy)
        task_type, task_id = task_info(strategy)
        model_dir = config.model_dir
        write_dir = model_dir if chief else os.path.join(model_dir, f".tmp-{task_type}-{task_id}")
        return cls(model_dir, write_dir, os.path.join(model_dir, LOG_SUBDIR), chief)


def _built_model(config: PretrainingRunConfig, albert_config: AlbertConfig, strategy):
    """`(model, optimizer, checkpoint)`: the seeded, compiled model and its `training_state`."""
    import keras

    jit_compile = config.jit_compile
    if jit_compile is None:
        jit_compile = default_jit_compile(strategy_device_kind(strategy), config.precision)
    keras.utils.set_random_seed(config.seed)
    model, optimizer = build_pretraining_model(config, albert_config, strategy, jit_compile)
    return model, optimizer, training_state(model, optimizer)


def _restore_or_initialise(config: PretrainingRunConfig, model, optimizer, checkpoint, run: _RunPlaces):
    """Restores the run's newest readable checkpoint, else starts the encoder from
    `config.init_checkpoint` (if any); returns `(restored_from, skipped, initial_step)`."""
    import tensorflow as tf

    restored_from, skipped = None, []
    chief_checkpoint_dir = os.path.join(run.model_dir, CHECKPOINT_SUBDIR)
    if tf.io.gfile.isdir(chief_checkpoint_dir):
        restored_from, skipped = restore_newest_readable(checkpoint, chief_checkpoint_dir)
    initial_step = int(scalar(optimizer.iterations))
    if initial_step > config.num_train_steps:
        raise PretrainingError(
            f"{restored_from} is at step {initial_step}, beyond num_train_steps={config.num_train_steps}"
        )
    if restored_from:
        logger.info("restored %s (step %d)", restored_from, initial_step)
    elif config.init_checkpoint:
        from albert_tf.checkpoints.any_format import init_encoder

        init_encoder(model.encoder, config.init_checkpoint)
        logger.info("encoder initialised from %s", config.init_checkpoint)
    return restored_from, skipped, initial_step


def _prepare_model_dir(
    config: PretrainingRunConfig, run: _RunPlaces, restored_from: Optional[str], initial_step: int
) -> Optional[MetricsLog]:
    """The run's first writes: its folder, then (chief) the metrics up to `initial_step`, the
    tokenizer and ``run_config.json``. Returns the chief's `MetricsLog` (None elsewhere)."""
    import tensorflow as tf

    model_dir = run.model_dir
    metrics_log = MetricsLog(os.path.join(model_dir, METRICS_FILE)) if run.chief else None
    run_config_path = os.path.join(model_dir, RUN_CONFIG_FILE)
    if run.chief and config.tokenizer is not None and tf.io.gfile.isdir(model_dir):
        check_tokenizer_of_run(model_dir, config.tokenizer)
    # The first write: everything before can still fail without leaving anything behind.
    tf.io.gfile.makedirs(run.write_dir)
    if run.chief:
        if restored_from:
            check_resumed_config(run_config_path, config)
        metrics_log.truncate_after(initial_step)
        if config.tokenizer is not None:
            install_tokenizer(model_dir, config.tokenizer)
        file_io.atomic_write_json(run_config_path, config.to_dict(), ensure_ascii=True)
    return metrics_log


class _Fits:
    """The `fit` calls of a run, one per group of equal checkpoint intervals (`interval_groups`),
    with the interval checkpoint first among their callbacks, then (chief) TensorBoard's, then
    the caller's."""

    def __init__(self, config: PretrainingRunConfig, model, strategy, run: _RunPlaces, manager,
                 metrics_log: Optional[MetricsLog], history: List[Dict[str, Any]], callbacks):
        import keras

        self.config, self.model, self.strategy, self.run = config, model, strategy, run
        self.manager, self.metrics_log, self.history = manager, metrics_log, history
        self.callbacks = callbacks
        self.IntervalCheckpoint, self.StepTensorBoard, self.RunningScalars = make_callbacks(keras)

    def train(self, initial_step: int, make_dataset: Callable[[], Any], first_dataset) -> Optional[Any]:
        """Trains from `initial_step` to the end; returns the last fit's interval-checkpoint
        callback (None where there was nothing to train)."""
        config = self.config
        every, accumulation = config.checkpoint_every_n_steps, config.gradient_accumulation_steps
        ends = list(range(every, config.num_train_steps, every)) + [config.num_train_steps]
        starts = [0] + ends[:-1]
        groups = interval_groups(initial_step, config.num_train_steps, every)
        if groups:
            logger.info(
                "training steps %d..%d: one Keras epoch is one checkpoint interval of %d step(s) x %d batch(es) of %d",
                initial_step + 1,
                config.num_train_steps,
                every,
                accumulation,
                config.batch_size,
            )
        else:
            logger.info("%s is already at step %d: nothing to train", self.run.model_dir, initial_step)
        interval_callback = None
        step = initial_step
        for first_epoch, end_epoch, length in groups:
            interval_starts = list(starts)
            interval_starts[first_epoch] = step
            interval_callback = self.IntervalCheckpoint(
                self.manager, self.metrics_log, self.history, interval_starts, ends, config.batch_size * accumulation
            )
            fit_callbacks = self._fit_callbacks(interval_callback, interval_starts)
            source, first_dataset = (first_dataset if first_dataset is not None else make_dataset()), None
            dataset = prepare_pretraining_dataset(source, step * accumulation, config)
            self._fit(dataset, first_epoch, end_epoch, length, fit_callbacks)
            step = ends[end_epoch - 1]
        return interval_callback

    def _fit_callbacks(self, interval_callback, interval_starts: List[int]) -> List[Any]:
        config, log_dir = self.config, self.run.log_dir
        fit_callbacks = [interval_callback]
        if self.run.chief:
            # A fresh TensorBoard per fit: Keras's closes its writers at the end of `fit`.
            fit_callbacks.append(self.StepTensorBoard(log_dir=log_dir, write_graph=False, profile_batch=0))
            if config.log_every:
                fit_callbacks.append(
                    self.RunningScalars(
                        os.path.join(log_dir, "train"), config.log_every, config.gradient_accumulation_steps,
                        interval_starts,
                    )
                )
        fit_callbacks.extend(self.callbacks or ())
        return fit_callbacks

    def _fit(self, dataset, first_epoch: int, end_epoch: int, length: int, fit_callbacks: List[Any]) -> None:
        with pretraining_fit_scope(self.model, self.strategy):
            self.model.fit(
                dataset,
                epochs=end_epoch,
                initial_epoch=first_epoch,
                steps_per_epoch=length * self.config.gradient_accumulation_steps,
                callbacks=fit_callbacks,
                verbose=self.config.verbose,
                shuffle=False,  # The dataset's own (seeded) shuffling is the only one.
            )


def _export_run(
    config: PretrainingRunConfig, model, albert_config: AlbertConfig, run: _RunPlaces, metrics_log: Optional[MetricsLog]
) -> Dict[str, str]:
    """Writes the trained model's files (every worker; the others' private folder is removed
    again) and returns the chief's artifacts (empty elsewhere)."""
    import tensorflow as tf

    model_dir, write_dir = run.model_dir, run.write_dir
    artifacts: Dict[str, str] = {}
    save_keras_atomically(model, os.path.join(write_dir, PRETRAINER_FILE))
    save_keras_atomically(model.encoder, os.path.join(write_dir, ENCODER_FILE))
    tf1 = export_tf1(model, albert_config, os.path.join(write_dir, TF1_SUBDIR))
    if not run.chief:
        tf.io.gfile.rmtree(write_dir)
        return artifacts
    artifacts = {
        "pretrainer": os.path.join(model_dir, PRETRAINER_FILE),
        "encoder": os.path.join(model_dir, ENCODER_FILE),
        **tf1,
        "metrics": metrics_log.path,
        "logs": run.log_dir,
    }
    if config.tokenizer is not None:
        installed = tokenizer_of_run(model_dir)
        # Beside the TF1 checkpoint too, as the original releases ship it: `tf1/` alone fine-tunes.
        install_tokenizer(os.path.join(model_dir, TF1_SUBDIR), installed)
        artifacts["tokenizer"] = installed.path
    return artifacts
