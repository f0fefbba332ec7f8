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
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import re
import tempfile
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

from albert_tf import file_io
from albert_tf.config import AlbertConfig, ConfigError, load_config
from albert_tf.errors import ParameterError
from albert_tf.training.strategies import PRECISIONS, STRATEGY_NAMES

logger = logging.getLogger(__name__)

SENTENCE_TASKS = ("sop", "nsp")
OPTIMIZERS = ("lamb", "adamw")
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

CHECKPOINT_SUBDIR = "checkpoints"
CHECKPOINT_NAME = "ckpt"
METRICS_FILE = "metrics.jsonl"
RUN_CONFIG_FILE = "run_config.json"
PRETRAINER_FILE = "pretrainer.keras"
ENCODER_FILE = "encoder.keras"
TF1_SUBDIR = "tf1"
TF1_CHECKPOINT = "model.ckpt"
ALBERT_CONFIG_FILE = "albert_config.json"
LOG_SUBDIR = "logs"
TOKENIZER_FILE = "tokenizer.json"
# The tokenizer copied into a run directory, under a fixed name per kind (the names
# `albert-tf finetune` also looks for beside --init).
TOKENIZER_KINDS = {"sentencepiece": "spm.model", "wordpiece": "vocab.txt"}

# Fields whose change between a run and its restart makes the continuation differ from an
# uninterrupted run (a warning names them); the others (logging, retention) are harmless.
_TRAJECTORY_FIELDS = (
    "model_config",
    "batch_size",
    "max_seq_length",
    "max_predictions_per_seq",
    "num_train_steps",
    "num_warmup_steps",
    "learning_rate",
    "optimizer",
    "weight_decay",
    "clipnorm",
    "precision",
    "gradient_accumulation_steps",
    "seed",
    "sentence_task",
    "masking",
)


class PretrainingError(ParameterError):
    """A run that cannot go ahead as configured: bad settings, a dataset that does not match
    them, a checkpoint of another model (a `ValueError`; settings marked with
    `albert_tf.errors.param` read as Python arguments, or as flags on the command line)."""


def _check_int(name, value, minimum):
    if isinstance(value, bool) or not isinstance(value, int):
        raise PretrainingError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise PretrainingError(f"{name} must be >= {minimum}, got {value}")


@dataclasses.dataclass(frozen=True)
class TokenizerFile:
    """A tokenizer file: what `albert-tf finetune` needs besides the weights.

    Attributes:
        kind: "sentencepiece" (a SentencePiece ``.model``) or "wordpiece" (a ``vocab.txt``).
        path: The file.
        lower_case: Whether the text is lower-cased before tokenization (as the data was made).
    """

    kind: str
    path: str
    lower_case: bool = True

    def validate(self) -> None:
        """Raises `PretrainingError` for an unknown kind or a missing file."""
        import tensorflow as tf

        if self.kind not in TOKENIZER_KINDS:
            raise PretrainingError(
                f"unknown tokenizer kind {self.kind!r}; expected one of {', '.join(TOKENIZER_KINDS)}"
            )
        if not isinstance(self.lower_case, bool):
            raise PretrainingError(f"tokenizer lower_case must be True or False, got {self.lower_case!r}")
        if not tf.io.gfile.exists(self.path) or tf.io.gfile.isdir(self.path):
            raise PretrainingError(f"tokenizer file not found: {self.path}")


def _as_tokenizer_file(found) -> Optional[TokenizerFile]:
    """The `TokenizerFile` of a `tokenization.resolve.StoredTokenizer` (lower-cased unless recorded)."""
    if found is None:
        return None
    return TokenizerFile(found.kind, found.file, True if found.lower_case is None else found.lower_case)


def _read_tokenizer_entry(directory: str) -> Optional[TokenizerFile]:
    """The tokenizer that ``tokenizer.json`` in `directory` describes, or None."""
    from albert_tf.tokenization.resolve import TOKENIZER_JSON, tokenizer_in

    return _as_tokenizer_file(tokenizer_in(directory, TOKENIZER_JSON))


