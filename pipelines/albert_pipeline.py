"""The ALBERT pipeline, defined once with the KFP v2 SDK: run locally, or compiled for Kubeflow / Vertex.

    ExampleGen -> VocabGen -> StatisticsGen -> SchemaGen -> ExampleValidator -> Transform
              -> Pretrainer -> Trainer -> Evaluator ----\\
                                       \\-> InfraValidator -> Pusher

With `distill: {enabled: true, ...}` a Distiller follows the Trainer: the Trainer's model is the
teacher, and the student is what the Evaluator judges (with the teacher's margin as one more gate)
and the InfraValidator and Pusher get. Off (the default), the pipeline is exactly the one above.

With `warm_start: true` the run continues from the latest pushed (blessed) model: VocabGen
resolves it and takes its vocabulary, the Pretrainer continues from its encoder and the Trainer
from its classifier head (`albert_tf.pipeline_steps.warm_start`); the input fingerprint covers
that model, so a new push re-runs the cached steps.

* `run_local(settings)` runs it with `kfp.local` and `SubprocessRunner(use_venv=False)`: every
  step is a subprocess of this interpreter, artifacts go under `pipeline_root`, and the data and
  training steps are cached (a re-run on unchanged inputs reuses them; the Evaluator,
  InfraValidator and Pusher always run, since they depend on what is being served). kfp.local's
  output (every task's executor input as JSON, its streamed log, its outputs) goes to a log file
  under `pipeline_root/logs`; the terminal gets one line per step and, when a step fails, nothing
  of its log: `run_local` raises `StepFailed`, whose message is one line naming the step, the cause
  and the log file (`verbose=True`: all of kfp.local's output on the terminal too).
* `compile_pipeline(settings, path, image)` writes the pipeline YAML that Kubeflow Pipelines and
  Vertex AI Pipelines run, each step on `image` (see `pipelines/README.md`); the settings become
  the pipeline parameters' defaults.
"""

import collections
import contextlib
import dataclasses
import datetime
import hashlib
import inspect
import io
import json
import os
import re
import sys
import time
from typing import Any, Dict, Iterator, List, NamedTuple, Sequence, TextIO

from kfp import dsl

from albert_tf.config import AlbertConfig
from albert_tf.pipeline_steps import failures
from albert_tf.pipeline_steps.settings import PipelineSettings, finetuning_config
from albert_tf.runtime_env import is_startup_notice
from pipelines.components import make_components

PIPELINE_NAME = "albert-tf-pipeline"
DEFAULT_IMAGE = "albert-tf-python3.11:0.1.0"
UNCACHED_STEPS = ("schema_gen", "example_validator", "evaluator", "infra_validator", "pusher")
# kfp.local's names of the cached steps' tasks, in the order it runs them (before the others).
# SchemaGen and ExampleValidator are never cached (they read the statistics store) but run
# between cached steps: listed for their place in the order, they are always seen running.
CACHED_TASKS = ("example-gen", "vocab-gen", "statistics-gen", "schema-gen", "example-validator", "transform",
                "pretrainer", "trainer")
LOG_SUBDIR = "logs"


def input_fingerprint(settings: PipelineSettings) -> str:
    """A hash of the input files' contents, so the cached data steps re-run when the data change."""
    from albert_tf.pipeline_steps.example_gen import expand_corpus
    from albert_tf.pipeline_steps.spans import SpanError, resolve_spans

    digest = hashlib.sha256()
    try:
        task_dirs = [s.path for s in resolve_spans(settings.task_data, settings.span, settings.num_spans)]
    except SpanError:
        task_dirs = [settings.task_data]  # ExampleGen names the problem
    task_files = sorted(
        os.path.join(task_data, name) for task_data in task_dirs if os.path.isdir(task_data)
        for name in os.listdir(task_data) if os.path.isfile(os.path.join(task_data, name))
    )
    for path in expand_corpus(settings.corpus) + task_files:
        digest.update(os.path.abspath(path).encode("utf-8"))
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
    if settings.warm_start:
        # A warm-started run depends on the model it starts from as much as on its data.
        from albert_tf.pipeline_steps.pusher import fingerprint
        from albert_tf.pipeline_steps.warm_start import latest_blessed_model

        base = latest_blessed_model(settings.serving_base, settings.model_name)
        if base is not None:
            digest.update(os.path.abspath(base).encode("utf-8") + fingerprint(base).encode("ascii"))
    return digest.hexdigest()


