"""`finetune(FinetuneSettings(...))`: one fine-tuning run of any task, from data files to a
model directory that `from_pretrained` (and `albert-tf evaluate / predict / export`) reads whole;
and `train_task_model`, the driver it shares with the pipeline's Trainer.

`FinetuneSettings` mirrors the flags of `albert-tf finetune` (same names, same defaults); the
command maps its flags onto it and calls `finetune`. Its training values are resolved into the one
`albert_tf.training.finetuning_config.FinetuningConfig` (`resolve_finetuning_config`: the task's
preset, then the recipe for the model's size, then the values given). The task's family
(`albert_tf.tasks.family.task_family`) reads and encodes the data (`plan`), and
`train_task_model` trains the task's raw-text model (`AlbertTextClassifier`, ...) on it with
`albert_tf.training.finetuning.run_finetuning`, writing the whole model and its assets.

Bad settings, data or checkpoints raise `albert_tf.tasks.errors.TaskError` with a one-line message
(it names the setting: `overwrite=True` here, `--overwrite` as the command reports it).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
from typing import Any, Callable, Dict, Optional

from albert_tf.errors import raw_message
from albert_tf.tasks.errors import TaskError, param
from albert_tf.tasks.family import families, task_family, task_names
from albert_tf.tasks.resources import (
    check_init,
    check_tokenizer_fits,
    load_tokenizer,
    load_tokenizer_layer,
    resolve_model_config,
    resolve_tokenizer_file,
)
from albert_tf.tasks.spec import CONFIG_FILE, RESULTS_FILE, TaskSpec, write_json
from albert_tf.training.finetuning_config import (
    USER_NAMES,
    FinetuningConfig,
    FinetuningError,
    RuntimeConfig,
    resolve_finetuning_config,
)

# Settings with a fixed set of values: (attribute, values).
CHOICES = (
    ("table_format", (None, "tsv", "csv", "jsonl")),
    ("tsv_quoting", ("csv", "none")),
    ("on_error", ("raise", "skip")),
    ("pooling", (None, "mean", "cls")),
    ("precision", (None, "float32", "mixed_bfloat16")),
)
# Settings that do not change what a run computes: a rerun may differ in them and still resume.
RESUME_IGNORED = ("model_dir", "overwrite", "quiet")
# Training examples held in the shuffle buffer: all of any GLUE task but MNLI/QQP/QNLI, whose
# full buffers would hold gigabytes of features at length 512.
SHUFFLE_BUFFER = 100_000


@dataclasses.dataclass
class FinetuneSettings:
    """Everything a fine-tuning run takes; the fields are `albert-tf finetune`'s flags.

    Attributes:
        task: A task name (`albert_tf.tasks.family.task_names()`).
        data: The data directory (the corpus file for peoples-daily, the `RACE/` folder for race).
        model_dir: The output directory (written atomically).
        text_column, text_b_column, label_column, table_format, tsv_quoting: Tables of
            `classification` / `regression`.
        on_error: Malformed rows: "raise" or "skip".
        max_train_examples, max_eval_examples: Use only the first N examples.
        doc_stride, max_query_length, n_best_size, max_answer_length: SQuAD conversion.
        max_qa_length: RACE question+option tokens.
        init, config: The starting checkpoint and the encoder architecture.
        spm_model, vocab_file, lower_case: The tokenizer (default: the one stored with `init`).
        allow_vocab_mismatch: Accept a tokenizer smaller than the model's vocabulary.
        dropout, encoder_dropout: Dropout before the head and inside the encoder.
        The remaining fields are the run's training options (see `albert-tf finetune --help`);
        those left None are resolved into the run's `FinetuningConfig`.
    """

    task: str
    data: str
    model_dir: str
    text_column: Optional[str] = None
    text_b_column: Optional[str] = None
    label_column: Optional[str] = None
    table_format: Optional[str] = None
    tsv_quoting: str = "csv"
    on_error: str = "raise"
    max_train_examples: Optional[int] = None
    max_eval_examples: Optional[int] = None
    doc_stride: Optional[int] = None
    max_query_length: Optional[int] = None
    n_best_size: Optional[int] = None
    max_answer_length: Optional[int] = None
    max_qa_length: Optional[int] = None
    init: Optional[str] = None
    config: Optional[str] = None
    spm_model: Optional[str] = None
    vocab_file: Optional[str] = None
    lower_case: Optional[bool] = None
    allow_vocab_mismatch: bool = False
    dropout: Optional[float] = None
    encoder_dropout: Optional[float] = None
    overwrite: bool = False
    max_seq_length: Optional[int] = None
    learning_rate: Optional[float] = None
    batch_size: Optional[int] = None
    eval_batch_size: Optional[int] = None
    num_train_steps: Optional[int] = None
    num_epochs: Optional[float] = None
    warmup_steps: Optional[int] = None
    warmup_proportion: Optional[float] = None
    eval_every: Optional[int] = None
    weight_decay: Optional[float] = None
    pooling: Optional[str] = None
    bias_correction: Optional[bool] = None
    gradient_accumulation_steps: Optional[int] = None
    precision: Optional[str] = None
    strategy: Optional[str] = None
    tpu: Optional[str] = None
    jit_compile: Optional[bool] = None
    seed: Optional[int] = None
    quiet: bool = False

    @classmethod
    def from_namespace(cls, namespace) -> "FinetuneSettings":
        """The settings of an `argparse.Namespace` (or any object) with these attribute names."""
        return cls(**{f.name: getattr(namespace, f.name) for f in dataclasses.fields(cls) if hasattr(namespace, f.name)})


@dataclasses.dataclass
class FinetuneOutcome:
    """What `finetune` did.

    Attributes:
        model_dir: The written model directory.
        spec: Its `task.json`.
        config: The run's resolved `FinetuningConfig`.
        result: The `albert_tf.training.finetuning.FinetuningResult` of the run; `result.model` is
            the trained raw-text model (`AlbertTextClassifier`, ...: `predict` takes strings),
            `result.model.task_model` its head, which the model directory keeps.
        num_train_steps, warmup_steps: The schedule it ran.
        constant_baseline: The dev set's best constant answer, where the family has one.
    """

    model_dir: str
    spec: TaskSpec
    config: Any
    result: Any
    num_train_steps: int
    warmup_steps: int
    constant_baseline: Any = None


def _field_order(name: str) -> int:
    names = [field.name for field in dataclasses.fields(FinetuneSettings)]
    return names.index(name) if name in names else len(names)


def check_settings(s: FinetuneSettings) -> None:
    """Refuses settings that cannot make a run, before any data is read.

    Raises:
        TaskError: The first problem found, naming its flag.
    """
    tasks = task_names()
    if s.task not in tasks:
        raise TaskError(f"{param('task')} must be one of {', '.join(tasks)}, got {s.task!r}")
    for name, values in CHOICES:
        if getattr(s, name) not in values:
            shown = ", ".join(v for v in values if v is not None)
            raise TaskError(f"{param(name)} must be one of {shown}, got {getattr(s, name)!r}")
    family = task_family(s.task)
    if family.reads_columns():
        if not s.text_column or not s.label_column:
            raise TaskError(f"{param('task', s.task)} needs {param('text_column')} and {param('label_column')}")
    elif s.text_column or s.text_b_column or s.label_column:
        columns = " or ".join(t for f in families() for t in f.tasks if f(t).reads_columns())
        raise TaskError(f"{param('text_column')}/{param('text_b_column')}/{param('label_column')} are for {param('task')} {columns}, not {s.task}")
    family.check_data(s.data)
    for name in ("max_seq_length", "batch_size", "num_train_steps", "eval_every", "max_train_examples", "max_eval_examples"):
        value = getattr(s, name)
        if value is not None and value < 1:
            raise TaskError(f"{param(name)} must be >= 1, got {value}")
    for name in sorted({option for f in families() for option in f.options}, key=_field_order):
        value = getattr(s, name, None)
        if value is None:
            continue
        if name not in family.options:
            owners = " / ".join(t for f in families() if name in f.options for t in f.tasks)
            raise TaskError(f"{param(name)} is for {param('task')} {owners}, not {s.task}")
        if value < 1:
            raise TaskError(f"{param(name)} must be >= 1, got {value}")
    if family.reading:
        # Their readers convert whole files; a malformed question stops the run with its place named.
        for name in ("max_train_examples", "max_eval_examples"):
            if getattr(s, name) is not None:
                raise TaskError(f"{param(name)} is not supported for {s.task}; cut the data files instead")
        if s.on_error != "raise":
            raise TaskError(f"{param('on_error', s.on_error)} is not supported for {s.task}")
    if s.num_epochs is not None and not s.num_epochs > 0:
        raise TaskError(f"{param('num_epochs')} must be > 0, got {s.num_epochs}")
    if s.warmup_proportion is not None and not 0 <= s.warmup_proportion <= 1:
        raise TaskError(f"{param('warmup_proportion')} must be in [0, 1], got {s.warmup_proportion}")
    if s.init:
        check_init(s.init)


def write_model_assets(directory: str, tokenizer_file: str, config, spec: TaskSpec, results: Callable[[], Dict[str, Any]],
                       model=None, training: Optional[Dict[str, Any]] = None) -> None:
    """Everything of a fine-tuned model directory but `model.keras`: the tokenizer file, the
    encoder's `albert_config.json`, `eval_results.json` (what `results()` returns; it runs after
    the first two are written and may add to `spec.settings`) and `task.json`, which records the
    raw-text `model` (after it took what the results decided, e.g. SQuAD v2's threshold) and the
    resolved `training` configuration."""
    from albert_tf.tasks.model_dir import model_record

    shutil.copyfile(tokenizer_file, os.path.join(directory, spec.tokenizer["file"]))
    config.to_json_file(os.path.join(directory, CONFIG_FILE))
    write_json(os.path.join(directory, RESULTS_FILE), results())
    if model is not None:
        model.adopt_spec(spec)
        spec.model = model_record(model)
    spec.training = training
    spec.write(directory)


def finetune(settings: FinetuneSettings) -> FinetuneOutcome:
    """Fine-tunes the encoder on the task and writes `settings.model_dir`.

    The directory receives, atomically, `model.keras` (the whole raw-text model), `albert_config.json`, the tokenizer file,
    `task.json`, `eval_results.json` (the best model on every dev split and on labelled test
    files) and prediction files for unlabelled test data. Progress and results are printed as
    `albert-tf finetune` shows them.

    Raises:
        TaskError: Bad settings, data, tokenizer or checkpoint, an existing `model_dir` without
            `overwrite`, or a failed run.
    """
    # The run fills in what was left to defaults; the caller's settings stay as given.
    s = dataclasses.replace(settings, task=settings.task.lower() if isinstance(settings.task, str) else settings.task)
    check_settings(s)
    from albert_tf.training.run_directory import is_complete

    if os.path.exists(s.model_dir) and os.listdir(s.model_dir) and not s.overwrite:
        what = "a completed fine-tuning run" if is_complete(s.model_dir) else "not empty"
        raise TaskError(f"{param('model_dir')} {s.model_dir} is {what}; pass {param('overwrite', True)} to replace it")

    from albert_tf.training.strategies import StrategyError, get_strategy

    # First TensorFlow work of the process: multi-worker and TPU strategies must configure the
    # runtime before anything else runs.
    try:
        strategy = get_strategy(s.strategy or RuntimeConfig.strategy, tpu=s.tpu)
    except StrategyError as e:
        raise TaskError(raw_message(e)) from None
    family = task_family(s.task)
    model_config, config_source = resolve_model_config(s.config, s.init)
    with _task_errors():
        config = resolve_finetuning_config(family, model_config, **{n: getattr(s, n) for n in USER_NAMES if hasattr(s, n)})
    tokenizer_type, tokenizer_file, stored_lower_case = resolve_tokenizer_file(s.spm_model, s.vocab_file, s.init)
    if s.lower_case is None:
        # The casing the tokenizer was made with, where it was stored with it; else lower-cased.
        s.lower_case = True if stored_lower_case is None else bool(stored_lower_case)
    tokenizer = load_tokenizer(tokenizer_type, tokenizer_file, s.lower_case)
    check_tokenizer_fits(tokenizer, tokenizer_file, model_config, config_source, s.allow_vocab_mismatch)
    seq_length = config.data.max_seq_length
    if seq_length > model_config.max_position_embeddings:
        given = "" if s.max_seq_length is not None else f" (the {s.task} default)"
        raise TaskError(
            f"{param('max_seq_length', seq_length)}{given} exceeds the max_position_embeddings of "
            f"{config_source} ({model_config.max_position_embeddings}); pass "
            f"{param('max_seq_length', model_config.max_position_embeddings)} or less"
        )
    if config.task.encoder_dropout is not None:
        dropout = config.task.encoder_dropout
        model_config = model_config.replace(hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)
    plan = family.plan(s, config, tokenizer_type, tokenizer_file, tokenizer)
    spec = plan.spec
    with _task_errors():
        steps, warmup = config.schedule(plan.num_train)
    _check_memory(s, config, model_config, strategy, spec)
    preprocessor = load_tokenizer_layer(spec.tokenizer["type"], tokenizer_file, spec.tokenizer["lower_case"], seq_length)
    print(f"fine-tuning {s.task}: {plan.summary}", flush=True)
    result = train_task_model(
        plan.build_model, plan.train_data, plan.eval_data, config, num_train=plan.num_train, model_dir=s.model_dir,
        preprocessor=preprocessor, model_config=model_config, tokenizer_file=tokenizer_file, spec=spec,
        results=plan.write_results, init=s.init, strategy=strategy, eval_fn=plan.eval_fn,
        constant_baseline=plan.constant_baseline,
        metadata={"data": os.path.abspath(s.data)}, eval_every_n_steps=s.eval_every, overwrite=s.overwrite,
        verbose=0 if s.quiet else "auto",  # "auto": a bar on a terminal, one line per interval otherwise
        # An interrupted run resumes only with the same settings; the first that differs is named.
        resume_settings={k: v for k, v in dataclasses.asdict(s).items() if k not in RESUME_IGNORED},
    )
    shown = ", ".join(f"{k}={v:.4f}" for k, v in sorted(result.best_metrics.items()))
    print(f"best dev {spec.best_metric} at step {result.best_step}: {shown}")
    if plan.constant_baseline is not None:
        constant = plan.constant_baseline
        print(f"best constant answer: {spec.best_metric}={constant.metrics[spec.best_metric]:.4f} ({constant.description})")
    if result.collapsed:
        print(f"WARNING: the model collapsed: {result.collapse.reason}. It answers like a constant; see "
              f"albert_tf.training.recipes for settings that learn (learning rate, --pooling mean, more epochs).",
              flush=True)
    print(f"wrote {result.model_dir}")
    return FinetuneOutcome(result.model_dir, spec, config, result, steps, warmup, plan.constant_baseline)


@contextlib.contextmanager
def _task_errors():
    """A configuration that cannot make a run, as the task layer's one-line `TaskError`."""
    try:
        yield
    except FinetuningError as e:
        raise TaskError(raw_message(e)) from None


def task_model_of(model):
    """The head of a raw-text model (`model.task_model`): what a model directory keeps."""
    return model.task_model


def on_head(eval_fn):
    """A family's dev evaluation (`eval_fn(head, data, callbacks=None)`) of a raw-text model's
    head, as `run_finetuning` calls it with the trained model; None stays None (`model.evaluate`)."""
    if eval_fn is None:
        return None

    def evaluate(model, data, callbacks=None):
        return eval_fn(task_model_of(model), data, callbacks=callbacks)

    return evaluate


def _check_memory(s: FinetuneSettings, run: FinetuningConfig, config, strategy, spec) -> None:
    """On a CPU, refuses a run whose estimated peak memory exceeds what is free, naming what fits."""
    from albert_tf.training import memory
    from albert_tf.training.strategies import strategy_device_kind

    if strategy_device_kind(strategy) != "CPU":
        return
    num_labels = len(spec.labels or ()) or 2
    try:
        found = memory.check_fits(
            f"fine-tuning a {config.num_hidden_layers}-layer, {config.hidden_size}-wide ALBERT",
            lambda batch: memory.estimate_training_memory(
                config, batch, spec.max_seq_length, precision=run.runtime.precision,
                gradient_accumulation_steps=run.optimization.gradient_accumulation_steps, num_labels=num_labels,
            ),
            run.data.batch_size,
            spec.max_seq_length,
            gradient_accumulation_steps=run.optimization.gradient_accumulation_steps,
        )
    except memory.TrainingMemoryError as e:
        raise TaskError(raw_message(e)) from None
    if not s.quiet:
        print(memory.memory_line(found), flush=True)


def train_task_model(build, train_data, eval_data, config: FinetuningConfig, *, num_train: int, model_dir: str,
                     preprocessor, model_config, tokenizer_file: str, spec: TaskSpec,
                     results: Callable[[str, Any], Dict[str, Any]], init: Optional[str] = None, strategy=None,
                     eval_fn=None, constant_baseline=None, metadata: Optional[Dict[str, Any]] = None,
                     init_info: Optional[Dict[str, Any]] = None, **run: Any):
    """The fine-tuning driver of a task's raw-text model: the CLI's `finetune` and the pipeline's
    Trainer both train through it.

    Prints the resolved `config`, builds the encoder of `model_config` at the run's precision
    (from `init`, else random), the model `build(encoder, preprocessor)`, trains it with
    `run_finetuning` on the unbatched feature datasets, and writes `model_dir` whole
    (`model.keras`, the tokenizer file, `albert_config.json`, `eval_results.json` from
    `results(directory, head)`, `task.json` with the model record and `config`).

    Args:
        eval_fn: The dev evaluation of the head (`eval_fn(head, data, callbacks=None)`), None:
            `model.evaluate`.
        constant_baseline: The dev set's best constant answer; the run is checked against it
            on `spec.best_metric`.
        metadata: More of `finetuning.json`'s metadata.
        init_info: Filled with the `init` checkpoint's kind and source (the caller's `build`
            may add to it); `finetuning.json` records it.
        run: More `FinetuningRunConfig` fields of this run (`verbose`, `overwrite`, ...).

    Raises:
        TaskError: A checkpoint that does not fit, or a failed run.
    """
    from albert_tf.checkpoints.any_format import init_encoder
    from albert_tf.checkpoints.original import CheckpointError
    from albert_tf.modeling import AlbertEncoder
    from albert_tf.training.finetuning import FinetuningRunConfig, run_finetuning

    init_info = {} if init_info is None else init_info

    def build_model():
        encoder = AlbertEncoder.from_albert_config(model_config, dtype=config.runtime.precision)
        if init:
            try:
                loaded = init_encoder(encoder, init)
            except (CheckpointError, ValueError) as e:
                raise TaskError(raw_message(e)) from None
            init_info.update(kind=loaded.kind, source=loaded.source)
            print(f"initialised the encoder from {loaded.source} ({loaded.kind})", flush=True)
        else:
            print("no --init: the encoder starts from random weights", flush=True)
        try:
            return build(encoder, preprocessor)
        except ValueError as e:
            raise TaskError(raw_message(e)) from None

    def save_assets(directory: str, model) -> None:
        write_model_assets(directory, tokenizer_file, model_config, spec, lambda: results(directory, task_model_of(model)),
                           model=model, training=config.to_dict())

    for line in config.describe(num_train):
        print(line, flush=True)
    try:
        run_config = FinetuningRunConfig.from_config(
            config, num_train, model_dir, best_metric=spec.best_metric,
            shuffle_buffer=min(num_train, SHUFFLE_BUFFER),
            metadata={"task": spec.task, "init": init_info, "config": model_config.to_dict(), **(metadata or {})},
            collapse_metric=spec.best_metric if constant_baseline is not None else None, **run,
        )
        return run_finetuning(
            build_model, train_data, eval_data, run_config, eval_fn=on_head(eval_fn), strategy=strategy,
            save_assets=save_assets, constant_baseline=constant_baseline,
        )
    except (FinetuningError, FileExistsError) as e:
        raise TaskError(raw_message(e)) from None
