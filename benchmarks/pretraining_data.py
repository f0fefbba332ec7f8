"""Benchmark: ALBERT pretraining data, Beam path and on-the-fly tf.data path, against tf-models-official.

Builds a sentence-per-line corpus from State of the Union files (``../shared/data/en/sotu``), trains
a small SentencePiece model on it, then runs each job in its own subprocess (so peak RSS is the
job's own) on two corpus sizes:

* ``reference``: ``official.nlp.data.create_pretraining_data`` (the closest installed reference:
  SentencePiece, ``do_whole_word_mask``, ``max_ngram_size=3``), one process, tokenize + create +
  write, as its ``main`` does;
* ``beam x1``: :func:`albert_tf.data.beam_pipeline.make_pretraining_data` on the in-memory FnApiRunner;
* ``beam x2``: the same with two worker processes (``--direct_running_mode=multi_processing``);
* ``on-the-fly``: :func:`albert_tf.data.on_the_fly.make_on_the_fly_dataset` masking the Beam output
  anew, pinned to one CPU core with one tf.data thread (steady state, after the first batch).

Instances/s are end to end (reading text to files written, imports excluded) for the writers; the
reference's instance count differs because it makes BERT's NSP pairs (random B half the time,
putting unused sentences back), not SOP pairs. Peak RSS is the job process's (the reference's
includes TensorFlow), plus the largest worker's for ``beam x2``. Prints a table; run as
``python benchmarks/pretraining_data.py`` (about 3-5 minutes on 2 cores). Scaling over corpus sizes
and workers, Dask included, is ``benchmarks/pretraining_data_scaling.py``.
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
SEQ, PRED = 512, 20


def _peak_rss_mb(children: bool = False) -> float:
    who = resource.RUSAGE_CHILDREN if children else resource.RUSAGE_SELF
    return resource.getrusage(who).ru_maxrss / 1024.0


def _cpu_seconds() -> float:
    """CPU time of this process and its finished children (Beam's worker processes)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def _job_reference(args) -> dict:
    import random

    from official.nlp.data import create_pretraining_data as cpd
    from official.nlp.tools import tokenization

    start, cpu = time.perf_counter(), _cpu_seconds()
    tokenizer = tokenization.FullSentencePieceTokenizer(args.spm)
    text_fn = cpd.get_processor_text_fn(True, True)
    instances = cpd.create_training_instances(
        args.inputs, tokenizer, text_fn, SEQ, args.dupe, 0.1, 0.15, PRED, random.Random(12345), True, 3
    )
    output = [os.path.join(args.out, "ref.tfrecord")]
    cpd.write_instance_to_example_files(instances, tokenizer, SEQ, PRED, output, False, False)
    return {"instances": len(instances), "seconds": time.perf_counter() - start, "cpu": _cpu_seconds() - cpu}


def _job_beam(args) -> dict:
    from albert_tf.data.beam_pipeline import PipelineConfig, TokenizerSpec, make_pretraining_data
    from albert_tf.data.pretraining_instances import InstanceConfig

    # As for the reference, imports are outside the timing; pipeline construction and the runner's
    # start (and the worker processes') are inside.
    start, cpu = time.perf_counter(), _cpu_seconds()
    config = PipelineConfig(
        instance=InstanceConfig(max_seq_length=SEQ, max_predictions_per_seq=PRED),
        tokenizer=TokenizerSpec(spm_model=args.spm),
        dupe_factor=args.dupe,
        seed=12345,
        num_shards=2,
    )
    beam_args = []
    if args.workers > 1:
        beam_args = ["--direct_running_mode=multi_processing", f"--direct_num_workers={args.workers}"]
    summary = make_pretraining_data(args.inputs, args.out, config, pipeline_args=beam_args)
    seconds = time.perf_counter() - start
    return {"instances": summary.counters["instances"], "seconds": seconds, "cpu": _cpu_seconds() - cpu}


def _job_on_the_fly(args) -> dict:
    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    from albert_tf.data.on_the_fly import MaskingConfig, make_on_the_fly_dataset

    config = MaskingConfig.from_output_dir(args.records)
    files = sorted(str(p) for p in Path(args.records).glob("part-*"))
    dataset = make_on_the_fly_dataset(files, 64, config, seed=1, shuffle_buffer_size=1000, num_parallel_calls=1)
    options = tf.data.Options()
    options.threading.private_threadpool_size = 1
    options.threading.max_intra_op_parallelism = 1
    dataset = dataset.with_options(options)
    iterator = iter(dataset)
    first = time.perf_counter()
    next(iterator)
    warm, cpu = time.perf_counter(), time.process_time()
    batches = args.batches
    for _ in range(batches):
        batch = next(iterator)
    batch["input_ids"].numpy()
    end = time.perf_counter()
    return {
        "instances": 64 * batches,
        "seconds": end - warm,
        "cpu": time.process_time() - cpu,
        "first_batch_seconds": warm - first,
    }


JOBS = {"reference": _job_reference, "beam": _job_beam, "on-the-fly": _job_on_the_fly}


def _run_job(kind: str, **kwargs) -> dict:
    argv = [sys.executable, __file__, "--job", kind]
    for key, value in kwargs.items():
        if isinstance(value, list):
            argv += [f"--{key}"] + [str(v) for v in value]
        else:
            argv += [f"--{key}", str(value)]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{kind} job failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _make_corpus(work: Path, num_files: int, offset: int = 0):
    """`num_files` addresses from `offset` on, one sentence per line; the paths."""
    sources = sorted(SOTU.glob("*.txt"))[offset : offset + num_files]
    return bench_common.sentence_files(work, sources, folder=f"corpus{num_files}")


_train_spm = bench_common.train_sample_spm


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--job", choices=sorted(JOBS))
    parser.add_argument("--inputs", nargs="*")
    parser.add_argument("--spm")
    parser.add_argument("--out")
    parser.add_argument("--records")
    parser.add_argument("--dupe", type=int, default=10)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--batches", type=int, default=30)
    parser.add_argument("--sizes", type=int, nargs=2, default=[4, 12], help="corpus sizes in sotu files")
    args = parser.parse_args()
    if args.job:
        result = JOBS[args.job](args)
        result["peak_rss_mb"] = _peak_rss_mb()
        result["peak_child_rss_mb"] = _peak_rss_mb(children=True)
        print(json.dumps(result))
        return 0

    if not SOTU.exists():
        print(f"shared data not found at {SOTU}", file=sys.stderr)
        return 1
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        small_n, large_n = args.sizes
        large = _make_corpus(work, large_n, offset=150)
        small = large[:small_n]
        spm_model = _train_spm(work, large)
        for name, paths in (("small", small), ("large", large)):
            tokens = sum(len(Path(p).read_text(encoding="utf-8").split()) for p in paths)
            corpus = f"{len(paths)} files, {tokens / 1000:.0f}k words"
            jobs = [
                ("reference (official, 1 process)", "reference", {}),
                ("beam x1 (in-memory)", "beam", {"workers": 1}),
            ]
            if name == "large":
                jobs.append(("beam x2 (2 worker processes)", "beam", {"workers": 2}))
            for label, kind, extra in jobs:
                out = work / f"{name}-{kind}-{extra.get('workers', 0)}"
                if kind == "reference":
                    out.mkdir()
                result = _run_job(kind, inputs=paths, spm=spm_model, out=out, dupe=args.dupe, **extra)
                rows.append((corpus, label, result))
                rate = result["instances"] / result["seconds"]
                print(f"  {corpus:22s} {label:32s} {rate:9.1f} inst/s", file=sys.stderr)
        records = work / "large-beam-1"
        result = _run_job("on-the-fly", records=records, batches=args.batches)
        rows.append((f"{large_n} files (records)", "on-the-fly tf.data (1 core)", result))

    reference = {corpus: r for corpus, label, r in rows if label.startswith("reference")}
    print(f"\nseq {SEQ}, {PRED} predictions, dupe_factor {args.dupe}, ngram 3, whole-word, SentencePiece 4k\n")
    header = (
        f"{'corpus':24s} {'path':32s} {'instances':>9s} {'seconds':>8s} {'inst/s':>9s} {'vs ref':>7s} "
        f"{'inst/cpu-s':>10s} {'RSS MB':>8s} {'worker MB':>9s}"
    )
    print(header)
    print("-" * len(header))
    for corpus, label, r in rows:
        rate = r["instances"] / r["seconds"]
        ref = reference.get(corpus)
        speedup = f"{rate / (ref['instances'] / ref['seconds']):6.1f}x" if ref else "      -"
        worker = f"{r['peak_child_rss_mb']:9.0f}" if label.startswith("beam x2") else "        -"
        print(
            f"{corpus:24s} {label:32s} {r['instances']:9d} {r['seconds']:8.2f} {rate:9.1f} {speedup:>7s} "
            f"{r['instances'] / r['cpu']:10.1f} {r['peak_rss_mb']:8.0f} {worker}"
        )
    fly = rows[-1][2]
    print(f"\non-the-fly first batch (tracing + fill): {fly['first_batch_seconds']:.2f} s")
    print("inst/cpu-s: instances per CPU second (all processes), less sensitive than wall time to a shared machine")
    return 0


if __name__ == "__main__":
    sys.exit(main())