def pipeline_arguments(settings: PipelineSettings, fingerprint: str = "") -> Dict[str, Any]:
    """The pipeline parameters of `settings` (names as in `build_pipeline`)."""
    s = settings
    arguments = dict(
        corpus=s.corpus, task_data=os.path.abspath(s.task_data) if "://" not in s.task_data else s.task_data,
        text_column=s.text_column,
        text_b_column=s.text_b_column or "", label_column=s.label_column, eval_fraction=s.eval_fraction,
        input_fingerprint=fingerprint, vocab_type=s.vocab_type, vocab_size=s.vocab_size, lower_case=s.lower_case,
        character_coverage=s.character_coverage, hard_vocab_limit=s.hard_vocab_limit,
        max_seq_length=s.max_seq_length, max_predictions_per_seq=s.max_predictions_per_seq, dupe_factor=s.dupe_factor,
        model_config_json=json.dumps(s.model), pretrain_steps=s.pretrain_steps, pretrain_batch_size=s.pretrain_batch_size,
        pretrain_learning_rate=s.pretrain_learning_rate, pretrain_warmup_steps=s.pretrain_warmup_steps,
        finetune_epochs=s.finetune_epochs, finetune_batch_size=s.finetune_batch_size,
        finetune_learning_rate=s.finetune_learning_rate, finetune_pooling=s.finetune_pooling,
        finetune_bias_correction=s.finetune_bias_correction, finetune_warmup_fraction=s.finetune_warmup_fraction,
        strategy=s.strategy, precision=s.precision,
        beam_runner=s.beam_runner, beam_args=list(s.beam_args), model_name=s.model_name,
        serving_base=os.path.abspath(s.serving_base) if "://" not in s.serving_base else s.serving_base,
        eval_metric=s.eval_metric, eval_threshold=s.eval_threshold, eval_tolerance=s.eval_tolerance,
        eval_baseline_margin=s.eval_baseline_margin, eval_min_mcc=s.eval_min_mcc, eval_confidence=s.eval_confidence,
        seed=s.seed, deterministic=s.deterministic, span=s.span, num_spans=s.num_spans, warm_start=s.warm_start,
        pinned_schema=os.path.abspath(s.schema) if s.schema and "://" not in s.schema else (s.schema or ""),
        statistics_store=s.statistics_store_path(),
    )
    # Bad rows and encodings: ExampleGen's reader, the ExampleValidator's judgement.
    arguments.update(encoding=s.encoding, on_error=s.on_error, max_truncated_fraction=float(s.max_truncated_fraction))
    distill = s.distill_settings()
    if distill.enabled:
        # Only a distilling pipeline has the parameter: one without is unchanged.
        arguments["distill_json"] = distill.to_json()
    if s.bulk_infer_input:
        # Likewise only a pipeline with the BulkInferrer has its parameter.
        arguments["bulk_infer_input"] = ",".join(p if "://" in p else os.path.abspath(p) for p in s.bulk_infer_input.split(","))
    # KFP types parameters strictly: a float setting written as `8` in YAML must still be a float.
    for name in ("eval_fraction", "character_coverage", "pretrain_learning_rate", "finetune_epochs", "finetune_learning_rate", "finetune_warmup_fraction",
                 "eval_threshold", "eval_tolerance", "eval_baseline_margin", "eval_min_mcc", "eval_confidence"):
        arguments[name] = float(arguments[name])
    return arguments


