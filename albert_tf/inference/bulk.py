"""Bulk inference: a large unlabelled set scored by a fine-tuned model on Apache Beam, TFX's
BulkInferrer for albert-tf models.

`bulk_infer(model, inputs, output_dir)` scores the texts of `inputs` (`albert_tf.inference.inputs`:
text files, tables, TFRecords of tf.Examples) with a model directory or a pushed TF Serving version,
on Beam's local FnApiRunner (the DirectRunner, by default) or on Dask (`dask_address`: a running
scheduler; `num_workers`: a `LocalCluster` that the run starts and stops), with the data step's
runners (`albert_tf.data.dask_runner`). It writes into `output_dir`:

    prediction_logs-SSSSS-of-NNNNN.gz   TF Serving `PredictionLog`s, GZIP TFRecords, one per text in
                                        input order (`albert_tf.inference.prediction_logs`)
    answers.jsonl | answers.tsv         with `answers_format`: the records `albert-tf predict` prints
                                        (JSONL), or its `index<TAB>prediction` file (TSV)
    metadata.json                       the model, inputs, counts, shards and files

How it scales and resumes:

* The texts are cut into shards of `shard_size` texts in input order (shard i holds texts
  ``i*shard_size ...``): the same inputs and settings always give the same shards.
* One Beam element per shard. Each worker process loads the model once (the DoFn's `setup`, cached
  per process) and scores a shard length-aware: its texts are scored in the order of their piece
  count (the text models' `predict`), so each batch of `batch_size` is packed to the length of its
  own longest text (`length_bucket`), and short texts do not pay for long ones; the answers go
  back to input order.
* A shard's files are written under temporary names and renamed into place, its answers first and
  its logs last: a shard is complete when its log file exists, and nothing half-written is ever
  taken for complete.
* Everything is written into a staging directory beside the output (``.NAME.bulk-infer-partial``)
  that records the run's fingerprint (model, texts, shard size). A run that was killed leaves it
  behind; the next run with the same fingerprint scores only the shards that are not complete
  (another fingerprint discards it). When every shard is complete, the answers file and
  ``metadata.json`` are assembled and the staging directory becomes `output_dir` by a rename
  (remote: copied up, then removed): the output appears complete or not at all.

Problems with the arguments, the model or the input are one-line `TaskError`s; a failed run is a
one-line `PipelineError` (its staging directory kept for the rerun).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
import os
import re
from typing import Dict, List, Optional, Sequence, Tuple

from albert_tf import file_io
from albert_tf.data import dask_runner
from albert_tf.data.beam_import import Metrics, PipelineOptions, beam
from albert_tf.data.pipeline_output import PipelineError
from albert_tf.errors import describe_error, param
from albert_tf.inference import prediction_logs as logs_lib
from albert_tf.inference.inputs import InputText, read_inputs
from albert_tf.tasks.errors import TaskError
from albert_tf.tasks.spec import TASK_FILE, TaskSpec

logger = logging.getLogger(__name__)

METRICS_NAMESPACE = "albert_tf.bulk_inference"
LOGS_PREFIX = "prediction_logs"
LOGS_SUFFIX = ".gz"
ANSWERS_PREFIX = "answers"
ANSWER_FORMATS = ("jsonl", "tsv")
METADATA_FILE = "metadata.json"
RUN_FILE = "run.json"
STAGING_SUFFIX = ".bulk-infer-partial"
FORMAT_NAME = "albert-bulk-inference"
DEFAULT_SHARD_SIZE = 1024
DEFAULT_BATCH_SIZE = 32
SUPPORTED_KINDS = ("classification", "regression")


def shard_name(prefix: str, index: int, count: int, suffix: str) -> str:
    return f"{prefix}-{index:05d}-of-{count:05d}{suffix}"


def _piece_name(index: int, count: int) -> str:
    """A shard's answers (JSON lines of guid and record), assembled into the answers file at the end."""
    return shard_name(f"{ANSWERS_PREFIX}-part", index, count, ".jsonl")


