"""The Apache Beam pipeline that writes ALBERT pretraining TFRecords (SOP + n-gram masked LM).

The same pipeline runs locally on Beam's FnApiRunner (``--runner DirectRunner``: in-memory or
with worker processes) and on Dataflow, Flink or Spark through ordinary pipeline options. Stages:

1. ``ReadDocuments``: each input file (one element per file) is parsed into documents
   (:mod:`albert_tf.data.documents`), control characters cleaned out as the original BERT text
   cleaning does (counted: ``cleaned_characters``, ``cleaned_files``). An unreadable file (invalid
   UTF-8, binary, empty) fails the run with the file and line, or with ``on_error="skip"`` is left
   out and reported (``skipped_files``, names in ``metadata.json``).
2. ``Tokenize``: documents are batched (``beam.BatchElements``) and tokenized by a tokenizer that
   each worker loads once in ``DoFn.setup``; documents that tokenize to nothing are dropped, as the
   original drops empty documents.
3. ``Number``: every document gets its index among all documents: input files in sorted path
   order, documents in file order (a small per-file count side input makes this order-free).
4. ``Pair``: for every dupe ``d`` in ``range(dupe_factor)`` the document is cut into segment pairs
   and finished (truncated, masked, serialized) with the seeds documented in
   :mod:`albert_tf.data.pretraining_instances`: ``derive_seed(seed, PAIRING, index, d)`` and
   ``derive_seed(seed, FINISHING, index, d, k)``. A single-sentence chunk needs segment B from a
   random other document of the whole corpus, exactly as the original; such pairs go to
5. ``RandomNext``: a ``CoGroupByKey`` of those requests with the documents they name, which takes B
   there and finishes the instance with the same seeds.
6. ``Write``: ``WriteToTFRecord`` shards into a temporary directory beside the output; only when the
   run succeeds are the shards moved into the output directory, with ``metadata.json`` (the
   settings, vocabulary ids and counts) written last. A failed run leaves no output.

Because every random draw depends only on (seed, document index, dupe, instance), the set of
records is the same for any runner, worker count, bundle split or shard count, and equals what
:func:`albert_tf.data.pretraining_instances.create_training_instances` yields in memory. (Their
order across shards is the runner's.) Memory per worker is one document plus its random-next
requests; on the local runner the tokenized corpus is held compactly (int32 ids) between stages,
never the ``dupe_factor`` copies of instances, which stream to the shard files.
"""

from __future__ import annotations

import bisect
import contextlib
import dataclasses
import json
import logging
import os
import re
import uuid
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union


class _DropMessage(logging.Filter):
    """Drops log records whose message starts with a given text."""

    def __init__(self, prefix: str):
        super().__init__()
        self._prefix = prefix

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(self._prefix)


# Importing Beam without Google's apitools logs "apitools not found, and bigquery client libraries
# are not available ..." on every run; GCS and BigQuery are not what a local run needs. Only that
# record is dropped, only during the import; every other message passes.
_APITOOLS_FILTER = _DropMessage("apitools not found")
logging.getLogger().addFilter(_APITOOLS_FILTER)
try:
    import apache_beam as beam
    from apache_beam.io.filesystems import FileSystems
    from apache_beam.metrics import Metrics
    from apache_beam.options.pipeline_options import PipelineOptions
finally:
    logging.getLogger().removeFilter(_APITOOLS_FILTER)

from albert_tf.data import pretraining_instances as instances_lib  # noqa: E402 - after Beam, see above
from albert_tf.data.documents import (  # noqa: E402
    INPUT_FORMATS,
    MalformedInputError,
    check_readable,
    read_documents,
)
from albert_tf.data.pretraining_instances import InstanceConfig, TokenizedDocument, VocabInfo  # noqa: E402
from albert_tf.data.tfrecords import feature_shapes, serialize_instance  # noqa: E402
from albert_tf.tokenization import _files  # noqa: E402
from albert_tf.tokenization._files import CleaningStats  # noqa: E402

logger = logging.getLogger(__name__)

METADATA_FILE = "metadata.json"
SHARD_PREFIX = "part"
SHARD_SUFFIX = ".tfrecord"
METRICS_NAMESPACE = "albert_tf.pretraining_data"
FORMAT_NAME = "albert-pretraining-tfrecord"