def tokenizer_of_run(path: str) -> Optional[TokenizerFile]:
    """The tokenizer a pretraining output carries (written by `run_pretraining`), or None.

    Args:
        path: The run directory, its ``tf1/`` or ``checkpoints/`` folder, or a file or checkpoint
            prefix in one of them (anything `albert-tf finetune --init` accepts from a run).

    Returns:
        The `TokenizerFile` that ``tokenizer.json`` describes, or None where there is none
        (`albert_tf.tokenization.resolve.find_tokenizer` with `RUN_SEARCH`).
    """
    from albert_tf.tokenization.resolve import RUN_SEARCH, find_tokenizer as find_stored

    return _as_tokenizer_file(find_stored(path, RUN_SEARCH))


def _file_bytes(path: str) -> bytes:
    import tensorflow as tf

    with tf.io.gfile.GFile(path, "rb") as f:
        return f.read()


def _check_tokenizer_of_run(directory: str, tokenizer: TokenizerFile) -> None:
    """Refuses to continue a run that was pretrained with another vocabulary."""
    previous = _read_tokenizer_entry(directory)
    if previous is None:
        return
    if previous.kind != tokenizer.kind or _file_bytes(previous.path) != _file_bytes(tokenizer.path):
        raise PretrainingError(
            f"{directory} was pretrained with the tokenizer in {previous.path}; {tokenizer.path} is another "
            "vocabulary (use a new --model-dir for new data)"
        )


def _install_tokenizer(directory: str, tokenizer: TokenizerFile) -> str:
    """Copies the tokenizer file into `directory` and describes it in ``tokenizer.json``."""
    import tensorflow as tf

    name = TOKENIZER_KINDS[tokenizer.kind]
    target = os.path.join(directory, name)
    if os.path.abspath(target) != os.path.abspath(tokenizer.path):
        with file_io.atomic_output(target) as tmp:
            tf.io.gfile.copy(tokenizer.path, tmp, overwrite=True)
    entry = {"type": tokenizer.kind, "file": name, "lower_case": tokenizer.lower_case}
    file_io.atomic_write_json(os.path.join(directory, TOKENIZER_FILE), entry, ensure_ascii=True)
    return target


