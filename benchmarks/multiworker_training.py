"""tf.distribute across worker processes: 2 workers x 1 core against 1 worker x 2 cores, ALBERT pretraining.

The same model, optimizer, global batch and synthetic data in every case; only the way the two
cores of the machine are used changes:

* ``1x2`` (the peer): one process pinned to cores {0, 1} (`os.sched_setaffinity`; the first two
  cores this process may use, if it is itself restricted), TensorFlow intra-op and inter-op
  threads 2, TensorFlow's default strategy, global batch B;
* ``2x1``: two processes, each pinned to one core (intra-op and inter-op threads 1), joined by
  `MultiWorkerMirroredStrategy` through ``TF_CONFIG`` (a 2-worker cluster on 127.0.0.1, free
  ports), B/2 sequences per worker, the gradients all-reduced over gRPC (RING) every step;
* ``1x1`` (once): one process on core 0 with 1 thread, global batch B: the per-core reference,
  so that the gain of the second core is visible for both ways of using it.

The model is the package's own pretraining run: `AlbertPretrainer` with MLM + SOP heads, LAMB
with the run's schedule, weight decay and global-norm clipping, float32, no XLA (the CPU default),
compiled and fitted exactly as `run_pretraining` does (`albert_tf.training.pretraining.build_pretraining_model`
and `pretraining_fit_scope`, which carries the package's multi-worker handling of `model.fit`). The data is a
few in-memory synthetic batches repeated, so no data loading is measured. Each case warms up
(tracing, first steps), then times at least `--steps-seconds` of steps (a step count estimated from
the fastest later warm-up step) with a Keras callback that waits for each step's loss; the workers
of the 2x1 case agree on the step count first (an all-reduce of each one's estimate), so they stop
together. The pair alternates (1x2, 2x1, then 2x1, 1x2, ...) over `--repeats` repeats, every case
in fresh processes.

Printed: per case the step time (median and p10-p90), sequences/s (global batch / median step
time), the ratio to the 1x2 case of the same repeat, the CPU seconds per step of all the case's
processes (less sensitive than wall time to other jobs on the machine), then the scaling
efficiency = throughput(2x1) / throughput(1x2) per repeat (the same two cores: 1.0 means the
communication costs nothing), the per-core gains against 1x1 and the all-reduce payload per step.
One JSON line per case is appended to ``benchmarks/results/multiworker_training.jsonl`` (date,
load average at the start and end of the case, figures).

    .venv/bin/python benchmarks/multiworker_training.py    # small, length 128, batch 32, 3 repeats + 1x1 (6-11 min)
    .venv/bin/python benchmarks/multiworker_training.py --quick --results /tmp/mw.jsonl   # smoke test (~40 s idle)

Options: ``--config`` (a preset name, default "small"), ``--vocab-size`` (default: the preset's),
``--batch-size`` (global), ``--seq-length``, ``--predictions``, ``--steps-seconds`` (timed seconds
per case), ``--warmup`` (untimed steps), ``--repeats``, ``--no-single-core`` (skip 1x1),
``--communication`` (auto / ring for the all-reduce), ``--results`` (the JSONL file).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import socket
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_RESULTS = os.path.join(REPO, "benchmarks", "results", "multiworker_training.jsonl")

# name -> (workers, cores per worker, description)
CASES = {
    "1x2": (1, 2, "1 worker x 2 cores, default strategy"),
    "2x1": (2, 1, "2 workers x 1 core, MultiWorkerMirroredStrategy"),
    "1x1": (1, 1, "1 worker x 1 core, default strategy"),
}


# --- the worker (one process of a case) ----------------------------------------------------------


def synthetic_features(vocab: int, examples: int, seq: int, predictions: int, seed: int = 0) -> dict:
    """`examples` pretraining examples of the original feature layout (random tokens, all positions masked-weight 1)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    positions = np.sort(np.stack([rng.choice(np.arange(1, seq - 1), predictions, replace=False)
                                  for _ in range(examples)]), 1)
    ids = rng.integers(5, vocab, size=(examples, seq)).astype("int32")
    return {
        "input_ids": ids,
        "input_mask": np.ones((examples, seq), "int32"),
        "segment_ids": np.repeat([[0] * (seq // 2) + [1] * (seq - seq // 2)], examples, 0).astype("int32"),
        "masked_lm_positions": positions.astype("int32"),
        "masked_lm_ids": np.take_along_axis(ids, positions, 1).astype("int32"),
        "masked_lm_weights": np.ones((examples, predictions), "float32"),
        "next_sentence_labels": rng.integers(0, 2, size=(examples, 1)).astype("int32"),
    }


def worker_main(args) -> int:
    """One process of a case: pin, configure threads, build the run's model, warm up, time."""
    cores = [int(c) for c in args.cores.split(",")]
    os.sched_setaffinity(0, cores)  # before TensorFlow starts any thread
    t_enter = time.perf_counter()
    import numpy as np
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)

    import keras

    from albert_tf.config import load_config
    from albert_tf.training.pretraining import PretrainingRunConfig, build_pretraining_model, pretraining_fit_scope, prepare_pretraining_dataset

    multi_worker = "TF_CONFIG" in os.environ
    if multi_worker:
        implementation = {
            "auto": tf.distribute.experimental.CommunicationImplementation.AUTO,
            "ring": tf.distribute.experimental.CommunicationImplementation.RING,
        }[args.communication]
        strategy = tf.distribute.MultiWorkerMirroredStrategy(
            communication_options=tf.distribute.experimental.CommunicationOptions(implementation=implementation)
        )
    else:
        strategy = tf.distribute.get_strategy()

    t_strategy = time.perf_counter()
    overrides = {"vocab_size": args.vocab_size} if args.vocab_size else {}
    albert_config = load_config(args.config, **overrides)
    if albert_config.max_position_embeddings < args.seq_length:
        albert_config = albert_config.replace(max_position_embeddings=args.seq_length)
    run = PretrainingRunConfig(
        model_dir=tempfile.mkdtemp(prefix="multiworker-bench-"),  # nothing is written there
        model_config=albert_config,
        batch_size=args.batch_size,
        max_seq_length=args.seq_length,
        max_predictions_per_seq=args.predictions,
        num_train_steps=100000,
        num_warmup_steps=100,
        learning_rate=0.005,
        precision="float32",
        jit_compile=False,
        verbose=0,
    )
    keras.utils.set_random_seed(run.seed)
    model, _ = build_pretraining_model(run, albert_config, strategy, jit_compile=False)
    params = int(sum(np.prod(v.shape) for v in model.trainable_variables))

    features = synthetic_features(albert_config.vocab_size, 4 * args.batch_size, args.seq_length, args.predictions)
    dataset = tf.data.Dataset.from_tensor_slices(features).batch(args.batch_size, drop_remainder=True).cache().repeat()
    dataset = prepare_pretraining_dataset(dataset, 0, run)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    dataset = dataset.with_options(options)

    ends, cpu = [], []  # wall clock and this process's CPU time (all its threads) at each step's end

    class Timer(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            ends[:] = [time.perf_counter()]
            cpu[:] = [time.process_time()]

        def on_train_batch_end(self, batch, logs=None):
            float(np.asarray(logs["loss"]).reshape(-1)[0])  # waits for the step (and its all-reduce)
            ends.append(time.perf_counter())
            cpu.append(time.process_time())

    def fit(steps):
        with pretraining_fit_scope(model, strategy):
            model.fit(dataset, epochs=1, steps_per_epoch=steps, callbacks=[Timer()], verbose=0, shuffle=False)
        return [b - a for a, b in zip(ends[:-1], ends[1:])]

    t0 = time.perf_counter()
    warm = fit(args.warmup)
    warmup_s = time.perf_counter() - t0

    def agreed(steps: int) -> int:
        """The largest of the workers' step counts: they must all run the same number of steps.
        (ReduceOp has no MAX: each worker sums its count into its own slot of a vector.)"""
        if not multi_worker:
            return steps
        task, workers = strategy.cluster_resolver.task_id, strategy.num_replicas_in_sync
        slots = strategy.reduce(
            tf.distribute.ReduceOp.SUM,
            strategy.run(lambda: tf.one_hot(task, workers, dtype=tf.float32) * float(steps)),
            axis=None,
        )
        return int(np.max(slots.numpy()))

    # Steps estimated from the fastest later warm-up step (on the short side: more steps, not
    # fewer); if the machine slowed down and they took less than --steps-seconds, more follow.
    estimate = min(warm[len(warm) // 2:])
    steps = int(min(args.max_steps, max(args.min_steps, math.ceil(args.steps_seconds / max(estimate, 1e-6)))))
    steps, timed, cpu_s = agreed(steps), [], 0.0
    while steps:
        # One step more than timed: the first step of a `fit` call also creates the data iterator.
        timed += fit(steps + 1)[1:]
        cpu_s += cpu[-1] - cpu[1]
        remaining = args.steps_seconds - sum(timed)
        more = math.ceil(remaining / float(np.median(timed))) if remaining > 0 else 0
        steps = agreed(min(more, args.max_steps - len(timed)))
    task = strategy.cluster_resolver.task_id if multi_worker else 0
    result = {
        "task": int(task or 0),
        "replicas": int(strategy.num_replicas_in_sync),
        "affinity": sorted(os.sched_getaffinity(0)),
        "threads": args.threads,
        "params": params,
        "warmup_steps": args.warmup,
        "warmup_s": warmup_s,
        "startup_s": {"imports": t_strategy - t_enter, "build": t0 - t_strategy},
        "step_times": timed,
        "cpu_s": cpu_s,
    }
    print("RESULT " + json.dumps(result), flush=True)
    return 0


# --- the driver ----------------------------------------------------------------------------------


def free_ports(n: int):
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def worker_command(args, cores: str, threads: int):
    return [
        sys.executable, os.path.abspath(__file__), "--worker",
        f"--cores={cores}", f"--threads={threads}",
        f"--config={args.config}", f"--vocab-size={args.vocab_size or 0}",
        f"--batch-size={args.batch_size}", f"--seq-length={args.seq_length}", f"--predictions={args.predictions}",
        f"--steps-seconds={args.steps_seconds}", f"--warmup={args.warmup}",
        f"--min-steps={args.min_steps}", f"--max-steps={args.max_steps}", f"--communication={args.communication}",
    ]


def worker_env(threads: int, tf_config=None):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="", KERAS_BACKEND="tensorflow",
               OMP_NUM_THREADS=str(threads))
    env["PYTHONPATH"] = REPO + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.pop("TF_CONFIG", None)
    if tf_config is not None:
        env["TF_CONFIG"] = json.dumps(tf_config)
    return env


def run_case(name: str, args, log_dir: str) -> dict:
    """Runs one case in fresh processes; returns worker 0's figures (and checks the others)."""
    workers, cores_per_worker, _ = CASES[name]
    available = sorted(os.sched_getaffinity(0))[:2]  # cores 0 and 1 on an unrestricted machine
    ports = free_ports(workers) if workers > 1 else []
    procs = []
    for i in range(workers):
        cores = ",".join(str(available[i * cores_per_worker + c]) for c in range(cores_per_worker))
        tf_config = None
        if workers > 1:
            tf_config = {"cluster": {"worker": [f"127.0.0.1:{p}" for p in ports]},
                         "task": {"type": "worker", "index": i}}
        log_path = os.path.join(log_dir, f"{name}-{i}-{time.time_ns()}.log")
        log = open(log_path, "w")
        proc = subprocess.Popen(worker_command(args, cores, cores_per_worker), stdout=subprocess.PIPE,
                                stderr=log, text=True, env=worker_env(cores_per_worker, tf_config))
        procs.append((proc, log, log_path))
    deadline = time.time() + args.timeout
    results = []
    try:
        for proc, log, log_path in procs:
            try:
                out, _ = proc.communicate(timeout=max(1.0, deadline - time.time()))
            except subprocess.TimeoutExpired:
                raise RuntimeError(f"case {name} did not finish in {args.timeout:.0f}s; log: {log_path}")
            lines = [l for l in out.splitlines() if l.startswith("RESULT ")]
            if proc.returncode or not lines:
                log.flush()
                with open(log_path) as f:
                    raise RuntimeError(f"case {name} worker exited with {proc.returncode}:\n{f.read()[-3000:]}")
            results.append(json.loads(lines[-1][len("RESULT "):]))
    finally:
        for proc, log, _ in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            log.close()
    counts = {len(r["step_times"]) for r in results}
    if len(counts) != 1 or any(r["replicas"] != workers for r in results):
        raise RuntimeError(f"case {name}: the workers disagree: {[(r['replicas'], len(r['step_times'])) for r in results]}")
    return results


def percentile(sorted_values, q: float) -> float:
    import numpy as np

    return float(np.percentile(sorted_values, q))


def summarize(name: str, repeat: int, results: list, args, load_start, load_end, started: str) -> dict:
    """The case's record: worker 0's step times (the workers step in lockstep), everyone's CPU time."""
    worker = results[0]
    times = sorted(worker["step_times"])
    median = percentile(times, 50)
    workers, cores, description = CASES[name]
    return {
        "date": started,
        "case": name,
        "description": description,
        "repeat": repeat,
        "workers": workers,
        "cores_per_worker": cores,
        "config": args.config,
        "vocab_size": args.vocab_size,
        "batch_size": args.batch_size,
        "per_worker_batch": args.batch_size // workers,
        "seq_length": args.seq_length,
        "predictions": args.predictions,
        "communication": args.communication if workers > 1 else None,
        "params": worker["params"],
        "allreduce_bytes_per_step": worker["params"] * 4 if workers > 1 else 0,
        "timed_steps": len(times),
        "timed_s": float(sum(times)),
        "warmup_steps": worker["warmup_steps"],
        "warmup_s": worker["warmup_s"],
        "startup_s": worker["startup_s"],
        "step_s_median": median,
        "step_s_p10": percentile(times, 10),
        "step_s_p90": percentile(times, 90),
        "seq_per_s": args.batch_size / median,
        "seq_per_s_mean": args.batch_size * len(times) / sum(times),
        # CPU seconds of all the case's processes per step (threads' spin-waits included): less
        # sensitive than wall time to other jobs on the machine, which take cores, not CPU time.
        "cpu_s_per_step": sum(r["cpu_s"] for r in results) / len(times),
        "loadavg_start": load_start,
        "loadavg_end": load_end,
        "quick": bool(args.quick),
    }


def table(records) -> str:
    peers = {r["repeat"]: r for r in records if r["case"] == "1x2"}
    lines = [
        "| case | repeat | step time median (s) | p10-p90 (s) | seq/s | vs 1x2 same repeat | CPU s/step, all workers "
        "| timed steps (s) | load avg start/end |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in records:
        peer = peers.get(r["repeat"])
        ratio = f"{r['seq_per_s'] / peer['seq_per_s']:.2f}x" if peer else "-"
        lines.append(
            f"| {r['case']} ({r['description']}) | {r['repeat']} | {r['step_s_median']:.3f} | "
            f"{r['step_s_p10']:.3f}-{r['step_s_p90']:.3f} | {r['seq_per_s']:.1f} | {ratio} | "
            f"{r['cpu_s_per_step']:.2f} | {r['timed_steps']} ({r['timed_s']:.1f}) | {r['loadavg_start'][0]:.2f}/{r['loadavg_end'][0]:.2f} |"
        )
    return "\n".join(lines)


def efficiency_summary(records) -> str:
    by = {(r["case"], r["repeat"]): r for r in records}
    repeats = sorted({r["repeat"] for r in records})
    effs = [by[("2x1", k)]["seq_per_s"] / by[("1x2", k)]["seq_per_s"]
            for k in repeats if ("2x1", k) in by and ("1x2", k) in by]
    out = []
    if effs:
        out.append(f"scaling efficiency throughput(2x1) / throughput(1x2), same repeat: "
                   f"{', '.join(f'{e:.2f}' for e in effs)} (range {min(effs):.2f}-{max(effs):.2f})")
        cpu = [by[("1x2", k)]["cpu_s_per_step"] / by[("2x1", k)]["cpu_s_per_step"]
               for k in repeats if ("2x1", k) in by and ("1x2", k) in by]
        out.append(f"CPU-time ratio CPU s/step(1x2) / CPU s/step(2x1, both workers), same repeat: "
                   f"{', '.join(f'{e:.2f}' for e in cpu)} (range {min(cpu):.2f}-{max(cpu):.2f})")
    single = [r for r in records if r["case"] == "1x1"]
    if single:
        base = single[0]["seq_per_s"]
        for case in ("1x2", "2x1"):
            values = [r["seq_per_s"] / base for r in records if r["case"] == case]
            if values:
                out.append(f"per-core gain {case} / 1x1 ({base:.1f} seq/s): "
                           f"{min(values):.2f}-{max(values):.2f}x (2.0 = perfect use of the second core)")
    multi = [r for r in records if r["case"] == "2x1"]
    if multi:
        b = multi[0]["allreduce_bytes_per_step"]
        out.append(f"all-reduce payload: {multi[0]['params']:,} trainable parameters = {b / 1e6:.1f} MB of float32 "
                   f"gradients per step; a ring all-reduce sends and receives 2(N-1)/N x that per worker "
                   f"({b / 1e6:.1f} MB each way at N=2)")
    return "\n".join(out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="small", help="a preset of albert_tf.config (default: small)")
    parser.add_argument("--vocab-size", type=int, default=0, help="override the preset's vocabulary (0: keep it)")
    parser.add_argument("--batch-size", type=int, default=32, help="global batch (split over the workers)")
    parser.add_argument("--seq-length", type=int, default=128)
    parser.add_argument("--predictions", type=int, default=20, help="masked positions per sequence")
    parser.add_argument("--steps-seconds", type=float, default=15.0, help="timed seconds of steps per case (at least)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first (tracing, first steps)")
    parser.add_argument("--min-steps", type=int, default=5)
    parser.add_argument("--max-steps", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3, help="repeats of the 1x2 / 2x1 pair, alternating their order")
    parser.add_argument("--no-single-core", action="store_true", help="skip the 1 worker x 1 core reference case")
    parser.add_argument("--communication", choices=("auto", "ring"), default="auto",
                        help="MultiWorkerMirroredStrategy all-reduce implementation (on CPU AUTO is RING)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per case before it is abandoned")
    parser.add_argument("--results", default=DEFAULT_RESULTS, help="JSONL file the case records are appended to")
    parser.add_argument("--quick", action="store_true",
                        help="smoke test: tiny config, vocab 1000, length 32, batch 8, 1 warm-up step, >= 3 timed steps, "
                        "1 repeat, no 1x1")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--cores", help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.worker:
        return worker_main(args)
    if args.quick:
        args.config, args.vocab_size, args.seq_length, args.batch_size, args.predictions = "tiny", 1000, 32, 8, 5
        args.steps_seconds, args.warmup, args.min_steps, args.repeats, args.no_single_core = 0.5, 1, 3, 1, True
    if args.batch_size % 2:
        parser.error("--batch-size must be even (it is split over 2 workers)")
    if len(os.sched_getaffinity(0)) < 2:
        parser.error(f"needs 2 cores; this process may run on {sorted(os.sched_getaffinity(0))} only")

    order = []
    for k in range(1, args.repeats + 1):
        order += [("1x2", k), ("2x1", k)] if k % 2 else [("2x1", k), ("1x2", k)]
    if not args.no_single_core:
        order.append(("1x1", 1))
    print(f"config {args.config}{f' (vocab {args.vocab_size})' if args.vocab_size else ''}, global batch "
          f"{args.batch_size}, length {args.seq_length}, {args.predictions} predictions, LAMB, float32, no XLA; "
          f">= {args.steps_seconds:g} s timed per case after {args.warmup} warm-up steps", flush=True)
    records = []
    os.makedirs(os.path.dirname(os.path.abspath(args.results)), exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="multiworker-bench-logs-") as log_dir:
        for name, repeat in order:
            started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
            load_start = list(os.getloadavg())
            results = run_case(name, args, log_dir)
            record = summarize(name, repeat, results, args, load_start, list(os.getloadavg()), started)
            peer = next((r for r in records if r["case"] == "1x2" and r["repeat"] == repeat), None)
            peer = record if name == "1x2" else peer
            record["vs_1x2_same_repeat"] = record["seq_per_s"] / peer["seq_per_s"] if peer else None
            records.append(record)
            if name == "1x2":  # the peer ran after its 2x1 partner in this repeat: fill the partner's ratio
                for r in records:
                    if r["repeat"] == repeat and r["case"] == "2x1":
                        r["vs_1x2_same_repeat"] = r["seq_per_s"] / record["seq_per_s"]
            print(f"  [{time.strftime('%H:%M:%S')}] {name} repeat {repeat}: {record['step_s_median']:.3f} s/step "
                  f"(p10-p90 {record['step_s_p10']:.3f}-{record['step_s_p90']:.3f}), {record['seq_per_s']:.1f} seq/s, "
                  f"{record['timed_steps']} steps in {record['timed_s']:.1f} s, load {load_start[0]:.2f}",
                  flush=True)
    for r in records:
        if r["case"] == "1x1":
            peers = [p["seq_per_s"] for p in records if p["case"] == "1x2"]
            r["vs_1x2_same_repeat"] = r["seq_per_s"] / peers[0] if peers else None
    with open(args.results, "a") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")
    print()
    print(table(records))
    print()
    print(efficiency_summary(records))
    print(f"\n{len(records)} records appended to {args.results}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