def _gfile():
    import tensorflow as tf

    return tf.io.gfile


def _join(directory: str, name: str) -> str:
    return f"{directory.rstrip('/')}/{name}" if file_io.is_remote(directory) else os.path.join(directory, name)


def staging_dir(output_dir: str) -> str:
    """Where a run into `output_dir` builds its output: ``.NAME.bulk-infer-partial`` beside it (on
    its filesystem, where the workers write), the same for every run, so a rerun finds it."""
    output_dir = output_dir.rstrip("/") or output_dir
    if file_io.is_remote(output_dir):
        parent, _, name = output_dir.rpartition("/")
    else:
        parent, name = os.path.split(os.path.abspath(output_dir))
    return _join(parent, f".{name}{STAGING_SUFFIX}")


# --- the model ------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ModelInfo:
    """What the driver knows of the model without loading it: path, `task.json` and served name."""

    path: str
    spec: TaskSpec
    served: logs_lib.ServedModel

    @property
    def kind(self) -> str:
        return self.spec.kind


def model_info(path: str) -> ModelInfo:
    """The model directory or pushed version at `path`, checked for bulk inference.

    Raises:
        TaskError: No model there, or a task bulk inference does not score (only single-text
            classifiers and regressors).
    """
    from albert_tf.tasks.classification.family import ClassificationFamily
    from albert_tf.weight_index import is_export

    if not os.path.isdir(path):
        raise TaskError(f"{param('model')} not found: {path}")
    if is_export(path):
        spec = TaskSpec.from_file(os.path.join(path, "assets", TASK_FILE), path)
    else:
        spec = TaskSpec.read(path)
    if spec.kind not in SUPPORTED_KINDS:
        raise TaskError(f"bulk inference scores classifiers and regressors; {path} is a {spec.kind} model")
    if ClassificationFamily.is_pair(spec):
        raise TaskError(f"{path} reads text pairs; bulk inference scores single texts")
    signature = logs_lib.CLASSIFY_SIGNATURE if spec.kind == "classification" else logs_lib.REGRESS_SIGNATURE
    return ModelInfo(os.path.abspath(path), spec, logs_lib.ServedModel.of_path(path, signature))


# One loaded model per worker process, whatever the number of bundles or DoFn copies.
_MODELS: Dict[str, object] = {}


def load_scoring_model(path: str, kind: str, threads: Optional[int] = None):
    """The raw-text model at `path`, loaded once per process (`threads`: TensorFlow's intra-op
    threads, set before the first model of a process where TensorFlow still allows it)."""
    if path not in _MODELS:
        import tensorflow as tf

        from albert_tf.tasks.family import text_model_class

        if threads:
            try:
                tf.config.threading.set_intra_op_parallelism_threads(threads)
                tf.config.threading.set_inter_op_parallelism_threads(threads)
            except RuntimeError:
                pass  # TensorFlow already ran something in this process: its pools stay as they are
        _MODELS[path] = text_model_class(kind).from_pretrained(path, compile=False)
    return _MODELS[path]


def score_texts(model, texts: Sequence[str], batch_size: int):
    """The model's raw outputs (logits `[n, classes]` or predictions `[n]`) for `texts`, in their order.

    Length-aware: the text models' `predict` scores the texts in the order of their piece count
    (`AlbertTextTask.length_order`), so that each batch holds texts of similar length and is
    packed to its own longest text (`length_bucket`), and returns the outputs in input order.
    """
    import numpy as np

    return np.asarray(model.predict(np.array(list(texts), dtype=object), batch_size=batch_size, verbose=0))


# --- one shard ------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Job:
    """What a worker needs to score shards (picklable: it travels to the workers)."""

    model: ModelInfo
    staging: str
    num_shards: int
    batch_size: int
    threads: Optional[int] = None