class PipelineError(RuntimeError):
    """The pipeline could not produce output; no output directory was written."""


@dataclasses.dataclass(frozen=True)
class TokenizerSpec:
    """A picklable recipe for the tokenizer, loaded on each Beam worker in ``DoFn.setup``.

    Exactly one of `spm_model` (ALBERT's SentencePiece model) and `vocab_file` (a WordPiece
    ``vocab.txt``, as the Chinese ALBERT models use) is given.
    """

    spm_model: Optional[str] = None
    vocab_file: Optional[str] = None
    lower_case: bool = True

    def __post_init__(self):
        if (self.spm_model is None) == (self.vocab_file is None):
            raise ValueError("give exactly one of spm_model and vocab_file")

    @property
    def piece_style(self) -> str:
        return "sentencepiece" if self.spm_model else "wordpiece"

    def __call__(self):
        from albert_tf.tokenization.tokenizers import SentencePieceTokenizer, WordPieceTokenizer

        if self.spm_model:
            return SentencePieceTokenizer(self.spm_model, lower_case=self.lower_case)
        return WordPieceTokenizer(self.vocab_file, lower_case=self.lower_case)


@dataclasses.dataclass(frozen=True)
class PipelineConfig:
    """Everything the pipeline computes from, besides the input and output paths.

    Attributes:
        instance: lengths, probabilities and masking settings.
        tokenizer: a picklable zero-argument callable returning a tokenizer (e.g. `TokenizerSpec`).
        piece_style: ``"sentencepiece"`` or ``"wordpiece"`` word-start rule; None guesses from the
            vocabulary.
        dupe_factor: copies of every document, each paired and masked anew (original default 40).
        seed: the run seed; see the module docstring for what it seeds.
        input_format: ``"sentences"`` or ``"paragraphs"`` (see :mod:`albert_tf.data.documents`).
        num_shards: output files; 0 lets the runner choose.
        max_tokenize_batch: the largest batch of documents per tokenizer call.
        on_error: an unreadable input file (invalid UTF-8, binary, empty): ``"raise"`` fails the
            run naming file and line; ``"skip"`` leaves the whole file out and reports it (each
            file is then read twice, once to check it).
    """

    instance: InstanceConfig
    tokenizer: Callable[[], object]
    piece_style: Optional[str] = None
    dupe_factor: int = 40
    seed: int = 12345
    input_format: str = "sentences"
    num_shards: int = 0
    max_tokenize_batch: int = 64
    on_error: str = "raise"

    def __post_init__(self):
        if self.dupe_factor < 1:
            raise ValueError(f"dupe_factor must be at least 1, got {self.dupe_factor}")
        if self.num_shards < 0:
            raise ValueError(f"num_shards must be >= 0, got {self.num_shards}")
        if self.input_format not in INPUT_FORMATS:
            raise ValueError(f"input_format must be one of {INPUT_FORMATS}, got {self.input_format!r}")
        if self.max_tokenize_batch < 1:
            raise ValueError(f"max_tokenize_batch must be positive, got {self.max_tokenize_batch}")
        _files.check_on_error(self.on_error)


def _counter(name: str):
    return Metrics.counter(METRICS_NAMESPACE, name)


# String-set metrics that bring file names back to the driver (JSON lists, see `_ReadDocuments`);
# Beam keeps up to a million characters of each, thousands of names.
SKIPPED_FILES = "skipped_files"
CLEANED_FILES = "cleaned_files"


