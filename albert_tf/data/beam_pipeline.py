"""The Apache Beam pipeline that writes ALBERT pretraining TFRecords (SOP + n-gram masked LM).

The same pipeline runs locally on Beam's FnApiRunner (``--runner DirectRunner``: in-memory or
with worker processes), on a Dask cluster (``runner="dask"``: Beam's DaskRunner, on a
``LocalCluster`` of worker processes that the run starts and stops, or on a running scheduler given
by ``--dask_client_address tcp://host:8786``), and on Dataflow, Flink or Spark through ordinary
pipeline options. Stages:

1. ``ReadDocuments``: each input file (one element per file) is parsed into documents
   (:mod:`albert_tf.data.documents`), control characters cleaned out as the original BERT text
   cleaning does (counted: ``cleaned_characters``, ``cleaned_files``), and tokenized in batches of
   up to ``max_tokenize_batch`` documents (one SentencePiece batch call per batch) by a tokenizer
   that each worker process loads once. A batch travels as one element (a "chunk"); documents
   that tokenize to nothing are dropped, as the original drops empty documents. An unreadable file
   (invalid UTF-8, binary, empty) fails the run with the file and line, or with
   ``on_error="skip"`` is left out and reported (``skipped_files``, names in ``metadata.json``).
2. ``Number``: every document gets its index among all documents: input files in sorted path
   order, documents in file order. The kept documents per chunk are gathered in one place and the
   chunks joined (``CoGroupByKey``) with their first index and the total.
3. ``RandomNext``: a single-sentence chunk needs segment B from a random other document of the
   whole corpus, exactly as the original. Every document copy is paired once to find those pairs
   (cheap: nothing is finished), and a ``CoGroupByKey`` of these requests with the documents they
   name takes each B there.
4. ``Pair``: a ``CoGroupByKey`` brings every chunk its first index and the B segments of its
   random-next pairs; then for every dupe ``d`` in ``range(dupe_factor)`` each document is cut
   into segment pairs and every instance finished (truncated, masked, serialized) with the seeds
   documented in :mod:`albert_tf.data.pretraining_instances`: ``derive_seed(seed, PAIRING, index,
   d)`` and ``derive_seed(seed, FINISHING, index, d, k)``, by its fast path
   (:class:`~albert_tf.data.pretraining_instances.InstanceEncoder`: the bytes of the reference
   functions, for a fraction of the work). All records come from this one step, so they stream
   into the sink (a ``Flatten`` of two record streams would make the local runner hold them all).
5. ``Write``: records leave ``Pair`` framed as TFRecords already, about a megabyte per element. On
   Beam's own runners a file sink writes them into a temporary directory beside the output (shards
   as ``num_shards`` says); on Dask each task appends its records to a piece file of its own, named
   after the documents it processed (a task run again rewrites the same file), and the pieces
   become the shards (or are concatenated into ``num_shards``). Only when the run succeeds are the
   shards moved into the output directory, with ``metadata.json`` (the settings, vocabulary ids
   and counts) written last. A failed run leaves no output.

Because every random draw depends only on (seed, document index, dupe, instance), the set of
records is the same for any runner, worker count, bundle split or shard count, and equals what
:func:`albert_tf.data.pretraining_instances.create_training_instances` yields in memory. (Their
order across shards is the runner's.) Memory per worker is one chunk of documents and the B
segments of its random-next pairs; on the local runner the tokenized corpus is held compactly
(int32 ids) between stages, never the ``dupe_factor`` copies of instances, which stream to the
shard files (with ``num_shards`` 0; a fixed shard count makes Beam group all records first).

On Dask, ``dask_address`` (or ``--dask_client_address tcp://host:8786`` among the pipeline
options) names a running scheduler; without one the run starts a ``LocalCluster`` of
``num_workers`` processes and stops it when done, failed or not (a script that does so needs the
usual ``if __name__ == "__main__":`` guard: the workers are started by ``spawn``). What Beam's
DaskRunner (2.77) does not do, and how the pipeline stays within it: it has no metrics (the counts
travel as elements into the pipeline's last step and come back with its result); it gives every
output of a multi-output ``ParDo`` all elements (no step has more than one output); it drops what
``finish_bundle`` emits (``BatchElements`` loses each partition's last batch, ``WriteToTFRecord``
its files: batching happens inside the steps, and the tasks write their records themselves); it
recomputes a side input's whole upstream inside every task that reads one (numbering is a join,
not a side input); it computes only the pipeline's last step (everything flows into it); and
``Reshuffle`` is a no-op, parallelism being the number of partitions (default: one per worker,
the files dealt out by size; ``--dask_npartitions`` sets another number).

The runners and the Dask cluster are `albert_tf.data.dask_runner`'s; the output directory (file
names, publication, ``metadata.json``) is `albert_tf.data.pipeline_output`'s.
"""


