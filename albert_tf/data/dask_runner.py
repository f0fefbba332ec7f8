"""The runners of the pretraining-data pipeline: `make_runner` (Beam's local FnApiRunner for
``"DirectRunner"``) and Beam's DaskRunner, on a running scheduler or on a ``LocalCluster`` that the
run starts and stops (`dask_cluster`).

`run_dask` runs a pipeline built for Dask: the input files dealt out to the partitions by size,
each task writing its records to a piece file of its own, and the pieces made the shards
afterwards. The worker processes of a ``LocalCluster`` preload this module (`dask_setup`).
"""

from __future__ import annotations

import contextlib
import logging
import os
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

from albert_tf.data import documents as documents_lib
from albert_tf.data.beam_import import CompressionTypes, FileSystems, PipelineOptions, beam
from albert_tf.data.pipeline_output import SHARD_PREFIX, SHARD_SUFFIX, PipelineError, join
from albert_tf.errors import describe_error

DASK_RUNNERS = ("dask", "DaskRunner")
PIECES_DIR = "pieces"
# Piece files are concatenated into shards in blocks of this many bytes.
_COPY_BYTES = 1 << 20


def make_runner(runner: Optional[Union[str, object]]):
    """The local FnApiRunner for 'DirectRunner'/None (never Prism, which downloads a binary)."""
    if runner is None or (isinstance(runner, str) and runner in ("DirectRunner", "FnApiRunner")):
        from apache_beam.runners.portability.fn_api_runner import fn_runner

        return fn_runner.FnApiRunner()
    return runner


def is_dask_runner(runner: Optional[Union[str, object]]) -> bool:
    """Whether `runner` names Beam's DaskRunner (``"dask"`` or ``"DaskRunner"``) or is one."""
    if isinstance(runner, str):
        return runner in DASK_RUNNERS
    from apache_beam.runners.dask.dask_runner import DaskRunner

    return isinstance(runner, DaskRunner)


@contextlib.contextmanager
def dask_cluster(address: Optional[str] = None, num_workers: Optional[int] = None, scheduler_file: Optional[str] = None):
    """The Dask scheduler to run on: `address` (or `scheduler_file`) if given, else a new LocalCluster.

    The LocalCluster has `num_workers` worker processes (default: one per CPU) of one thread each
    and is shut down on exit, also when the run fails.

    Yields:
        ``(scheduler address, number of workers)``.
    """
    import dask
    from dask.distributed import Client, LocalCluster

    # Dask logs every connection and worker start at INFO; only its errors concern a data run.
    dask_logger = logging.getLogger("distributed")
    level = dask_logger.level
    dask_logger.setLevel(max(logging.ERROR, level))
    try:
        if address or scheduler_file:
            with Client(address, scheduler_file=scheduler_file) as client:
                workers = len(client.scheduler_info().get("workers", {}))
                address = client.scheduler.address
            yield address, workers
            return
        workers = num_workers or os.cpu_count() or 1
        # The worker processes read their log level from the environment when they import Dask
        # (Beam's import gives them a root handler that would print every INFO record). Not even
        # errors: a failing task's error comes back to this process, which reports it (an input
        # error as one line, anything else logged with its traceback).
        quiet = {"DASK_LOGGING__DISTRIBUTED": os.environ.get("DASK_LOGGING__DISTRIBUTED", "critical")}
        # Nor the statistical profiler, which samples every task's stack 100 times a second for a
        # dashboard this cluster does not have (the nannies pass this process's settings on).
        with _environment(quiet), dask.config.set({"distributed.worker.profile.enabled": False}):
            # One thread per process: the work is pure Python, so threads would only take turns on the GIL.
            try:
                cluster = LocalCluster(
                    n_workers=workers,
                    threads_per_worker=1,
                    processes=True,
                    dashboard_address=None,
                    # No dashboard; the scheduler's small HTTP server on any free local port, not 8787.
                    scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
                    silence_logs=logging.ERROR,
                    # Each worker imports this module (and with it Beam, quietly) while the cluster starts.
                    preload=[__name__],
                )
            except Exception as e:  # noqa: BLE001 - Dask fails to start in assorted types, some without a message
                raise PipelineError(
                    f"the local Dask cluster of {workers} worker processes did not start: {describe_error(e)}"
                ) from e
        try:
            yield cluster.scheduler_address, workers
        finally:
            _stop_workers(cluster)
            cluster.close()
    finally:
        dask_logger.setLevel(level)


