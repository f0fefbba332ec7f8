"""`pretrain(PretrainSettings(...))`: one pretraining run from record files (or the bundled
sample) to a model directory, as `albert-tf pretrain` runs it.

`PretrainSettings` mirrors the command's flags (same names, same defaults); the command maps its
flags onto it, calls `pretrain` and prints the `PretrainingResult`. `pretrain` settles what the
settings leave open: the lengths, tokenizer and masking settings from the data's
``metadata.json`` (else from its first record), the run settings from the config's preset
(`albert_tf.config.PRETRAINING_PRESETS`; a setting given overrides it). It reads every record
file once, then runs `albert_tf.training.pretraining.run_pretraining`; a model directory the run
created is removed again when the run fails before it holds a checkpoint. Without ``data`` it is
the bundled sample job: vocabulary, records and a tiny model, each step reusing finished output.

Progress lines go to ``report``. Bad settings, data or checkpoints raise `PretrainingError` (or
`TrainingMemoryError`) with one line naming the setting: ``masked_lm_prob`` here,
``--masked-lm-prob`` as the command reports it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import json
import os
from typing import Callable, Optional, Tuple, Union

import tensorflow as tf
from google.protobuf.message import DecodeError

from albert_tf.config import AlbertConfig, ConfigError, load_config, pretraining_preset
from albert_tf.data.on_the_fly import MaskingConfig, make_on_the_fly_dataset, masking_record
from albert_tf.data.pretraining_instances import InstanceConfig
from albert_tf.data.tfrecords import (
    FEATURE_NAMES,
    PretrainingDataError,
    find_pretraining_data,
    first_record,
    list_files,
    make_pretraining_dataset,
    scan_record_files,
)
from albert_tf.errors import as_python, param, raw_message, rename_params
from albert_tf.tokenization.resolve import python_tokenizer
from albert_tf.tokenization.sentencepiece_vocab import train_sentencepiece
from albert_tf.training.memory import TrainingMemoryError
from albert_tf.training.checkpointing import CHECKPOINT_NAME, CHECKPOINT_SUBDIR
from albert_tf.training.pretraining import PretrainingResult, run_pretraining
from albert_tf.training.pretraining_config import PretrainingError, PretrainingRunConfig, TokenizerFile
from albert_tf.training.strategies import StrategyError

# Without `config`: the paper's model and run settings where a GPU or TPU is found, else the CPU
# size, whose run settings fit a small machine's memory.
DEFAULT_CONFIG = "base-v2"
CPU_DEFAULT_CONFIG = "small"
MASKING_MODES = ("offline", "on-the-fly")
# `PretrainingRunConfig` fields that are settings of another name here.
SETTING_NAMES = {"model_config": "config", "gradient_accumulation_steps": "grad_accum"}

SAMPLE_CORPUS = os.path.join(os.path.dirname(os.path.dirname(__file__)), "resources", "sample", "sotu")
SAMPLE_SETTINGS = dict(
    model_dir="albert-tf-sample",
    vocab_size=3000,
    max_seq_length=128,
    max_predictions_per_seq=20,
    dupe_factor=2,
    steps=300,
    batch_size=32,
    learning_rate=0.002,
    checkpoint_every=100,
)
# The lengths of a record: (setting, its feature).
_LENGTHS = (("max_seq_length", "input_ids"), ("max_predictions_per_seq", "masked_lm_positions"))


@dataclasses.dataclass
class PretrainSettings:
    """Everything a pretraining run takes; the fields are `albert-tf pretrain`'s flags.

    Attributes:
        data: Pretraining TFRecords: a ``make-pretraining-data`` output directory, a glob or
            comma-separated globs. None: the bundled sample job.
        model_dir: Output and resume directory (required with `data`).
        config: A preset name or an ``albert_config.json`` (default: ``base-v2`` where a GPU or
            TPU is found, else ``small``); the run settings not given follow its preset.
        max_seq_length, max_predictions_per_seq: The records' lengths (default: from the data).
        spm_model, vocab_file, lower_case: The data's tokenizer (default: the metadata's).
        check_records: Read every record once before training.
        masking: "offline" (the records' masks) or "on-the-fly" (fresh masks every epoch).
        masked_lm_prob: With on-the-fly masking, the masked fraction (default: the metadata's).
        sentence_task, shuffle_buffer: As `PretrainingRunConfig` / the input pipeline.
        steps, batch_size, learning_rate, warmup_steps, checkpoint_every, keep_checkpoints: Run
            settings (default: the preset's).
        grad_accum: Micro-batches accumulated per update.
        The remaining fields are the run's options (see `albert-tf pretrain --help`); `verbose`
        is "auto" or a Keras verbosity.
    """

    data: Optional[str] = None
    model_dir: Optional[str] = None
    config: Optional[str] = None
    max_seq_length: Optional[int] = None
    max_predictions_per_seq: Optional[int] = None
    spm_model: Optional[str] = None
    vocab_file: Optional[str] = None
    lower_case: Optional[bool] = None
    check_records: bool = True
    masking: str = "offline"
    masked_lm_prob: Optional[float] = None
    sentence_task: str = "sop"
    shuffle_buffer: int = 10000
    steps: Optional[int] = None
    batch_size: Optional[int] = None
    learning_rate: Optional[float] = None
    warmup_steps: Optional[int] = None
    optimizer: str = "lamb"
    weight_decay: float = 0.01
    clipnorm: float = 1.0
    grad_accum: int = 1
    seed: int = 12345
    strategy: str = "default"
    tpu: Optional[str] = None
    precision: str = "float32"
    jit_compile: Optional[bool] = None
    steps_per_execution: int = 1
    deterministic_ops: bool = False
    checkpoint_every: Optional[int] = None
    keep_checkpoints: Optional[int] = None
    log_every: int = 100
    verbose: Union[str, int] = "auto"

    @classmethod
    def from_namespace(cls, namespace) -> "PretrainSettings":
        """The settings of an `argparse.Namespace` (or any object) with these attribute names."""
        return cls(**{f.name: getattr(namespace, f.name) for f in dataclasses.fields(cls) if hasattr(namespace, f.name)})


def _print_line(line: str) -> None:
    print(as_python(line))


def pretrain(settings: PretrainSettings, report: Callable[[str], None] = _print_line) -> PretrainingResult:
    """Runs (or resumes) the pretraining run `settings` describe and returns its result.

    Args:
        settings: The run.
        report: Called with each progress line, whose settings are marked with
            `albert_tf.errors.param` (`albert_tf.errors.as_python` / `as_flags` spell them);
            default: printed, settings as Python arguments.

    Raises:
        PretrainingError: Bad settings, data, tokenizer or checkpoint (one line).
        TrainingMemoryError: A CPU run whose estimated peak memory exceeds what is free.
    """
    if settings.masking not in MASKING_MODES:
        raise PretrainingError(f"{param('masking')} must be one of {', '.join(MASKING_MODES)}, got {settings.masking!r}")
    if settings.data is None:
        return _sample_run(settings, report)
    if not settings.model_dir:
        raise PretrainingError(
            f"{param('model_dir')} is required with {param('data')} (checkpoints, logs and models go there)"
        )
    return _run_on_data(settings, report)


# --- settings against the data ----------------------------------------------------------------


def check_masking_settings(settings: PretrainSettings) -> None:
    """`masked_lm_prob` is for on-the-fly masking only, and a rate."""
    if settings.masked_lm_prob is None:
        return
    if settings.masking != "on-the-fly":
        raise PretrainingError(
            f"{param('masked_lm_prob')} applies to {param('masking', 'on-the-fly')} (offline records carry their masks)"
        )
    if not 0 < settings.masked_lm_prob <= 1:
        raise PretrainingError(f"{param('masked_lm_prob')} must be in (0, 1], got {settings.masked_lm_prob:g}")


def record_lengths(path: str, record: bytes) -> Tuple[int, int]:
    """`(max_seq_length, max_predictions_per_seq)` of one serialized pretraining record.

    Fixed-length parsing of records that do not match the settings would otherwise fail inside
    the first train step, with a message about parsing rather than about the data.
    """
    try:
        features = tf.train.Example.FromString(record).features.feature
    except DecodeError:
        raise PretrainingError(f"{path}: the records are not tf.train.Example protos") from None
    missing = [name for name in FEATURE_NAMES if name not in features and name != "token_boundary"]
    if missing:
        raise PretrainingError(f"{path}: the records lack feature(s) {', '.join(missing)}")
    return len(features["input_ids"].int64_list.value), len(features["masked_lm_positions"].int64_list.value)


def check_lengths_against_metadata(settings: PretrainSettings, data) -> None:
    """A length setting that contradicts the data's ``metadata.json`` is an error."""
    for name, _ in _LENGTHS:
        stated, given = getattr(data, name), getattr(settings, name)
        if stated is not None and given is not None and given != stated:
            raise PretrainingError(
                f"{param(name, given)} contradicts {data.metadata_path}: the records have {name} {stated} "
                "(leave the flag out)"
            )


def data_lengths(settings: PretrainSettings, data, first) -> Tuple[int, int]:
    """The records' `(max_seq_length, max_predictions_per_seq)`: the metadata's, else the first
    record's; a setting that says otherwise is an error (`check_lengths_against_metadata` first)."""
    path, record = first
    found = record_lengths(path, record)
    lengths = []
    for index, (name, feature) in enumerate(_LENGTHS):
        stated, given = getattr(data, name), getattr(settings, name)
        if stated is not None and found[index] != stated:
            raise PretrainingError(
                f"{path}: the records have {found[index]} {feature} per example, but {data.metadata_path} says {stated}"
            )
        expected = given if given is not None else found[index]
        if found[index] != expected:
            raise PretrainingError(
                f"{path}: the records have {found[index]} {feature} per example, but {param(name)} is {expected}"
            )
        lengths.append(expected)
    return tuple(lengths)


def data_tokenizer(settings: PretrainSettings, data) -> Optional[Tuple[TokenizerFile, int]]:
    """`(TokenizerFile, vocab_size)` of the tokenizer the data was made with, from the settings or
    the metadata (None: unknown)."""
    if settings.spm_model and settings.vocab_file:
        raise PretrainingError(f"pass {param('spm_model')} or {param('vocab_file')}, not both")
    stated = data.tokenizer or {}
    lower_case = settings.lower_case if settings.lower_case is not None else bool(stated.get("lower_case", True))
    if settings.spm_model:
        kind, path, source = "sentencepiece", settings.spm_model, param("spm_model")
    elif settings.vocab_file:
        kind, path, source = "wordpiece", settings.vocab_file, param("vocab_file")
    elif stated.get("spm_model") or stated.get("vocab_file"):
        kind = "sentencepiece" if stated.get("spm_model") else "wordpiece"
        path, source = stated.get("spm_model") or stated.get("vocab_file"), None
    else:
        return None
    if not tf.io.gfile.exists(path):
        where = "" if source else f", named by {data.metadata_path},"
        raise PretrainingError(
            f"tokenizer file {path}{where} not found (pass {param('spm_model')} or {param('vocab_file')})"
        )
    try:
        loaded = python_tokenizer(kind, path)
    except (OSError, RuntimeError, ValueError) as e:
        raise PretrainingError(f"{path} is not a {kind} tokenizer: {e}") from None
    if data.vocab_size is not None and loaded.vocab_size != data.vocab_size:
        raise PretrainingError(
            f"{source or data.metadata_path} {path} has {loaded.vocab_size} tokens, but {data.metadata_path} says the "
            f"records were made with {data.vocab_size}: it is not the data's tokenizer"
        )
    return TokenizerFile(kind, path, lower_case), loaded.vocab_size


def data_metadata(data) -> dict:
    """The data's ``metadata.json`` ({} without one); `find_pretraining_data` has checked it is an object."""
    if not data.metadata_path:
        return {}
    with tf.io.gfile.GFile(data.metadata_path, "r") as f:
        return json.load(f)


def _record_has_masks(record: bytes) -> bool:
    weights = tf.train.Example.FromString(record).features.feature["masked_lm_weights"].float_list.value
    return any(w > 0 for w in weights)


def check_offline_records_are_masked(settings: PretrainSettings, data, metadata, first) -> None:
    """Offline masking of unmasked records (``masked_lm_prob 0`` data) would train no masked LM."""
    if settings.masking != "offline":
        return
    stated = (metadata.get("instance_config") or {}).get("masked_lm_prob")
    if stated == 0:
        raise PretrainingError(
            f"{data.metadata_path} says the records are unmasked (masked_lm_prob 0): pass {param('masking', 'on-the-fly')}"
        )
    path, record = first
    if stated is None and not _record_has_masks(record):
        raise PretrainingError(
            f"{path}: the records have no masked positions (unmasked data?): pass {param('masking', 'on-the-fly')}"
        )


def masking_config(settings: PretrainSettings, data, metadata, lengths, tokenizer) -> MaskingConfig:
    """The `MaskingConfig` of on-the-fly masking: the metadata's settings, the tokenizer's ids
    (else the metadata's ``vocab`` entry)."""
    instance = dict(metadata.get("instance_config") or {})
    instance.update(max_seq_length=lengths[0], max_predictions_per_seq=lengths[1])
    stated = metadata.get("vocab") if isinstance(metadata.get("vocab"), dict) else {}
    ids = ("cls_id", "sep_id", "mask_id")
    on_the_fly = param("masking", "on-the-fly")
    try:
        if tokenizer is not None:
            masking = MaskingConfig.from_tokenizer(tokenizer, instance, masked_lm_prob=settings.masked_lm_prob)
        elif all(k in stated for k in ("vocab_size",) + ids):
            masking = MaskingConfig.from_instance_config(instance, stated, settings.masked_lm_prob)
        else:
            raise PretrainingError(
                f"{on_the_fly} needs the data's vocabulary (the [CLS], [SEP] and [MASK] ids and its size): "
                f"pass {param('spm_model')} or {param('vocab_file')}"
            )
    except (ValueError, TypeError) as e:
        if isinstance(e, PretrainingError):
            raise
        raise PretrainingError(f"{on_the_fly}: {e}") from None
    differing = [f"{k} {getattr(masking, k)}" for k in ids if k in stated and stated[k] != getattr(masking, k)]
    if tokenizer is not None and differing:
        raise PretrainingError(
            f"{tokenizer.path} has {', '.join(differing)}, but {data.metadata_path} says the records were made with "
            f"{', '.join(f'{k} {stated[k]}' for k in ids if k in stated)}: it is not the data's tokenizer"
        )
    return masking


def describe_masking(masking: MaskingConfig) -> str:
    """One line of what on-the-fly masking draws."""
    order = "shorter favored" if masking.favor_shorter_ngram else "longer favored"
    words = "whole words" if masking.do_whole_word_mask else "single pieces"
    return (
        f"masking on the fly: rate {masking.masked_lm_prob:g}, n-grams up to {masking.ngram} ({order}), {words}; "
        f"[MASK] id {masking.mask_id}, random ids below {masking.vocab_size}"
    )


def pretraining_dataset_fn(files, config: PretrainingRunConfig, masking: Optional[MaskingConfig], shuffle_buffer: int):
    """`run_pretraining`'s ``dataset_fn``: the records' own masks, or fresh ones with `masking`."""

    def dataset_fn():
        if masking is None:
            return make_pretraining_dataset(
                files,
                config.max_seq_length,
                config.max_predictions_per_seq,
                config.batch_size,
                is_training=True,
                seed=config.seed,
                shuffle_buffer_size=shuffle_buffer,
            )
        return make_on_the_fly_dataset(
            files, config.batch_size, masking, seed=config.seed, shuffle_buffer_size=shuffle_buffer
        )

    return dataset_fn


# --- the run settings ---------------------------------------------------------------------------


def default_config(strategy: str) -> str:
    """The config without one given: the paper's model on a GPU or TPU, else the CPU size."""
    if strategy == "tpu":
        return DEFAULT_CONFIG
    return DEFAULT_CONFIG if tf.config.list_physical_devices("GPU") else CPU_DEFAULT_CONFIG


def run_config(settings: PretrainSettings, albert_config: AlbertConfig, lengths, tokenizer, vocab_size) -> PretrainingRunConfig:
    """The `PretrainingRunConfig` of `settings` on data of `lengths`: settings not given are the
    config's preset's; a ``tiny``/``small`` model takes the data's vocabulary size."""
    preset = pretraining_preset(settings.config or DEFAULT_CONFIG)
    if vocab_size is not None:
        if preset.vocab_from_data:
            albert_config = albert_config.replace(vocab_size=vocab_size)
        elif vocab_size > albert_config.vocab_size:
            raise PretrainingError(
                f"the data's vocabulary has {vocab_size} tokens, but the model's vocab_size is "
                f"{albert_config.vocab_size}"
            )

    def setting(name, preset_value):
        value = getattr(settings, name)
        return preset_value if value is None else value

    steps = setting("steps", preset.num_train_steps)
    warmup = settings.warmup_steps if settings.warmup_steps is not None else preset.warmup_for(steps)
    try:
        config = PretrainingRunConfig(
            model_dir=settings.model_dir,
            model_config=albert_config,
            batch_size=setting("batch_size", preset.batch_size),
            max_seq_length=lengths[0],
            max_predictions_per_seq=lengths[1],
            num_train_steps=steps,
            num_warmup_steps=warmup,
            learning_rate=setting("learning_rate", preset.learning_rate),
            optimizer=settings.optimizer,
            weight_decay=settings.weight_decay,
            clipnorm=settings.clipnorm or None,
            precision=settings.precision,
            jit_compile=settings.jit_compile,
            steps_per_execution=settings.steps_per_execution,
            gradient_accumulation_steps=settings.grad_accum,
            strategy=settings.strategy,
            tpu=settings.tpu,
            checkpoint_every_n_steps=setting("checkpoint_every", preset.checkpoint_every_n_steps),
            keep_checkpoints=setting("keep_checkpoints", preset.keep_checkpoints),
            seed=settings.seed,
            sentence_task=settings.sentence_task,
            log_every=settings.log_every,
            verbose=settings.verbose if settings.verbose == "auto" else int(settings.verbose),
            deterministic_ops=settings.deterministic_ops,
            tokenizer=tokenizer,
        )
        config.albert_config()  # the lengths against the model's positions, before anything runs
    except ConfigError as e:
        raise PretrainingError(raw_message(e)) from None
    return config


# --- the run ------------------------------------------------------------------------------------


def is_chief_process(strategy: str) -> bool:
    """Whether this process writes the model directory (`strategies.is_chief` before TensorFlow)."""
    if strategy != "multi_worker":
        return True
    try:
        tf_config = json.loads(os.environ.get("TF_CONFIG") or "{}")
    except json.JSONDecodeError:
        return False
    task, cluster = tf_config.get("task") or {}, tf_config.get("cluster") or {}
    if not task:
        return True
    return task.get("type") == "chief" or (
        task.get("type") == "worker" and int(task.get("index", 0)) == 0 and "chief" not in cluster
    )


@contextlib.contextmanager
def no_trace_on_failure(model_dir: str, chief: bool):
    """Removes `model_dir` if this run created it and fails before it holds a checkpoint.

    A directory that existed is left alone (the run writes into it only after its checks), and
    one holding a checkpoint is kept: rerunning resumes from it.
    """
    existed = tf.io.gfile.exists(model_dir)
    try:
        yield
    except BaseException:
        if chief and not existed and tf.io.gfile.exists(model_dir):
            if not tf.io.gfile.glob(os.path.join(model_dir, CHECKPOINT_SUBDIR, f"{CHECKPOINT_NAME}-*.index")):
                tf.io.gfile.rmtree(model_dir)
        raise


def _run_on_data(settings: PretrainSettings, report) -> PretrainingResult:
    # Strategies must be created before other TensorFlow work; `run_pretraining` does that
    # first. Until then the data is only listed and read with the record reader, which does not
    # start TensorFlow's runtime.
    check_masking_settings(settings)
    if settings.config is None:
        settings = dataclasses.replace(settings, config=default_config(settings.strategy))
        report(f"no {param('config')}: {settings.config}" + (
            f" (no GPU or TPU found: the CPU size; {param('config', DEFAULT_CONFIG)} is the paper's model and recipe)"
            if settings.config == CPU_DEFAULT_CONFIG else ""
        ))
    try:
        albert_config = load_config(settings.config)
    except ConfigError as e:
        raise PretrainingError(raw_message(e)) from None
    try:
        data = find_pretraining_data(settings.data)
        check_lengths_against_metadata(settings, data)
        if settings.check_records:
            scans = scan_record_files(data.files, data.num_records)
            records = sum(s.num_records for s in scans)
            megabytes = sum(s.num_bytes for s in scans) / 1e6
            report(f"checked {records:,d} records in {len(scans)} file(s) ({megabytes:,.1f} MB)")
            first = next(((s.path, s.first_record) for s in scans if s.first_record is not None), None)
        else:
            first = first_record(data.files)
    except (FileNotFoundError, PretrainingDataError) as e:
        raise PretrainingError(str(e)) from None
    if first is None:
        raise PretrainingError(f"{settings.data}: the files hold no records")
    lengths = data_lengths(settings, data, first)
    metadata = data_metadata(data)
    check_offline_records_are_masked(settings, data, metadata, first)
    found = data_tokenizer(settings, data)
    tokenizer, vocab_size = found if found else (None, data.vocab_size)
    config = run_config(settings, albert_config, lengths, tokenizer, vocab_size)
    masking = masking_config(settings, data, metadata, lengths, tokenizer) if settings.masking == "on-the-fly" else None
    config = dataclasses.replace(config, masking=masking_record(masking))
    files = data.files
    source = f" ({data.metadata_path})" if data.metadata_path else ""
    report(f"pretraining on {len(files)} file(s) matching {settings.data!r}{source} -> {config.model_dir}")
    report(
        f"length {config.max_seq_length}, {config.max_predictions_per_seq} predictions, batch {config.batch_size}, "
        f"{config.num_train_steps:,d} steps ({config.num_warmup_steps:,d} warmup), "
        f"{config.optimizer} lr {config.learning_rate:g}"
    )
    if masking is not None:
        report(describe_masking(masking))
    if tokenizer is None:
        report(
            f"note: no tokenizer is known for this data, so the outputs carry none; pass {param('spm_model')} or "
            f"{param('vocab_file')} and `albert-tf finetune --init` will need no tokenizer flag"
        )
    dataset_fn = pretraining_dataset_fn(files, config, masking, settings.shuffle_buffer)

    try:
        with no_trace_on_failure(config.model_dir, is_chief_process(config.strategy)):
            return run_pretraining(config, dataset_fn)
    except TrainingMemoryError as e:
        raise TrainingMemoryError(rename_params(raw_message(e), SETTING_NAMES)) from None
    except (StrategyError, ConfigError) as e:
        # No TPU, a checkpoint of another model, ...
        raise PretrainingError(raw_message(e)) from None
    except tf.errors.DataLossError as e:
        # The files changed after the check (or it was skipped): find the damaged one.
        try:
            scan_record_files(files)
        except PretrainingDataError as damaged:
            raise PretrainingError(str(damaged)) from None
        raise PretrainingError(f"reading the records failed: {e.message.strip().splitlines()[0]}") from None


def _sample_run(settings: PretrainSettings, report) -> PretrainingResult:
    """The job without `data`: the whole chain on the bundled sample.

    SentencePiece vocabulary (the original recipe) on 12 State of the Union addresses, SOP + n-gram
    instances through the Beam pipeline, then a tiny ALBERT pretrained with LAMB for a few minutes
    on CPU. Every step reuses its output when it is already complete, and training resumes from the
    newest checkpoint, so re-running continues (or just reports) instead of starting over.
    `model_dir`, `steps`, `batch_size` and the other training settings apply as usual.
    """
    # Apache Beam is imported for this job only: it is slow to import and gives the root logger
    # a handler of its own.
    from albert_tf.data.beam_pipeline import PipelineConfig, TokenizerSpec, make_pretraining_data
    from albert_tf.data.pipeline_output import read_metadata

    sample = dict(SAMPLE_SETTINGS)
    model_dir = settings.model_dir or sample["model_dir"]
    seq, predictions = sample["max_seq_length"], sample["max_predictions_per_seq"]
    if settings.config:
        raise PretrainingError(
            f"the sample run (no {param('data')}) trains its own tiny model: {param('config')} needs {param('data')}"
        )
    if (settings.max_seq_length or seq) != seq or (settings.max_predictions_per_seq or predictions) != predictions:
        raise PretrainingError(
            f"the sample run makes its own records: {param('max_seq_length')}/{param('max_predictions_per_seq')} "
            f"need {param('data')}"
        )
    if settings.spm_model or settings.vocab_file:
        raise PretrainingError(
            f"the sample run trains its own vocabulary: {param('spm_model')}/{param('vocab_file')} need {param('data')}"
        )
    check_masking_settings(settings)
    inputs = os.path.join(SAMPLE_CORPUS, "*.txt")
    work = os.path.join(model_dir, "sample_data")
    os.makedirs(work, exist_ok=True)

    spm_prefix = os.path.join(work, "spm")
    if not os.path.exists(spm_prefix + ".model"):
        report(f"[1/3] SentencePiece vocabulary ({sample['vocab_size']} pieces) on {SAMPLE_CORPUS}")
        train_sentencepiece(sorted(glob.glob(inputs)), spm_prefix, sample["vocab_size"], seed=settings.seed)
    else:
        report(f"[1/3] vocabulary: reusing {spm_prefix}.model")

    records = os.path.join(work, "records")
    try:
        read_metadata(records)
        report(f"[2/3] pretraining records: reusing {records}")
    except Exception:  # absent or incomplete: (re)make them; the pipeline only moves complete output in
        report(f"[2/3] SOP + n-gram instances (Beam DirectRunner, dupe factor {sample['dupe_factor']}) -> {records}")
        summary = make_pretraining_data(
            inputs,
            records,
            PipelineConfig(
                instance=InstanceConfig(max_seq_length=seq, max_predictions_per_seq=predictions),
                tokenizer=TokenizerSpec(spm_model=spm_prefix + ".model"),
                dupe_factor=sample["dupe_factor"],
                seed=settings.seed,
                input_format="paragraphs",
                num_shards=2,
            ),
            overwrite=True,
        )
        report(f"      {summary}")

    steps = settings.steps or sample["steps"]
    config = PretrainingRunConfig(
        model_dir=model_dir,
        model_config=AlbertConfig.preset("tiny", vocab_size=sample["vocab_size"], max_position_embeddings=seq),
        batch_size=settings.batch_size or sample["batch_size"],
        max_seq_length=seq,
        max_predictions_per_seq=predictions,
        num_train_steps=steps,
        num_warmup_steps=settings.warmup_steps if settings.warmup_steps is not None else steps // 10,
        learning_rate=settings.learning_rate if settings.learning_rate is not None else sample["learning_rate"],
        optimizer=settings.optimizer,
        precision=settings.precision,
        jit_compile=settings.jit_compile,
        strategy=settings.strategy,
        checkpoint_every_n_steps=settings.checkpoint_every or sample["checkpoint_every"],
        keep_checkpoints=settings.keep_checkpoints or 3,
        seed=settings.seed,
        log_every=settings.log_every,
        verbose=2 if settings.verbose == "auto" else int(settings.verbose),
        tokenizer=TokenizerFile("sentencepiece", spm_prefix + ".model", lower_case=True),
    )
    files = list_files(os.path.join(records, "*.tfrecord"))
    masking = None
    if settings.masking == "on-the-fly":
        masking = MaskingConfig.from_tokenizer(
            spm_prefix + ".model", InstanceConfig(seq, predictions), masked_lm_prob=settings.masked_lm_prob
        )
    report(f"[3/3] pretraining a tiny ALBERT (E=64, H=128, L=4, sharing all) for {steps} steps -> {model_dir}")
    config = dataclasses.replace(config, masking=masking_record(masking))
    if masking is not None:
        report(f"      {describe_masking(masking)}")
    return run_pretraining(config, pretraining_dataset_fn(files, config, masking, settings.shuffle_buffer))