from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import pickle
import re
import uuid
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from albert_tf import file_io
from albert_tf.data import dask_runner
from albert_tf.data import pretraining_instances as instances_lib
from albert_tf.data.beam_import import CompressionTypes, FileSystems, Metrics, PipelineOptions, beam, filebasedsink
from albert_tf.data.dask_runner import is_dask_runner, make_runner
from albert_tf.data.documents import (
    INPUT_FORMATS,
    MalformedInputError,
    check_readable,
    read_documents,
)
from albert_tf.data.pipeline_output import (
    METADATA_FILE,
    SHARD_PREFIX,
    SHARD_SUFFIX,
    PipelineError,
    check_output_dir,
    join,
    list_dir,
    move_into_place,
)
from albert_tf.data.pretraining_instances import InstanceConfig, TokenizedDocument, VocabInfo
from albert_tf.data.tfrecords import feature_shapes, frame_record
from albert_tf.errors import describe_error
from albert_tf.tokenization import corpus_files
from albert_tf.tokenization.corpus_files import CleaningStats

logger = logging.getLogger(__name__)

METRICS_NAMESPACE = "albert_tf.pretraining_data"
FORMAT_NAME = "albert-pretraining-tfrecord"

# Records are shipped and written in elements of about this many bytes (many records each), so
# that the runner's per-element cost is paid once per megabyte, not once per record.
_BLOB_BYTES = 1 << 20