def build_pipeline(image: str = DEFAULT_IMAGE, distill: bool = False, bulk_infer: bool = False):
    """The `@dsl.pipeline` function, its steps on the container `image`; with `distill`, the
    Distiller after the Trainer and its student as the candidate (parameter `distill_json`); with
    `bulk_infer`, the BulkInferrer after the Pusher (parameter `bulk_infer_input`)."""
    c = make_components(image)

    class Outputs(NamedTuple):
        corpus_splits: dsl.Dataset
        example_splits: dsl.Dataset
        vocabulary: dsl.Artifact
        statistics: dsl.Artifact
        schema: dsl.Artifact
        anomalies: dsl.Artifact
        transformed: dsl.Dataset
        pretrained_model: dsl.Model
        trained_model: dsl.Model
        evaluation: dsl.Metrics
        blessing: dsl.Artifact
        infra_blessing: dsl.Artifact
        pushed_model: dsl.Model

    # The same artifacts plus the student: one list of fields, so the two cannot drift apart.
    DistilledOutputs = NamedTuple(  # noqa: UP014  (KFP reads a NamedTuple's annotations either way)
        "DistilledOutputs", [*Outputs.__annotations__.items(), ("distilled_model", dsl.Model)]
    )

    # The Trainer's defaults for the default model (`base-v2`), as the one resolver decides them.
    trainer_default = finetuning_config(AlbertConfig.preset("base-v2"))

    def albert_pipeline(
        corpus: str,
        task_data: str,
        serving_base: str,
        text_column: str = "text",
        text_b_column: str = "",
        label_column: str = "label",
        eval_fraction: float = 0.1,
        input_fingerprint: str = "",
        vocab_type: str = "sentencepiece",
        vocab_size: int = 30000,
        lower_case: bool = True,
        character_coverage: float = 0.99995,
        hard_vocab_limit: bool = True,
        max_seq_length: int = 128,
        max_predictions_per_seq: int = 20,
        dupe_factor: int = 10,
        model_config_json: str = '"base-v2"',
        pretrain_steps: int = 10000,
        pretrain_batch_size: int = 256,
        pretrain_learning_rate: float = 0.00176,
        pretrain_warmup_steps: int = 250,
        finetune_epochs: float = trainer_default.optimization.num_epochs,
        finetune_batch_size: int = trainer_default.data.batch_size,
        finetune_learning_rate: float = trainer_default.optimization.learning_rate,
        finetune_pooling: str = trainer_default.task.pooling,
        finetune_bias_correction: bool = trainer_default.optimization.bias_correction,
        finetune_warmup_fraction: float = trainer_default.optimization.warmup_proportion,
        strategy: str = "default",
        precision: str = "float32",
        beam_runner: str = "DirectRunner",
        beam_args: List[str] = [],  # noqa: B006  (KFP reads the default from the signature)
        model_name: str = "albert_classifier",
        eval_metric: str = "accuracy",
        eval_threshold: float = 0.5,
        eval_tolerance: float = 0.0,
        eval_baseline_margin: float = 0.0,
        eval_min_mcc: float = 0.0,
        eval_confidence: float = 0.95,
        seed: int = 12345,
        deterministic: bool = True,
        span: int = -1,
        num_spans: int = 1,
        warm_start: bool = False,
        pinned_schema: str = "",
        statistics_store: str = "",
        encoding: str = "utf-8",
        on_error: str = "skip",
        max_truncated_fraction: float = 0.05,
        distill_json: str = "",
        bulk_infer_input: str = "",
    ):
        gen = c["example_gen"](
            corpus=corpus, task_data=task_data, text_column=text_column, text_b_column=text_b_column,
            label_column=label_column, eval_fraction=eval_fraction, input_fingerprint=input_fingerprint, span=span,
            num_spans=num_spans, encoding=encoding,
        ).set_display_name("ExampleGen")
        vocab = c["vocab_gen"](
            corpus_splits=gen.outputs["corpus_splits"], example_splits=gen.outputs["example_splits"],
            vocab_type=vocab_type, vocab_size=vocab_size, character_coverage=character_coverage,
            hard_vocab_limit=hard_vocab_limit, lower_case=lower_case, seed=seed, warm_start=warm_start,
            serving_base=serving_base, model_name=model_name,
        ).set_display_name("VocabGen")
        stats = c["statistics_gen"](
            corpus_splits=gen.outputs["corpus_splits"], example_splits=gen.outputs["example_splits"],
            vocabulary=vocab.outputs["vocabulary"], beam_runner=beam_runner, beam_args=beam_args,
            max_seq_length=max_seq_length,
        ).set_display_name("StatisticsGen")
        schema = c["schema_gen"](
            statistics=stats.outputs["statistics"], pinned_schema=pinned_schema, statistics_store=statistics_store,
        ).set_display_name("SchemaGen")
        check = c["example_validator"](
            statistics=stats.outputs["statistics"], schema=schema.outputs["schema"], statistics_store=statistics_store,
            on_error=on_error, max_truncated_fraction=max_truncated_fraction,
        ).set_display_name("ExampleValidator")
        data = c["transform"](
            corpus_splits=gen.outputs["corpus_splits"], example_splits=gen.outputs["example_splits"],
            vocabulary=vocab.outputs["vocabulary"], max_seq_length=max_seq_length,
            max_predictions_per_seq=max_predictions_per_seq, dupe_factor=dupe_factor, seed=seed,
            beam_runner=beam_runner, beam_args=beam_args, deterministic=deterministic,
        ).set_display_name("Transform").after(check)  # anomalous data stop the run before the Transform
        pretrain = c["pretrainer"](
            transformed=data.outputs["transformed"], vocabulary=vocab.outputs["vocabulary"],
            model_config_json=model_config_json, steps=pretrain_steps, batch_size=pretrain_batch_size,
            learning_rate=pretrain_learning_rate, warmup_steps=pretrain_warmup_steps, strategy=strategy,
            precision=precision, seed=seed, deterministic=deterministic,
        ).set_display_name("Pretrainer")
        train = c["trainer"](
            transformed=data.outputs["transformed"], vocabulary=vocab.outputs["vocabulary"],
            pretrained_model=pretrain.outputs["pretrained_model"], model_config_json=model_config_json,
            model_name=model_name, epochs=finetune_epochs, batch_size=finetune_batch_size,
            learning_rate=finetune_learning_rate, pooling=finetune_pooling, bias_correction=finetune_bias_correction,
            warmup_fraction=finetune_warmup_fraction, strategy=strategy, precision=precision, seed=seed,
            deterministic=deterministic,
        ).set_display_name("Trainer")
        gates = dict(
            serving_base=serving_base, model_name=model_name, metric=eval_metric, threshold=eval_threshold,
            tolerance=eval_tolerance, baseline_margin=eval_baseline_margin, min_mcc=eval_min_mcc,
            confidence=eval_confidence,
        )
        candidate = train.outputs["trained_model"]
        if distill:
            student = c["distiller"](
                example_splits=gen.outputs["example_splits"], vocabulary=vocab.outputs["vocabulary"],
                trained_model=train.outputs["trained_model"], distill_json=distill_json, model_name=model_name, seed=seed,
            ).set_display_name("Distiller")
            candidate = student.outputs["distilled_model"]
            evaluate = c["distilled_evaluator"](
                example_splits=gen.outputs["example_splits"], trained_model=candidate,
                teacher_model=train.outputs["trained_model"], distill_json=distill_json, **gates,
            ).set_display_name("Evaluator")
        else:
            evaluate = c["evaluator"](
                example_splits=gen.outputs["example_splits"], trained_model=candidate, **gates,
            ).set_display_name("Evaluator")
        validate = c["infra_validator"](
            trained_model=candidate, model_name=model_name,
        ).set_display_name("InfraValidator")
        push = c["pusher"](
            trained_model=candidate, blessing=evaluate.outputs["blessing"],
            infra_blessing=validate.outputs["infra_blessing"], serving_base=serving_base, model_name=model_name,
        ).set_display_name("Pusher")
        uncached = [schema, check, evaluate, validate, push]
        if bulk_infer:
            uncached.append(c["bulk_inferrer"](
                pushed_model=push.outputs["pushed_model"], bulk_infer_input=bulk_infer_input, beam_runner=beam_runner,
            ).set_display_name("BulkInferrer"))
        for task in uncached:
            # They depend on what is served (or stored) now, not only on their inputs: never reuse a result.
            task.set_caching_options(False)
        outputs = (
            gen.outputs["corpus_splits"], gen.outputs["example_splits"], vocab.outputs["vocabulary"],
            stats.outputs["statistics"], schema.outputs["schema"], check.outputs["anomalies"], data.outputs["transformed"],
            pretrain.outputs["pretrained_model"], train.outputs["trained_model"],
            evaluate.outputs["evaluation"], evaluate.outputs["blessing"], validate.outputs["infra_blessing"],
            push.outputs["pushed_model"],
        )
        return DistilledOutputs(*outputs, candidate) if distill else Outputs(*outputs)

    # KFP reads the parameters from the signature and passes them by position: a pipeline without
    # the Distiller (BulkInferrer) has no `distill_json` (`bulk_infer_input`) parameter at all (the
    # last ones, left at their defaults).
    signature = inspect.signature(albert_pipeline)
    parameters = [p for p in signature.parameters.values()
                  if (p.name != "distill_json" or distill) and (p.name != "bulk_infer_input" or bulk_infer)]

    names = [p.name for p in parameters]

    def pipeline_function(*args, **kwargs):
        return albert_pipeline(**dict(zip(names, args)), **kwargs)

    pipeline_function.__name__ = pipeline_function.__qualname__ = "albert_pipeline"
    pipeline_function.__signature__ = signature.replace(
        parameters=parameters, return_annotation=DistilledOutputs if distill else Outputs
    )
    return dsl.pipeline(name=PIPELINE_NAME, description="ALBERT: raw text to a pushed, validated SavedModel for TF Serving.")(
        pipeline_function
    )


