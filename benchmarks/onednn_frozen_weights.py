"""oneDNN's frozen-weights mode on our SavedModel exports: `TF_ONEDNN_ASSUME_FROZEN_WEIGHTS` off
against on, each case in a process of its own (TensorFlow reads the variable once per process), the
export run as `albert-tf serve` runs it (the model server's `SessionServable`, raw text in).

A random-weight classifier of `--shape` (default the ALBERT-base shape, 12 x 768 shared, E 128, a
SentencePiece model of 2,000 pieces trained on RT train; its biases are made nonzero, as a trained
model's are) is exported fp32 and bf16 (`precision="mixed_bfloat16"`), length-aware. For each
precision and mode, alternating for `--rounds` rounds, a worker process answers RT dev texts
(shuffled) at batch 1 (p50) and batch 32 (texts/s) for `--min-seconds` each, and reports its
resident memory after them and after a sweep of other (batch, length) shapes (the mode caches each
matmul's blocked weights: the sweep shows whether that grows with the shapes served). The answers
of every case are compared with the first export's off-mode answers (fp32 unless `--precisions
bf16`: argmax agreement, largest logit difference). Prints one table with the CPU's ISA; `--json` also writes the figures.

    python benchmarks/onednn_frozen_weights.py [--shape 12x768] [--min-seconds 10] [--rounds 2]
    python benchmarks/onednn_frozen_weights.py --quick      # 2 x 64, a functional check
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import bench_common  # noqa: E402

ENV_VAR = "TF_ONEDNN_ASSUME_FROZEN_WEIGHTS"
SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"
SAMPLE_RT = Path(__file__).resolve().parents[1] / "albert_tf" / "resources" / "sample" / "rotten_tomatoes"
SWEEP_BATCHES = (1, 2, 3, 4, 5, 7, 8, 11, 13, 16)


def rss_mb() -> float:
    return int(re.search(r"VmRSS:\s+(\d+)", Path("/proc/self/status").read_text()).group(1)) / 1024


def rt_rows(name: str) -> list:
    import deployment_frontier

    path = SHARED / "en" / "rotten_tomatoes" / name
    return deployment_frontier.read_labelled_tsv(path if path.is_file() else SAMPLE_RT / name)


def export_models(work: str, shape: str, seq_len: int, vocab_size: int, precisions=("fp32", "bf16")) -> dict:
    """{precision: version directory}: the length-aware exports of one random model in `precisions`."""
    import numpy as np

    import deployment_frontier
    from albert_tf.export.saved_model import export_saved_model
    from albert_tf.tokenization.in_graph import AlbertTokenizerLayer

    spm = deployment_frontier.train_traffic_spm(work, rt_rows("train.tsv"), vocab_size)
    (source,) = deployment_frontier.random_sources(f"teacher={shape}", spm, vocab_size, seq_len)
    rng = np.random.default_rng(0)
    # Zero biases (a fresh model's) would let Grappler fold BiasAdd away when weights are constants.
    source.model.set_weights([w + (rng.normal(size=w.shape) * 0.02).astype(w.dtype) if w.ndim == 1 else w
                              for w in source.model.get_weights()])
    layer = AlbertTokenizerLayer.from_sentencepiece(spm, sequence_length=seq_len, lower_case=True)
    base = os.path.join(work, "exports")
    return {precision: export_saved_model(source.model, layer, base, precision, labels=["0", "1"], check=False,
                                          precision=None if precision == "fp32" else "mixed_bfloat16",
                                          length_bucket=16).path
            for precision in precisions}


def worker(args) -> int:
    """One case: the export through `SessionServable`, timed; one JSON line on stdout."""
    import numpy as np

    from albert_tf.model_server.servable import SessionServable

    texts = json.loads(Path(args.texts_file).read_text(encoding="utf-8"))
    servable = SessionServable(args.worker)

    def run(batch):
        feed = np.array([t.encode("utf-8") for t in batch], dtype=object)
        return servable.run("serving_default", {"text": feed}, output_filter=("logits",))["logits"]

    logits = np.concatenate([run(texts[i:i + 32]) for i in range(0, len(texts), 32)])
    figures = {"logits": logits.tolist()}
    for batch in (1, 32):
        requests = [texts[i:i + batch] for i in range(0, len(texts) - batch + 1, batch)]
        position = 0

        def call():
            nonlocal position
            run(requests[position % len(requests)])
            position += 1

        times = bench_common.time_calls(call, args.min_seconds, 3, warmup=min(len(requests), 8))
        figures[f"b{batch}"] = {"p50_ms": 1e3 * statistics.median(times), "texts_s": batch * len(times) / sum(times),
                                "calls": len(times)}
    figures["rss_mb"] = rss_mb()
    ordered = sorted(texts, key=len)
    for batch in SWEEP_BATCHES:  # batches of similar lengths: many (batch, length bucket) shapes
        for start in range(0, len(ordered) - batch + 1, max(1, len(ordered) // 12)):
            run(ordered[start:start + batch])
    figures["rss_after_sweep_mb"] = rss_mb()
    figures["env"] = os.environ.get(ENV_VAR, "unset")
    servable.close()
    print(json.dumps(figures), flush=True)
    return 0


def run_case(path: str, frozen: bool, texts_file: str, min_seconds: float) -> dict:
    env = {k: v for k, v in os.environ.items() if k != ENV_VAR}
    if frozen:
        env[ENV_VAR] = "1"
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", path, "--texts-file", texts_file,
                           "--min-seconds", str(min_seconds)], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"the worker of {path} failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def table(results: dict, args, isa: dict, reference, precisions) -> str:
    import numpy as np

    lines = [f"## oneDNN frozen weights, `{ENV_VAR}` off vs on ({time.strftime('%Y-%m-%d')})", "",
             f"CPU: {isa['model']}; ISA: {', '.join(isa['flags']) or '-'} (not: {', '.join(isa['missing']) or '-'}); "
             f"{len(os.sched_getaffinity(0))} usable cores. Model: {args.shape} random weights (nonzero biases), "
             f"length-aware exports, {args.texts} RT dev texts shuffled; each case a process of its own, "
             f"{args.rounds} round(s) alternating (median over rounds); >= {args.min_seconds} s per batch size.", "",
             "| export | frozen weights | batch 1 p50 ms | batch 32 texts/s | b1 on vs off | b32 on vs off "
             f"| RSS MB | RSS after sweep MB | argmax = {precisions[0]} off | max logit diff vs {precisions[0]} off |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for precision in [p for p in ("fp32", "bf16") if (p, False) in results]:
        med = {}
        for frozen in (False, True):
            runs = results[precision, frozen]
            med[frozen] = {k: statistics.median(r[k] for r in runs) for k in ("rss_mb", "rss_after_sweep_mb")}
            med[frozen]["p50"] = statistics.median(r["b1"]["p50_ms"] for r in runs)
            med[frozen]["tps"] = statistics.median(r["b32"]["texts_s"] for r in runs)
        for frozen in (False, True):
            m, logits = med[frozen], np.array(results[precision, frozen][0]["logits"])
            agree = float((logits.argmax(-1) == reference.argmax(-1)).mean())
            b1 = f"{med[False]['p50'] / m['p50']:.2f}x" if frozen else "1.00x"
            b32 = f"{m['tps'] / med[False]['tps']:.2f}x" if frozen else "1.00x"
            lines.append(f"| {precision} | {'on' if frozen else 'off'} | {m['p50']:.1f} | {m['tps']:.1f} | {b1} | {b32} "
                         f"| {m['rss_mb']:.0f} | {m['rss_after_sweep_mb']:.0f} | {agree:.3f} "
                         f"| {float(np.abs(logits - reference).max()):.2e} |")
    lines += ["", "Reproduce: `python benchmarks/onednn_frozen_weights.py " + " ".join(sys.argv[1:]) + "`"]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", default="12x768", help="LxH of the random model (default 12x768, ALBERT-base)")
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--vocab-size", type=int, default=2000)
    parser.add_argument("--texts", type=int, default=224, help="RT dev texts of the traffic")
    parser.add_argument("--min-seconds", type=float, default=10.0, help="timed seconds per case and batch size")
    parser.add_argument("--rounds", type=int, default=2, help="off/on alternations per precision")
    parser.add_argument("--precisions", default="fp32,bf16", help="exports to measure (default fp32,bf16)")
    parser.add_argument("--json", help="also write the figures here")
    parser.add_argument("--quick", action="store_true", help="2 x 64, 48 texts, 0.2 s, 1 round: a functional check")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--texts-file", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args)
    if args.quick:
        args.shape, args.texts, args.min_seconds, args.rounds, args.vocab_size = "2x64", 48, 0.2, 1, 300
    precisions = [p for p in ("fp32", "bf16") if p in args.precisions.split(",")]
    if not precisions:
        parser.error(f"--precisions takes fp32 and/or bf16, got {args.precisions!r}")
    with tempfile.TemporaryDirectory(prefix="onednn-frozen-") as work:
        paths = export_models(work, args.shape, args.seq_len, args.vocab_size, precisions)
        texts = [text for _, text in rt_rows("dev.tsv")]
        random.Random(0).shuffle(texts)
        texts_file = os.path.join(work, "texts.json")
        Path(texts_file).write_text(json.dumps(texts[:args.texts]), encoding="utf-8")
        results = {}
        for _ in range(args.rounds):
            for precision in precisions:
                for frozen in (False, True):
                    print(f"[{time.strftime('%H:%M:%S')}] {precision} frozen={'on' if frozen else 'off'}",
                          file=sys.stderr, flush=True)
                    figures = run_case(paths[precision], frozen, texts_file, args.min_seconds)
                    if figures["env"] != ("1" if frozen else "unset"):
                        raise RuntimeError(f"the worker saw {ENV_VAR}={figures['env']}")
                    results.setdefault((precision, frozen), []).append(figures)
    import numpy as np

    reference = np.array(results[precisions[0], False][0]["logits"])
    report = table(results, args, bench_common.cpu_isa(), reference, precisions)
    print(report)
    if args.json:
        Path(args.json).write_text(json.dumps({f"{p} {'on' if f else 'off'}": r for (p, f), r in results.items()}),
                                   encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