def score_shard(job: _Job, model, index: int, texts: List[InputText]) -> Tuple[int, int]:
    """Scores shard `index` and writes its answers, then its logs, each atomically; returns
    `(index, texts scored)`."""
    from albert_tf.tasks.classification.family import ClassificationFamily

    spec = job.model.spec
    scores = score_texts(model, [t.text for t in texts], job.batch_size)
    records = ClassificationFamily.records_from_scores(spec, scores)
    piece = _join(job.staging, _piece_name(index, job.num_shards))
    with file_io.atomic_output(piece) as tmp:
        with _gfile().GFile(tmp, "w") as f:
            for text, record in zip(texts, records):
                f.write(json.dumps({"guid": text.guid, "record": record}, ensure_ascii=False, sort_keys=True) + "\n")
    if spec.kind == "classification":
        logs = (logs_lib.classify_log(t.text, spec.labels, [r["probabilities"][name] for name in spec.labels], job.model.served)
                for t, r in zip(texts, records))
    else:
        logs = (logs_lib.regress_log(t.text, r["prediction"], job.model.served) for t, r in zip(texts, records))
    with file_io.atomic_output(_join(job.staging, shard_name(LOGS_PREFIX, index, job.num_shards, LOGS_SUFFIX))) as tmp:
        logs_lib.write_prediction_logs(tmp, logs)
    logger.info("scored shard %d of %d (%d texts)", index + 1, job.num_shards, len(texts))
    return index, len(texts)


class _ScoreShards(beam.DoFn):
    """(shard index, texts) -> (shard index, texts scored), the shard's files written."""

    def __init__(self, job: _Job):
        self._job = job
        self._model = None

    def setup(self):
        self._model = load_scoring_model(self._job.model.path, self._job.model.kind, self._job.threads)

    def process(self, element):
        index, texts = element
        done = score_shard(self._job, self._model, index, texts)
        Metrics.counter(METRICS_NAMESPACE, "shards_scored").inc()
        Metrics.counter(METRICS_NAMESPACE, "texts_scored").inc(done[1])
        yield done


# --- the run ----------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class BulkInferenceSummary:
    """What a run did.

    Attributes:
        output_dir: The published output directory.
        files: Its `PredictionLog` shards, in order.
        answers: The answers file, if one was asked for.
        num_texts: Texts scored in all (this run and the runs it resumed).
        num_shards: Shards in all.
        shards_scored: The shards this run scored (the others were complete already).
        texts_scored: The texts this run scored.
    """

    output_dir: str
    files: List[str]
    answers: Optional[str]
    num_texts: int
    num_shards: int
    shards_scored: List[int]
    texts_scored: int


def _fingerprint(model: ModelInfo, texts: Sequence[InputText], shard_size: int) -> str:
    """A hash of what decides the shards' contents: the model, the texts and the shard size."""
    digest = hashlib.sha256()
    digest.update(json.dumps([model.path, shard_size]).encode("utf-8"))
    for name in (TASK_FILE, os.path.join("assets", TASK_FILE)):
        path = os.path.join(model.path, name)
        if os.path.isfile(path):
            with open(path, "rb") as f:
                digest.update(f.read())
    for name in ("model.keras", "saved_model.pb"):
        path = os.path.join(model.path, name)
        if os.path.isfile(path):
            stat = os.stat(path)
            digest.update(f"{name}:{stat.st_size}:{stat.st_mtime_ns}".encode("ascii"))
    for text in texts:
        digest.update(text.guid.encode("utf-8") + b"\x00" + text.text.encode("utf-8") + b"\x01")
    return digest.hexdigest()


_TEMPORARY = re.compile(r"^\..*\.tmp-[0-9a-f]+")


def _recorded_fingerprint(staging: str) -> Optional[str]:
    """The fingerprint `staging` records: in its run file, or once assembled in its metadata."""
    gfile = _gfile()
    for name in (RUN_FILE, METADATA_FILE):
        path = _join(staging, name)
        if gfile.exists(path):
            with gfile.GFile(path, "r") as f:
                try:
                    return json.loads(f.read()).get("fingerprint")
                except ValueError:
                    return None
    return None