@contextlib.contextmanager
def _environment(values: Dict[str, str]):
    """Sets environment variables for the duration (for child processes started meanwhile)."""
    old = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in old.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def dask_setup(worker) -> None:
    """Dask's hook for a preloaded module: readies a new worker process for its first task.

    The Unicode tables of the text cleaning and of SentencePiece's preprocessing are built on
    first use (a good fraction of a second); here they are built while the cluster starts.
    """
    from albert_tf.tokenization.text import preprocess_text

    preprocess_text("Warm up.")
    # Two sentences: a single-sentence document would be logged as suspicious input.
    list(documents_lib.iter_documents([b"Warm up. Then run.\n"], "warm-up", "paragraphs"))


def _stop_workers(cluster) -> None:
    """Stops a LocalCluster's worker processes at once.

    A process that has imported Beam takes seconds to exit by itself (the finalizers of its
    gRPC and Cloud Storage modules), and the nanny waits 4 s before killing it. By now the run's
    files are written and closed (or the run failed and its output is being deleted), so the
    processes are stopped without that wait.
    """
    import asyncio

    async def stop():
        await asyncio.gather(*(w.close(timeout=0.25) for w in list(cluster.workers.values())), return_exceptions=True)

    with contextlib.suppress(Exception):
        cluster.sync(stop)


def run_on_dask(pipeline: beam.Pipeline) -> list:
    """Runs a pipeline built for Dask and returns the elements its last step computed."""
    import dask

    # Bags shuffle by tasks whatever the setting says; naming it spares the driver the import of
    # dask.dataframe (seconds) that finding the default costs. The pipeline goes to the runner as
    # built, without Beam's round trip through its proto form (a check of picklability that
    # shipping the steps to Dask makes anyway).
    with dask.config.set({"dataframe.shuffle.method": "tasks"}):
        result = pipeline.run(test_runner_api=False)
    try:
        result.wait_until_finish()
        gathered = result.client.gather(result.futures)
    except BaseException:
        # Tasks of a failed run must not go on writing into the directory about to be deleted.
        with contextlib.suppress(Exception):
            result.cancel()
        raise
    finally:
        result.client.close()
    return [stats for part in gathered for stats in part]


def _partitions(workers: int) -> int:
    """DaskRunner's partitions (its tasks per step) for a cluster of `workers`: one per worker.

    Every join multiplies them (a join of inputs of p and q partitions has p + q, shuffled in
    (p + q)**2 tasks): one per worker keeps the scheduler's work small next to the pipeline's, and
    the pairing step, behind a join of three inputs, still gets six per worker.
    """
    return max(2, workers)


def _dask_args(args: List[str], address: str, partition_size: Optional[int]) -> List[str]:
    """`args` with the scheduler address, and `partition_size` unless they set the partitioning."""
    from apache_beam.runners.dask.dask_runner import DaskOptions

    options = PipelineOptions(args).view_as(DaskOptions)
    args = [a for a in args if not a.startswith(("--dask_client_address", "--dask_scheduler_file"))]
    args.append(f"--dask_client_address={address}")
    if partition_size and options.npartitions is None and options.partition_size is None:
        args.append(f"--dask_partition_size={partition_size}")
    return args