class _ReadDocuments(beam.DoFn):
    """(file index, path) -> ((file index, document index), Document) for every document.

    Counts the cleaned characters; with on_error="skip" an unreadable file yields nothing and
    goes into the ``skipped_files`` string set as ``[path, problem]``.
    """

    def __init__(self, input_format: str, on_error: str = "raise"):
        self._input_format = input_format
        self._on_error = on_error
        self._documents = _counter("documents")
        self._single = _counter("single_sentence_documents")
        self._files = _counter("files")
        self._cleaned_characters = _counter("cleaned_characters")
        self._cleaned_files = _counter("cleaned_files")
        self._skipped = _counter(SKIPPED_FILES)
        self._cleaned_names = Metrics.string_set(METRICS_NAMESPACE, CLEANED_FILES)
        self._skipped_names = Metrics.string_set(METRICS_NAMESPACE, SKIPPED_FILES)

    def process(self, element):
        file_index, path = element
        cleaning = CleaningStats()
        emitted = 0
        try:
            if self._on_error == "skip":
                # A file is skipped whole: check it before its first document goes out.
                check_readable(path, opener=FileSystems.open)
            documents = read_documents(path, self._input_format, opener=FileSystems.open, cleaning=cleaning)
            for doc_index, document in enumerate(documents):
                self._documents.inc()
                if len(document.sentences) == 1:
                    self._single.inc()
                emitted += 1
                yield (file_index, doc_index), document
        except MalformedInputError as e:
            # Only an error before any output can skip the file (an empty file, or one that
            # changed since the check); otherwise the run has already used part of it.
            if self._on_error == "raise" or emitted:
                raise
            logger.info("skipping %s", e)
            self._skipped.inc()
            self._skipped_names.add(json.dumps([path, str(e)]))
            return
        self._files.inc()
        if cleaning.characters:
            self._cleaned_characters.inc(cleaning.characters)
            self._cleaned_files.inc()
            self._cleaned_names.add(json.dumps([path, cleaning.characters]))


class _Tokenize(beam.DoFn):
    """Batches of ((file, doc), Document) -> ((file, doc), TokenizedDocument); empty ones tagged 'dropped'."""

    DROPPED = "dropped"

    def __init__(self, tokenizer_factory: Callable[[], object]):
        self._factory = tokenizer_factory
        self._tokenize = None
        self._dropped = _counter("documents_without_tokens")

    def setup(self):
        self._tokenize = instances_lib.DocumentTokenizer(self._factory())

    def process(self, batch):
        for key, document in batch:
            tokenized = self._tokenize(document)
            if len(tokenized) == 0:
                self._dropped.inc()
                yield beam.pvalue.TaggedOutput(self.DROPPED, key)
            else:
                yield key, tokenized


class _Numbering(beam.CombineFn):
    """(file, doc, kept) for every parsed document -> how to number the kept ones.

    The result is ``{"offsets": {file: index of its first kept document}, "dropped": {file:
    sorted doc indices without tokens}, "total": kept documents}``; small (per file), so it travels
    as a side input.
    """

    def create_accumulator(self):
        return {}

    def add_input(self, accumulator, element):
        file_index, doc_index, kept = element
        counts = accumulator.setdefault(file_index, [0, []])
        if kept:
            counts[0] += 1
        else:
            counts[1].append(doc_index)
        return accumulator

    def merge_accumulators(self, accumulators):
        merged = {}
        for accumulator in accumulators:
            for file_index, (kept, dropped) in accumulator.items():
                counts = merged.setdefault(file_index, [0, []])
                counts[0] += kept
                counts[1].extend(dropped)
        return merged

    def extract_output(self, accumulator):
        offsets, total = {}, 0
        for file_index in sorted(accumulator):
            offsets[file_index] = total
            total += accumulator[file_index][0]
        dropped = {f: sorted(d) for f, (_, d) in accumulator.items() if d}
        return {"offsets": offsets, "dropped": dropped, "total": total}


def _document_index(element, numbering):
    """((file, doc), document) -> (index among all kept documents, document)."""
    (file_index, doc_index), document = element
    skipped = bisect.bisect_left(numbering["dropped"].get(file_index, ()), doc_index)
    return numbering["offsets"][file_index] + doc_index - skipped, document


class _Pair(beam.DoFn):
    """(index, document) -> serialized instances; random-next pairs tagged 'requests' for the join."""

    REQUESTS = "requests"

    def __init__(self, config: PipelineConfig, vocab: VocabInfo):
        self._instance = config.instance
        self._seed = config.seed
        self._dupe_factor = config.dupe_factor
        self._vocab = vocab
        self._instances = _counter("instances")

    def process(self, element, num_documents: int):
        index, document = element
        cfg, seed, vocab = self._instance, self._seed, self._vocab
        for dupe in range(self._dupe_factor):
            for k, pair in enumerate(instances_lib.document_pairs(document, index, dupe, num_documents, cfg, seed)):
                if pair.random_next is not None:
                    target = pair.random_next.document_index
                    yield beam.pvalue.TaggedOutput(self.REQUESTS, (target, (index, dupe, k, pair)))
                    continue
                rng = instances_lib.finishing_rng(seed, index, dupe, k)
                instance = instances_lib.finish_instance(pair, cfg, vocab, rng)
                self._instances.inc()
                yield serialize_instance(instance, cfg.max_seq_length, cfg.max_predictions_per_seq)