def _prepare_staging(staging: str, fingerprint: str, num_shards: int, shard_size: int) -> None:
    """Makes `staging` ready: kept when it is this run's (its temporary files removed), else new."""
    gfile = _gfile()
    run_file = _join(staging, RUN_FILE)
    if gfile.exists(staging):
        if _recorded_fingerprint(staging) == fingerprint:
            for name in gfile.listdir(staging):
                if _TEMPORARY.match(name.rstrip("/")):
                    gfile.remove(_join(staging, name.rstrip("/")))
            return
        logger.warning("discarding %s: a partial run of another model, input or shard size", staging)
        gfile.rmtree(staging)
    gfile.makedirs(staging)
    record = {"fingerprint": fingerprint, "num_shards": num_shards, "shard_size": shard_size}
    with file_io.atomic_output(run_file) as tmp:
        with gfile.GFile(tmp, "w") as f:
            f.write(json.dumps(record) + "\n")


def complete_shards(staging: str, num_shards: int) -> List[int]:
    """The shards whose log file is in `staging` (renamed there last: the shard is complete)."""
    gfile = _gfile()
    names = set(n.rstrip("/") for n in gfile.listdir(staging)) if gfile.exists(staging) else set()
    return [i for i in range(num_shards) if shard_name(LOGS_PREFIX, i, num_shards, LOGS_SUFFIX) in names]


def _use_dask(runner, dask_address: Optional[str], num_workers: Optional[int]) -> bool:
    if num_workers is not None and num_workers < 1:
        raise TaskError(f"{param('num_workers')} must be at least 1, got {num_workers}")
    if runner is None or runner in ("DirectRunner", "FnApiRunner"):
        return bool(dask_address or num_workers)
    if dask_runner.is_dask_runner(runner):
        return True
    if dask_address or num_workers:
        raise TaskError(f"{param('dask_address')} and {param('num_workers')} are for Dask, not runner {runner!r}")
    return False