@dataclasses.dataclass
class PretrainingRunConfig:
    """Everything that defines a pretraining run; the same config resumes the same run.

    Attributes:
        model_dir: Where checkpoints, logs, metrics and the exported models go (local or any
            `tf.io.gfile` filesystem, e.g. ``gs://``).
        model_config: An `AlbertConfig`, a preset name ("base-v2") or an ``albert_config.json`` path.
        batch_size: Global batch size per micro-batch (split over the replicas).
        max_seq_length: Sequence length of the data.
        max_predictions_per_seq: Masked positions per sequence in the data.
        num_train_steps: Optimizer updates in the whole run.
        num_warmup_steps: Linear-warmup updates of the learning rate.
        learning_rate: Peak learning rate (the original's 0.00176 for LAMB at batch 4096).
        optimizer: "lamb" (the original pretraining optimizer) or "adamw".
        weight_decay: The optimizers' in-update weight-decay rate.
        clipnorm: Global-norm clipping of the aggregated gradients (None: no clipping).
        precision: "float32" or "mixed_bfloat16" (bfloat16 compute, float32 variables).
        jit_compile: XLA for the train step; None picks `default_jit_compile` for the device.
        steps_per_execution: Batches per `tf.function` call (fewer Python round trips). Must
            divide the batches of every checkpoint interval.
        gradient_accumulation_steps: Batches whose mean gradient makes one update.
        strategy: One of `strategies.STRATEGY_NAMES`.
        tpu: TPU name or address for strategy "tpu".
        checkpoint_every_n_steps: Checkpoint (and metrics line) interval, in updates.
        keep_checkpoints: Number of newest checkpoints kept.
        seed: Seeds Python, NumPy, TensorFlow and Keras (weights init, dropout).
        sentence_task: "sop" or "nsp".
        log_every: Also write the running metrics to TensorBoard every this many updates
            (0: only once per checkpoint interval).
        verbose: Keras `fit` verbosity ("auto", 0, 1 or 2).
        deterministic_ops: Call `tf.config.experimental.enable_op_determinism()` (needed for
            bit-exact resume on GPU; CPU kernels are deterministic already). Process-wide.
        tokenizer: The tokenizer the data was made with; copied into the outputs (None: none).
        masking: How the records are masked, as recorded in ``run_config.json``: ``{"mode":
            "offline"}`` (the records carry their masks), or ``{"mode": "on-the-fly", ...}`` with
            the `MaskingConfig` fields (`masking_record`). The dataset function does the masking;
            this field only records it, so that a run says how it was trained (None: not stated).
        init_checkpoint: Start the encoder from this checkpoint (any layout
            `albert_tf.checkpoints.any_format.init_encoder` reads: continued pretraining) rather
            than from random weights; the heads start fresh. A resumed run restores its own
            checkpoint instead. None: from scratch.
    """

    model_dir: str
    model_config: Union[str, AlbertConfig] = "base-v2"
    batch_size: int = 4096
    max_seq_length: int = 512
    max_predictions_per_seq: int = 20
    num_train_steps: int = 125000
    num_warmup_steps: int = 3125
    learning_rate: float = 0.00176
    optimizer: str = "lamb"
    weight_decay: float = 0.01
    clipnorm: Optional[float] = 1.0
    precision: str = "float32"
    jit_compile: Optional[bool] = None
    steps_per_execution: int = 1
    gradient_accumulation_steps: int = 1
    strategy: str = "default"
    tpu: Optional[str] = None
    checkpoint_every_n_steps: int = 5000
    keep_checkpoints: int = 5
    seed: int = 12345
    sentence_task: str = "sop"
    log_every: int = 100
    verbose: Union[str, int] = "auto"
    deterministic_ops: bool = False
    tokenizer: Optional[TokenizerFile] = None
    masking: Optional[Dict[str, Any]] = None
    init_checkpoint: Optional[str] = None

    def __post_init__(self):
        self.validate()

    def validate(self) -> None:
        """Raises `PretrainingError` (a `ValueError`) naming the first impossible setting."""
        if not isinstance(self.model_dir, (str, os.PathLike)) or not os.fspath(self.model_dir):
            raise PretrainingError(f"model_dir must be a non-empty path, got {self.model_dir!r}")
        self.model_dir = os.fspath(self.model_dir)
        if not isinstance(self.model_config, (str, os.PathLike, AlbertConfig)):
            raise PretrainingError(
                f"model_config must be an AlbertConfig, a preset name or a path, got {self.model_config!r}"
            )
        for name, minimum in (
            ("batch_size", 1),
            ("max_seq_length", 2),
            ("max_predictions_per_seq", 1),
            ("num_train_steps", 1),
            ("num_warmup_steps", 0),
            ("steps_per_execution", 1),
            ("gradient_accumulation_steps", 1),
            ("checkpoint_every_n_steps", 1),
            ("keep_checkpoints", 1),
            ("seed", 0),
            ("log_every", 0),
        ):
            _check_int(name, getattr(self, name), minimum)
        if self.num_warmup_steps > self.num_train_steps:
            raise PretrainingError(
                f"num_warmup_steps ({self.num_warmup_steps}) exceeds num_train_steps ({self.num_train_steps})"
            )
        if self.max_predictions_per_seq > self.max_seq_length:
            raise PretrainingError(
                f"max_predictions_per_seq ({self.max_predictions_per_seq}) exceeds "
                f"max_seq_length ({self.max_seq_length})"
            )
        rate = self.learning_rate
        if not isinstance(rate, (int, float)) or isinstance(rate, bool) or not rate > 0:
            raise PretrainingError(f"learning_rate must be a positive number, got {self.learning_rate!r}")
        if not isinstance(self.weight_decay, (int, float)) or self.weight_decay < 0:
            raise PretrainingError(f"weight_decay must be a number >= 0, got {self.weight_decay!r}")
        if self.clipnorm is not None and (not isinstance(self.clipnorm, (int, float)) or self.clipnorm <= 0):
            raise PretrainingError(f"clipnorm must be a positive number or None, got {self.clipnorm!r}")
        if self.optimizer not in OPTIMIZERS:
            raise PretrainingError(f"unknown optimizer {self.optimizer!r}; expected one of {', '.join(OPTIMIZERS)}")
        if self.precision not in PRECISIONS:
            raise PretrainingError(f"unknown precision {self.precision!r}; expected one of {', '.join(PRECISIONS)}")
        if self.strategy not in STRATEGY_NAMES:
            raise PretrainingError(f"unknown strategy {self.strategy!r}; expected one of {', '.join(STRATEGY_NAMES)}")
        if self.sentence_task not in SENTENCE_TASKS:
            raise PretrainingError(
                f"unknown sentence_task {self.sentence_task!r}; expected one of {', '.join(SENTENCE_TASKS)}"
            )
        if self.tokenizer is not None and not isinstance(self.tokenizer, TokenizerFile):
            raise PretrainingError(f"tokenizer must be a TokenizerFile or None, got {self.tokenizer!r}")
        if self.jit_compile not in (None, True, False):
            raise PretrainingError(f"jit_compile must be True, False or None (auto), got {self.jit_compile!r}")
        if self.masking is not None and (
            not isinstance(self.masking, dict) or self.masking.get("mode") not in ("offline", "on-the-fly")
        ):
            raise PretrainingError(
                f'masking must be None or a dict with "mode" "offline" or "on-the-fly", got {self.masking!r}'
            )
        # Every fit call covers whole checkpoint intervals (or the last, shorter one), and
        # Keras runs `steps_per_execution` batches per call without looking at epoch ends.
        groups = interval_groups(0, self.num_train_steps, self.checkpoint_every_n_steps)
        for length in sorted({n for _, _, n in groups}):
            batches = length * self.gradient_accumulation_steps
            if batches % self.steps_per_execution:
                raise PretrainingError(
                    f"steps_per_execution ({self.steps_per_execution}) must divide the batches of every "
                    f"checkpoint interval: an interval of {length} step(s) x {self.gradient_accumulation_steps} "
                    f"accumulation = {batches} batches (num_train_steps={self.num_train_steps}, "
                    f"checkpoint_every_n_steps={self.checkpoint_every_n_steps})"
                )

    def albert_config(self) -> AlbertConfig:
        """The model's `AlbertConfig`, checked against the data shapes."""
        config = self.model_config
        if not isinstance(config, AlbertConfig):
            config = load_config(os.fspath(config))
        if self.max_seq_length > config.max_position_embeddings:
            raise ConfigError(
                f"max_seq_length ({self.max_seq_length}) exceeds the model's max_position_embeddings "
                f"({config.max_position_embeddings})"
            )
        return config

    def to_dict(self) -> Dict[str, Any]:
        """A JSON-serializable dict (the model config expanded if it is an `AlbertConfig`)."""
        out = dataclasses.asdict(self)
        if isinstance(self.model_config, AlbertConfig):
            out["model_config"] = self.model_config.to_dict()
        return out


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


