"""Encoder inference throughput and peak memory: albert_tf `AlbertEncoder` beside keras-hub `AlbertBackbone`.

Same shapes, same weights (transferred), same run; every (implementation, precision, XLA) case runs in
its own subprocess so its peak RSS is its own. Prints a Markdown table with seq/s, ms/batch, peak RSS
and the ratio against keras-hub in the same precision and XLA mode.

    python benchmarks/encoder_inference.py                  # ALBERT-base, batch 32, length 128
    python benchmarks/encoder_inference.py --preset base-v2 --batch 32 --seq 128 --iters 10
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time


def run_case(impl: str, precision: str, xla: bool, preset: str, batch: int, seq: int, iters: int, warmup: int) -> dict:
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np
    import tensorflow as tf
    import keras

    from albert_tf import AlbertConfig, AlbertEncoder

    keras.mixed_precision.set_global_policy(precision)
    config = AlbertConfig.preset(preset)
    rng = np.random.default_rng(0)
    inputs = {
        "input_ids": tf.constant(rng.integers(5, config.vocab_size, size=(batch, seq)), tf.int32),
        "input_mask": tf.ones((batch, seq), tf.int32),
        "segment_ids": tf.constant(np.repeat([[0] * (seq // 2) + [1] * (seq - seq // 2)], batch, 0), tf.int32),
    }
    if impl == "albert_tf":
        model = AlbertEncoder.from_albert_config(config)
        feed = inputs

        def forward(x):
            return model(x, training=False)["sequence_output"]

    else:
        import keras_hub

        model = keras_hub.models.AlbertBackbone(
            vocabulary_size=config.vocab_size,
            num_layers=config.num_hidden_layers,
            num_heads=config.num_attention_heads,
            num_groups=config.num_hidden_groups,
            num_inner_repetitions=config.inner_group_num,
            embedding_dim=config.embedding_size,
            hidden_dim=config.hidden_size,
            intermediate_dim=config.intermediate_size,
            dropout=0.0,
            max_sequence_length=config.max_position_embeddings,
            num_segments=config.type_vocab_size,
        )
        feed = {
            "token_ids": inputs["input_ids"],
            "padding_mask": inputs["input_mask"],
            "segment_ids": inputs["segment_ids"],
        }

        def forward(x):
            return model(x, training=False)["sequence_output"]

    fn = tf.function(forward, jit_compile=xla)
    start = time.perf_counter()
    for _ in range(warmup):
        fn(feed).numpy()
    compile_s = time.perf_counter() - start
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn(feed).numpy()
        times.append(time.perf_counter() - t0)
    times.sort()
    median = times[len(times) // 2]
    return {
        "impl": impl,
        "precision": precision,
        "xla": xla,
        "seq_per_s": batch / median,
        "ms_per_batch": 1000 * median,
        "warmup_s": compile_s,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "params": int(model.count_params()),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="base-v2")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--iters", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--precisions", default="float32,mixed_bfloat16")
    parser.add_argument("--xla", default="off,on")
    parser.add_argument("--impls", default="keras_hub,albert_tf")
    parser.add_argument("--json", help="also write the results to this JSON file")
    parser.add_argument("--case", help=argparse.SUPPRESS)  # internal: run one case in this process
    args = parser.parse_args(argv)

    if args.case:
        impl, precision, xla = args.case.split(":")
        result = run_case(impl, precision, xla == "on", args.preset, args.batch, args.seq, args.iters, args.warmup)
        print("RESULT " + json.dumps(result))
        return 0

    results = []
    for precision in args.precisions.split(","):
        for xla in args.xla.split(","):
            for impl in args.impls.split(","):
                cmd = [sys.executable, __file__, "--case", f"{impl}:{precision}:{xla}"] + [
                    f"--preset={args.preset}", f"--batch={args.batch}", f"--seq={args.seq}",
                    f"--iters={args.iters}", f"--warmup={args.warmup}",
                ]
                proc = subprocess.run(cmd, capture_output=True, text=True)
                line = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")]
                if proc.returncode or not line:
                    print(f"case {impl}/{precision}/xla={xla} failed:\n{proc.stderr[-2000:]}", file=sys.stderr)
                    continue
                result = json.loads(line[0][len("RESULT "):])
                results.append(result)
                print(f"  {impl:10s} {precision:15s} xla={xla:3s} {result['seq_per_s']:7.1f} seq/s", file=sys.stderr)

    peers = {(r["precision"], r["xla"]): r for r in results if r["impl"] == "keras_hub"}
    fp32_peer = {r["xla"]: r for r in results if r["impl"] == "keras_hub" and r["precision"] == "float32"}
    print(f"\nEncoder inference, {args.preset}, batch {args.batch}, length {args.seq}, median of {args.iters}\n")
    print("| implementation | precision | XLA | seq/s | ms/batch | peak RSS (MB) | vs keras-hub same mode | vs keras-hub fp32 same XLA |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    for r in results:
        peer = peers.get((r["precision"], r["xla"]))
        ratio = f"{r['seq_per_s'] / peer['seq_per_s']:.2f}x" if peer else "-"
        base = fp32_peer.get(r["xla"])
        ratio32 = f"{r['seq_per_s'] / base['seq_per_s']:.2f}x" if base else "-"
        print(
            f"| {r['impl']} | {r['precision']} | {'on' if r['xla'] else 'off'} | {r['seq_per_s']:.1f} | "
            f"{r['ms_per_batch']:.0f} | {r['peak_rss_mb']:.0f} | {ratio} | {ratio32} |"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
