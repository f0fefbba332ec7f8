"""Benchmark: on-the-fly masking (`albert_tf.data.on_the_fly`) against reading offline-masked records.

Makes a SentencePiece vocabulary and two ``make-pretraining-data`` outputs of the same instances
(length 128, 20 predictions, 3-gram whole-word masking by default): masked (the offline path) and
unmasked (``masked_lm_prob=0``, what ``pretrain --masking on-the-fly`` reads). Then, each in its
own process pinned to N cores (``sched_setaffinity``, TensorFlow's intra/inter-op pools and
tf.data's private pool all N), it measures batches of 32 per second of three stages:

* ``read offline records``: `make_pretraining_dataset` on the masked records (read, shuffle,
  batch, parse): what ``pretrain --masking offline`` feeds the model;
* ``on-the-fly end to end``: `make_on_the_fly_dataset` on the unmasked records (read, key,
  shuffle, batch, parse, draw and mask): what ``pretrain --masking on-the-fly`` feeds the model;
* ``masking pass only``: `masking_function` (restore ids, draws, masking) on parsed batches held
  in memory.

Steady state: after the first batch (which includes filling the shuffle buffer and, on the fly,
the XLA compilation; reported apart), ``--rounds`` rounds of ``--batches`` batches; the median
round's instances per wall second are reported, and per CPU second (less sensitive to other
load on the machine). Run on an idle machine for figures to quote::

    python benchmarks/on_the_fly_masking.py                       # about 2 minutes on 2 cores
    python benchmarks/on_the_fly_masking.py --batches 50 --rounds 2   # a quick check
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "albert_tf" / "resources" / "sample" / "sotu"
STAGES = ("read", "on-the-fly", "mask")
STAGE_NAMES = {
    "read": "read offline records",
    "on-the-fly": "on-the-fly end to end",
    "mask": "masking pass only",
}


def _pin(cores: int) -> None:
    """This process on its first `cores` CPUs, before TensorFlow starts its thread pools."""
    available = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, set(available[:cores]))


def _job(args) -> dict:
    _pin(args.cores)
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(args.cores)
    tf.config.threading.set_inter_op_parallelism_threads(args.cores)
    from albert_tf.data import on_the_fly as O
    from albert_tf.data.tfrecords import list_files, make_pretraining_dataset, parse_examples

    config = O.MaskingConfig.from_output_dir(args.unmasked)
    seq, predictions, batch = config.max_seq_length, config.max_predictions_per_seq, args.batch_size
    if args.stage == "read":
        dataset = make_pretraining_dataset(
            os.path.join(args.masked, "*.tfrecord"), seq, predictions, batch, seed=1, shuffle_buffer_size=args.shuffle
        )
    elif args.stage == "on-the-fly":
        dataset = O.make_on_the_fly_dataset(
            os.path.join(args.unmasked, "*.tfrecord"), batch, config, seed=1, shuffle_buffer_size=args.shuffle,
            jit_compile=not args.no_jit,
        )
    else:
        files = list_files(os.path.join(args.unmasked, "*.tfrecord"))
        serialized = tf.data.TFRecordDataset(files).batch(batch, drop_remainder=True).take(16)
        held = [(O.record_keys(0, tf.range(i * batch, (i + 1) * batch)), parse_examples(s, seq, predictions))
                for i, s in enumerate(serialized)]
        keys = tf.stack([k for k, _ in held])
        features = {name: tf.stack([f[name] for _, f in held]) for name in held[0][1]}
        mask = O.masking_function(config, seed=1, jit_compile=not args.no_jit)
        dataset = tf.data.Dataset.from_tensor_slices((keys, features)).repeat().map(
            mask, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True
        ).prefetch(tf.data.AUTOTUNE)
    options = tf.data.Options()
    options.threading.private_threadpool_size = args.cores
    options.threading.max_intra_op_parallelism = args.cores
    iterator = iter(dataset.with_options(options))
    start = time.perf_counter()
    next(iterator)
    first = time.perf_counter() - start
    rounds = []
    for _ in range(args.rounds):
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(args.batches):
            out = next(iterator)
        out["input_ids"].numpy()
        rounds.append((time.perf_counter() - wall, time.process_time() - cpu))
    instances = args.batches * batch
    return {
        "stage": args.stage,
        "cores": args.cores,
        "first_batch_s": first,
        "inst_per_s": statistics.median(instances / w for w, _ in rounds),
        "inst_per_cpu_s": statistics.median(instances / c for _, c in rounds),
        "rounds_inst_per_s": [instances / w for w, _ in rounds],
    }


def _run_job(args, stage: str, cores: int) -> dict:
    argv = [sys.executable, __file__, "--job", "--stage", stage, "--cores", str(cores), "--masked", args.masked,
            "--unmasked", args.unmasked, "--batches", str(args.batches), "--rounds", str(args.rounds),
            "--batch-size", str(args.batch_size), "--shuffle", str(args.shuffle)]
    if args.no_jit:
        argv.append("--no-jit")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    done = subprocess.run(argv, capture_output=True, text=True, check=False, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"{stage} on {cores} core(s) failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _prepare(args) -> None:
    """The vocabulary and both record sets in `args.work_dir` (reused when already there)."""
    from albert_tf.data.beam_pipeline import PipelineConfig, TokenizerSpec, make_pretraining_data
    from albert_tf.data.pretraining_instances import InstanceConfig
    from albert_tf.tokenization import train_sentencepiece

    work = Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    inputs = sorted(str(p) for p in Path(args.corpus).glob("*.txt"))
    if not inputs:
        raise SystemExit(f"no *.txt files in {args.corpus}")
    spm = work / "spm.model"
    if not spm.exists():
        train_sentencepiece(inputs, str(work / "spm"), args.vocab_size, seed=1)
    for name, rate in (("masked", 0.15), ("unmasked", 0.0)):
        out = work / name
        if (out / "metadata.json").exists():
            continue
        make_pretraining_data(
            inputs,
            str(out),
            PipelineConfig(
                instance=InstanceConfig(
                    max_seq_length=args.max_seq_length, max_predictions_per_seq=args.max_predictions_per_seq,
                    masked_lm_prob=rate,
                ),
                tokenizer=TokenizerSpec(spm_model=str(spm)),
                dupe_factor=args.dupe_factor,
                seed=12345,
                input_format="paragraphs",
                num_shards=4,
            ),
            overwrite=True,
        )
    args.masked, args.unmasked = str(work / "masked"), str(work / "unmasked")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default=str(SAMPLE), help="directory of *.txt files (default: the bundled sample)")
    parser.add_argument("--work-dir", help="vocabulary and records, reused when present (default: a temporary dir)")
    parser.add_argument("--vocab-size", type=int, default=3000)
    parser.add_argument("--dupe-factor", type=int, default=3)
    parser.add_argument("--max-seq-length", type=int, default=128)
    parser.add_argument("--max-predictions-per-seq", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--shuffle", type=int, default=10000, help="shuffle buffer (records)")
    parser.add_argument("--batches", type=int, default=300, help="batches per measured round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cores", default="1,2", help="comma-separated core counts to compare")
    parser.add_argument("--no-jit", action="store_true", help="the masking without XLA")
    parser.add_argument("--output", help="also write the results as JSON lines to this file")
    parser.add_argument("--job", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--stage", choices=STAGES, help=argparse.SUPPRESS)
    parser.add_argument("--masked", help=argparse.SUPPRESS)
    parser.add_argument("--unmasked", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.job:
        args.cores = int(args.cores)
        print(json.dumps(_job(args)))
        return 0

    cores = [int(c) for c in args.cores.split(",")]
    available = len(os.sched_getaffinity(0))
    if max(cores) > available:
        print(f"only {available} core(s) available: measuring {[c for c in cores if c <= available]}", file=sys.stderr)
        cores = [c for c in cores if c <= available]
    with tempfile.TemporaryDirectory() as tmp:
        if args.work_dir is None:
            args.work_dir = tmp
        _prepare(args)
        with open(os.path.join(args.unmasked, "metadata.json")) as f:
            instances = json.load(f)["counters"]["instances"]
        results = {}
        for stage in STAGES:
            for n in cores:
                results[stage, n] = _run_job(args, stage, n)
                r = results[stage, n]
                print(f"  {STAGE_NAMES[stage]:24s} {n} core(s): {r['inst_per_s']:9,.0f} inst/s", file=sys.stderr)

    print(
        f"\nlength {args.max_seq_length}, {args.max_predictions_per_seq} predictions, batch {args.batch_size}, "
        f"{instances:,d} instances, shuffle buffer {args.shuffle:,d}, {args.rounds} x {args.batches} batches"
        f"{', masking without XLA' if args.no_jit else ''}; load average {os.getloadavg()[0]:.1f}\n"
    )
    header = f"{'stage':24s}" + "".join(f" {f'{n} core(s) inst/s':>18s} {'inst/CPU-s':>11s}" for n in cores)
    header += f" {f'{cores[-1]} vs {cores[0]}':>8s}" if len(cores) > 1 else ""
    header += f" {f'first batch s ({cores[0]})':>18s}"
    print(header)
    print("-" * len(header))
    for stage in STAGES:
        line = f"{STAGE_NAMES[stage]:24s}"
        for n in cores:
            r = results[stage, n]
            line += f" {r['inst_per_s']:18,.0f} {r['inst_per_cpu_s']:11,.0f}"
        if len(cores) > 1:
            line += f" {results[stage, cores[-1]]['inst_per_s'] / results[stage, cores[0]]['inst_per_s']:7.2f}x"
        line += f" {results[stage, cores[0]]['first_batch_s']:18.2f}"
        print(line)
    for n in cores:
        fly, read = results["on-the-fly", n]["inst_per_s"], results["read", n]["inst_per_s"]
        mask = results["mask", n]["inst_per_s"]
        print(
            f"\n{n} core(s): on the fly end to end is {fly / read:.2f}x the speed of reading offline records "
            f"({fly:,.0f} vs {read:,.0f} inst/s) and {fly / mask:.2f}x that of the masking pass alone"
        )
    if args.output:
        with open(args.output, "a") as f:
            for r in results.values():
                f.write(json.dumps({**r, "instances": instances, "no_jit": args.no_jit}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