def interval_groups(start_step: int, num_train_steps: int, every: int) -> List[tuple]:
    """The `fit` calls that take a run from `start_step` to `num_train_steps`.

    Checkpoint interval `i` (a Keras epoch) ends at step `min((i + 1) * every, num_train_steps)`.
    Consecutive intervals of equal length share one `fit` call.

    Returns:
        A list of `(first_epoch, end_epoch, steps_per_interval)`: `fit(initial_epoch=first_epoch,
        epochs=end_epoch, steps_per_epoch=steps_per_interval * accumulation)`.
    """
    ends = list(range(every, num_train_steps, every)) + [num_train_steps]
    groups: List[list] = []
    previous = start_step
    for index, end in enumerate(ends):
        if end <= start_step:
            continue
        length = end - previous
        if groups and groups[-1][1] == index and groups[-1][2] == length:
            groups[-1][1] = index + 1
        else:
            groups.append([index, index + 1, length])
        previous = end
    return [tuple(g) for g in groups]


# --- files ----------------------------------------------------------------------------------


def _read_jsonl(path: str) -> List[Dict[str, Any]]:
    """The records of a metrics file; an unparseable line (a write cut by a crash) is skipped."""
    import tensorflow as tf

    if not tf.io.gfile.exists(path):
        return []
    records = []
    with tf.io.gfile.GFile(path, "r") as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                logger.warning("%s:%d is not a JSON line (an interrupted write?); dropping it", path, number)
                continue
            if isinstance(record, dict) and isinstance(record.get("step"), int):
                records.append(record)
    return records