def _run_pipeline(job: _Job, elements: List[Tuple[int, List[InputText]]], runner, dask_address: Optional[str],
                  num_workers: Optional[int], dask: bool) -> Tuple[int, int]:
    """Scores `elements` (shard index, texts); returns `(shards, texts)` the workers scored."""
    if dask:
        with dask_runner.dask_cluster(dask_address, num_workers) as (scheduler, workers):
            if not dask_address:
                # A cluster of this machine: its cores shared out among the worker processes.
                job = dataclasses.replace(job, threads=max(1, (os.cpu_count() or 1) // max(1, workers)))
            from apache_beam.runners.dask.dask_runner import DaskRunner

            options = PipelineOptions([f"--dask_client_address={scheduler}", f"--dask_npartitions={len(elements)}"])
            pipeline = beam.Pipeline(runner=DaskRunner(), options=options)
            _ = pipeline | "Shards" >> beam.Create(elements) | "Score" >> beam.ParDo(_ScoreShards(job))
            # DaskRunner has no metrics: the counts come back as the last step's elements.
            done = dask_runner.run_on_dask(pipeline)
        return len(done), sum(count for _, count in done)
    from apache_beam.metrics.metric import MetricsFilter

    pipeline = beam.Pipeline(runner=dask_runner.make_runner(runner), options=PipelineOptions([]))
    shards = pipeline | "Shards" >> beam.Create(elements)
    if runner not in (None, "DirectRunner", "FnApiRunner"):
        shards = shards | "Spread" >> beam.Reshuffle()
    _ = shards | "Score" >> beam.ParDo(_ScoreShards(job))
    result = pipeline.run()
    result.wait_until_finish()
    counts = {}
    for counter in result.metrics().query(MetricsFilter().with_namespace(METRICS_NAMESPACE))["counters"]:
        value = counter.committed if counter.committed is not None else counter.attempted
        counts[counter.key.metric.name] = counts.get(counter.key.metric.name, 0) + int(value or 0)
    return counts.get("shards_scored", 0), counts.get("texts_scored", 0)


def _assemble(job: _Job, shard_size: int, answers_format: Optional[str], family) -> Optional[str]:
    """Writes the answers file from the shards' pieces (in input order); returns its name."""
    if answers_format is None:
        return None
    gfile = _gfile()
    name = f"{ANSWERS_PREFIX}.{answers_format}"
    with file_io.atomic_output(_join(job.staging, name)) as tmp:
        with gfile.GFile(tmp, "w") as out:
            if answers_format == "tsv":
                out.write("index\tprediction\n")
            for index in range(job.num_shards):
                with gfile.GFile(_join(job.staging, _piece_name(index, job.num_shards)), "r") as f:
                    for offset, line in enumerate(f):
                        entry = json.loads(line)
                        if answers_format == "jsonl":
                            out.write(json.dumps(entry["record"], ensure_ascii=False, sort_keys=True) + "\n")
                        else:
                            text = InputText("", entry["guid"])
                            guid, value = family.prediction_row(job.model.spec, index * shard_size + offset, text,
                                                                entry["record"])
                            out.write(f"{guid}\t{value}\n")
    return name


def bulk_infer(
    model: str,
    inputs: Sequence[str],
    output_dir: str,
    *,
    runner=None,
    dask_address: Optional[str] = None,
    num_workers: Optional[int] = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    text_column: Optional[str] = None,
    answers_format: Optional[str] = None,
    shard_size: int = DEFAULT_SHARD_SIZE,
    overwrite: bool = False,
) -> BulkInferenceSummary:
    """Scores every text of `inputs` with `model`; writes `PredictionLog`s (and answers) to `output_dir`.

    Args:
        model: A fine-tuned model directory (`albert-tf finetune`, the pipeline's Trainer) or an
            export / pushed TF Serving version (`<base>/<name>/<version>`) of a single-text
            classifier or regressor.
        inputs: Input files (globs expand): `.txt` (one text per line), `.tsv` / `.csv` /
            `.jsonl` tables (the model's text column, or `text_column`), `.tfrecord[.gz]` files of
            tf.Examples with a bytes feature `text`.
        output_dir: The output directory (see the module docstring); it must not exist or be
            empty, unless `overwrite`.
        runner: None / "DirectRunner" (Beam's local FnApiRunner, in this process), "dask"
            (Beam's DaskRunner), or another Beam runner name or object.
        dask_address: A running Dask scheduler (``tcp://host:8786``): its workers must import
            albert_tf and read the model and inputs and write beside `output_dir`.
        num_workers: Without `dask_address`: the worker processes of a local Dask cluster started
            and stopped for the run (default with ``runner="dask"``: one per CPU).
        batch_size: Texts per model call.
        text_column: The tables' text column (default the model's own, as `albert-tf predict`).
        answers_format: None, "jsonl" (the records `albert-tf predict` prints) or "tsv" (its
            `index<TAB>prediction` file).
        shard_size: Texts per shard (the unit of work, of output files and of resumption).
        overwrite: Replace an existing non-empty `output_dir`.

    Raises:
        TaskError: Bad arguments, model or input (one line, naming file and line where it can).
        PipelineError: The run failed; its complete shards are kept for the next run.
    """
    if batch_size < 1:
        raise TaskError(f"{param('batch_size')} must be >= 1, got {batch_size}")
    if shard_size < 1:
        raise TaskError(f"{param('shard_size')} must be >= 1, got {shard_size}")
    if answers_format is not None and answers_format not in ANSWER_FORMATS:
        raise TaskError(f"{param('answers_format')} must be one of {', '.join(ANSWER_FORMATS)}, got {answers_format!r}")
    dask = _use_dask(runner, dask_address, num_workers)
    from albert_tf.tasks.family import task_family

    info = model_info(model)
    family = task_family(info.spec)
    output_dir = output_dir.rstrip("/") or output_dir
    gfile = _gfile()
    if gfile.exists(output_dir) and not overwrite and (not gfile.isdir(output_dir) or gfile.listdir(output_dir)):
        raise TaskError(f"{param('output_dir')} {output_dir} exists and is not empty (pass {param('overwrite', True)})")
    texts = read_inputs(list(inputs), info.spec, family, text_column)
    num_shards = math.ceil(len(texts) / shard_size)
    staging = staging_dir(output_dir)
    fingerprint = _fingerprint(info, texts, shard_size)
    _prepare_staging(staging, fingerprint, num_shards, shard_size)
    job = _Job(info, staging, num_shards, batch_size)
    complete = set(complete_shards(staging, num_shards))
    pending = [i for i in range(num_shards) if i not in complete]
    logger.info("bulk inference: %d texts in %d shards; %d complete already, scoring %d",
                len(texts), num_shards, len(complete), len(pending))
    texts_scored = 0
    if pending:
        elements = [(i, texts[i * shard_size:(i + 1) * shard_size]) for i in pending]
        try:
            _, texts_scored = _run_pipeline(job, elements, runner, dask_address, num_workers, dask)
        except (TaskError, PipelineError):
            raise
        except Exception as e:  # noqa: BLE001 - Beam and Dask wrap worker errors in assorted types
            logger.debug("bulk inference failed", exc_info=e)
            done = len(complete_shards(staging, num_shards))
            raise PipelineError(
                f"bulk inference failed ({done} of {num_shards} shards complete, kept for the next run): {describe_error(e)}"
            ) from e
    missing = sorted(set(range(num_shards)) - set(complete_shards(staging, num_shards)))
    if missing:
        raise PipelineError(f"bulk inference left {len(missing)} of {num_shards} shards unscored (first: shard {missing[0]})")
    files = [shard_name(LOGS_PREFIX, i, num_shards, LOGS_SUFFIX) for i in range(num_shards)]
    metadata_path = _join(staging, METADATA_FILE)
    if gfile.exists(metadata_path):
        # Assembled by a run killed before it published: the pieces may be gone already.
        with gfile.GFile(metadata_path, "r") as f:
            assembled = json.loads(f.read())
        if assembled.get("answers_format") != answers_format:
            gfile.rmtree(staging)
            raise PipelineError(f"{staging} held a finished run with other answers; it is removed: run again")
        answers = assembled.get("answers")
    else:
        answers = _assemble(job, shard_size, answers_format, family)
        _write_metadata(metadata_path, info, inputs, texts, shard_size, files, answers, answers_format, fingerprint)
    for index in range(num_shards):
        piece = _join(staging, _piece_name(index, num_shards))
        if gfile.exists(piece):
            gfile.remove(piece)
    if gfile.exists(_join(staging, RUN_FILE)):
        gfile.remove(_join(staging, RUN_FILE))
    file_io.publish_directory(staging, output_dir, overwrite=overwrite)
    return BulkInferenceSummary(
        output_dir, [_join(output_dir, f) for f in files], _join(output_dir, answers) if answers else None,
        len(texts), num_shards, pending, texts_scored,
    )


def _write_metadata(path: str, info: ModelInfo, inputs: Sequence[str], texts: Sequence[InputText], shard_size: int,
                    files: List[str], answers: Optional[str], answers_format: Optional[str], fingerprint: str) -> None:
    metadata = {
        "format": FORMAT_NAME,
        "model": info.path,
        "kind": info.kind,
        "labels": info.spec.labels,
        "prediction_log": "classify_log" if info.kind == "classification" else "regress_log",
        "model_spec": dataclasses.asdict(info.served),
        "inputs": [os.path.abspath(p) if "://" not in p else p for p in inputs],
        "num_texts": len(texts),
        "shard_size": shard_size,
        "num_shards": len(files),
        "files": files,
        "answers": answers,
        "answers_format": answers_format,
        "fingerprint": fingerprint,
    }
    with file_io.atomic_output(path) as tmp:
        with _gfile().GFile(tmp, "w") as f:
            f.write(json.dumps(metadata, indent=2) + "\n")
