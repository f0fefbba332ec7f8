"""Encoder inference throughput and peak memory: albert_tf `AlbertEncoder` beside keras-hub `AlbertBackbone`
and, when installed, Hugging Face transformers' PyTorch `AlbertModel`.

Same shapes (random weights on every side: speed does not depend on the values), the same inputs,
same run. By default every (implementation, precision, XLA) case runs in its own subprocess so its
peak RSS is its own; with `--interleave` the implementations of one precision and XLA mode run side
by side instead (the TF ones in one process, PyTorch in a worker process of its own), one batch each
in turn, so that a change of machine load hits all alike (peak RSS is then the TF pair's). PyTorch's
bf16 is `torch.autocast("cpu", torch.bfloat16)`; it has no XLA mode (run once, listed under XLA
off). Every case is timed for at least `--min-seconds` (default 10) and `--iters` batches after
`--warmup` untimed ones. Prints a
Markdown table with seq/s of the median batch, the range of ms/batch, peak RSS and the ratios against
keras-hub in the same precision and XLA mode and against the best PyTorch case of the same precision.

    python benchmarks/encoder_inference.py                  # ALBERT-base, batch 32, length 128
    python benchmarks/encoder_inference.py --precisions mixed_bfloat16 --xla off --min-seconds 20
    PYTHONPATH=/tmp/torchsite python benchmarks/encoder_inference.py --impls keras_hub,albert_tf,transformers \
        --torch-threads 1,2 --xla off --interleave   # with the PyTorch peer (installed as serving.py's docstring says)
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


def build_torch_case(precision: str, preset: str, batch: int, seq: int, threads=None):
    """(forward, parameter count, versions): transformers' `AlbertModel` (PyTorch, random init of the
    preset's shapes) on the same inputs as the TF cases."""
    import contextlib

    import numpy as np
    import torch
    import transformers

    from albert_tf import AlbertConfig

    if threads:
        torch.set_num_threads(threads)
    config = AlbertConfig.preset(preset)
    hf_config = transformers.AlbertConfig(
        vocab_size=config.vocab_size, embedding_size=config.embedding_size, hidden_size=config.hidden_size,
        num_hidden_layers=config.num_hidden_layers, num_hidden_groups=config.num_hidden_groups,
        inner_group_num=config.inner_group_num, num_attention_heads=config.num_attention_heads,
        intermediate_size=config.intermediate_size, hidden_act="gelu_new", hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0, max_position_embeddings=config.max_position_embeddings,
        type_vocab_size=config.type_vocab_size,
    )
    model = transformers.AlbertModel(hf_config, add_pooling_layer=True).eval()
    rng = np.random.default_rng(0)
    feed = {
        "input_ids": torch.tensor(rng.integers(5, config.vocab_size, size=(batch, seq))),
        "attention_mask": torch.ones((batch, seq), dtype=torch.long),
        "token_type_ids": torch.tensor(np.repeat([[0] * (seq // 2) + [1] * (seq - seq // 2)], batch, 0)),
    }

    def forward():
        autocast = (torch.autocast("cpu", dtype=torch.bfloat16) if "bfloat16" in precision
                    else contextlib.nullcontext())
        with torch.inference_mode(), autocast:
            return model(**feed).last_hidden_state.float().numpy()

    params = sum(p.numel() for p in model.parameters())
    return forward, params, f"torch {torch.__version__}, transformers {transformers.__version__}"


def torch_worker(spec_json: str) -> int:
    """PyTorch in a process of its own for `--interleave`: one forward pass per line read, its
    seconds written back."""
    spec = json.loads(spec_json)
    forward, params, versions = build_torch_case(spec["precision"], spec["preset"], spec["batch"], spec["seq"],
                                                 spec["threads"])
    print(json.dumps({"params": params, "versions": versions}), flush=True)
    for _ in sys.stdin:
        start = time.perf_counter()
        forward()
        print(json.dumps(time.perf_counter() - start), flush=True)
    return 0


class TorchWorker:
    def __init__(self, impl: str, precision: str, preset: str, batch: int, seq: int):
        threads = int(impl.split("@")[1]) if "@" in impl else None
        spec = {"precision": precision, "preset": preset, "batch": batch, "seq": seq, "threads": threads}
        self.process = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--torch-worker", json.dumps(spec)],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the PyTorch worker for {impl} did not start (torch/transformers installed?)")
        ready = json.loads(line)
        self.params, self.versions = ready["params"], ready["versions"]

    def __call__(self):
        self.process.stdin.write("go\n")
        self.process.stdin.flush()
        return json.loads(self.process.stdout.readline())

    def close(self):
        self.process.stdin.close()
        self.process.wait(timeout=60)


def _result(impl, precision, xla, batch, times, compile_s, params, versions=None) -> dict:
    stats = bench_common.spread(times)
    return {
        "impl": impl,
        "precision": precision,
        "xla": xla,
        "seq_per_s": batch / stats["median_s"],
        "ms_per_batch": 1000 * stats["median_s"],
        "ms_min": 1000 * stats["min_s"],
        "ms_max": 1000 * stats["max_s"],
        "batches": stats["calls"],
        "timed_s": stats["total_s"],
        "warmup_s": compile_s,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "params": int(params),
        "versions": versions,
    }


def run_case(impl: str, precision: str, xla: bool, preset: str, batch: int, seq: int, iters: int, warmup: int,
             min_seconds: float = 0.0) -> dict:
    """One implementation in this process: warm-up, then timed batches."""
    if impl.startswith("transformers"):
        threads = int(impl.split("@")[1]) if "@" in impl else None
        forward, params, versions = build_torch_case(precision, preset, batch, seq, threads)
        xla = False
    else:
        forward, params, versions = build_tf_case(impl, precision, xla, preset, batch, seq)
    start = time.perf_counter()
    for _ in range(warmup):
        forward()
    compile_s = time.perf_counter() - start
    times = bench_common.time_calls(forward, min_seconds, iters, warmup=0)
    return _result(impl, precision, xla, batch, times, compile_s, params, versions=versions)


def run_interleaved(impls, precision: str, xla: bool, preset: str, batch: int, seq: int, iters: int, warmup: int,
                    min_seconds: float = 0.0) -> list:
    """All `impls` of one mode side by side, one batch each in turn (the order reversed every other
    round), until each has `iters` batches and `min_seconds` timed. TF cases in this process, PyTorch
    ones in worker processes."""
    cases, workers = {}, []
    try:
        for impl in impls:
            if impl.startswith("transformers"):
                worker = TorchWorker(impl, precision, preset, batch, seq)
                workers.append(worker)
                cases[impl] = (worker, worker.params, worker.versions)
            else:
                cases[impl] = build_tf_case(impl, precision, xla, preset, batch, seq)
        first = {impl: 0.0 for impl in cases}
        times = {impl: [] for impl in cases}
        for _ in range(warmup):
            for impl, (forward, _, _) in cases.items():
                start = time.perf_counter()
                forward()
                first[impl] += time.perf_counter() - start
        order = list(cases)
        while min(len(t) for t in times.values()) < iters or min(sum(t) for t in times.values()) < min_seconds:
            for impl in order:
                forward = cases[impl][0]
                start = time.perf_counter()
                elapsed = forward()
                # A worker reports its own forward time (the pipe round trip is not the model's).
                times[impl].append(elapsed if isinstance(forward, TorchWorker) else time.perf_counter() - start)
            order.reverse()
    finally:
        for worker in workers:
            worker.close()
    results = []
    for impl, (_, params, versions) in cases.items():
        result = _result(impl, precision, xla and not impl.startswith("transformers"), batch, times[impl],
                         first[impl], params, versions=versions)
        result["interleaved"] = True
        if impl.startswith("transformers"):
            result["peak_rss_mb"] = None  # the worker's own, not measured
        results.append(result)
    return results


def build_tf_case(impl: str, precision: str, xla: bool, preset: str, batch: int, seq: int):
    """(forward, parameter count, versions) of albert_tf's encoder or keras-hub's backbone."""
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
    return lambda: fn(feed).numpy(), model.count_params(), f"TF {tf.__version__}, keras {keras.__version__}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="base-v2")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--iters", type=int, default=3, help="timed batches per case, at least")
    parser.add_argument("--min-seconds", type=float, default=10.0, help="timed seconds per case, at least")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--precisions", default="float32,mixed_bfloat16")
    parser.add_argument("--xla", default="off,on")
    parser.add_argument("--impls", default="keras_hub,albert_tf",
                        help="of keras_hub, albert_tf, transformers (PyTorch, if installed)")
    parser.add_argument("--torch-threads", default="",
                        help="comma-separated torch.set_num_threads values, one transformers case each "
                             "(default: torch's own setting)")
    parser.add_argument("--interleave", action="store_true",
                        help="the implementations of a mode side by side, one batch each in turn (robust to a "
                             "changing machine load; peak RSS is then the TF pair's)")
    parser.add_argument("--json", help="also write the results to this JSON file")
    parser.add_argument("--case", help=argparse.SUPPRESS)  # internal: run one case in this process
    if argv is None and len(sys.argv) == 3 and sys.argv[1] == "--torch-worker":
        return torch_worker(sys.argv[2])
    args = parser.parse_args(argv)

    if args.case:
        impl, precision, xla = args.case.split(":")
        if impl == "interleaved":
            results = run_interleaved(args.impls.split(","), precision, xla == "on", args.preset, args.batch,
                                      args.seq, args.iters, args.warmup, args.min_seconds)
        else:
            results = [run_case(impl, precision, xla == "on", args.preset, args.batch, args.seq, args.iters,
                                args.warmup, args.min_seconds)]
        for result in results:
            print("RESULT " + json.dumps(result))
        return 0

    impls = []
    for impl in args.impls.split(","):
        if impl == "transformers" and args.torch_threads:
            impls += [f"transformers@{int(t)}" for t in args.torch_threads.split(",")]
        else:
            impls.append(impl)
    results = []
    for precision in args.precisions.split(","):
        for xla in args.xla.split(","):
            mode_impls = [i for i in impls if not (i.startswith("transformers") and xla == "on"
                                                   and "off" in args.xla.split(","))]  # no XLA mode: once
            for impl in ["interleaved"] if args.interleave else mode_impls:
                cmd = [sys.executable, __file__, "--case", f"{impl}:{precision}:{xla}"] + [
                    f"--preset={args.preset}", f"--batch={args.batch}", f"--seq={args.seq}",
                    f"--iters={args.iters}", f"--warmup={args.warmup}", f"--min-seconds={args.min_seconds}",
                    f"--impls={','.join(mode_impls)}",
                ]
                proc = subprocess.run(cmd, capture_output=True, text=True)
                lines = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")]
                if proc.returncode or not lines:
                    print(f"case {impl}/{precision}/xla={xla} failed:\n{proc.stderr[-2000:]}", file=sys.stderr)
                    continue
                for line in lines:
                    result = json.loads(line[len("RESULT "):])
                    results.append(result)
                    print(f"  {result['impl']:14s} {precision:15s} xla={xla:3s} {result['seq_per_s']:7.1f} seq/s",
                          file=sys.stderr, flush=True)

    peers = {(r["precision"], r["xla"]): r for r in results if r["impl"] == "keras_hub"}
    fp32_peer = {r["xla"]: r for r in results if r["impl"] == "keras_hub" and r["precision"] == "float32"}
    torch_best = {}
    for r in results:
        if r["impl"].startswith("transformers"):
            best = torch_best.get(r["precision"])
            torch_best[r["precision"]] = r if best is None or r["seq_per_s"] > best["seq_per_s"] else best
    versions = sorted({r["versions"] for r in results if r.get("versions")})
    print(f"\nEncoder inference, {args.preset}, batch {args.batch}, length {args.seq}; each case >= "
          f"{args.min_seconds:g} s and >= {args.iters} batches after {args.warmup} warm-up; "
          f"{'interleaved (one batch each in turn; RSS of the TF pair)' if args.interleave else 'own processes'}; "
          f"{'; '.join(versions)}\n")
    print("| implementation | precision | XLA | seq/s | ms/batch (median) | ms range | batches | peak RSS (MB) "
          "| vs keras-hub same mode | vs keras-hub fp32 same XLA | vs best PyTorch same precision |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        peer = peers.get((r["precision"], r["xla"]))
        ratio = f"{r['seq_per_s'] / peer['seq_per_s']:.2f}x" if peer else "-"
        base = fp32_peer.get(r["xla"])
        ratio32 = f"{r['seq_per_s'] / base['seq_per_s']:.2f}x" if base else "-"
        best = torch_best.get(r["precision"])
        vs_torch = f"{r['seq_per_s'] / best['seq_per_s']:.2f}x" if best else "-"
        print(
            f"| {r['impl']} | {r['precision']} | {'on' if r['xla'] else 'off'} | {r['seq_per_s']:.1f} | "
            f"{r['ms_per_batch']:.0f} | {r['ms_min']:.0f}-{r['ms_max']:.0f} | {r['batches']} | "
            f"{'-' if r['peak_rss_mb'] is None else format(r['peak_rss_mb'], '.0f')} | {ratio} | {ratio32} | {vs_torch} |"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
