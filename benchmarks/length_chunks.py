"""Length-sorted chunks in the exported text signatures (`length_chunk`), against the whole batch at once.

Exports one classifier (random weights of `--shape`, or a fine-tuned `--model-dir`) length-aware in
`--precision` once per `--chunks` value (0: the batch at once) and, for each, per `--chunk-widths`
value (what a chunk's width is rounded up to; the library's `CHUNK_LENGTH_BUCKET`, 8, by default),
and serves every export as
`albert-tf serve` does: the model server's `SessionServable` (TF Serving's loader and session) in a
process of its own that sets oneDNN's frozen-weights mode by the server's rule (on for bf16
exports). Traffic: the Rotten Tomatoes dev texts, batches of `--batch` drawn at random (the same
batches for every case), one request each in turn, and single texts for batch-1 latency. Prints
texts/s, the ratio to the whole batch, the batch-1 p50, and the largest logit difference and the
label agreement against the whole batch, with the CPU's ISA.

    python benchmarks/length_chunks.py                                  # ALBERT-base, bf16, chunks 0,16,8,4
    python benchmarks/length_chunks.py --precision fp32 --shape 312x4
    python benchmarks/length_chunks.py --model-dir rt/teacher --precision bf16
    python benchmarks/length_chunks.py --model-dir rt/teacher --chunks 0,8,4 --chunk-widths 16,8,4
    python benchmarks/length_chunks.py --quick                          # functional check, tiny model

Bad arguments end with one `error:` line and exit status 2.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import bench_common  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
RT_DEV = REPO.parent / "shared" / "data" / "en" / "rotten_tomatoes" / "dev.tsv"
RT_TRAIN = REPO.parent / "shared" / "data" / "en" / "rotten_tomatoes" / "train.tsv"
SAMPLE_RT = REPO / "albert_tf" / "resources" / "sample" / "rotten_tomatoes"


def rt_texts(split: str, count: int) -> list:
    path = {"dev": RT_DEV, "train": RT_TRAIN}[split]
    if not path.is_file():
        path = SAMPLE_RT / f"{split}.tsv"
    with open(path, encoding="utf-8") as f:
        return [row["text"] for row in csv.DictReader(f, delimiter="\t")][:count]


def parse_shape(text: str):
    try:
        hidden, layers = (int(x) for x in text.split("x"))
    except ValueError:
        raise SystemExit(f"error: --shape must be HIDDENxLAYERS (e.g. 768x12), got {text!r}") from None
    return hidden, layers


def case_name(rows: int, width: int) -> str:
    return f"{rows}/{width}" if rows else "0"


def build_exports(args, work: Path) -> dict:
    """{case name (`case_name`; "0": whole batch): export path}."""
    import keras
    import numpy as np

    from albert_tf.export import signatures
    from albert_tf.export.saved_model import export_saved_model
    from albert_tf.tokenization.in_graph import AlbertTokenizerLayer

    if args.model_dir:
        from albert_tf import AlbertTextClassifier

        text_model = AlbertTextClassifier.from_pretrained(args.model_dir)
        model, layer = text_model.task_model, text_model.preprocessor
    else:
        from albert_tf.config import AlbertConfig
        from albert_tf.modeling import AlbertEncoder
        from albert_tf.tasks.classification import AlbertForClassification

        hidden, layers = parse_shape(args.shape)
        corpus = work / "rt_train.txt"
        corpus.write_text("\n".join(t.lower() for t in rt_texts("train", 100_000)) + "\n", encoding="utf-8")
        spm = bench_common.train_sample_spm(work, [corpus], vocab_size=args.vocab_size)
        layer = AlbertTokenizerLayer.from_sentencepiece(spm, sequence_length=args.seq_len, lower_case=True)
        keras.utils.set_random_seed(0)
        config = AlbertConfig(vocab_size=layer.vocab_size, embedding_size=128, hidden_size=hidden,
                              num_hidden_layers=layers, num_attention_heads=max(1, hidden // 64),
                              intermediate_size=4 * hidden, max_position_embeddings=512)
        model = AlbertForClassification(AlbertEncoder.from_albert_config(config), num_labels=2)
        model({k: np.zeros((1, 8), "int32") for k in ("input_ids", "input_mask", "segment_ids")})
    precision = "mixed_bfloat16" if args.precision == "bf16" else "float32"
    paths = {}
    library_width = signatures.CHUNK_LENGTH_BUCKET
    try:
        for rows in args.chunks:
            for width in args.chunk_widths if rows else [0]:
                # The graph reads the rounding when it is traced, at export: a variant of the library's constant.
                signatures.CHUNK_LENGTH_BUCKET = width or library_width
                name = case_name(rows, width)
                result = export_saved_model(model, layer, str(work / "exports"), f"chunk{name.replace('/', 'w')}",
                                            labels=["neg", "pos"], check=False, precision=precision,
                                            length_chunk=rows or None)
                paths[name] = result.path
    finally:
        signatures.CHUNK_LENGTH_BUCKET = library_width
    return paths


def serve_and_time(spec: dict) -> dict:
    """In its own process: every export through `SessionServable`, interleaved."""
    from albert_tf.export.onednn_weights import apply_frozen_weights

    mode = apply_frozen_weights("auto", list(spec["paths"].values()))
    import numpy as np

    from albert_tf.model_server.servable import SessionServable

    servables = {rows: SessionServable(path) for rows, path in spec["paths"].items()}

    def run(rows, texts):
        feed = np.array([t.encode("utf-8") for t in texts], dtype=object)
        return np.asarray(servables[rows].run("serving_default", {"text": feed}, output_filter=("logits",))["logits"])

    batches, singles = spec["batches"], spec["singles"]
    answers = {rows: np.concatenate([run(rows, b) for b in batches]) for rows in servables}  # also the warm-up
    spent = {rows: 0.0 for rows in servables}
    latencies = {rows: [] for rows in servables}
    order = list(servables)
    done = 0
    while done < spec["min_rounds"] or min(spent.values()) < spec["min_seconds"]:
        for batch in batches:
            for rows in order:
                start = time.perf_counter()
                run(rows, batch)
                spent[rows] += time.perf_counter() - start
        for text in singles:
            for rows in order:
                start = time.perf_counter()
                run(rows, [text])
                latencies[rows].append(time.perf_counter() - start)
        order.reverse()
        done += 1
    whole = answers["0"]
    return {"frozen_weights": mode, "rounds": done, "cases": {
        str(rows): {"texts_per_s": done * len(batches) * len(batches[0]) / spent[rows],
                    "b1_p50_ms": 1000 * float(np.median(latencies[rows])),
                    "max_logit_diff": float(np.max(np.abs(answers[rows] - whole))),
                    "same_label": float(np.mean(answers[rows].argmax(-1) == whole.argmax(-1)))}
        for rows in servables}}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", default="768x12", help="HIDDENxLAYERS of the random-weight classifier (default ALBERT-base)")
    parser.add_argument("--model-dir", help="a fine-tuned classifier directory instead of random weights")
    parser.add_argument("--precision", choices=("bf16", "fp32"), default="bf16")
    parser.add_argument("--chunks", default="0,16,8,4", help="rows per chunk, comma-separated; 0: the whole batch")
    parser.add_argument("--chunk-widths", default=None,
                        help="what a chunk's width is rounded up to, comma-separated (default the library's, 8)")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--batches", type=int, default=7, help="random batches of RT dev texts")
    parser.add_argument("--singles", type=int, default=30, help="texts timed alone per round (batch 1)")
    parser.add_argument("--min-seconds", type=float, default=20.0, help="timed seconds per case at batch --batch")
    parser.add_argument("--min-rounds", type=int, default=2)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--vocab-size", type=int, default=2000)
    parser.add_argument("--json", help="also write the figures here")
    parser.add_argument("--quick", action="store_true", help="a tiny model, a few seconds: a functional check")
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        spec = json.loads(Path(args.serve).read_text(encoding="utf-8"))
        print(json.dumps(serve_and_time(spec)))
        return 0
    try:
        args.chunks = sorted({int(x) for x in args.chunks.split(",")})
    except ValueError:
        parser.error(f"--chunks must be integers >= 0, got {args.chunks!r}")
    if min(args.chunks) < 0 or 0 not in args.chunks or args.batch < 1 or args.batches < 1:
        parser.error("--chunks must include 0 (the whole batch, the reference) and no negative value; "
                     "--batch and --batches must be >= 1")
    from albert_tf.export.signatures import CHUNK_LENGTH_BUCKET

    try:
        args.chunk_widths = sorted({int(x) for x in (args.chunk_widths or str(CHUNK_LENGTH_BUCKET)).split(",")},
                                   reverse=True)
    except ValueError:
        parser.error(f"--chunk-widths must be integers >= 1, got {args.chunk_widths!r}")
    if min(args.chunk_widths) < 1:
        parser.error("--chunk-widths must be integers >= 1")
    if args.model_dir and not Path(args.model_dir).is_dir():
        parser.error(f"--model-dir not found: {args.model_dir}")
    if args.quick:
        args.shape, args.batches, args.singles, args.min_seconds, args.min_rounds = "32x2", 2, 3, 0.0, 1
        args.vocab_size, args.batch, args.chunks, args.chunk_widths = 300, 8, [0, 3], [16, 4]
    parse_shape(args.shape)
    isa = bench_common.cpu_isa()
    with tempfile.TemporaryDirectory(prefix="length_chunks_") as tmp:
        work = Path(tmp)
        paths = build_exports(args, work)
        texts = rt_texts("dev", 10_000)
        rng = random.Random(0)
        spec = {"paths": paths, "min_seconds": args.min_seconds,
                "min_rounds": args.min_rounds, "batches": [rng.sample(texts, args.batch) for _ in range(args.batches)],
                "singles": rng.sample(texts, args.singles)}
        (work / "spec.json").write_text(json.dumps(spec), encoding="utf-8")
        proc = subprocess.run([sys.executable, __file__, "--serve", str(work / "spec.json")], capture_output=True,
                              text=True)
        if proc.returncode != 0:
            print(f"error: the serving process failed: {proc.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
            return 1
        result = json.loads(proc.stdout.strip().splitlines()[-1])
    model = args.model_dir or f"random {args.shape}"
    print(f"## Length-sorted chunks: {model}, {args.precision}, batch {args.batch} (RT dev, random batches)\n")
    print(f"CPU: {isa['model']}; ISA: {', '.join(isa['flags']) or '-'} (not: {', '.join(isa['missing']) or '-'}); "
          f"{len(os.sched_getaffinity(0))} usable cores; frozen weights: {result['frozen_weights']}; "
          f"{result['rounds']} rounds\n")
    print(f"| chunk rows | chunk width rounded to | batch {args.batch} texts/s | vs whole batch | batch 1 p50 ms "
          "| max logit diff | same label |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    whole = result["cases"]["0"]
    for name in paths:
        case = result["cases"][name]
        rows, _, width = name.partition("/")
        print(f"| {rows if width else 'whole batch'} | {width or '-'} | {case['texts_per_s']:.1f} "
              f"| {case['texts_per_s'] / whole['texts_per_s']:.2f}x | {case['b1_p50_ms']:.2f} "
              f"| {case['max_logit_diff']:.2e} | {case['same_label']:.3f} |")
    print(f"\nReproduce: python benchmarks/length_chunks.py {' '.join(sys.argv[1:] if argv is None else argv)}")
    if args.json:
        Path(args.json).write_text(json.dumps({"isa": isa, "args": {k: v for k, v in vars(args).items() if k != "serve"},
                                               **result}, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