class _FinishRandomNext(beam.DoFn):
    """(index, {'document': [doc], 'requests': [...]}) -> serialized random-next instances."""

    def __init__(self, config: PipelineConfig, vocab: VocabInfo):
        self._instance = config.instance
        self._seed = config.seed
        self._vocab = vocab
        self._instances = _counter("instances")
        self._random_next = _counter("random_next_instances")

    def process(self, element):
        index, grouped = element
        documents = list(grouped["document"])
        if len(documents) != 1:
            raise AssertionError(f"document index {index} has {len(documents)} documents; numbering is broken")
        document: TokenizedDocument = documents[0]
        cfg, seed, vocab = self._instance, self._seed, self._vocab
        for source_index, dupe, k, pair in grouped["requests"]:
            tokens_b = instances_lib.resolve_random_next(document, pair.random_next)
            rng = instances_lib.finishing_rng(seed, source_index, dupe, k)
            instance = instances_lib.finish_instance(pair, cfg, vocab, rng, tokens_b)
            self._instances.inc()
            self._random_next.inc()
            yield serialize_instance(instance, cfg.max_seq_length, cfg.max_predictions_per_seq)


def build_pipeline(
    pipeline: beam.Pipeline,
    input_files: Sequence[str],
    output_prefix: str,
    config: PipelineConfig,
    vocab: VocabInfo,
):
    """Adds the transforms to `pipeline`: read, tokenize, number, pair, join, write.

    Args:
        pipeline: the pipeline to extend.
        input_files: the input files, in the order that numbers documents (sorted paths).
        output_prefix: the shard path prefix (``.../part``).
        config: the pipeline settings.
        vocab: the vocabulary info (special ids, word starts), computed once at construction.

    Returns:
        The ``WriteToTFRecord`` result (the written file names).
    """
    files = (
        pipeline
        | "InputFiles" >> beam.Create(list(enumerate(input_files)))
        # One file per element, spread over workers before the expensive reads.
        | "SpreadFiles" >> beam.Reshuffle()
    )
    documents = files | "ReadDocuments" >> beam.ParDo(_ReadDocuments(config.input_format, config.on_error))
    tokenized = (
        documents
        | "BatchDocuments" >> beam.BatchElements(min_batch_size=1, max_batch_size=config.max_tokenize_batch)
        | "Tokenize" >> beam.ParDo(_Tokenize(config.tokenizer)).with_outputs(_Tokenize.DROPPED, main="kept")
    )
    kept = tokenized.kept
    numbering = (
        (
            kept | "KeptKey" >> beam.Map(lambda kv: (kv[0][0], kv[0][1], True)),
            tokenized[_Tokenize.DROPPED] | "DroppedKey" >> beam.Map(lambda key: (key[0], key[1], False)),
        )
        | "AllDocuments" >> beam.Flatten()
        | "Numbering" >> beam.CombineGlobally(_Numbering())
    )
    num_documents = numbering | "NumDocuments" >> beam.Map(lambda n: n["total"])
    numbered = kept | "Number" >> beam.Map(_document_index, numbering=beam.pvalue.AsSingleton(numbering))
    paired = numbered | "Pair" >> beam.ParDo(
        _Pair(config, vocab), num_documents=beam.pvalue.AsSingleton(num_documents)
    ).with_outputs(_Pair.REQUESTS, main="instances")
    random_next = (
        {"document": numbered, "requests": paired[_Pair.REQUESTS]}
        | "JoinRandomNext" >> beam.CoGroupByKey()
        | "RandomNext" >> beam.ParDo(_FinishRandomNext(config, vocab))
    )
    return (
        (paired.instances, random_next)
        | "AllInstances" >> beam.Flatten()
        | "Write"
        >> beam.io.WriteToTFRecord(
            output_prefix,
            file_name_suffix=SHARD_SUFFIX,
            num_shards=config.num_shards,
            shard_name_template="-SSSSS-of-NNNNN",
        )
    )