def compile_pipeline(settings: PipelineSettings, package_path: str, image: str = DEFAULT_IMAGE) -> str:
    """Writes the pipeline YAML for Kubeflow Pipelines / Vertex AI, `settings` as parameter defaults."""
    from kfp import compiler

    arguments = pipeline_arguments(settings)
    arguments.pop("input_fingerprint")
    pipeline = build_pipeline(image, distill=settings.distill_settings().enabled, bulk_infer=bool(settings.bulk_infer_input))
    compiler.Compiler().compile(pipeline, package_path, pipeline_parameters=arguments)
    return package_path


@dataclasses.dataclass
class LocalRun:
    """Where a local run put everything, and what the Evaluator and Pusher decided."""

    artifacts: Dict[str, str]
    evaluation: Dict[str, Any]
    push: Dict[str, Any]
    log_file: str = ""
    data_validation: Dict[str, Any] = dataclasses.field(default_factory=dict)


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_EXECUTING = re.compile(r"Executing task '(?P<task>[^']+)'")
_FINISHED = re.compile(r"Task '(?P<task>[^']+)' finished with status (?P<status>\w+)")
# A step's own warnings (`WARNING: the fine-tuned model collapsed: ...`) reach the terminal; absl's
# and TensorFlow's start otherwise ("WARNING: All log ...", "WARNING:tensorflow:...").
# The ExampleValidator's anomalies of error severity ("ERROR: data validation: ...") reach it too.
_STEP_WARNING = re.compile(r"(WARNING|ERROR): [a-z]")
_INNER_TASK = re.compile(r"Inner task failed: '(?P<task>[^']+)'")