@dataclasses.dataclass(frozen=True)
class TokenizerSpec:
    """A picklable recipe for the tokenizer, loaded once per Beam worker process.

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
        from albert_tf.tokenization.resolve import python_tokenizer

        return python_tokenizer(self.piece_style, self.spm_model or self.vocab_file, lower_case=self.lower_case)


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
        max_tokenize_batch: the most documents per tokenizer call, and per element of the
            tokenized corpus.
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
        corpus_files.check_on_error(self.on_error)


# String-set metrics that bring file names back to the driver (JSON lists, see `_Stats`); Beam
# keeps up to a million characters of each, thousands of names.
SKIPPED_FILES = "skipped_files"
CLEANED_FILES = "cleaned_files"


@dataclasses.dataclass
class _Stats:
    """Counts and file names of part of a run, as an element (Dask) or reported as Beam metrics.

    Attributes:
        counters: name -> count (files, documents, instances, ...); only non-zero ones.
        cleaned: ``(path, characters)`` of each file the text cleaning changed.
        skipped: ``(path, problem)`` of each unreadable file left out.
    """

    counters: Dict[str, int] = dataclasses.field(default_factory=dict)
    cleaned: List[Tuple[str, int]] = dataclasses.field(default_factory=list)
    skipped: List[Tuple[str, str]] = dataclasses.field(default_factory=list)

    def inc(self, name: str, value: int = 1) -> None:
        if value:
            self.counters[name] = self.counters.get(name, 0) + value

    def add(self, other: "_Stats") -> None:
        for name, value in other.counters.items():
            self.inc(name, value)
        self.cleaned.extend(other.cleaned)
        self.skipped.extend(other.skipped)

    def report(self) -> None:
        """Adds these counts to the Beam metrics of the running step."""
        for name, value in self.counters.items():
            Metrics.counter(METRICS_NAMESPACE, name).inc(value)
        for path, count in self.cleaned:
            Metrics.string_set(METRICS_NAMESPACE, CLEANED_FILES).add(json.dumps([path, count]))
        for path, problem in self.skipped:
            Metrics.string_set(METRICS_NAMESPACE, SKIPPED_FILES).add(json.dumps([path, problem]))


@dataclasses.dataclass
class _Chunk:
    """Consecutive kept documents of one file, tokenized, and the counts of reading them."""

    documents: List[TokenizedDocument]
    stats: _Stats


# One tokenizer per worker process, whatever the number of bundles (DaskRunner sets up every
# DoFn once per partition), keyed by the pickled recipe.
_TOKENIZERS: Dict[bytes, "instances_lib.DocumentTokenizer"] = {}


def _document_tokenizer(factory: Callable[[], object]) -> "instances_lib.DocumentTokenizer":
    try:
        key = pickle.dumps(factory)
    except Exception:  # noqa: BLE001 - an unpicklable factory is simply not cached
        return instances_lib.DocumentTokenizer(factory())
    if key not in _TOKENIZERS:
        _TOKENIZERS[key] = instances_lib.DocumentTokenizer(factory())
    return _TOKENIZERS[key]


class _ReadDocuments(beam.DoFn):
    """(file index, path) -> ((file index, chunk), `_Chunk`): the file's documents, tokenized.

    Every file yields at least one chunk, the last one carrying the file's counts (an empty one
    for a skipped file), so that every count reaches the end of the pipeline with the documents.
    """

    def __init__(self, config: PipelineConfig):
        self._input_format = config.input_format
        self._on_error = config.on_error
        self._factory = config.tokenizer
        self._batch = config.max_tokenize_batch
        self._tokenizer = None

    def setup(self):
        self._tokenizer = _document_tokenizer(self._factory)

    def _chunk(self, documents, stats: _Stats) -> _Chunk:
        tokenized = self._tokenizer.tokenize_documents(documents) if documents else []
        kept = [d for d in tokenized if len(d)]
        stats.inc("documents_without_tokens", len(tokenized) - len(kept))
        return _Chunk(kept, stats)

    def process(self, element):
        file_index, path = element
        cleaning = CleaningStats()
        stats = _Stats()
        batch = []
        chunk = 0
        try:
            if self._on_error == "skip":
                # A file is skipped whole: check it before its first document goes out.
                check_readable(path, opener=FileSystems.open)
            for document in read_documents(path, self._input_format, opener=FileSystems.open, cleaning=cleaning):
                stats.inc("documents")
                if len(document.sentences) == 1:
                    stats.inc("single_sentence_documents")
                batch.append(document)
                if len(batch) >= self._batch:
                    yield (file_index, chunk), self._chunk(batch, stats)
                    batch, stats, chunk = [], _Stats(), chunk + 1
        except MalformedInputError as e:
            # Only an error before any output can skip the file (an empty file, or one that
            # changed since the check); otherwise the run has already used part of it.
            if self._on_error == "raise" or chunk:
                raise
            logger.info("skipping %s", e)
            skipped = _Stats(skipped=[(path, str(e))])
            skipped.inc(SKIPPED_FILES)
            yield (file_index, 0), _Chunk([], skipped)
            return
        stats.inc("files")
        if cleaning.characters:
            stats.inc("cleaned_characters", cleaning.characters)
            stats.inc(CLEANED_FILES)
            stats.cleaned.append((path, cleaning.characters))
        yield (file_index, chunk), self._chunk(batch, stats)


def _offsets(element):
    """(_, [(chunk key, kept documents)]) -> (chunk key, (index of its first document, total))."""
    _, sizes = element
    sizes = sorted(sizes)
    total = sum(count for _, count in sizes)
    offset = 0
    for key, count in sizes:
        yield key, (offset, total)
        offset += count


def _only(values, what: str):
    values = list(values)
    if len(values) != 1:
        raise AssertionError(f"{what}: expected one value, got {len(values)}; numbering is broken")
    return values[0]


def _numbered(element):
    """The join of a chunk with its offset -> (chunk key, chunk, first index, total documents)."""
    key, grouped = element
    return (key, _only(grouped["chunk"], f"chunk {key}"), *_only(grouped["offset"], f"offset of chunk {key}"))


def _indexed_documents(element):
    """(chunk key, chunk, first index, total) -> (index, document) for the random-next join."""
    _, chunk, offset, _ = element
    for i, document in enumerate(chunk.documents):
        yield offset + i, document


class _RandomNextRequests(beam.DoFn):
    """(chunk key, chunk, first index, total) -> (random document, (chunk key, index, dupe, k, request)).

    The pairing of every document copy, only to find the pairs whose segment B comes from another
    document (cheap: no instance is finished here); `_Pair` pairs them again, identically.
    """

    def __init__(self, config: PipelineConfig):
        self._config = config

    def process(self, element):
        key, chunk, offset, total = element
        config = self._config
        for i, document in enumerate(chunk.documents):
            index = offset + i
            sentence_offsets = document.offsets.tolist()
            for dupe in range(config.dupe_factor):
                rng = instances_lib.pairing_rng(config.seed, index, dupe)
                spans = instances_lib.pair_spans(sentence_offsets, index, total, config.instance, rng)
                for k, (_, _, _, _, _, request) in enumerate(spans):
                    if request is not None:
                        yield request.document_index, (key, index, dupe, k, request)


def _resolve_random_next(element):
    """(index, {'document': [doc], 'requests': [...]}) -> (chunk key of the pair, ((index, dupe, k), B ids))."""
    index, grouped = element
    requests = list(grouped["requests"])
    if not requests:
        return
    document: TokenizedDocument = _only(grouped["document"], f"document index {index}")
    for key, source, dupe, k, request in requests:
        lo, hi = instances_lib.random_next_span(document.offsets, request)
        yield key, ((source, dupe, k), document.ids[lo:hi].copy())


class _RecordOutput:
    """Where `_Pair`'s records go, framed as TFRecords.

    On Beam's runners they leave as elements of about a megabyte (`take` after `add`) for the file
    sink. On Dask (`piece_dir` set) the DoFn writes them itself, to one piece file per bundle,
    named after the smallest key of the bundle: a task that runs again writes the same file.
    """

    def __init__(self, piece_dir: Optional[str]):
        self._piece_dir = piece_dir
        self._parts: List[bytes] = []
        self._size = 0
        self._file = None
        self._temp = None
        self._smallest_key = None

    def add(self, records: Iterable[bytes], key: Tuple[int, ...]) -> None:
        framed = [frame_record(r) for r in records]
        if not framed:
            return
        if self._piece_dir is None:
            self._parts.extend(framed)
            self._size += sum(len(r) for r in framed)
            return
        if self._smallest_key is None or key < self._smallest_key:
            self._smallest_key = key
        if self._file is None:
            self._temp = FileSystems.join(self._piece_dir, f".{uuid.uuid4().hex}.tmp")
            self._file = FileSystems.create(self._temp, mime_type="application/octet-stream")
        self._file.write(b"".join(framed))

    def take(self, final: bool = False) -> List[bytes]:
        """The blobs due for the sink: a full one, or at `final` whatever is left."""
        if not self._parts or (self._size < _BLOB_BYTES and not final):
            return []
        blob = b"".join(self._parts)
        self._parts, self._size = [], 0
        return [blob]

    def close(self) -> None:
        """Finishes the bundle's piece file (Dask)."""
        if self._file is None:
            return
        self._file.close()
        name = "-".join(f"{k:06d}" for k in self._smallest_key)
        FileSystems.rename([self._temp], [FileSystems.join(self._piece_dir, f"piece-{name}{SHARD_SUFFIX}")])
        self._file = self._temp = self._smallest_key = None