def _directory_pattern(path: str) -> Optional[str]:
    """``path/*.txt`` when `path` (no glob) names a directory, as ``train-tokenizer`` reads it."""
    if re.search(r"[*?\[]", path):
        return None
    if "://" not in path:
        return os.path.join(path, _files.DIRECTORY_PATTERN) if os.path.isdir(path) else None
    # Object stores have no directories: a name ending in "/" is one, and so is a name that is
    # no object but has `*.txt` objects under it.
    candidate = path.rstrip("/") + "/" + _files.DIRECTORY_PATTERN
    if path.endswith("/"):
        return candidate
    if FileSystems.match([path])[0].metadata_list:
        return None
    return candidate if FileSystems.match([candidate])[0].metadata_list else None


def expand_inputs(patterns: Union[str, Sequence[str]]) -> List[str]:
    """Input files from paths, directories, globs or comma-separated lists of them, sorted and deduplicated.

    A directory stands for the ``*.txt`` files directly in it, not those in subdirectories (the
    rule of ``albert-tf train-tokenizer``, :func:`albert_tf.tokenization._files.expand_inputs`).

    Raises:
        FileNotFoundError: a pattern matches no file, or a directory has no ``*.txt`` file.
    """
    if isinstance(patterns, str):
        patterns = [patterns]
    patterns = [p for item in patterns for p in str(item).split(",") if p]
    if not patterns:
        raise FileNotFoundError("no input given")
    directories = {p: _directory_pattern(p) for p in patterns}
    files = set()
    for pattern, result in zip(patterns, FileSystems.match([directories[p] or p for p in patterns])):
        paths = [m.path for m in result.metadata_list]
        if not paths:
            if directories[pattern]:
                raise FileNotFoundError(_files.no_text_files_message(pattern))
            raise FileNotFoundError(f"no input file matches {pattern!r}")
        files.update(paths)
    return sorted(files)


def _make_runner(runner: Optional[Union[str, object]]):
    """The local FnApiRunner for 'DirectRunner'/None (never Prism, which downloads a binary)."""
    if runner is None or (isinstance(runner, str) and runner in ("DirectRunner", "FnApiRunner")):
        from apache_beam.runners.portability.fn_api_runner import fn_runner

        return fn_runner.FnApiRunner()
    return runner


def _find_input_error(error: BaseException) -> Optional[str]:
    """The MalformedInputError message inside an error that Beam wrapped (possibly as text)."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, MalformedInputError):
            return str(error)
        error = error.__cause__ or error.__context__
    return None


_WRAPPED_INPUT_ERROR = re.compile(r"MalformedInputError: (.+?)(?: \[while running|\n|$)")


def _input_error_message(error: BaseException) -> Optional[str]:
    found = _find_input_error(error)
    if found is not None:
        return found
    # Worker processes send the error back as text.
    match = _WRAPPED_INPUT_ERROR.search(str(error))
    return match.group(1).strip() if match else None


class _DropInputErrors(logging.Filter):
    """Drops Beam's log records (with traceback) of a worker failing on a MalformedInputError.

    The run reports that error as one line naming file and line; any other failure is logged.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if error is not None and _input_error_message(error) is not None:
            return False
        return _WRAPPED_INPUT_ERROR.search(record.getMessage()) is None


# Where the local runners log a worker's exception before re-raising it.
_BEAM_ERROR_LOGGERS = (
    "apache_beam.runners.common",
    "apache_beam.runners.worker.sdk_worker",
    "apache_beam.runners.portability.fn_api_runner.fn_runner",
    "apache_beam.runners.portability.local_job_service",
)


@contextlib.contextmanager
def _quiet_input_errors():
    log_filter = _DropInputErrors()
    loggers = [logging.getLogger(name) for name in _BEAM_ERROR_LOGGERS]
    for each in loggers:
        each.addFilter(log_filter)
    try:
        yield
    finally:
        for each in loggers:
            each.removeFilter(log_filter)