class MetricsLog:
    """``metrics.jsonl``: one JSON object per checkpoint interval.

    Locally a record is appended with a single `write` on an ``O_APPEND`` descriptor and
    fsync'ed, so a crash leaves whole lines only; filesystems without append (GCS) get the whole
    file rewritten atomically instead.
    """

    def __init__(self, path: str):
        self.path = path

    def records(self) -> List[Dict[str, Any]]:
        return _read_jsonl(self.path)

    def append(self, record: Dict[str, Any]) -> None:
        file_io.append_line(self.path, json.dumps(record, sort_keys=True))

    def truncate_after(self, step: int) -> None:
        """Keeps the records of steps <= `step` (rewritten atomically if anything changes)."""
        import tensorflow as tf

        if not tf.io.gfile.exists(self.path):
            return
        with tf.io.gfile.GFile(self.path, "r") as f:
            original = f.read()
        kept = [r for r in self.records() if r["step"] <= step]
        text = "".join(json.dumps(r, sort_keys=True) + "\n" for r in kept)
        if text != original:
            dropped = len(original.splitlines()) - len(kept)
            if dropped:
                logger.info("%s: dropping %d record(s) after step %d (not in a checkpoint)", self.path, dropped, step)
            file_io.atomic_write_text(self.path, text)


# --- checkpoints ------------------------------------------------------------------------------

_CHECKPOINT_NUMBER = re.compile(r"-(\d+)$")


def _checkpoint_candidates(directory: str) -> List[str]:
    """Checkpoint prefixes in `directory`, newest (highest step) first.

    Both the manager's state file and the ``.index`` files on disk are consulted: the state
    file may name a checkpoint whose index is gone, and a crash between writing a checkpoint and
    updating the state file leaves one only the disk knows.
    """
    import tensorflow as tf

    prefixes = set()
    state = tf.train.get_checkpoint_state(directory)
    if state is not None:
        # Relative entries come back joined to `directory` already; joining again named a
        # checkpoint that does not exist (and warned it "unreadable") for a relative model_dir.
        prefixes.update(state.all_model_checkpoint_paths)
    for index in tf.io.gfile.glob(os.path.join(directory, f"{CHECKPOINT_NAME}-*.index")):
        prefixes.add(index[: -len(".index")])
    numbered = []
    for prefix in prefixes:
        match = _CHECKPOINT_NUMBER.search(prefix)
        if match:
            numbered.append((int(match.group(1)), prefix))
    return [p for _, p in sorted(numbered, reverse=True)]


def _read_fully(prefix: str) -> None:
    """Reads every tensor of a checkpoint once (one at a time, so memory stays one tensor).

    Raises whatever the reader raises for a missing index or shard, a truncated file
    (`IndexError`: "Read less bytes than requested") or a checksum mismatch (`DataLossError`).
    Checking before restoring keeps "unreadable" apart from "does not match the model" and
    never assigns half a checkpoint; it costs one extra read of the checkpoint.
    """
    import tensorflow as tf

    reader = tf.train.load_checkpoint(prefix)
    for name in reader.get_variable_to_shape_map():
        reader.get_tensor(name)


def restore_newest_readable(checkpoint, directory: str):
    """Restores the newest checkpoint of `directory` that reads back completely.

    Unreadable checkpoints are skipped with a warning, not deleted: training overwrites them
    when it reaches their step again.

    Args:
        checkpoint: The `tf.train.Checkpoint` to restore into.
        directory: A `CheckpointManager` directory.

    Returns:
        `(restored_prefix or None, [unreadable prefixes skipped])`.

    Raises:
        PretrainingError: A readable checkpoint does not match the model (a different config).
    """
    import tensorflow as tf

    skipped = []
    for prefix in _checkpoint_candidates(directory):
        try:
            _read_fully(prefix)
        except (tf.errors.OpError, IndexError) as e:
            message = str(e).strip().splitlines()[0] if str(e).strip() else ""
            logger.warning(
                "checkpoint %s is unreadable (%s: %s); falling back to the previous checkpoint",
                prefix,
                type(e).__name__,
                message,
            )
            skipped.append(prefix)
            continue
        try:
            checkpoint.restore(prefix).assert_existing_objects_matched()
        except (AssertionError, ValueError, tf.errors.InvalidArgumentError) as e:
            raise PretrainingError(
                f"checkpoint {prefix} does not match this model and optimizer (was the run started with "
                f"another config?): {e}"
            ) from None
        return prefix, skipped
    return None, skipped


def training_state(model, optimizer):
    """The `tf.train.Checkpoint` of a run: every model and optimizer variable.

    Lists rather than the Keras objects themselves: Keras 3 models expose only part of their
    variables to TensorFlow's object graph (not the dropout seed generators, and the encoder's
    weights only through the optimizer), so the variables are collected explicitly, in their
    deterministic creation order.
    """
    import tensorflow as tf

    return tf.train.Checkpoint(model=list(model.variables), optimizer=list(optimizer.variables))


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