def _balanced_order(sizes: Sequence[int], partitions: int) -> Tuple[List[int], int]:
    """An order of the files whose consecutive runs of `partition_size` have similar byte totals.

    DaskRunner cuts the input list into partitions by count; the biggest files are dealt out first,
    each to the partition with the fewest bytes that has room.

    Returns:
        ``(order, partition_size)``: file indices, and how many files each partition takes.
    """
    size = -(-len(sizes) // partitions)
    count = -(-len(sizes) // size)
    bins: List[List[int]] = [[] for _ in range(count)]
    totals = [0] * count
    for i in sorted(range(len(sizes)), key=lambda i: (-sizes[i], i)):
        open_bins = [b for b in range(count) if len(bins[b]) < size]
        target = min(open_bins, key=lambda b: (totals[b], b))
        bins[target].append(i)
        totals[target] += sizes[i]
    return [i for b in bins for i in sorted(b)], size


def _shards_from_pieces(piece_dir: str, temp_dir: str, num_shards: int) -> List[str]:
    """The Dask tasks' piece files as ``part-SSSSS-of-NNNNN.tfrecord`` shards in `temp_dir`.

    Without `num_shards` every piece is a shard; otherwise the pieces are concatenated (TFRecord
    files are concatenations of framed records) into that many shards of similar size.
    """
    matched = FileSystems.match([FileSystems.join(piece_dir, "*" + SHARD_SUFFIX)])[0].metadata_list
    pieces = sorted((m for m in matched if not os.path.basename(m.path).startswith(".")), key=lambda m: m.path)
    count = num_shards or len(pieces)
    names = [join(temp_dir, f"{SHARD_PREFIX}-{i:05d}-of-{count:05d}{SHARD_SUFFIX}") for i in range(count)]
    if not num_shards:
        FileSystems.rename([m.path for m in pieces], names)
        return names
    groups: List[List[str]] = [[] for _ in range(count)]
    sizes = [0] * count
    for piece in sorted(pieces, key=lambda m: (-m.size_in_bytes, m.path)):
        smallest = sizes.index(min(sizes))
        groups[smallest].append(piece.path)
        sizes[smallest] += piece.size_in_bytes
    for name, group in zip(names, groups):
        with FileSystems.create(name, mime_type="application/octet-stream") as out:
            for path in sorted(group):
                with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
                    while True:
                        block = f.read(_COPY_BYTES)
                        if not block:
                            break
                        out.write(block)
    return names



def run_dask(
    input_files: List[str],
    temp_dir: str,
    build: Callable[[beam.Pipeline, str, List[int]], object],
    args: List[str],
    num_workers: Optional[int],
    dask_address: Optional[str],
    num_shards: int,
) -> list:
    """Runs a pipeline on Dask into `temp_dir`'s shards; returns what its last step computed.

    Args:
        input_files: the pipeline's input files (their sizes decide the order they enter it in).
        temp_dir: where the shards go (``part-SSSSS-of-NNNNN.tfrecord``; `num_shards` 0: one per
            piece file).
        build: adds the transforms, called as ``build(pipeline, piece_dir, file_order)``: the tasks
            write their piece files into `piece_dir`, the files enter in `file_order`.
        args, num_workers, dask_address: as `make_pretraining_data` takes them.
        num_shards: the shards to write (0: one per piece file).
    """
    from apache_beam.runners.dask.dask_runner import DaskOptions, DaskRunner

    options = PipelineOptions(args).view_as(DaskOptions)
    address = dask_address or options.address
    piece_dir = join(temp_dir, PIECES_DIR)
    FileSystems.mkdirs(piece_dir)
    sizes = [m.size_in_bytes for result in FileSystems.match(input_files) for m in result.metadata_list]
    with dask_cluster(address, num_workers, None if address else options.scheduler_file) as (scheduler, workers):
        order, partition_size = _balanced_order(sizes, _partitions(workers))
        pipeline = beam.Pipeline(runner=DaskRunner(), options=PipelineOptions(_dask_args(args, scheduler, partition_size)))
        build(pipeline, piece_dir, order)
        parts = run_on_dask(pipeline)
    _shards_from_pieces(piece_dir, temp_dir, num_shards)
    FileSystems.delete([piece_dir])
    return parts