class _Pair(beam.DoFn):
    """(chunk key, {'chunk', 'offset', 'random_next'}) -> the chunk's records, framed, many per element.

    Pairs every copy of every document and finishes each instance (truncation, masking,
    serialization) by the fast path, taking segment B of random-next pairs from the join. On
    Dask the records go to the task's piece file instead, and the counts leave as a `_Stats`.
    """

    def __init__(self, config: PipelineConfig, vocab: VocabInfo, piece_dir: Optional[str]):
        self._config = config
        self._vocab = vocab
        self._piece_dir = piece_dir
        self._encoder = None
        self._output = None

    def setup(self):
        self._encoder = instances_lib.InstanceEncoder(self._config.instance, self._vocab)

    def start_bundle(self):
        self._output = _RecordOutput(self._piece_dir)

    def finish_bundle(self):
        self._output.close()

    def process(self, element):
        key, grouped = element
        chunk: _Chunk = _only(grouped["chunk"], f"chunk {key}")
        offset, total = _only(grouped["offset"], f"offset of chunk {key}")
        segments_b = dict(grouped["random_next"])
        encoder, config, output = self._encoder, self._config, self._output
        stats = _Stats()
        stats.add(chunk.stats)
        requests: List[Tuple[int, int, int, instances_lib.RandomNextRequest]] = []
        for i, document in enumerate(chunk.documents):
            index = offset + i
            prepared = encoder.prepare(document)
            for dupe in range(config.dupe_factor):
                records = encoder.document_records(prepared, index, dupe, total, config.seed, requests)
                for k, a_lo, a_hi, _ in requests:
                    ids_b = segments_b.pop((index, dupe, k))
                    rng = encoder.finishing_rng(config.seed, index, dupe, k)
                    records.append(encoder.encode(prepared, a_lo, a_hi, encoder.segment(ids_b), 0, len(ids_b), True, rng))
                stats.inc("instances", len(records))
                stats.inc("random_next_instances", len(requests))
                requests.clear()
                output.add(records, (index,))
                yield from output.take()
        if segments_b:
            raise AssertionError(f"chunk {key}: {len(segments_b)} random-next segments without their pair")
        yield from output.take(final=True)
        if self._piece_dir is None:
            stats.report()
        else:
            yield stats


