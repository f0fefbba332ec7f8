"""`PipelineSettings`: one typed configuration for the whole pipeline run, read from JSON or YAML.

The defaults are the embedded sample job: the State of the Union addresses and the Rotten
Tomatoes snippets shipped in `albert_tf/resources/sample`, a tiny ALBERT, a few minutes on two
CPU cores. A real run overrides what it needs in a file (`albert-tf pipeline run --config FILE`)::

    corpus: /data/wiki/*.txt
    task_data: /data/sst2            # train.tsv and dev.tsv (or .csv / .jsonl)
    vocab_size: 30000
    model: base-v2                   # a preset, or a mapping of AlbertConfig fields
    pretrain_steps: 125000
    pretrain_batch_size: 4096
    strategy: multi_worker
    beam_runner: DataflowRunner
    beam_args: ["--project=my-project", "--region=europe-west4", "--temp_location=gs://b/tmp"]
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Dict, List, Optional, Union

from albert_tf.data.tables import check_encoding
from albert_tf.tasks.family import task_family
from albert_tf.training.finetuning_config import FinetuningConfig, resolve_finetuning_config

SAMPLE_DIR = os.path.join(os.path.dirname(os.path.dirname(__file__)), "resources", "sample")

# The tiny encoder of the sample run (vocab_size comes from the vocabulary step).
SAMPLE_MODEL = dict(
    embedding_size=64,
    hidden_size=128,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=256,
    max_position_embeddings=128,
)

VOCAB_TYPES = ("sentencepiece", "wordpiece")
STRATEGIES = ("default", "one_device", "mirrored", "multi_worker", "tpu")
PRECISIONS = ("float32", "mixed_bfloat16")
POOLINGS = ("mean", "cls")
# The task the pipeline fine-tunes: a table of labelled texts (its model directory's `task.json`
# names it), resolved as `albert-tf finetune --task classification` resolves it.
PIPELINE_TASK = "classification"


class SettingsError(ValueError):
    """A pipeline configuration that cannot be used; the message names the key and the file."""


@dataclasses.dataclass
class DistillStepSettings:
    """The pipeline's `distill:` mapping.

    Attributes:
        enabled: Run the Distiller (off: the pipeline is the one without it, unchanged).
        student: As `DistillSettings.student` ("shared:1", a preset, an albert_config.json).
        temperature, alpha, transfer, max_labeled, unlabeled_from_train: As `DistillSettings`.
        epochs, batch_size, learning_rate: The student's training; None: resolved as
            `albert-tf distill` resolves them (`resolve_finetuning_config`: 3 epochs, batch 32,
            the recipe's learning rate for the student's size).
        teacher_margin: The Evaluator blesses the student only when its metric is at most this
            far below the teacher's on the same eval data.
    """

    enabled: bool = False
    student: str = "shared:1"
    temperature: float = 2.0
    alpha: float = 0.5
    transfer: str = "none"
    max_labeled: Optional[int] = None
    unlabeled_from_train: bool = False
    epochs: Optional[float] = None
    batch_size: Optional[int] = None
    learning_rate: Optional[float] = None
    teacher_margin: float = 0.02

    @classmethod
    def from_dict(cls, values) -> "DistillStepSettings":
        """Settings from the `distill:` mapping; unknown keys and bad values raise `ValueError`."""
        if not isinstance(values, dict):
            raise ValueError(f"distill must be a mapping of settings, got {type(values).__name__}")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - names)
        if unknown:
            raise ValueError(f"distill: unknown setting(s) {', '.join(unknown)} (known: {', '.join(sorted(names))})")
        settings = cls(**values)
        settings.validate()
        return settings

    def validate(self) -> None:
        from albert_tf.distillation.settings import TRANSFERS

        if not isinstance(self.enabled, bool):
            raise ValueError(f"distill.enabled must be true or false, got {self.enabled!r}")
        if not isinstance(self.student, str) or not self.student:
            raise ValueError(f"distill.student must be a preset, a config file or shared:N, got {self.student!r}")
        if self.transfer not in TRANSFERS:
            raise ValueError(f"distill.transfer must be one of {', '.join(TRANSFERS)}, got {self.transfer!r}")
        if not 0 <= self.alpha <= 1:
            raise ValueError(f"distill.alpha must be in [0, 1], got {self.alpha}")
        if not self.temperature > 0 or (self.epochs is not None and not self.epochs > 0) or (
                self.batch_size is not None and self.batch_size < 1):
            raise ValueError("distill.temperature and distill.epochs must be > 0 and distill.batch_size >= 1")
        if not self.teacher_margin >= 0:
            raise ValueError(f"distill.teacher_margin must be >= 0, got {self.teacher_margin}")
        if self.unlabeled_from_train and self.max_labeled is None:
            raise ValueError("distill.unlabeled_from_train needs distill.max_labeled")

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)


@dataclasses.dataclass
class PipelineSettings:
    """Everything a pipeline run needs.

    Attributes:
        corpus: Glob(s) of the raw pretraining text, one paragraph per line, a document per file
            (comma-separated for several).
        task_data: Directory of the labelled task: `train` and `dev` (or `validation`) files as
            `.tsv`, `.csv` or `.jsonl` with a header / keys.
        text_column, text_b_column, label_column: The task table's columns (`text_b_column` for
            sentence-pair tasks).
        eval_fraction: Share of corpus documents held out as the eval split (by a hash of the
            file name, so a document never moves between splits when others are added).
        vocab_type: "sentencepiece" (ALBERT's) or "wordpiece" (the Chinese models').
        vocab_size: Pieces in the vocabulary.
        character_coverage: SentencePiece: the share of the text's characters the vocabulary
            covers, in [0.98, 1] (the rest map to `<unk>`); lower it for a text of many rare characters
            (Chinese).
        hard_vocab_limit: SentencePiece: fail when the text cannot fill `vocab_size` (false: accept
            a smaller vocabulary).
        lower_case: Lower-case the text (vocabulary, pretraining and fine-tuning alike).
        max_seq_length: Sequence length of pretraining and fine-tuning inputs.
        max_predictions_per_seq: Masked positions per pretraining sequence.
        dupe_factor: Times each document is masked differently for pretraining.
        model: A preset name ("base-v2") or a mapping of `AlbertConfig` fields; `vocab_size` is
            set from the vocabulary.
        pretrain_steps, pretrain_batch_size, pretrain_learning_rate, pretrain_warmup_steps:
            LAMB pretraining.
        finetune_epochs, finetune_batch_size, finetune_learning_rate, finetune_pooling,
            finetune_bias_correction, finetune_warmup_fraction: AdamW fine-tuning. What is left
            unset (None) is resolved as `albert-tf finetune --task classification` resolves it
            (`albert_tf.training.finetuning_config.resolve_finetuning_config`: the recipe for the
            model's size, 3 epochs, batch 32, 10 % warmup; for the sample model 1e-3, mean pooling,
            bias-corrected), and the settings show the resolved values.
        strategy: The `tf.distribute` strategy of the training steps.
        precision: "float32" or "mixed_bfloat16".
        beam_runner, beam_args: The Beam runner of the data steps and its pipeline options.
        model_name: The served model's name.
        serving_base: The TF Serving model base the Pusher publishes into.
        eval_metric: The task metric the Evaluator compares ("accuracy", "f1", ...).
        eval_threshold: The candidate's minimum `eval_metric` to be blessed.
        eval_tolerance: How much worse than the pushed model the candidate may be and still be
            blessed (0: not worse).
        eval_baseline_margin, eval_min_mcc, eval_confidence: How far past the best constant answer
            (the majority class) the candidate must be: by more than `eval_baseline_margin` in
            `eval_metric`, with MCC above `eval_min_mcc`, and with an accuracy above the majority
            rate at `eval_confidence` (`albert_tf.evaluation.gates`). The defaults never bless a
            model that answers the same for every input.
        span: The `{SPAN}` of `task_data` to read (TFX's input spans, `pipeline_steps.spans`);
            -1 (the default) reads the latest.
        num_spans: How many spans to read, up to `span`: TFX's rolling range (1: that span only).
        schema: A pinned `schema.pbtxt` (tensorflow_metadata `Schema`) the data are validated
            against, as given; unset: the schema inferred on the first run (and kept).
        statistics_store: Where the schema inferred on the first run and each validated span's
            statistics (the next span's drift baseline) are kept; unset: `data_validation`
            beside `serving_base`.
        encoding: The encoding ExampleGen reads the task tables and the corpus in (a Python
            codec name: "utf-8", "gbk", "cp1252", ...); a file not in it stops ExampleGen in one
            line naming the byte offset and an encoding that reads it.
        on_error: What a bad row (an empty text, a missing or unparsable label, undecodable
            bytes) does: "skip" leaves it out at ExampleGen and counts it, and the
            ExampleValidator accepts the split within the schema's `presence.min_fraction`;
            "raise" stops the run at the ExampleValidator at any bad row, naming the first.
        max_truncated_fraction: The ExampleValidator warns when a larger share of the texts is
            longer than `max_seq_length` pieces (the Transform truncates them).
        seed: Seeds every random choice of the run.
        warm_start: Continue from the latest pushed (blessed) model under
            `serving_base/model_name`: its vocabulary, its encoder (continued pretraining) and its
            classifier head (`albert_tf.pipeline_steps.warm_start`), TFX's continuous training. With
            nothing pushed yet the run starts from scratch.
        distill: The optional Distiller after the Trainer (`DistillStepSettings` fields, e.g.
            `{enabled: true, student: "shared:1", teacher_margin: 0.02}`); off by default, and
            then the pipeline is exactly the one without it.
        bulk_infer_input: The optional BulkInferrer after the Pusher: input files (comma-separated;
            `.txt`, tables, `.tfrecord[.gz]` of tf.Examples) scored by the pushed model into
            `PredictionLog`s (`albert_tf.pipeline_steps.bulk_inferrer`); unset (the default), the
            pipeline is exactly the one without it.
        deterministic: Make a run reproducible: the same inputs, settings and seed give the same
            model on the same machine. The Transform rewrites the Beam output in a canonical
            order (one more pass over the pretraining records; Beam's order is the runner's) and,
            on GPUs, the training steps switch on TensorFlow's op determinism. Off saves that
            pass on a very large corpus, at the price of runs that differ.
    """

    corpus: str = os.path.join(SAMPLE_DIR, "sotu", "*.txt")
    task_data: str = os.path.join(SAMPLE_DIR, "rotten_tomatoes")
    text_column: str = "text"
    text_b_column: Optional[str] = None
    label_column: str = "label"
    eval_fraction: float = 0.1
    vocab_type: str = "sentencepiece"
    vocab_size: int = 2000
    character_coverage: float = 0.99995
    hard_vocab_limit: bool = True
    lower_case: bool = True
    max_seq_length: int = 64
    max_predictions_per_seq: int = 10
    dupe_factor: int = 1
    model: Union[str, Dict[str, Any]] = dataclasses.field(default_factory=lambda: dict(SAMPLE_MODEL))
    pretrain_steps: int = 60
    pretrain_batch_size: int = 32
    pretrain_learning_rate: float = 0.002
    pretrain_warmup_steps: int = 6
    finetune_epochs: Optional[float] = None
    finetune_batch_size: Optional[int] = None
    finetune_learning_rate: Optional[float] = None
    finetune_pooling: Optional[str] = None
    finetune_bias_correction: Optional[bool] = None
    finetune_warmup_fraction: Optional[float] = None
    strategy: str = "default"
    precision: str = "float32"
    beam_runner: str = "DirectRunner"
    beam_args: List[str] = dataclasses.field(default_factory=list)
    model_name: str = "albert_classifier"
    serving_base: str = "albert-tf-pipeline/serving"
    eval_metric: str = "accuracy"
    eval_threshold: float = 0.5
    eval_tolerance: float = 0.0
    eval_baseline_margin: float = 0.0
    eval_min_mcc: float = 0.0
    eval_confidence: float = 0.95
    span: int = -1
    num_spans: int = 1
    schema: Optional[str] = None
    statistics_store: Optional[str] = None
    # Bad rows and encodings (ExampleGen, StatisticsGen, ExampleValidator).
    encoding: str = "utf-8"
    on_error: str = "skip"
    max_truncated_fraction: float = 0.05
    seed: int = 12345
    deterministic: bool = True
    warm_start: bool = False
    distill: Dict[str, Any] = dataclasses.field(default_factory=dict)
    bulk_infer_input: Optional[str] = None

    def __post_init__(self):
        self.validate()
        # What is left unset is resolved as the command line resolves it, and shown resolved.
        config = self.finetuning_config(self.vocab_size)
        self.finetune_epochs = config.optimization.num_epochs
        self.finetune_batch_size = config.data.batch_size
        self.finetune_learning_rate = config.optimization.learning_rate
        self.finetune_pooling = config.task.pooling
        self.finetune_bias_correction = config.optimization.bias_correction
        self.finetune_warmup_fraction = config.optimization.warmup_proportion

    def validate(self) -> None:
        """Raises `SettingsError` naming the first bad value."""
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            expected = _expected_type(f)
            if expected is not None and not _is_instance(value, expected):
                raise SettingsError(f"{f.name} must be {_type_name(expected)}, got {value!r}")
        for name in ("vocab_size", "max_seq_length", "max_predictions_per_seq", "dupe_factor", "pretrain_steps",
                     "pretrain_batch_size", "finetune_batch_size"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise SettingsError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not 0.98 <= self.character_coverage <= 1:  # SentencePiece's own bounds
            raise SettingsError(f"character_coverage must be in [0.98, 1], got {self.character_coverage}")
        if not 0 < self.eval_fraction < 1:
            raise SettingsError(f"eval_fraction must be in (0, 1), got {self.eval_fraction}")
        if not 0 <= self.pretrain_warmup_steps <= self.pretrain_steps:
            raise SettingsError(f"pretrain_warmup_steps must be in [0, pretrain_steps], got {self.pretrain_warmup_steps}")
        if self.num_spans < 1:
            raise SettingsError(f"num_spans must be >= 1, got {self.num_spans}")
        if self.span < -1:
            raise SettingsError(f"span must be -1 (the latest) or a span number, got {self.span}")
        if self.eval_baseline_margin < 0:
            raise SettingsError(f"eval_baseline_margin must be >= 0, got {self.eval_baseline_margin}")
        if not 0 <= self.eval_confidence < 1:
            raise SettingsError(f"eval_confidence must be in [0, 1), got {self.eval_confidence}")
        if self.finetune_learning_rate is not None and not self.finetune_learning_rate > 0:
            raise SettingsError(f"finetune_learning_rate must be > 0, got {self.finetune_learning_rate}")
        if self.finetune_pooling is not None and self.finetune_pooling not in POOLINGS:
            raise SettingsError(f"finetune_pooling must be one of {', '.join(POOLINGS)}, got {self.finetune_pooling!r}")
        if self.finetune_warmup_fraction is not None and not 0 <= self.finetune_warmup_fraction < 1:
            raise SettingsError(f"finetune_warmup_fraction must be in [0, 1), got {self.finetune_warmup_fraction}")
        if self.finetune_epochs is not None and not self.finetune_epochs > 0:
            raise SettingsError(f"finetune_epochs must be > 0, got {self.finetune_epochs}")
        for name, allowed in (("vocab_type", VOCAB_TYPES), ("strategy", STRATEGIES), ("precision", PRECISIONS)):
            if getattr(self, name) not in allowed:
                raise SettingsError(f"{name} must be one of {', '.join(allowed)}, got {getattr(self, name)!r}")
        if self.max_predictions_per_seq >= self.max_seq_length:
            raise SettingsError("max_predictions_per_seq must be smaller than max_seq_length")
        if not self.model_name or "/" in self.model_name or self.model_name.startswith("."):
            raise SettingsError(f"model_name must be a plain directory name, got {self.model_name!r}")
        if self.on_error not in ("skip", "raise"):
            raise SettingsError(f"on_error must be skip or raise, got {self.on_error!r}")
        if not 0 <= self.max_truncated_fraction <= 1:
            raise SettingsError(f"max_truncated_fraction must be in [0, 1], got {self.max_truncated_fraction}")
        try:
            check_encoding(self.encoding)
        except ValueError as e:
            raise SettingsError(f"encoding: {e}") from None
        self.albert_config(self.vocab_size)
        try:
            self.distill_settings()
        except (TypeError, ValueError) as e:
            raise SettingsError(str(e)) from None

    def distill_settings(self) -> "DistillStepSettings":
        """The `distill` mapping as `DistillStepSettings` (all defaults, disabled, when empty)."""
        return DistillStepSettings.from_dict(self.distill)

    def statistics_store_path(self) -> str:
        """`statistics_store`, or `data_validation` beside `serving_base` when unset."""
        if self.statistics_store:
            return self.statistics_store if "://" in self.statistics_store else os.path.abspath(self.statistics_store)
        base = self.serving_base if "://" in self.serving_base else os.path.abspath(self.serving_base)
        return base.rstrip("/").rsplit("/", 1)[0] + "/data_validation"

    def finetuning_config(self, vocab_size: int) -> FinetuningConfig:
        """The Trainer's `FinetuningConfig` for a vocabulary of `vocab_size`."""
        return finetuning_config(
            self.albert_config(vocab_size), learning_rate=self.finetune_learning_rate,
            batch_size=self.finetune_batch_size, max_seq_length=self.max_seq_length, pooling=self.finetune_pooling,
            bias_correction=self.finetune_bias_correction, num_epochs=self.finetune_epochs,
            warmup_proportion=self.finetune_warmup_fraction, precision=self.precision, strategy=self.strategy,
            seed=self.seed,
        )

    def albert_config(self, vocab_size: int):
        """The encoder's `AlbertConfig` for a vocabulary of `vocab_size`."""
        return albert_config_for(self.model, vocab_size, self.max_seq_length)

    def to_dict(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, values: Dict[str, Any], source: str = "settings") -> "PipelineSettings":
        """Settings from a mapping; unknown keys are an error (a typo would silently use a default)."""
        if not isinstance(values, dict):
            raise SettingsError(f"{source}: expected a mapping of settings, got {type(values).__name__}")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - names)
        if unknown:
            raise SettingsError(f"{source}: unknown setting(s) {', '.join(unknown)} (known: {', '.join(sorted(names))})")
        try:
            return cls(**values)
        except SettingsError as e:
            raise SettingsError(f"{source}: {e}") from None

    @classmethod
    def from_json(cls, text: str) -> "PipelineSettings":
        return cls.from_dict(json.loads(text))

    @classmethod
    def from_file(cls, path: str) -> "PipelineSettings":
        """Settings from a `.json`, `.yaml` or `.yml` file; relative paths in it are relative to the file."""
        import yaml

        try:
            with open(path, "rb") as f:
                raw = f.read()
            text = raw.decode("utf-8")
        except OSError as e:
            raise SettingsError(f"cannot read {path}: {e.strerror}") from None
        except UnicodeDecodeError as e:
            raise SettingsError(f"{path} is not UTF-8 text (byte {e.start})") from None
        try:
            values = json.loads(text) if path.endswith(".json") else yaml.safe_load(text)
        except (ValueError, yaml.YAMLError) as e:
            raise SettingsError(f"{path} is not valid {'JSON' if path.endswith('.json') else 'YAML'}: {e}") from None
        if values is None:
            values = {}
        base = os.path.dirname(os.path.abspath(path))
        if isinstance(values, dict):
            for key in ("corpus", "task_data", "serving_base", "schema", "statistics_store", "bulk_infer_input"):
                if isinstance(values.get(key), str):
                    values[key] = ",".join(_relative_to(base, p) for p in values[key].split(","))
        return cls.from_dict(values, source=path)


def finetuning_config(albert_config, **values: Any) -> FinetuningConfig:
    """The pipeline's fine-tuning configuration on an encoder of `albert_config`:
    `resolve_finetuning_config` of `PIPELINE_TASK` with the given `values` (its keywords; None:
    unset), the same resolution as the command line's."""
    return resolve_finetuning_config(task_family(PIPELINE_TASK), albert_config, **values)


def albert_config_for(model: Union[str, Dict[str, Any]], vocab_size: int, max_seq_length: int):
    """`model` (a preset name or `AlbertConfig` fields) as an `AlbertConfig` of `vocab_size`.

    Raises:
        SettingsError: unknown fields or values, or a sequence longer than the model's positions.
    """
    from albert_tf.config import AlbertConfig, ConfigError

    try:
        if isinstance(model, str):
            config = AlbertConfig.preset(model)
        else:
            config = AlbertConfig(**{"vocab_size": vocab_size, **model})
    except (ConfigError, TypeError, ValueError) as e:
        raise SettingsError(f"model: {e}") from None
    config = config.replace(vocab_size=vocab_size)
    if max_seq_length > config.max_position_embeddings:
        raise SettingsError(
            f"max_seq_length {max_seq_length} exceeds the model's max_position_embeddings ({config.max_position_embeddings})"
        )
    return config


def _relative_to(base: str, path: str) -> str:
    path = path.strip()
    if "://" in path or os.path.isabs(path):
        return path
    return os.path.join(base, path)


def _expected_type(f: dataclasses.Field):
    hints = {
        "str": str, "int": int, "float": (int, float), "bool": bool,
        "Optional[str]": (str, type(None)), "Optional[float]": (int, float, type(None)), "Optional[bool]": (bool, type(None)), "List[str]": list, "Union[str, Dict[str, Any]]": (str, dict),
    }
    return hints.get(f.type if isinstance(f.type, str) else getattr(f.type, "__name__", ""))


def _is_instance(value, expected) -> bool:
    if expected is int and isinstance(value, bool):
        return False
    if isinstance(expected, tuple) and float in expected and isinstance(value, bool):
        return False
    if expected is list:
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    return isinstance(value, expected)


def _type_name(expected) -> str:
    if expected is list:
        return "a list of strings"
    if isinstance(expected, tuple):
        return " or ".join("null" if t is type(None) else t.__name__ for t in expected)
    return expected.__name__