class StepFailed(RuntimeError):
    """A step of a local run failed: `failure` (`failures.StepFailure`: the step, the kind, the
    cause) and `log_file`; the message is the one line the command prints."""

    def __init__(self, failure: "failures.StepFailure", log_file: str):
        super().__init__(failure.line(log_file))
        self.failure, self.log_file = failure, log_file

    @property
    def exit_code(self) -> int:
        return self.failure.exit_code


class KfpOutput(io.TextIOBase):
    """Stands in for `sys.stdout` while kfp.local runs (which prints everything there).

    Everything goes to `log`. In verbose mode everything also goes to `terminal`, unchanged;
    otherwise the terminal gets one line per step (its status and time, or "cached") and the
    steps' own warnings (not TensorFlow's start-up notices). A step that fails shows its status
    line only: `failure` then holds its cause (`failures.StepFailure`), from the marker line its
    component printed or else the last `tail` lines of its log. `cacheable`: the tasks that may
    come from the cache, in run order, all before the others.
    """

    def __init__(self, terminal: TextIO, log: TextIO, verbose: bool = False, tail: int = 200,
                 cacheable: Sequence[str] = ()):
        super().__init__()
        self._terminal, self._log, self._verbose = terminal, log, verbose
        self._cacheable = tuple(cacheable)
        self._pending = ""
        self._task = None
        self._started = 0.0
        self._lines: collections.deque = collections.deque(maxlen=tail)
        self._seen: List[str] = []
        self.failure = None
        self._marked = None

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self._log.write(_ANSI.sub("", text))
        if self._verbose:
            self._terminal.write(text)
            return len(text)
        *lines, self._pending = (self._pending + text).split("\n")
        for line in lines:
            self._line(line)
        return len(text)

    def flush(self) -> None:
        if not self._log.closed:  # also called when garbage-collected, after the log is closed
            self._log.flush()
        self._terminal.flush()

    def _say(self, text: str) -> None:
        self._terminal.write(text + "\n")
        self._terminal.flush()

    def _line(self, line: str) -> None:
        plain = _ANSI.sub("", line)
        started = _EXECUTING.search(plain)
        if started:
            task = started.group("task")
            # kfp.local prints nothing for a cache hit: a cacheable task before this one that did
            # not run came from the cache.
            earlier = self._cacheable[:self._cacheable.index(task)] if task in self._cacheable else self._cacheable
            for name in earlier:
                if name not in self._seen:
                    self._seen.append(name)
                    self._say(f"  {name:<16s} cached")
            self._seen.append(task)
            self._task, self._started = task, time.monotonic()
            self._lines.clear()
            self._marked = None
            return
        finished = _FINISHED.search(plain)
        if finished:
            if finished.group("status") == "SUCCESS":
                self._say(f"  {finished.group('task'):<16s} SUCCESS ({time.monotonic() - self._started:.0f} s)")
                self._task = None
            else:
                self.failed(finished.group("status"))
            return
        if self._task is not None:
            marked = failures.parse_marker(plain)
            if marked:
                self._marked = marked
                return
            self._lines.append(plain)
            if _STEP_WARNING.match(plain.strip()) and not is_startup_notice(plain):
                self._say(f"  {self._task}: {plain.strip()}")

    def failed(self, status: str = "FAILURE") -> None:
        """Records the running step's failure and shows its status line (also to call when
        kfp.local raised)."""
        if self._task is None:
            return
        marked = self._marked or {"kind": failures.INTERNAL, "message": failures.cause_from_log(self._lines)}
        self.failure = failures.StepFailure(self._task, marked["kind"], marked["message"])
        if not self._verbose:
            self._say(f"  {self._task:<16s} {status} ({time.monotonic() - self._started:.0f} s)")
        self._task = None