class _FramedRecordSink(filebasedsink.FileBasedSink):
    """A file sink for elements of TFRecords framed already: they are written as they are."""

    def __init__(self, file_path_prefix: str, num_shards: int):
        super().__init__(
            file_path_prefix=file_path_prefix,
            coder=beam.coders.BytesCoder(),
            file_name_suffix=SHARD_SUFFIX,
            num_shards=num_shards,
            shard_name_template="-SSSSS-of-NNNNN",
            mime_type="application/octet-stream",
            compression_type=CompressionTypes.UNCOMPRESSED,
        )

    def write_encoded_record(self, file_handle, value):
        file_handle.write(value)


def build_pipeline(
    pipeline: beam.Pipeline,
    input_files: Sequence[str],
    output_prefix: str,
    config: PipelineConfig,
    vocab: VocabInfo,
    *,
    piece_dir: Optional[str] = None,
    file_order: Optional[Sequence[int]] = None,
):
    """Adds the transforms to `pipeline`: read and tokenize, number, resolve random-next pairs, pair, write.

    Args:
        pipeline: the pipeline to extend.
        input_files: the input files, in the order that numbers documents (sorted paths).
        output_prefix: the shard path prefix (``.../part``) of Beam's file sink.
        config: the pipeline settings.
        vocab: the vocabulary info (special ids, word starts), computed once at construction.
        piece_dir: for DaskRunner: the directory the tasks write their piece files into; the
            pipeline then ends in the `_Stats` of the run instead of a file sink.
        file_order: the order in which the files enter the pipeline (indices into `input_files`;
            default: theirs). It changes no record: every file keeps its index.

    Returns:
        Beam's runners: the file sink's result (the written file names). Dask: the counts, the
        `_Stats` elements that the last step returns.
    """
    files = (
        pipeline
        | "InputFiles" >> beam.Create([(i, input_files[i]) for i in (file_order or range(len(input_files)))])
        # One file per element, spread over workers before the expensive reads.
        | "SpreadFiles" >> beam.Reshuffle()
    )
    chunks = files | "ReadDocuments" >> beam.ParDo(_ReadDocuments(config))
    offsets = (
        chunks
        | "ChunkSizes" >> beam.Map(lambda kv: (0, (kv[0], len(kv[1].documents))))
        | "GatherSizes" >> beam.GroupByKey()
        | "Offsets" >> beam.FlatMap(_offsets)
    )
    numbered = (
        {"chunk": chunks, "offset": offsets}
        | "JoinOffsets" >> beam.CoGroupByKey()
        | "Number" >> beam.Map(_numbered)
    )
    random_next = (
        {
            "document": numbered | "IndexDocuments" >> beam.FlatMap(_indexed_documents),
            "requests": numbered | "RandomNextRequests" >> beam.ParDo(_RandomNextRequests(config)),
        }
        | "JoinRandomNext" >> beam.CoGroupByKey()
        | "RandomNext" >> beam.FlatMap(_resolve_random_next)
    )
    # One step finishes every instance, so that its records stream straight into the sink
    # (a Flatten of two record streams would make the local runner hold them all).
    paired = (
        {"chunk": chunks, "offset": offsets, "random_next": random_next}
        | "JoinSegments" >> beam.CoGroupByKey()
        | "Pair" >> beam.ParDo(_Pair(config, vocab, piece_dir))
    )
    if piece_dir is not None:
        # The last step is the only one DaskRunner computes: the counts flow into it.
        return paired | "Stats" >> beam.Filter(lambda e: isinstance(e, _Stats))
    return paired | "Write" >> beam.io.Write(_FramedRecordSink(output_prefix, config.num_shards))