# --- callbacks ----------------------------------------------------------------------------------


def _scalar(value) -> float:
    import numpy as np

    return float(np.asarray(value))


def _make_callbacks(keras):
    """Callback classes, defined once Keras is imported."""

    class IntervalCheckpoint(keras.callbacks.Callback):
        """At the end of every checkpoint interval: a metrics line, then a checkpoint.

        The line is written first: a crash between the two leaves a line without a checkpoint,
        which the restart drops (`MetricsLog.truncate_after`); the other order would lose it.
        """

        def __init__(
            self,
            manager,
            metrics_log: Optional[MetricsLog],
            history: list,
            interval_starts: Sequence[int],
            expected_ends: Sequence[int],
            examples_per_step: int,
        ):
            super().__init__()
            self.manager = manager
            self.metrics_log = metrics_log
            self.history = history
            self.interval_starts = list(interval_starts)
            self.expected_ends = list(expected_ends)
            self.examples_per_step = examples_per_step
            self.last_checkpoint = None
            self._interval_start = None

        def on_epoch_begin(self, epoch, logs=None):
            self._interval_start = time.time()

        def on_epoch_end(self, epoch, logs=None):
            optimizer = self.model.optimizer
            step = int(_scalar(optimizer.iterations))
            if step != self.expected_ends[epoch]:
                raise RuntimeError(
                    f"checkpoint interval {epoch} ended at step {step}, expected {self.expected_ends[epoch]} "
                    "(did the dataset run out of batches?)"
                )
            record = {"step": step}
            for name, value in (logs or {}).items():
                record[name] = _scalar(value)
            record["lr"] = _scalar(optimizer.learning_rate)
            seconds = time.time() - self._interval_start
            record["seconds"] = round(seconds, 3)
            # Includes the first interval's tracing; later intervals show the steady rate.
            steps = step - self.interval_starts[epoch]
            record["examples_per_second"] = round(steps * self.examples_per_step / max(seconds, 1e-9), 2)
            if self.metrics_log is not None:
                self.metrics_log.append(record)
            self.last_checkpoint = self.manager.save(checkpoint_number=step)
            self.history.append(record)
            logger.info(
                "step %d: loss %.4f, checkpoint %s", step, record.get("loss", float("nan")), self.last_checkpoint
            )

    class StepTensorBoard(keras.callbacks.TensorBoard):
        """Keras's TensorBoard with the optimizer step, not the interval number, as x-axis.

        The step survives restarts, so the curves of a resumed run continue where they were.
        """

        def on_epoch_end(self, epoch, logs=None):
            super().on_epoch_end(int(_scalar(self.model.optimizer.iterations)), logs)

    class RunningScalars(keras.callbacks.Callback):
        """The running interval metrics every `log_every` updates, as TensorBoard `batch_*` scalars.

        Steps are counted in Python from the interval's first step (no device round trip).
        """

        def __init__(self, log_dir: str, log_every: int, accumulation: int, interval_starts: Sequence[int]):
            super().__init__()
            self.log_dir = log_dir
            self.log_every = log_every
            self.accumulation = accumulation
            self.interval_starts = list(interval_starts)
            self._writer = None
            self._start = 0
            self._last_step = 0

        def on_train_begin(self, logs=None):
            import tensorflow as tf

            self._writer = tf.summary.create_file_writer(self.log_dir)

        def on_epoch_begin(self, epoch, logs=None):
            self._start = self._last_step = self.interval_starts[epoch]

        def on_train_batch_end(self, batch, logs=None):
            import tensorflow as tf

            # `batch` is the last batch of the execution: with several steps per execution
            # a multiple of `log_every` may be passed over, so "crossed" rather than "equal".
            step = self._start + (batch + 1) // self.accumulation
            crossed = step // self.log_every > self._last_step // self.log_every
            self._last_step = step
            if not crossed or not isinstance(logs, dict):
                return
            with self._writer.as_default():
                for name, value in logs.items():
                    tf.summary.scalar(f"batch_{name}", value, step=step)

        def on_train_end(self, logs=None):
            if self._writer is not None:
                self._writer.close()

    return IntervalCheckpoint, StepTensorBoard, RunningScalars


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

    from albert_tf.training.strategies import task_info

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