@contextlib.contextmanager
def kfp_output(log_path: str, verbose: bool = False, cacheable: Sequence[str] = ()) -> Iterator[KfpOutput]:
    """Routes what kfp.local prints in the block through `KfpOutput` (to `log_path` in full)."""
    os.makedirs(os.path.dirname(os.path.abspath(log_path)), exist_ok=True)
    terminal = sys.stdout
    with open(log_path, "w", encoding="utf-8") as log:
        output = KfpOutput(terminal, log, verbose, cacheable=cacheable)
        try:
            with contextlib.redirect_stdout(output):
                yield output
        except BaseException:
            output.failed()
            raise
        finally:
            output.flush()


def run_local(settings: PipelineSettings, pipeline_root: str, cache: bool = True, verbose: bool = False) -> LocalRun:
    """Runs the whole pipeline with `kfp.local` (subprocesses of this interpreter).

    Args:
        settings: The run's settings.
        pipeline_root: Where artifacts, the step cache (`.cache`) and the logs (`logs`) go.
        cache: Reuse the data and training steps of an earlier run with the same inputs.
        verbose: Print all of kfp.local's output (every task's executor input and outputs as
            JSON, its streamed log) instead of one line per step. It is in the log file either way.

    Raises:
        albert_tf.pipeline_steps.preflight.PreflightError: a place it writes cannot be written, or
            an input is missing (checked before any step starts).
        StepFailed: a step failed; its message is one line naming the step, the cause and the
            log file, its `exit_code` says whether the step refused its input or failed inside.
    """
    import tempfile
    import warnings

    from kfp import local

    from albert_tf.pipeline_steps.preflight import check_pipeline
    from albert_tf.pipeline_steps.staging import read_summary

    check_pipeline(settings, pipeline_root)  # one line now, not a traceback after the training
    os.makedirs(pipeline_root, exist_ok=True)
    # kfp.local deletes workspace_root after every run: only ever give it a fresh temporary folder.
    workspace = tempfile.mkdtemp(prefix="albert-kfp-workspace-")
    local.init(
        runner=local.SubprocessRunner(use_venv=False),
        pipeline_root=pipeline_root,
        workspace_root=workspace,
        enable_caching=cache,
        cache_root=os.path.join(pipeline_root, ".cache"),
        raise_on_error=True,
    )
    # Display names are for the Kubeflow/Vertex UI; kfp.local warns that it ignores them.
    warnings.filterwarnings("ignore", message=".*have no effect in the current local runner.*")
    arguments = pipeline_arguments(settings, input_fingerprint(settings))
    stamp = datetime.datetime.now().strftime("%Y-%m-%d-%H-%M-%S-%f")
    log_path = os.path.abspath(os.path.join(pipeline_root, LOG_SUBDIR, f"{PIPELINE_NAME}-{stamp}.log"))
    distill = settings.distill_settings().enabled
    cacheable = CACHED_TASKS + (("distiller",) if distill else ())
    try:
        with kfp_output(log_path, verbose, cacheable=cacheable if cache else ()) as output:
            task = build_pipeline(distill=distill, bulk_infer=bool(settings.bulk_infer_input))(**arguments)
    except RuntimeError as e:
        message = _ANSI.sub("", str(e))
        failure = output.failure
        if failure is None:
            inner = _INNER_TASK.search(message)
            failure = failures.StepFailure(inner.group("task") if inner else PIPELINE_NAME, failures.INTERNAL, message)
        raise StepFailed(failure, log_path) from e
    paths = {name: artifact.path for name, artifact in task.outputs.items()}
    return LocalRun(paths, read_summary(paths["blessing"]), read_summary(paths["pushed_model"]), log_path,
                    read_summary(paths["anomalies"]))
