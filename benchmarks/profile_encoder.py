"""Where the time of ALBERT encoder inference goes: op time summed by op type, beside plain matmuls.

Builds `AlbertEncoder` (default ALBERT-base, `mixed_bfloat16`, batch 32, length 128, random weights)
and runs its forward pass as `encoder_inference.py` does (a `tf.function`, `training=False`, the
sequence output fetched). Beside it, the *matmul baseline*: the same matmul shapes (embedding
projection, per layer Q/K/V/output [B*S, H]x[H, H], the two feed-forward matmuls, the two attention
batch matmuls [B*N, S, D]) as plain `tf.matmul` calls in one `tf.function`, in the same dtype, and
nothing else. Then:

1. times both, alternating call by call, for at least `--min-seconds` each (after warm-up), and
   prints seq/s, the achieved GFLOP/s of each and their ratio (how close the model runs to the
   machine's plain matmul rate for its own shapes, measured in the same run);
2. traces `--trace-calls` calls of each with `tf.profiler` (host tracer; no TensorBoard needed: the
   `.xplane.pb` is read with the protobuf classes TensorFlow ships) and prints the op time summed by
   op type, sorted, with % of the total, and grouped into matmul / softmax / masking / GELU / layer
   norm / casts / transposes / embedding gather / tokenizer / other. A fused oneDNN op is listed
   with what was fused into it (e.g. `_MklNativeFusedMatMul [+GELU]`).

    python benchmarks/profile_encoder.py                          # ALBERT-base bf16, batch 32, length 128
    python benchmarks/profile_encoder.py --text                   # raw text through the in-graph tokenizer first
    python benchmarks/profile_encoder.py --precision float32 --min-seconds 5
    python benchmarks/profile_encoder.py --precision export-bfloat16   # the bf16 export's encoder
    python benchmarks/profile_encoder.py --per-shape              # also each matmul shape alone (GFLOP/s)
    python benchmarks/profile_encoder.py --precision export-bfloat16 --token-rates 1x48,8x16,8x48,32x64

`--token-rates ROWSxWIDTH,...`: the whole forward pass at each shape through one `tf.function`
with dynamic shapes (as a length-aware export runs it), timed alone and then with all the shapes
taking turns call by call (as length-sorted chunks feed it): tokens/s per shape, so a loss of speed
per token from small matmuls or from serving many shapes shows.

Op times are summed over the executor's threads, so with inter-op parallelism their total can exceed
the wall time of a call; the % column is of the op-time total.
"""

from __future__ import annotations

import argparse
import collections
import glob
import json
import os
import re
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import bench_common  # noqa: E402

# `--precision export-bfloat16`: the bf16 export's encoder (`albert_tf.export.precision.export_form`):
# bf16 dense weights in float32 blocks, LayerNorm and softmax in float32.
EXPORT_BFLOAT16 = "export-bfloat16"
GROUPS = ("matmul", "softmax", "masking", "GELU", "layer norm", "casts", "transposes", "embedding gather",
          "tokenizer", "other")
_OP_EVENT = re.compile(r"^([^:\s]+):([A-Za-z_][A-Za-z0-9_]*)$")


def encoder_flops(config, batch: int, seq: int) -> dict:
    """Multiply-add FLOPs (2 per MAC) of one forward pass, by matmul kind."""
    B, S, E, H, I = batch, seq, config.embedding_size, config.hidden_size, config.intermediate_size
    L = config.num_hidden_layers * config.inner_group_num
    rows = B * S
    flops = {
        "embedding projection": 2 * rows * E * H if E != H else 0,
        "q/k/v/output dense": L * 4 * 2 * rows * H * H,
        "feed-forward": L * 2 * 2 * rows * H * I,
        "attention batch matmuls": L * 2 * 2 * B * S * S * H,
    }
    flops["total"] = sum(flops.values())
    return flops