def _check_resumed_config(path: str, config: PretrainingRunConfig) -> None:
    import tensorflow as tf

    if not tf.io.gfile.exists(path):
        return
    try:
        with tf.io.gfile.GFile(path, "r") as f:
            previous = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        logger.warning("%s is unreadable (%s); cannot compare with the previous run's config", path, e)
        return
    current = json.loads(json.dumps(config.to_dict()))
    changed = [k for k in _TRAJECTORY_FIELDS if previous.get(k) != current.get(k)]
    if changed:
        logger.warning(
            "resuming %s with changed setting(s) %s: the continuation will differ from an uninterrupted run",
            config.model_dir,
            ", ".join(f"{k} ({previous.get(k)!r} -> {current.get(k)!r})" for k in changed),
        )


def _save_keras_atomically(model, path: str) -> None:
    # Keras insists on the ".keras" ending, temporary name included.
    with file_io.atomic_output(path, suffix=".keras") as tmp:
        model.save(tmp)


def _export_tf1(model, albert_config: AlbertConfig, directory: str) -> Dict[str, str]:
    """The original-format checkpoint and `albert_config.json` in `directory`."""
    import tensorflow as tf

    from albert_tf.checkpoints.original import save_original_checkpoint

    if not file_io.is_remote(directory):
        os.makedirs(directory, exist_ok=True)
        prefix = save_original_checkpoint(
            os.path.join(directory, TF1_CHECKPOINT), model.encoder, model.mlm_head, model.sentence_head
        )
        config_path = os.path.join(directory, ALBERT_CONFIG_FILE)
        albert_config.to_json_file(config_path)
        return {"tf1_checkpoint": prefix, "albert_config": config_path}
    # `save_original_checkpoint` writes local files: stage them, then copy, index last (a
    # prefix without its index is no checkpoint) and the state file after it.
    tf.io.gfile.makedirs(directory)
    staging = tempfile.mkdtemp(prefix="albert_tf1_")
    try:
        save_original_checkpoint(
            os.path.join(staging, TF1_CHECKPOINT), model.encoder, model.mlm_head, model.sentence_head
        )
        albert_config.to_json_file(os.path.join(staging, ALBERT_CONFIG_FILE))
        file_io.copy_tree(staging, directory, order=lambda n: (n.endswith(".index"), n == "checkpoint"))
    finally:
        file_io.remove_tree(staging)
    return {"tf1_checkpoint": f"{directory}/{TF1_CHECKPOINT}", "albert_config": f"{directory}/{ALBERT_CONFIG_FILE}"}


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
    import keras
    import tensorflow as tf

    from albert_tf.training.strategies import (
        default_jit_compile,
        get_strategy,
        is_chief,
        strategy_device_kind,
        task_info,
    )

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
    chief = is_chief(strategy)
    task_type, task_id = task_info(strategy)
    model_dir = config.model_dir
    # Every worker saves (saving may involve collectives); non-chief workers into a private
    # folder that is removed at the end, as TensorFlow's multi-worker guides do.
    write_dir = model_dir if chief else os.path.join(model_dir, f".tmp-{task_type}-{task_id}")
    chief_checkpoint_dir = os.path.join(model_dir, CHECKPOINT_SUBDIR)
    jit_compile = config.jit_compile
    if jit_compile is None:
        jit_compile = default_jit_compile(strategy_device_kind(strategy), config.precision)

    def make_dataset():
        # The same global seed before every call: op-level seeds of `shuffle` and friends are
        # derived from it, so the data order cannot depend on what the process did before.
        tf.random.set_seed(config.seed)
        return dataset_fn()

    # Checked before anything is built or written, so a wrong dataset fails fast.
    first_dataset = make_dataset()
    _check_dataset(first_dataset, config)

    keras.utils.set_random_seed(config.seed)
    model, optimizer = build_pretraining_model(config, albert_config, strategy, jit_compile)
    checkpoint = training_state(model, optimizer)

    restored_from, skipped = None, []
    if tf.io.gfile.isdir(chief_checkpoint_dir):
        restored_from, skipped = restore_newest_readable(checkpoint, chief_checkpoint_dir)
    accumulation = config.gradient_accumulation_steps
    initial_step = int(_scalar(optimizer.iterations))
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

    metrics_log = MetricsLog(os.path.join(model_dir, METRICS_FILE)) if chief else None
    run_config_path = os.path.join(model_dir, RUN_CONFIG_FILE)
    if chief and config.tokenizer is not None and tf.io.gfile.isdir(model_dir):
        _check_tokenizer_of_run(model_dir, config.tokenizer)
    # The first write: everything above can still fail without leaving anything behind.
    tf.io.gfile.makedirs(write_dir)
    if chief:
        if restored_from:
            _check_resumed_config(run_config_path, config)
        metrics_log.truncate_after(initial_step)
        if config.tokenizer is not None:
            _install_tokenizer(model_dir, config.tokenizer)
        file_io.atomic_write_json(run_config_path, config.to_dict(), ensure_ascii=True)

    manager = tf.train.CheckpointManager(
        checkpoint,
        directory=os.path.join(write_dir, CHECKPOINT_SUBDIR),
        max_to_keep=config.keep_checkpoints if chief else 1,
        checkpoint_name=CHECKPOINT_NAME,
    )
    IntervalCheckpoint, StepTensorBoard, RunningScalars = _make_callbacks(keras)
    every = config.checkpoint_every_n_steps
    ends = list(range(every, config.num_train_steps, every)) + [config.num_train_steps]
    starts = [0] + ends[:-1]
    history: List[Dict[str, Any]] = []
    log_dir = os.path.join(model_dir, LOG_SUBDIR)
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
        logger.info("%s is already at step %d: nothing to train", model_dir, initial_step)
    interval_callback = None
    step = initial_step
    for first_epoch, end_epoch, length in groups:
        interval_starts = list(starts)
        interval_starts[first_epoch] = step
        interval_callback = IntervalCheckpoint(
            manager, metrics_log, history, interval_starts, ends, config.batch_size * accumulation
        )
        fit_callbacks = [interval_callback]
        if chief:
            # A fresh TensorBoard per fit: Keras's closes its writers at the end of `fit`.
            fit_callbacks.append(StepTensorBoard(log_dir=log_dir, write_graph=False, profile_batch=0))
            if config.log_every:
                fit_callbacks.append(
                    RunningScalars(os.path.join(log_dir, "train"), config.log_every, accumulation, interval_starts)
                )
        fit_callbacks.extend(callbacks or ())
        source, first_dataset = (first_dataset if first_dataset is not None else make_dataset()), None
        dataset = prepare_pretraining_dataset(source, step * accumulation, config)
        with pretraining_fit_scope(model, strategy):
            model.fit(
                dataset,
                epochs=end_epoch,
                initial_epoch=first_epoch,
                steps_per_epoch=length * accumulation,
                callbacks=fit_callbacks,
                verbose=config.verbose,
                shuffle=False,  # The dataset's own (seeded) shuffling is the only one.
            )
        step = ends[end_epoch - 1]

    final_step = int(_scalar(optimizer.iterations))
    if final_step != config.num_train_steps:
        raise RuntimeError(f"training stopped at step {final_step} of {config.num_train_steps}")
    # A run restarted after it finished trains nothing: its final checkpoint is the restored one.
    final_checkpoint = interval_callback.last_checkpoint if interval_callback else restored_from

    artifacts: Dict[str, str] = {}
    _save_keras_atomically(model, os.path.join(write_dir, PRETRAINER_FILE))
    _save_keras_atomically(model.encoder, os.path.join(write_dir, ENCODER_FILE))
    tf1 = _export_tf1(model, albert_config, os.path.join(write_dir, TF1_SUBDIR))
    if chief:
        artifacts = {
            "pretrainer": os.path.join(model_dir, PRETRAINER_FILE),
            "encoder": os.path.join(model_dir, ENCODER_FILE),
            **tf1,
            "metrics": metrics_log.path,
            "logs": log_dir,
        }
        if config.tokenizer is not None:
            installed = tokenizer_of_run(model_dir)
            # Beside the TF1 checkpoint too, as the original releases ship it: `tf1/` alone fine-tunes.
            _install_tokenizer(os.path.join(model_dir, TF1_SUBDIR), installed)
            artifacts["tokenizer"] = installed.path
    else:
        tf.io.gfile.rmtree(write_dir)
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
