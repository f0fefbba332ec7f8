"""Pretraining throughput and peak memory: albert_tf `AlbertPretrainer` beside keras-hub `AlbertMaskedLM`.

Same shapes, random weights (no preset download), the same synthetic batches, the same optimizer
(albert_tf's LAMB, a fresh instance per model). albert_tf trains its MLM and SOP heads (the ALBERT
objective); keras-hub's `AlbertMaskedLM` has only the MLM head (its SOP would be one extra [H, 2]
dense layer, negligible here). Two ways of timing:

* default: every (implementation, precision, XLA) case runs `model.fit` in its own subprocess, as
  in `encoder_inference.py`, so its peak RSS is its own;
* `--interleave`: both implementations of a mode in one subprocess, their steps alternated, each
  step one `train_on_batch` call (not `model.fit`), so a change of machine load hits both alike.

Each case is timed for at least `--min-seconds` (default 10) and `--steps` steps after `--warmup`
untimed steps; the table has the median step and the range. Prints a Markdown table with
sequences/s, s/step, peak RSS and the ratio against keras-hub in the same mode.

    python benchmarks/training_throughput.py                             # base and small, all modes
    python benchmarks/training_throughput.py --shapes small --interleave
    python benchmarks/training_throughput.py --shapes base --precisions float32 --xla off --min-seconds 30

Shapes: "base" is ALBERT-base (vocab 30000, E=128, H=768, L=12, 12 heads, I=3072), "small" the
model of `pretrain_sotu.py` (vocab 8000, E=128, H=256, L=6, 4 heads, I=1024), "tiny" a test size.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_common  # noqa: E402

SHAPES = {
    # vocab, E, H, L, heads, I
    "base": (30000, 128, 768, 12, 12, 3072),
    "small": (8000, 128, 256, 6, 4, 1024),
    "tiny": (500, 16, 32, 2, 2, 64),
}


def peak_rss_mb() -> float:
    """This process's peak resident set size (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def synthetic_batch(vocab: int, batch: int, seq: int, predictions: int, seed: int = 0) -> dict:
    """One batch of the original pretraining features: random tokens, `predictions` masked positions."""
    import numpy as np

    rng = np.random.default_rng(seed)
    positions = np.sort(np.stack([rng.choice(np.arange(1, seq - 1), predictions, replace=False) for _ in range(batch)]), 1)
    return {
        "input_ids": rng.integers(5, vocab, size=(batch, seq)).astype("int32"),
        "input_mask": np.ones((batch, seq), "int32"),
        "segment_ids": np.repeat([[0] * (seq // 2) + [1] * (seq - seq // 2)], batch, 0).astype("int32"),
        "masked_lm_positions": positions.astype("int32"),
        "masked_lm_ids": rng.integers(5, vocab, size=(batch, predictions)).astype("int32"),
        "masked_lm_weights": np.ones((batch, predictions), "float32"),
        "next_sentence_labels": rng.integers(0, 2, size=(batch, 1)).astype("int32"),
    }


def build_case(impl: str, precision: str, xla: bool, shape: str, batch: int, seq: int, predictions: int):
    """The compiled model of one implementation and a `train_on_batch` closure on the synthetic batch."""
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras
    import tensorflow as tf

    from albert_tf import AlbertConfig, AlbertEncoder
    from albert_tf.pretrainer import AlbertPretrainer
    from albert_tf.training import create_optimizer

    vocab, E, H, L, heads, I = SHAPES[shape]
    config = AlbertConfig(vocab_size=vocab, embedding_size=E, hidden_size=H, num_hidden_layers=L,
                          num_attention_heads=heads, intermediate_size=I, max_position_embeddings=max(seq, 512))
    keras.utils.set_random_seed(0)
    keras.mixed_precision.set_global_policy(precision)
    features = {k: tf.constant(v) for k, v in synthetic_batch(vocab, batch, seq, predictions).items()}
    optimizer = create_optimizer("lamb", 1e-4, num_train_steps=1000, num_warmup_steps=10)
    if impl == "albert_tf":
        model = AlbertPretrainer(AlbertEncoder.from_albert_config(config, dtype=precision))
        model.compile(optimizer=optimizer, jit_compile=xla)
        args = (features,)
    else:
        import keras_hub

        backbone = keras_hub.models.AlbertBackbone(
            vocabulary_size=vocab, num_layers=L, num_heads=heads, num_groups=1, num_inner_repetitions=1,
            embedding_dim=E, hidden_dim=H, intermediate_dim=I, dropout=0.0,
            max_sequence_length=config.max_position_embeddings, num_segments=2,
        )
        model = keras_hub.models.AlbertMaskedLM(backbone)  # no preprocessor: takes token ids
        model.compile(optimizer=optimizer, jit_compile=xla)  # its default loss and weighted accuracy
        x = {"token_ids": features["input_ids"], "padding_mask": features["input_mask"],
             "segment_ids": features["segment_ids"], "mask_positions": features["masked_lm_positions"]}
        args = (x, features["masked_lm_ids"], features["masked_lm_weights"])
    return model, args


def run_case(impl: str, precision: str, xla: bool, shape: str, batch: int, seq: int, predictions: int,
             steps: int, warmup: int, min_seconds: float = 0.0) -> dict:
    """One implementation in this process: `model.fit` over the repeated batch, per-step times; after
    `warmup` steps it stops once `steps` steps and `min_seconds` of them are timed."""
    import keras
    import tensorflow as tf

    model, args = build_case(impl, precision, xla, shape, batch, seq, predictions)
    dataset = tf.data.Dataset.from_tensors(args if len(args) > 1 else args[0]).repeat().prefetch(2)
    ends = []

    class Timer(keras.callbacks.Callback):
        def on_train_batch_end(self, index, logs=None):
            float(logs["loss"])  # waits for the step's result
            ends.append(time.perf_counter())
            timed = ends[warmup:]
            if warmup and len(ends) > warmup:
                timed_seconds = ends[-1] - ends[warmup - 1]
            else:
                timed_seconds = ends[-1] - start
            if len(timed) >= steps and timed_seconds >= min_seconds:
                self.model.stop_training = True

    start = time.perf_counter()
    model.fit(dataset, steps_per_epoch=10**9, epochs=1, verbose=0, callbacks=[Timer()])
    starts = ([start] + ends[:-1])[warmup:]
    step_times = sorted(b - a for a, b in zip(starts, ends[warmup:]))
    return _result(impl, shape, precision, xla, batch, step_times, ends[warmup - 1] - start if warmup else None,
                   model)


def run_interleaved(precision: str, xla: bool, shape: str, batch: int, seq: int, predictions: int,
                    steps: int, warmup: int, impls, min_seconds: float = 0.0) -> list:
    """Both implementations in one process, their steps alternated (`train_on_batch`), so that a
    machine whose load changes during the run slows both alike; peak RSS is then the pair's. After
    `warmup` steps each, it stops once every implementation has `steps` steps and `min_seconds` timed."""
    built = {impl: build_case(impl, precision, xla, shape, batch, seq, predictions) for impl in impls}
    times = {impl: [] for impl in impls}
    first = {}
    i = 0
    while i < warmup or min(len(t) for t in times.values()) < steps or min(sum(t) for t in times.values()) < min_seconds:
        for impl in (impls if i % 2 == 0 else list(reversed(impls))):
            model, args = built[impl]
            t0 = time.perf_counter()
            logs = model.train_on_batch(*args, return_dict=True)
            float(logs["loss"])
            elapsed = time.perf_counter() - t0
            if i < warmup:
                first[impl] = first.get(impl, 0.0) + elapsed
            else:
                times[impl].append(elapsed)
        i += 1
    return [
        _result(impl, shape, precision, xla, batch, sorted(times[impl]), first.get(impl), built[impl][0], interleaved=True)
        for impl in impls
    ]


def _result(impl, shape, precision, xla, batch, step_times, first_steps_s, model, interleaved=False) -> dict:
    stats = bench_common.spread(step_times)
    median = stats["median_s"]
    return {
        "impl": impl,
        "shape": shape,
        "precision": precision,
        "xla": xla,
        "seq_per_s": batch / median,
        "s_per_step": median,
        "s_per_step_min": stats["min_s"],
        "s_per_step_max": stats["max_s"],
        "timed_s": stats["total_s"],
        "method": "train_on_batch" if interleaved else "model.fit",
        "first_steps_s": first_steps_s,
        "timed_steps": len(step_times),
        "peak_rss_mb": peak_rss_mb(),
        "params": int(model.count_params()),
        "interleaved": interleaved,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", default="small,base", help=f"comma-separated, of {', '.join(SHAPES)}")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--predictions", type=int, default=20)
    parser.add_argument("--steps", type=int, default=3, help="timed steps per case, at least (median)")
    parser.add_argument("--min-seconds", type=float, default=10.0, help="timed seconds per case, at least")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps first (tracing, compilation)")
    parser.add_argument("--precisions", default="float32,mixed_bfloat16")
    parser.add_argument("--xla", default="off,on")
    parser.add_argument("--impls", default="keras_hub,albert_tf")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per case before it is abandoned")
    parser.add_argument("--json", help="also write (append to) the results in this JSON file")
    parser.add_argument(
        "--interleave",
        action="store_true",
        help="run both implementations of a mode in one process, alternating their steps (robust to a "
        "changing machine load; peak RSS is then the pair's, not each one's)",
    )
    parser.add_argument("--case", help=argparse.SUPPRESS)  # internal: run one case in this process
    args = parser.parse_args(argv)

    if args.case:
        impl, precision, xla, shape = args.case.split(":")
        if impl == "pair":
            results = run_interleaved(precision, xla == "on", shape, args.batch, args.seq, args.predictions,
                                      args.steps, args.warmup, args.impls.split(","), args.min_seconds)
        else:
            results = [run_case(impl, precision, xla == "on", shape, args.batch, args.seq, args.predictions,
                                args.steps, args.warmup, args.min_seconds)]
        for result in results:
            print("RESULT " + json.dumps(result))
        return 0

    results = []
    if args.json and os.path.exists(args.json):  # resume a matrix measured in several sittings
        with open(args.json) as f:
            results = json.load(f)
    done = {(r["impl"], r["precision"], r["xla"], r["shape"], bool(r.get("interleaved"))) for r in results}
    for shape in args.shapes.split(","):
        for precision in args.precisions.split(","):
            for xla in args.xla.split(","):
                for impl in ["pair"] if args.interleave else args.impls.split(","):
                    if (impl, precision, xla == "on", shape, False) in done or (
                        impl == "pair"
                        and all((i, precision, xla == "on", shape, True) in done for i in args.impls.split(","))
                    ):
                        continue
                    cmd = [sys.executable, __file__, "--case", f"{impl}:{precision}:{xla}:{shape}",
                           f"--batch={args.batch}", f"--seq={args.seq}", f"--predictions={args.predictions}",
                           f"--steps={args.steps}", f"--warmup={args.warmup}", f"--impls={args.impls}",
                           f"--min-seconds={args.min_seconds}"]
                    try:
                        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
                    except subprocess.TimeoutExpired:
                        print(f"case {shape}/{impl}/{precision}/xla={xla} timed out", file=sys.stderr)
                        continue
                    lines = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")]
                    if proc.returncode or not lines:
                        print(f"case {shape}/{impl}/{precision}/xla={xla} failed:\n{proc.stderr[-2000:]}", file=sys.stderr)
                        continue
                    for line in lines:
                        result = json.loads(line[len("RESULT "):])
                        result["batch"], result["seq"] = args.batch, args.seq
                        results.append(result)
                        print(f"  [{time.strftime('%H:%M:%S')}] {shape:5s} {result['impl']:10s} {precision:15s} "
                              f"xla={xla:3s} {result['seq_per_s']:7.2f} seq/s  {result['peak_rss_mb']:.0f} MB"
                              f"{' (interleaved)' if result.get('interleaved') else ''}", file=sys.stderr, flush=True)
                    if args.json:
                        with open(args.json, "w") as f:
                            json.dump(results, f, indent=2)

    print(table(results))
    return 0


def table(results) -> str:
    # The peer of a row is keras-hub measured the same way (own process or interleaved with it).
    peers = {(r["shape"], r["precision"], r["xla"], bool(r.get("interleaved"))): r
             for r in results if r["impl"] == "keras_hub"}
    lines = [
        "| shape | implementation | precision | XLA | seq/s | s/step | s/step range | steps | peak RSS (MB) "
        "| vs keras-hub same mode | run |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    order = {"keras_hub": 0, "albert_tf": 1}
    for r in sorted(results, key=lambda r: (r["shape"], bool(r.get("interleaved")), r["precision"], r["xla"],
                                            order.get(r["impl"], 2))):
        peer = peers.get((r["shape"], r["precision"], r["xla"], bool(r.get("interleaved"))))
        ratio = f"{r['seq_per_s'] / peer['seq_per_s']:.2f}x" if peer else "-"
        lines.append(
            f"| {r['shape']} | {r['impl']} | {r['precision']} | {'on' if r['xla'] else 'off'} | {r['seq_per_s']:.2f} | "
            f"{r['s_per_step']:.2f} | {_range(r)} | {r.get('timed_steps', '')} | {r['peak_rss_mb']:.0f} | {ratio} | "
            f"{'interleaved, train_on_batch (RSS of both)' if r.get('interleaved') else 'own process, model.fit'} |"
        )
    return ("\nPretraining throughput (own process: model.fit; interleaved: train_on_batch, alternating), "
            "batch/length as given, median of the timed steps\n\n" + "\n".join(lines))


def _range(result) -> str:
    if "s_per_step_min" not in result:  # rows of older JSON files
        return "-"
    return f"{result['s_per_step_min']:.2f}-{result['s_per_step_max']:.2f}"


if __name__ == "__main__":
    sys.exit(main())