@dataclasses.dataclass(frozen=True)
class RunSummary:
    """What a successful run wrote.

    Attributes:
        output_dir: where the shards and ``metadata.json`` are.
        files: the shard paths.
        counters: the pipeline counters (files, documents, instances, cleaned_characters, ...).
        cleaned_files: input file -> control characters the text cleaning removed from it.
        skipped_files: ``(file, problem)`` of each unreadable file left out (``on_error="skip"``).
    """

    output_dir: str
    files: List[str]
    counters: Dict[str, int]
    cleaned_files: Dict[str, int] = dataclasses.field(default_factory=dict)
    skipped_files: List[Tuple[str, str]] = dataclasses.field(default_factory=list)


def _counters(result) -> Dict[str, int]:
    from apache_beam.metrics.metric import MetricsFilter

    out: Dict[str, int] = {}
    query = result.metrics().query(MetricsFilter().with_namespace(METRICS_NAMESPACE))
    for counter in query["counters"]:
        value = counter.committed if counter.committed is not None else counter.attempted
        out[counter.key.metric.name] = out.get(counter.key.metric.name, 0) + int(value or 0)
    return out


def _string_set(result, name: str) -> List[list]:
    """The JSON-encoded entries of the string-set metric `name`, decoded and sorted."""
    from apache_beam.metrics.metric import MetricsFilter

    entries = set()
    query = result.metrics().query(MetricsFilter().with_namespace(METRICS_NAMESPACE).with_name(name))
    for metric in query["string_sets"]:
        entries.update(metric.committed if metric.committed is not None else metric.attempted or ())
    return sorted(json.loads(entry) for entry in entries)


def _join(directory: str, name: str) -> str:
    return FileSystems.join(directory, name)


def _list_dir(directory: str) -> List[str]:
    result = FileSystems.match([_join(directory, "*")])[0]
    return sorted(m.path for m in result.metadata_list)


_OUR_FILES = re.compile(
    rf"^(?:{re.escape(METADATA_FILE)}|{SHARD_PREFIX}-\d{{5}}-of-\d{{5}}{re.escape(SHARD_SUFFIX)})$"
)


def _write_text_atomically(path: str, text: str) -> None:
    temp = f"{path}.tmp-{uuid.uuid4().hex}"
    with FileSystems.create(temp) as f:
        f.write(text.encode("utf-8"))
    FileSystems.rename([temp], [path])


