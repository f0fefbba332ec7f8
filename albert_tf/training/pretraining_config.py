"""The settings of a pretraining run: `PretrainingRunConfig` (with the tokenizer it carries,
`TokenizerFile`), `PretrainingError`, the run's checkpoint intervals (`interval_groups`) and the
check of a resumed run's settings against the ones it was started with (`check_resumed_config`).

Building a configuration loads no TensorFlow.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from typing import Any, Dict, List, Optional, Union

from albert_tf.config import AlbertConfig, ConfigError, load_config
from albert_tf.errors import ParameterError
from albert_tf.training.strategies import PRECISIONS, STRATEGY_NAMES

# Its lines are the run's: logged under the run's name, as `albert-tf pretrain` prints them.
logger = logging.getLogger("albert_tf.training.pretraining")

SENTENCE_TASKS = ("sop", "nsp")
OPTIMIZERS = ("lamb", "adamw")
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



def check_resumed_config(path: str, config: PretrainingRunConfig) -> None:
    """Warns, naming them, of the settings that differ from the run config at `path` (the
    continuation will differ from an uninterrupted run); a missing or unreadable file is no error."""
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