def _directory_pattern(path: str) -> Optional[str]:
    """``path/*.txt`` when `path` (no glob) names a directory, as ``train-tokenizer`` reads it."""
    if re.search(r"[*?\[]", path):
        return None
    if "://" not in path:
        return os.path.join(path, corpus_files.DIRECTORY_PATTERN) if os.path.isdir(path) else None
    # Object stores have no directories: a name ending in "/" is one, and so is a name that is
    # no object but has `*.txt` objects under it.
    candidate = path.rstrip("/") + "/" + corpus_files.DIRECTORY_PATTERN
    if path.endswith("/"):
        return candidate
    if FileSystems.match([path])[0].metadata_list:
        return None
    return candidate if FileSystems.match([candidate])[0].metadata_list else None


def expand_inputs(patterns: Union[str, Sequence[str]]) -> List[str]:
    """Input files from paths, directories, globs or comma-separated lists of them, sorted and deduplicated.

    A directory stands for the ``*.txt`` files directly in it, not those in subdirectories (the
    rule of ``albert-tf train-tokenizer``, :func:`albert_tf.tokenization.corpus_files.expand_inputs`).

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
                raise FileNotFoundError(corpus_files.no_text_files_message(pattern))
            raise FileNotFoundError(f"no input file matches {pattern!r}")
        files.update(paths)
    return sorted(files)


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


def _tokenizer_record(tokenizer) -> Optional[Dict]:
    """The `TokenizerSpec` as metadata.json keeps it: local paths made absolute; None for others."""
    if not isinstance(tokenizer, TokenizerSpec):
        return None

    def where(path):
        return path if path is None or "://" in path else os.path.abspath(path)

    return {"spm_model": where(tokenizer.spm_model), "vocab_file": where(tokenizer.vocab_file),
            "lower_case": tokenizer.lower_case}


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


def make_pretraining_data(
    input_patterns: Union[str, Sequence[str]],
    output_dir: str,
    config: PipelineConfig,
    *,
    runner: Optional[Union[str, object]] = "DirectRunner",
    pipeline_args: Optional[Sequence[str]] = None,
    overwrite: bool = False,
    num_workers: Optional[int] = None,
    dask_address: Optional[str] = None,
) -> RunSummary:
    """Runs the pipeline and moves its output into `output_dir` only when it succeeds.

    Args:
        input_patterns: input paths/globs (local or any Beam filesystem, e.g. ``gs://``).
        output_dir: the directory for ``part-SSSSS-of-NNNNN.tfrecord`` shards and ``metadata.json``.
            It must not exist or be empty, unless `overwrite`.
        config: the pipeline settings.
        runner: ``"DirectRunner"`` (the local FnApiRunner; `num_workers` > 1 runs worker
            processes), ``"dask"`` / ``"DaskRunner"`` (Beam's DaskRunner: on the scheduler at
            `dask_address` or ``--dask_client_address`` in `pipeline_args`, else on a LocalCluster
            of `num_workers` processes, default one per CPU, started and shut down here), another
            runner name (``"DataflowRunner"``, ``"FlinkRunner"``, ...) or a runner object.
        pipeline_args: further Beam pipeline options, e.g. ``["--project=...", "--region=..."]``,
            ``["--dask_npartitions=16"]``.
        overwrite: replace the shards and metadata of an earlier run in `output_dir` (a directory
            holding any other file is never touched).
        num_workers: worker processes of the DirectRunner or of the Dask LocalCluster (a running
            scheduler has its own).
        dask_address: a running Dask scheduler, e.g. ``tcp://host:8786``. Its workers must be able
            to import this package and to read the inputs and write `output_dir`'s parent (a
            shared filesystem or ``gs://``).

    Returns:
        The output directory, the shard files and the pipeline counters.

    Raises:
        FileNotFoundError: an input pattern matches nothing.
        MalformedInputError: an input file is empty, not UTF-8 or binary (message names file and
            line), unless ``config.on_error`` is ``"skip"``.
        PipelineError: the output directory is not empty, the input yields no instance (every file
            skipped, say), or the run failed.
        ValueError: `num_workers` below 1 or for another runner, `dask_address` for another runner.
    """
    input_files = expand_inputs(input_patterns)
    output_dir = output_dir.rstrip("/") or output_dir
    existing = check_output_dir(output_dir, overwrite)
    dask, args = _runner_args(runner, pipeline_args, num_workers, dask_address)

    tokenizer = config.tokenizer()
    vocab = VocabInfo.from_tokenizer(tokenizer, config.piece_style)
    # Hidden beside the output (on its filesystem, where the workers write), so that a local
    # output can be published with one rename.
    temp_dir = file_io.staging_name(output_dir, beside=True)
    FileSystems.mkdirs(temp_dir)
    try:
        counters, skipped, cleaned = _run(input_files, temp_dir, config, vocab, runner, args, dask, num_workers, dask_address)
        shards = [p for p in list_dir(temp_dir) if os.path.basename(p).startswith(SHARD_PREFIX)]
        _check_yield(counters, skipped)
        metadata = _metadata(config, vocab, input_files, counters, skipped, cleaned, shards)
        move_into_place(temp_dir, output_dir, shards, existing)
        file_io.atomic_write_text(join(output_dir, METADATA_FILE), json.dumps(metadata, indent=2) + "\n")
        return RunSummary(
            output_dir, [join(output_dir, os.path.basename(p)) for p in shards], counters, cleaned, skipped
        )
    finally:
        if FileSystems.exists(temp_dir):
            FileSystems.delete([temp_dir])


def _runner_args(runner, pipeline_args: Optional[Sequence[str]], num_workers: Optional[int],
                 dask_address: Optional[str]) -> Tuple[bool, List[str]]:
    """`(whether the runner is Dask, the pipeline options)`, the worker settings checked against the runner."""
    if num_workers is not None and num_workers < 1:
        raise ValueError(f"num_workers must be at least 1, got {num_workers}")
    dask = is_dask_runner(runner)
    if dask_address and not dask:
        raise ValueError(f"dask_address is for runner='dask', not {runner!r}")
    args = list(pipeline_args or [])
    if not dask and num_workers and num_workers > 1:
        if runner not in (None, "DirectRunner", "FnApiRunner"):
            raise ValueError(f"num_workers applies to the DirectRunner and Dask, not {runner!r}")
        args += ["--direct_running_mode=multi_processing", f"--direct_num_workers={num_workers}"]
    return dask, args


def _run(input_files, temp_dir, config, vocab, runner, args, dask, num_workers, dask_address):
    """Runs the pipeline into `temp_dir`; returns `(counters, skipped files, cleaned files)`.

    Raises:
        MalformedInputError: a worker failed on an input file (one line naming file and line).
        PipelineError: the run failed otherwise.
    """
    try:
        with _quiet_input_errors():
            if dask:
                stats = _run_dask(input_files, temp_dir, config, vocab, args, num_workers, dask_address)
                return dict(sorted(stats.counters.items())), sorted(stats.skipped), dict(sorted(stats.cleaned))
            return _run_direct(input_files, temp_dir, config, vocab, runner, args)
    except Exception as e:  # noqa: BLE001 - Beam wraps worker errors in assorted types
        message = _input_error_message(e)
        if message is not None:
            source, _, reason = message.partition(": ")
            line = None
            if re.search(r":\d+$", source):
                source, _, number = source.rpartition(":")
                line = int(number)
            raise MalformedInputError(source, line, reason) from None
        if dask:
            # Beam's own runners log a failing worker's traceback; Dask's workers are quiet.
            logger.error("a Dask task failed", exc_info=e)
        raise PipelineError(f"the pipeline failed: {describe_error(e)}") from e


def _run_direct(input_files, temp_dir, config, vocab, runner, args):
    """Runs the pipeline on a Beam runner; returns `(counters, skipped files, cleaned files)` from its metrics."""
    pipeline = beam.Pipeline(runner=make_runner(runner), options=PipelineOptions(args))
    build_pipeline(pipeline, input_files, join(temp_dir, SHARD_PREFIX), config, vocab)
    result = pipeline.run()
    result.wait_until_finish()
    counters = dict(sorted(_counters(result).items()))
    skipped = [(path, problem) for path, problem in _string_set(result, SKIPPED_FILES)]
    cleaned = {path: count for path, count in _string_set(result, CLEANED_FILES)}
    return counters, skipped, cleaned


def _run_dask(
    input_files: List[str],
    temp_dir: str,
    config: PipelineConfig,
    vocab: VocabInfo,
    args: List[str],
    num_workers: Optional[int],
    dask_address: Optional[str],
) -> "_Stats":
    """Runs the pipeline on Dask into `temp_dir`'s shards; returns the run's counts."""

    def build(pipeline, piece_dir, file_order):
        build_pipeline(
            pipeline, input_files, join(temp_dir, SHARD_PREFIX), config, vocab, piece_dir=piece_dir, file_order=file_order
        )

    parts = dask_runner.run_dask(input_files, temp_dir, build, args, num_workers, dask_address, config.num_shards)
    # Counted from what the tasks returned: DaskRunner has no metrics.
    stats = _Stats()
    for part in parts:
        stats.add(part)
    return stats


def _check_yield(counters: Dict[str, int], skipped: List[Tuple[str, str]]) -> None:
    """Refuses a run that read no file or made no instance."""
    if skipped and counters.get("files", 0) == 0:
        raise PipelineError(f"no readable input file; {corpus_files.describe_skipped(skipped)}")
    if counters.get("instances", 0) == 0:
        raise PipelineError(
            f"the input yielded no instance ({counters.get('documents', 0)} documents); "
            "is it one sentence per line (or --input-format paragraphs)?"
        )


def _metadata(config, vocab, input_files, counters, skipped, cleaned, shards) -> Dict:
    """The run's ``metadata.json``: its settings, inputs, vocabulary ids, counts and shard names."""
    return {
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
        # So that `pretrain --data` finds the tokenizer (and its output carries it) unasked.
        "tokenizer": _tokenizer_record(config.tokenizer),
        "vocab": {
            "vocab_size": vocab.vocab_size,
            "cls_id": vocab.cls_id,
            "sep_id": vocab.sep_id,
            "mask_id": vocab.mask_id,
        },
        "counters": counters,
        "files": [os.path.basename(p) for p in shards],
    }