def make_pretraining_data(
    input_patterns: Union[str, Sequence[str]],
    output_dir: str,
    config: PipelineConfig,
    *,
    runner: Optional[Union[str, object]] = "DirectRunner",
    pipeline_args: Optional[Sequence[str]] = None,
    overwrite: bool = False,
) -> RunSummary:
    """Runs the pipeline and moves its output into `output_dir` only when it succeeds.

    Args:
        input_patterns: input paths/globs (local or any Beam filesystem, e.g. ``gs://``).
        output_dir: the directory for ``part-SSSSS-of-NNNNN.tfrecord`` shards and ``metadata.json``.
            It must not exist or be empty, unless `overwrite`.
        config: the pipeline settings.
        runner: ``"DirectRunner"`` (the local FnApiRunner; pass ``--direct_running_mode`` and
            ``--direct_num_workers`` in `pipeline_args` for worker processes), another runner name
            (``"DataflowRunner"``, ``"FlinkRunner"``, ...) or a runner object.
        pipeline_args: further Beam pipeline options, e.g. ``["--project=...", "--region=..."]``.
        overwrite: replace the shards and metadata of an earlier run in `output_dir` (a directory
            holding any other file is never touched).

    Returns:
        The output directory, the shard files and the pipeline counters.

    Raises:
        FileNotFoundError: an input pattern matches nothing.
        MalformedInputError: an input file is empty, not UTF-8 or binary (message names file and
            line), unless ``config.on_error`` is ``"skip"``.
        PipelineError: the output directory is not empty, the input yields no instance (every file
            skipped, say), or the run failed.
    """
    input_files = expand_inputs(input_patterns)
    output_dir = output_dir.rstrip("/") or output_dir
    existing = _list_dir(output_dir) if FileSystems.exists(output_dir) else []
    if existing and not overwrite:
        raise PipelineError(f"output directory {output_dir} is not empty (pass overwrite to replace an earlier run)")
    foreign = [p for p in existing if not _OUR_FILES.match(os.path.basename(p))]
    if foreign:
        raise PipelineError(
            f"output directory {output_dir} has files this pipeline did not write "
            f"({os.path.basename(foreign[0])}, ...); refusing to overwrite it"
        )

    tokenizer = config.tokenizer()
    vocab = VocabInfo.from_tokenizer(tokenizer, config.piece_style)
    temp_dir = f"{output_dir}.tmp-{uuid.uuid4().hex[:12]}"
    FileSystems.mkdirs(temp_dir)
    try:
        options = PipelineOptions(list(pipeline_args or []))
        with_runner = _make_runner(runner)
        pipeline = beam.Pipeline(runner=with_runner, options=options)
        build_pipeline(pipeline, input_files, _join(temp_dir, SHARD_PREFIX), config, vocab)
        try:
            with _quiet_input_errors():
                result = pipeline.run()
                result.wait_until_finish()
        except Exception as e:  # noqa: BLE001 - Beam wraps worker errors in assorted types
            message = _input_error_message(e)
            if message is not None:
                source, _, reason = message.partition(": ")
                line = None
                if re.search(r":\d+$", source):
                    source, _, number = source.rpartition(":")
                    line = int(number)
                raise MalformedInputError(source, line, reason) from None
            raise PipelineError(f"the pipeline failed: {e}") from e
        counters = _counters(result)
        skipped = [(path, problem) for path, problem in _string_set(result, SKIPPED_FILES)]
        cleaned = {path: count for path, count in _string_set(result, CLEANED_FILES)}
        shards = [p for p in _list_dir(temp_dir) if os.path.basename(p).startswith(SHARD_PREFIX)]
        if skipped and counters.get("files", 0) == 0:
            raise PipelineError(f"no readable input file; {_files.describe_skipped(skipped)}")
        if counters.get("instances", 0) == 0:
            raise PipelineError(
                f"the input yielded no instance ({counters.get('documents', 0)} documents); "
                "is it one sentence per line (or --input-format paragraphs)?"
            )
        metadata = {
            "format": FORMAT_NAME,
            "features": [dataclasses.asdict(f) for f in feature_shapes(
                config.instance.max_seq_length, config.instance.max_predictions_per_seq)],
            "instance_config": dataclasses.asdict(config.instance),
            "dupe_factor": config.dupe_factor,
            "seed": config.seed,
            "input_format": config.input_format,
            "on_error": config.on_error,
            "input_files": input_files,
            "skipped_files": [{"file": path, "problem": problem} for path, problem in skipped],
            "cleaned_files": cleaned,
            "vocab": {
                "vocab_size": vocab.vocab_size,
                "cls_id": vocab.cls_id,
                "sep_id": vocab.sep_id,
                "mask_id": vocab.mask_id,
            },
            "counters": counters,
            "files": [os.path.basename(p) for p in shards],
        }
        _move_into_place(temp_dir, output_dir, shards, existing)
        _write_text_atomically(_join(output_dir, METADATA_FILE), json.dumps(metadata, indent=2) + "\n")
        return RunSummary(
            output_dir, [_join(output_dir, os.path.basename(p)) for p in shards], counters, cleaned, skipped
        )
    finally:
        if FileSystems.exists(temp_dir):
            FileSystems.delete([temp_dir])


def _move_into_place(temp_dir: str, output_dir: str, shards: List[str], existing: List[str]) -> None:
    if existing:
        FileSystems.delete(existing)
    if not FileSystems.exists(output_dir) and "://" not in output_dir:
        # Locally a directory rename is atomic: the output appears complete or not at all.
        others = [p for p in _list_dir(temp_dir) if p not in shards]
        if others:
            FileSystems.delete(others)
        os.replace(temp_dir, output_dir)
        return
    if not FileSystems.exists(output_dir):
        FileSystems.mkdirs(output_dir)
    FileSystems.rename(shards, [_join(output_dir, os.path.basename(p)) for p in shards])


def read_metadata(output_dir: str) -> Dict:
    """The ``metadata.json`` of an output directory (settings, vocabulary ids, counters)."""
    path = _join(output_dir, METADATA_FILE)
    if not FileSystems.exists(path):
        raise FileNotFoundError(f"{path} does not exist; is {output_dir} an output of make-pretraining-data?")
    with FileSystems.open(path) as f:
        return json.loads(f.read().decode("utf-8"))