def build_encoder(preset: str, precision: str, batch: int, seq: int, text: bool):
    """(config, callable, the model's feed): the forward pass as encoder_inference.py runs it."""
    import keras
    import numpy as np
    import tensorflow as tf

    from albert_tf import AlbertConfig, AlbertEncoder

    config = AlbertConfig.preset(preset)
    if precision == EXPORT_BFLOAT16:  # the graph `export --precision mixed_bfloat16` writes
        keras.mixed_precision.set_global_policy("float32")
        model = AlbertEncoder.from_albert_config(config, matmul_dtype="bfloat16")
    else:
        keras.mixed_precision.set_global_policy(precision)
        model = AlbertEncoder.from_albert_config(config)
    if not text:
        rng = np.random.default_rng(0)
        feed = {
            "input_ids": tf.constant(rng.integers(5, config.vocab_size, size=(batch, seq)), tf.int32),
            "input_mask": tf.ones((batch, seq), tf.int32),
            "segment_ids": tf.constant(np.repeat([[0] * (seq // 2) + [1] * (seq - seq // 2)], batch, 0), tf.int32),
        }
        fn = tf.function(lambda x: model(x, training=False)["sequence_output"])
        return config, lambda: fn(feed).numpy(), model
    from albert_tf.tokenization.in_graph import AlbertTokenizerLayer

    work = tempfile.mkdtemp(prefix="profile-encoder-")
    sources = sorted(bench_common.SOTU.glob("*.txt"))[-20:]
    if sources:  # the last 20 State of the Union addresses: a 4k-piece model, 128-word windows
        paths = bench_common.sentence_files(work, sources)
        spm = bench_common.train_sample_spm(work, paths, vocab_size=4000)
        words = " ".join(open(p, encoding="utf-8").read() for p in paths).split()
        texts = [" ".join(words[i * seq:(i + 1) * seq]) for i in range(batch)]
    else:  # no shared data: a few dozen pieces of generated text
        spm = bench_common.train_sample_spm(work, [_sample_corpus(work)], vocab_size=50)
        texts = _sample_texts(batch, seq)
    layer = AlbertTokenizerLayer.from_sentencepiece(spm, sequence_length=seq)
    texts = tf.constant(texts)

    @tf.function
    def text_fn(texts):
        with tf.name_scope("tokenizer"):
            features = layer(texts)
        return model({k: features[k] for k in ("input_ids", "input_mask", "segment_ids")}, training=False)[
            "sequence_output"]

    return config, lambda: text_fn(texts).numpy(), model


def _sample_texts(count: int, words: int, seed: int = 0):
    import random

    vocab = ("the people of this nation have made a law that states every year congress and the president "
             "shall report on the state of the union to all citizens in good faith").split()
    rng = random.Random(seed)
    return [" ".join(rng.choice(vocab) for _ in range(words)) for _ in range(count)]


def _sample_corpus(work: str) -> str:
    path = os.path.join(work, "corpus.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(_sample_texts(2000, 20, seed=1)))
    return path


def build_matmul_baseline(config, precision: str, batch: int, seq: int):
    """A callable running the encoder's matmul shapes as plain chained `tf.matmul`s, nothing else."""
    import tensorflow as tf

    dtype = tf.bfloat16 if "bfloat16" in precision else tf.float32
    B, S, E, H, I = batch, seq, config.embedding_size, config.hidden_size, config.intermediate_size
    N, D = config.num_attention_heads, config.hidden_size // config.num_attention_heads
    L = config.num_hidden_layers * config.inner_group_num

    def weight(*shape):
        return tf.cast(tf.random.normal(shape, stddev=0.02, seed=1), dtype)

    x0 = tf.cast(tf.random.normal((B * S, E), seed=2), dtype)
    w_in, wq, wk, wv, wo = weight(E, H), weight(H, H), weight(H, H), weight(H, H), weight(H, H)
    w1, w2 = weight(H, I), weight(I, H)

    @tf.function
    def fn(x0):
        x = tf.matmul(x0, w_in) if E != H else x0
        for _ in range(L):
            q, k, v = tf.matmul(x, wq), tf.matmul(x, wk), tf.matmul(x, wv)
            q, k, v = (tf.reshape(t, (B * N, S, D)) for t in (q, k, v))  # the shapes, not the head layout
            scores = tf.matmul(q, k, transpose_b=True)
            context = tf.reshape(tf.matmul(scores, v), (B * S, H))
            x = tf.matmul(context, wo)
            x = tf.matmul(tf.matmul(x, w1), w2)
        return x

    return lambda: fn(x0).numpy()


def per_shape_rates(config, precision: str, batch: int, seq: int, min_seconds: float):
    """GFLOP/s of each distinct matmul shape of the encoder alone: a `tf.function` of that one matmul
    called again and again on the same operands (warm caches: the single-shape microbenchmark),
    timed for `min_seconds`; [(label, GFLOP/s)]. (One matmul per call: Grappler would merge
    repeated identical matmuls inside one graph into one.)"""
    import tensorflow as tf

    dtype = tf.bfloat16 if "bfloat16" in precision else tf.float32
    B, S, H, I = batch, seq, config.hidden_size, config.intermediate_size
    N, D = config.num_attention_heads, config.hidden_size // config.num_attention_heads
    shapes = [(f"[{B * S}, {H}] x [{H}, {H}] (Q/K/V/output)", (B * S, H), (H, H)),
              (f"[{B * S}, {H}] x [{H}, {I}] (FFN in)", (B * S, H), (H, I)),
              (f"[{B * S}, {I}] x [{I}, {H}] (FFN out)", (B * S, I), (I, H)),
              (f"[{B * N}, {S}, {D}] x [{B * N}, {D}, {S}] (scores)", (B * N, S, D), (B * N, D, S)),
              (f"[{B * N}, {S}, {S}] x [{B * N}, {S}, {D}] (probs x V)", (B * N, S, S), (B * N, S, D))]
    rates = []
    for label, a_shape, b_shape in shapes:
        a = tf.cast(tf.random.normal(a_shape, seed=3), dtype)
        b = tf.cast(tf.random.normal(b_shape, stddev=0.02, seed=4), dtype)

        @tf.function
        def fn(a, b):
            return tf.matmul(a, b)[..., :1]  # fetch a sliver: the copy back is not the matmul's

        times = bench_common.time_calls(lambda: fn(a, b).numpy(), min_seconds, 3, warmup=2)
        flops = 2 * a_shape[-2] * a_shape[-1] * b_shape[-1] * (a_shape[0] if len(a_shape) == 3 else 1)
        rates.append((label, flops / bench_common.spread(times)["median_s"] / 1e9))
    return rates


def token_rates(model, config, shapes, min_seconds: float) -> list:
    """[(rows, width, tokens/s alone, tokens/s taking turns)] of the forward pass at each shape."""
    import numpy as np
    import tensorflow as tf

    spec = tf.TensorSpec([None, None], tf.int32)
    fn = tf.function(lambda x: model(x, training=False)["sequence_output"],
                     input_signature=[{k: spec for k in ("input_ids", "input_mask", "segment_ids")}])
    rng = np.random.default_rng(0)
    feeds = [{"input_ids": tf.constant(rng.integers(5, config.vocab_size, size=shape), tf.int32),
              "input_mask": tf.ones(shape, tf.int32), "segment_ids": tf.zeros(shape, tf.int32)} for shape in shapes]

    def timed(feed):
        start = time.perf_counter()
        fn(feed).numpy()
        return time.perf_counter() - start

    for feed in feeds * 2:
        timed(feed)
    alone = []
    for feed in feeds:
        spent, calls = 0.0, 0
        while spent < min_seconds or calls < 3:
            spent, calls = spent + timed(feed), calls + 1
        alone.append(spent / calls)
    turns, calls = [0.0] * len(feeds), 0
    while min(turns) < min_seconds or calls < 3:
        for i, feed in enumerate(feeds):
            turns[i] += timed(feed)
        calls += 1
    return [(rows, width, rows * width / a, rows * width * calls / t)
            for (rows, width), a, t in zip(shapes, alone, turns)]


def trace_op_times(call, calls: int, text: bool = False):
    """{(op type with fusion hint, group): [total seconds, op count]} over `calls` traced calls."""
    import tensorflow as tf
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    logdir = tempfile.mkdtemp(prefix="profile-encoder-trace-")
    tf.profiler.experimental.start(logdir, options=tf.profiler.experimental.ProfilerOptions(host_tracer_level=2))
    try:
        for _ in range(calls):
            call()
    finally:
        tf.profiler.experimental.stop()
    files = sorted(glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True))
    if not files:
        raise RuntimeError(f"the profiler wrote no trace under {logdir}")
    space = xplane_pb2.XSpace()
    with open(files[-1], "rb") as f:
        space.ParseFromString(f.read())
    totals = collections.defaultdict(lambda: [0.0, 0])
    for plane in space.planes:
        if not plane.name.startswith("/host:CPU"):
            continue
        for line in plane.lines:
            for event in line.events:
                match = _OP_EVENT.match(plane.event_metadata[event.metadata_id].name)
                if not match:
                    continue
                node, op_type = match.groups()
                key = classify(node, op_type, text)
                totals[key][0] += event.duration_ps * 1e-12 / calls
                totals[key][1] += 1 / calls
    return dict(totals)


def classify(node: str, op_type: str, text: bool = False):
    """(op type as listed, group) of one traced op: its type plus what oneDNN fused into it."""
    parts = node.split("/")
    lower = node.lower()
    if text and "tokenizer" in lower:
        return op_type, "tokenizer"
    if "MatMul" in op_type:
        hint = ""
        if "Gelu" in node:
            hint = " [+bias+GELU]"
        elif "LayerNorm" in node:
            hint = " [+bias+residual add]"
        elif "BatchMatMul" in op_type and parts[-1].startswith("add"):
            hint = " [+scale+mask add]"
        elif "Fused" in op_type:
            hint = " [+bias]"
        return op_type + hint, "matmul"
    if "Softmax" in op_type:
        return op_type, "softmax"
    if "LayerNorm" in op_type or "BatchNorm" in op_type or "LayerNorm" in node:
        return op_type, "layer norm"
    if "Gelu" in op_type or "Gelu" in node or op_type in ("Tanh", "Pow", "Erf"):
        return op_type, "GELU"
    if op_type == "Cast" or op_type == "_MklCast":
        return op_type, "casts"
    if "Transpose" in op_type:
        return op_type, "transposes"
    if op_type in ("GatherV2", "ResourceGather", "_MklGatherV2") or "embeddings" in lower and "Gather" in op_type:
        return op_type, "embedding gather"
    # The attention bias: built once at the encoder's top scope from the input mask.
    if len(parts) <= 2 and op_type.removeprefix("_Mkl") in ("Sub", "Mul", "AddV2", "ExpandDims", "StridedSlice",
                                                                "Reshape"):
        return op_type, "masking"
    return op_type, "other"


def op_table(totals, title: str, top: int = 25) -> str:
    grand = sum(t for t, _ in totals.values()) or 1.0
    rows = sorted(totals.items(), key=lambda kv: -kv[1][0])
    lines = [f"\n{title}: op time per call by op type (sum over threads {1e3 * grand:.0f} ms)\n",
             "| op type | group | ops per call | ms per call | % |", "|---|---|---:|---:|---:|"]
    for (op_type, group), (seconds, count) in rows[:top]:
        lines.append(f"| {op_type} | {group} | {count:.0f} | {1e3 * seconds:.1f} | {100 * seconds / grand:.1f} |")
    if len(rows) > top:
        rest = sum(t for _, (t, _) in rows[top:])
        lines.append(f"| ({len(rows) - top} more types) | | | {1e3 * rest:.1f} | {100 * rest / grand:.1f} |")
    return "\n".join(lines)


def group_table(totals, title: str) -> str:
    grand = sum(t for t, _ in totals.values()) or 1.0
    by_group = collections.defaultdict(float)
    for (_, group), (seconds, _) in totals.items():
        by_group[group] += seconds
    lines = [f"\n{title}: op time per call by group\n", "| group | ms per call | % |", "|---|---:|---:|"]
    for group in sorted(GROUPS, key=lambda g: -by_group.get(g, 0.0)):
        if by_group.get(group):
            lines.append(f"| {group} | {1e3 * by_group[group]:.1f} | {100 * by_group[group] / grand:.1f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="base-v2")
    parser.add_argument("--precision", default="mixed_bfloat16", help="a Keras dtype policy (default mixed_bfloat16), or export-bfloat16: the graph of "
                        "`export --precision mixed_bfloat16` (bf16 dense weights, LayerNorm and softmax in float32)")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--text", action="store_true",
                        help="raw texts (State of the Union windows when ../shared/data is there) through the "
                             "in-graph tokenizer first")
    parser.add_argument("--min-seconds", type=float, default=10.0, help="timed seconds per case, at least")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--trace-calls", type=int, default=2, help="calls traced per case for the op tables")
    parser.add_argument("--inter-op", type=int, default=None, help="tf inter-op threads (default TF's)")
    parser.add_argument("--top", type=int, default=25, help="op types listed per table")
    parser.add_argument("--per-shape", action="store_true",
                        help="also time each matmul shape alone (the single-shape microbenchmark)")
    parser.add_argument("--token-rates", help="ROWSxWIDTH,...: the forward pass's tokens/s at each shape, alone "
                        "and taking turns (see above)")
    parser.add_argument("--json", help="also write the figures and op times here")
    args = parser.parse_args(argv)
    try:
        rate_shapes = [tuple(int(n) for n in item.split("x")) for item in args.token_rates.split(",")] \
            if args.token_rates else []
    except ValueError:
        parser.error(f"--token-rates must be ROWSxWIDTH,..., got {args.token_rates!r}")
    if any(len(shape) != 2 or min(shape) < 1 for shape in rate_shapes):
        parser.error(f"--token-rates must be ROWSxWIDTH,... with both >= 1, got {args.token_rates!r}")

    import tensorflow as tf

    if args.inter_op:
        tf.config.threading.set_inter_op_parallelism_threads(args.inter_op)
    config, encoder, model = build_encoder(args.preset, args.precision, args.batch, args.seq, args.text)
    baseline = build_matmul_baseline(config, args.precision, args.batch, args.seq)
    flops = encoder_flops(config, args.batch, args.seq)
    for _ in range(args.warmup):
        encoder()
        baseline()
    # Alternating call by call, so a change of machine load hits both alike.
    times = {"encoder": [], "matmuls": []}
    while min(sum(t) for t in times.values()) < args.min_seconds or min(len(t) for t in times.values()) < 3:
        for name, call in (("encoder", encoder), ("matmuls", baseline)):
            start = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - start)
    stats = {name: bench_common.spread(t) for name, t in times.items()}
    enc, mm = stats["encoder"], stats["matmuls"]
    rate = flops["total"] / enc["median_s"] / 1e9
    mm_rate = flops["total"] / mm["median_s"] / 1e9
    what = f"{args.preset} {args.precision}, batch {args.batch}, length {args.seq}" + (", raw text in" if args.text else "")
    print(f"\n{what} (TF {tf.__version__}); {flops['total'] / 1e9:.0f} GFLOP per forward pass")
    isa = bench_common.cpu_isa()
    print(f"CPU: {isa['model']}; ISA: {', '.join(isa['flags']) or '-'} (not: {', '.join(isa['missing']) or '-'}); "
          f"{len(os.sched_getaffinity(0))} usable cores")
    print(f"timed alternately, >= {args.min_seconds:g} s each after {args.warmup} warm-up calls\n")
    print("| case | calls | median s | range s | seq/s | GFLOP/s |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, label, r in (("encoder", "albert_tf encoder", rate), ("matmuls", "plain matmuls of its shapes", mm_rate)):
        s = stats[name]
        print(f"| {label} | {s['calls']} | {s['median_s']:.3f} | {s['min_s']:.3f}-{s['max_s']:.3f} | "
              f"{args.batch / s['median_s']:.1f} | {r:.0f} |")
    print(f"\nencoder at {100 * rate / mm_rate:.0f}% of the plain matmul rate of its shapes (same run); "
          f"non-matmul share of the wall time at that rate: {100 * (1 - mm['median_s'] / enc['median_s']):.0f}%")

    shape_rates = []
    if args.per_shape:
        shape_rates = per_shape_rates(config, args.precision, args.batch, args.seq, max(1.0, args.min_seconds / 5))
        print("\nEach matmul shape alone, repeated on the same operands (warm caches):\n")
        print("| shape | GFLOP/s |")
        print("|---|---:|")
        for label, gflops in shape_rates:
            print(f"| {label} | {gflops:.0f} |")

    rates = []
    if rate_shapes:
        rates = token_rates(model, config, rate_shapes, max(1.0, args.min_seconds / 5))
        print("\nThe forward pass at each shape (one tf.function, dynamic shapes), alone and with the shapes "
              "taking turns:\n")
        print("| rows x width | tokens/s alone | tokens/s taking turns |")
        print("|---|---:|---:|")
        for rows, width, alone, turns in rates:
            print(f"| {rows} x {width} | {alone:.0f} | {turns:.0f} |")

    enc_ops = trace_op_times(encoder, args.trace_calls, args.text)
    mm_ops = trace_op_times(baseline, args.trace_calls)
    print(op_table(enc_ops, "encoder", args.top))
    print(group_table(enc_ops, "encoder"))
    print(op_table(mm_ops, "plain matmul baseline", args.top))
    print(group_table(mm_ops, "plain matmul baseline"))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({
                "case": what, "flops": flops, "timing": stats, "gflops": {"encoder": rate, "matmuls": mm_rate},
                "per_shape_gflops": shape_rates, "token_rates": rates,
                "encoder_ops": [[k[0], k[1], v[0], v[1]] for k, v in enc_ops.items()],
                "matmul_ops": [[k[0], k[1], v[0], v[1]] for k, v in mm_ops.items()],
            }, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
