"""Benchmark: pretraining data at four corpus sizes, the original script against one and more workers.

Converts the State of the Union addresses (``../shared/data/en/sotu``, one address per file) to one
sentence per line (the original script's input format; the Beam jobs read the same files), trains a
SentencePiece model of 4k pieces on all of them, then runs every job in a subprocess of its own on
corpora of evenly spaced files (default 25, 50, 100 and all 233):

* ``reference``: ``official.nlp.data.create_pretraining_data`` (tf-models-official's port of the
  original ``create_pretraining_data.py``, the one installed: SentencePiece, whole-word and 3-gram
  masking; it makes BERT's next-sentence pairs, so its instance count differs), one process;
* ``direct-1``: :func:`albert_tf.data.beam_pipeline.make_pretraining_data` on Beam's in-memory
  FnApiRunner, one process;
* ``direct-2``: the same with two worker processes (``--direct_running_mode=multi_processing``);
* ``dask-1`` / ``dask-2``: Beam's DaskRunner on a LocalCluster of one / two worker processes that
  the run starts and stops (cold: the cluster's start-up is inside the time);
* ``dask-1-warm`` / ``dask-2-warm``: the same on a cluster started before the timing, as a run
  against a running scheduler (``--dask-address``) sees it.

Times are end to end inside the job (reading text to files written; the cluster's start and stop
for the cold Dask jobs; Python imports outside), and ``+imports`` is the job's whole process,
interpreter start and imports included. Peak memory is the largest sum of RSS over the job's process
tree (worker processes included), sampled every 50 ms with psutil; CPU is user + system time of the
whole tree. Prints a Markdown table and writes the rows as JSON lines (``--json``). Runs as::

    python benchmarks/pretraining_data_scaling.py --seq 512 --dupe 10
    python benchmarks/pretraining_data_scaling.py --seq 128 --dupe 10 --jobs reference,direct-1,dask-2

Timings need an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_common  # noqa: E402

SOTU = bench_common.SOTU
PREDICTIONS = 20
JOBS = ("reference", "direct-1", "direct-2", "dask-1", "dask-2", "dask-1-warm", "dask-2-warm")


def _job_reference(args) -> dict:
    import random

    from official.nlp.data import create_pretraining_data as cpd
    from official.nlp.tools import tokenization

    start = time.perf_counter()
    tokenizer = tokenization.FullSentencePieceTokenizer(args.spm)
    text_fn = cpd.get_processor_text_fn(True, True)
    instances = cpd.create_training_instances(
        args.inputs, tokenizer, text_fn, args.seq, args.dupe, 0.1, 0.15, PREDICTIONS, random.Random(12345), True, 3
    )
    output = [os.path.join(args.out, "reference.tfrecord")]
    cpd.write_instance_to_example_files(instances, tokenizer, args.seq, PREDICTIONS, output, False, False)
    return {"instances": len(instances), "seconds": time.perf_counter() - start}


def _job_beam(args) -> dict:
    from albert_tf.data.beam_pipeline import PipelineConfig, TokenizerSpec, make_pretraining_data
    from albert_tf.data.dask_runner import dask_cluster
    from albert_tf.data.pretraining_instances import InstanceConfig

    runner, workers = args.job.split("-")[:2]
    warm = args.job.endswith("-warm")
    config = PipelineConfig(
        instance=InstanceConfig(max_seq_length=args.seq, max_predictions_per_seq=PREDICTIONS),
        tokenizer=TokenizerSpec(spm_model=args.spm),
        dupe_factor=args.dupe,
        seed=12345,
        input_format="sentences",
    )

    def run(**kwargs):
        start = time.perf_counter()
        summary = make_pretraining_data(args.inputs, os.path.join(args.out, "records"), config, **kwargs)
        return {"instances": summary.counters["instances"], "seconds": time.perf_counter() - start}

    if runner == "direct":
        return run(num_workers=int(workers))
    if not warm:
        return run(runner="dask", num_workers=int(workers))
    with dask_cluster(num_workers=int(workers)) as (address, _):
        return run(runner="dask", dask_address=address)


def _tree(process):
    import psutil

    try:
        return [process] + process.children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def _run_job(job: str, inputs, spm: str, out: Path, seq: int, dupe: int) -> dict:
    """Runs one job in a subprocess; adds its peak tree RSS, tree CPU and whole-process wall time."""
    import psutil

    out.mkdir(parents=True)
    argv = [sys.executable, __file__, "--job", job, "--spm", spm, "--out", str(out), "--seq", str(seq)]
    argv += ["--dupe", str(dupe), "--inputs", *inputs]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    watched, peak = psutil.Process(process.pid), 0
    while process.poll() is None:
        total = 0
        for each in _tree(watched):
            try:
                total += each.memory_info().rss
            except psutil.Error:
                pass
        peak = max(peak, total)
        time.sleep(0.05)
    stdout, stderr = process.communicate()
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if process.returncode != 0:
        raise RuntimeError(f"{job} failed:\n{stderr[-4000:]}")
    result = json.loads(stdout.strip().splitlines()[-1])
    result.update(
        job=job,
        wall_with_imports=wall,
        peak_mb=peak / 2**20,
        cpu=(after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
    )
    return result


def _convert(work: Path, corpus: Path):
    """Every address as one sentence per line (the original script's format); returns the paths."""
    return bench_common.sentence_files(work, sorted(corpus.glob("*.txt")))


_train_spm = bench_common.train_sample_spm


def _spread(paths, count: int):
    """`count` files evenly spaced over the corpus (its addresses get longer over the centuries)."""
    count = min(count, len(paths))
    return [paths[(i * len(paths)) // count] for i in range(count)]


def _table(rows, seq: int, dupe: int) -> str:
    reference = {r["files"]: r for r in rows if r["job"] == "reference"}
    single = {r["files"]: r for r in rows if r["job"] == "direct-1"}
    lines = [
        f"Sequence length {seq}, {PREDICTIONS} predictions, dupe factor {dupe}, 3-gram whole-word masking, "
        "SentencePiece 4k.",
        "",
        "| corpus | job | instances | s | s +imports | inst/s | × reference | × direct-1 | peak MB (tree) | CPU s |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        rate = r["instances"] / r["seconds"]
        ref, one = reference.get(r["files"]), single.get(r["files"])
        vs_ref = f"{rate / (ref['instances'] / ref['seconds']):.1f}×" if ref and r is not ref else "–"
        vs_one = f"{rate / (one['instances'] / one['seconds']):.2f}×" if one and r is not one else "–"
        lines.append(
            f"| {r['files']} files, {r['words'] / 1000:.0f}k words | {r['job']} | {r['instances']} | {r['seconds']:.1f} | "
            f"{r['wall_with_imports']:.1f} | {rate:.0f} | {vs_ref} | {vs_one} | {r['peak_mb']:.0f} | {r['cpu']:.1f} |"
        )
    ratios = []
    for files in sorted({r["files"] for r in rows}):
        by_job = {r["job"]: r["instances"] / r["seconds"] for r in rows if r["files"] == files}
        for two, one in (("dask-2", "dask-1"), ("dask-2-warm", "dask-1-warm"), ("dask-2", "direct-1"),
                         ("dask-2-warm", "direct-1"), ("direct-2", "direct-1")):
            if two in by_job and one in by_job:
                ratios.append(f"{files} files: {two} / {one} = {by_job[two] / by_job[one]:.2f}×")
    return "\n".join(lines + [""] + ratios)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--job", choices=JOBS)
    parser.add_argument("--inputs", nargs="*")
    parser.add_argument("--spm", help="a SentencePiece model (default: trained on the corpus)")
    parser.add_argument("--out")
    parser.add_argument("--seq", type=int, default=512, help="max_seq_length")
    parser.add_argument("--dupe", type=int, default=10, help="dupe_factor")
    parser.add_argument("--sizes", type=int, nargs="+", default=[25, 50, 100, 233], help="corpus sizes in files")
    parser.add_argument("--jobs", default=",".join(JOBS), help=f"comma-separated, of {', '.join(JOBS)}")
    parser.add_argument(
        "--reference-max-files", type=int, default=None, help="run the (slow) reference only up to this many files"
    )
    parser.add_argument("--corpus", type=Path, default=SOTU, help="a directory of *.txt files, one document per line")
    parser.add_argument("--work", type=Path, help="keep the converted corpus, model and outputs here")
    parser.add_argument("--json", type=Path, help="also write the rows here, one JSON object per line")
    args = parser.parse_args()
    if args.job:
        result = _job_reference(args) if args.job == "reference" else _job_beam(args)
        print(json.dumps(result))
        return 0

    jobs = [j for j in args.jobs.split(",") if j]
    unknown = sorted(set(jobs) - set(JOBS))
    if unknown:
        parser.error(f"unknown jobs {unknown}; choose from {', '.join(JOBS)}")
    if not args.corpus.is_dir():
        print(f"corpus not found at {args.corpus}", file=sys.stderr)
        return 1
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        paths = _convert(work, args.corpus)
        spm = args.spm or _train_spm(work, paths)
        for size in args.sizes:
            inputs = _spread(paths, size)
            words = sum(len(Path(p).read_text(encoding="utf-8").split()) for p in inputs)
            for job in jobs:
                if job == "reference" and args.reference_max_files is not None and len(inputs) > args.reference_max_files:
                    continue
                result = _run_job(job, inputs, spm, work / f"{len(inputs)}-{job}", args.seq, args.dupe)
                result.update(files=len(inputs), words=words, seq=args.seq, dupe=args.dupe)
                rows.append(result)
                rate = result["instances"] / result["seconds"]
                print(f"  {len(inputs):4d} files {job:12s} {result['instances']:7d} instances {result['seconds']:7.1f} s "
                      f"{rate:8.0f} inst/s {result['peak_mb']:6.0f} MB", file=sys.stderr, flush=True)
                if args.json:
                    with open(args.json, "a", encoding="utf-8") as f:
                        f.write(json.dumps(result) + "\n")
    print(_table(rows, args.seq, args.dupe))
    return 0


if __name__ == "__main__":
    sys.exit(main())
