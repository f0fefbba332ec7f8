"""End-to-end raw-text serving benchmark of an exported ALBERT classifier, beside PyTorch.

For each precision (fp32, bf16) a classifier is built (random weights: speed does not depend on
them), exported with `albert_tf.export.export_saved_model` (tokenization in the graph), and timed
on raw texts of about `--seq` tokens:

* in-process: the SavedModel loaded as TF Serving loads it (`SessionServable`, session run);
* local server: the same through `albert_tf.model_server.server.LocalModelServer` over gRPC (one
  client, so batch 32 is one request of 32 texts).

With `--torch`, Hugging Face transformers' PyTorch `AlbertForSequenceClassification` (random
init from an `AlbertConfig` of the same shapes, no hub download) with its fast tokenizer
(`AlbertTokenizerFast` built from the same SentencePiece `.model` file) is timed in the same run
on the same texts (in a worker process of its own, each case right after the TF case of the same
batch size and precision), in fp32 and with `torch.autocast("cpu", torch.bfloat16)`, padding to `--seq`
as the export does (tokenization + model + softmax, like the TF paths).

PyTorch's OpenMP threads spin-wait: on a machine whose cores are shared with other jobs, 2
threads can be ~100x slower than 1 (measured here on the tiny model), so `--torch-threads 1,2`
times one worker per setting and the ratios are against the better of them.

For batch 1 and 32 it prints throughput (texts/s) and latency p50/p99 (ms per request) as a
Markdown table, plus the ratio of each row to the best PyTorch row of the same batch size and
precision.

Every case sends requests for at least `--min-seconds` (default 10) and at least `--iters` (batch
< 8) / `--big-iters` (batch >= 8) requests, after `--warmup` untimed ones, cycling over the texts.
The header names the TF, torch and transformers versions that ran, and the SentencePiece model's
real size: `--vocab-size` is a target (`hard_vocab_limit=False`), and the SOTU corpus yields 22,368
pieces for `--vocab-size 30000`.

torch and transformers are not dependencies of this project. Install them beside the venv, not
into it (`--no-deps` so that the venv's numpy/protobuf/tokenizers are the ones used), and put them
on PYTHONPATH only for this script. The CPU-only wheel (`torch==2.13.0+cpu`, about 1 GB installed)
comes from PyTorch's own index, which this project's machines do not reach; PyPI's `torch` (2.14.1
when last run) is the CUDA build, which runs on the CPU but imports only with its `nvidia-*` /
`cuda-*` wheels present (about 4 GB), so install it with those:

    .venv/bin/pip download -d /tmp/torchwheels torch==2.14.1   # torch, its nvidia-*/cuda-* wheels, sympy, ...
    .venv/bin/pip install --target /tmp/torchsite --no-deps /tmp/torchwheels/*.whl transformers
    PYTHONPATH=/tmp/torchsite .venv/bin/python benchmarks/serving.py --torch --torch-threads 1,2 \
        --corpus ../shared/data/en/sotu --vocab-size 30000

(or, where PyTorch's index is reachable, `pip install --target /tmp/torchsite --no-deps
torch==2.13.0+cpu --index-url https://download.pytorch.org/whl/cpu` instead of the first two lines'
torch part).

    python benchmarks/serving.py --tiny --seq 32 --iters 5        # a quick functional check
"""

from __future__ import annotations

import argparse
import glob
import os
import random
import re
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

WORDS = ("the people of this nation have made a law that states every year congress and the "
         "president shall report on the state of the union to all citizens in good faith").split()


def make_texts(count: int, words: int, seed: int = 0, corpus_words=None):
    """`count` texts of `words` words: consecutive words of the corpus, or random `WORDS`."""
    rng = random.Random(seed)
    if corpus_words:
        texts = []
        for _ in range(count):
            start = rng.randrange(0, max(1, len(corpus_words) - words))
            texts.append(" ".join(corpus_words[start:start + words]))
        return texts
    return [" ".join(rng.choice(WORDS) for _ in range(words)) for _ in range(count)]


def corpus_files(corpus: str):
    files = sorted(glob.glob(os.path.join(corpus, "*.txt"))) if os.path.isdir(corpus) else sorted(glob.glob(corpus))
    if not files:
        raise SystemExit(f"no text files in {corpus}")
    return files


def read_corpus_words(files, limit: int = 2_000_000):
    words = []
    for path in files:
        with open(path, encoding="utf-8", errors="replace") as f:
            words.extend(f.read().split())
        if len(words) > limit:
            break
    return words


def train_vocab(directory: str, vocab_size: int, files=None) -> str:
    from albert_tf.tokenization import sentencepiece_vocab

    if not files:
        corpus = os.path.join(directory, "corpus.txt")
        with open(corpus, "w", encoding="utf-8") as f:
            f.write("\n".join(make_texts(2000, 20, seed=1)))
        files = [corpus]
    else:
        # One sentence-ish line each (SentencePiece caps line length).
        corpus = os.path.join(directory, "corpus.txt")
        with open(corpus, "w", encoding="utf-8") as out:
            for path in files:
                with open(path, encoding="utf-8", errors="replace") as f:
                    for line in re.split(r"(?<=[.!?])\s+", f.read()):
                        line = " ".join(line.split())
                        if line:
                            out.write(line + "\n")
        files = [corpus]
    return sentencepiece_vocab.train_sentencepiece(files, os.path.join(directory, "bench"), vocab_size=vocab_size,
                                                   seed=0, hard_vocab_limit=False, num_threads=2).model_file


def build_classifier(config, precision: str, seq: int):
    import keras
    import numpy as np

    from albert_tf.modeling import AlbertEncoder
    from albert_tf.tasks.classification import AlbertForClassification

    previous = keras.mixed_precision.dtype_policy()
    keras.mixed_precision.set_dtype_policy("mixed_bfloat16" if precision == "bf16" else "float32")
    try:
        model = AlbertForClassification(AlbertEncoder.from_albert_config(config), num_labels=2)
        model({k: np.zeros((1, seq), "int32") for k in ("input_ids", "input_mask", "segment_ids")})
    finally:
        keras.mixed_precision.set_dtype_policy(previous)
    return model


def percentiles(latencies):
    import numpy as np

    return float(np.percentile(latencies, 50) * 1e3), float(np.percentile(latencies, 99) * 1e3)


def time_calls(call, batches, warmup: int, min_seconds: float = 0.0):
    """Texts/s, p50 and p99 ms of `call` over `batches` (at least all of them once, and at least
    `min_seconds` of requests, cycling over them), after `warmup` untimed requests."""
    for batch in batches[:warmup]:
        call(batch)
    latencies, texts = [], 0
    start = time.perf_counter()
    while len(latencies) < len(batches) or time.perf_counter() - start < min_seconds:
        batch = batches[len(latencies) % len(batches)]
        t = time.perf_counter()
        call(batch)
        latencies.append(time.perf_counter() - t)
        texts += len(batch)
    elapsed = time.perf_counter() - start
    result = (texts / elapsed, *percentiles(latencies), len(latencies))
    # Each case as soon as it is measured (stderr), so a long run that is cut short still tells.
    print(f"  -> {result[0]:.2f} texts/s, p50 {result[1]:.0f} ms, p99 {result[2]:.0f} ms, {result[3]} requests",
          file=sys.stderr, flush=True)
    return result


def torch_model(spm: str, config, seq: int):
    """(tokenizer, model) of transformers, or None when transformers/torch are missing."""
    try:
        import torch  # noqa: F401
        import transformers
    except ImportError:
        return None
    tokenizer = transformers.AlbertTokenizerFast(vocab_file=spm)
    hf_config = transformers.AlbertConfig(
        vocab_size=max(config.vocab_size, len(tokenizer)), embedding_size=config.embedding_size,
        hidden_size=config.hidden_size, num_hidden_layers=config.num_hidden_layers,
        num_attention_heads=config.num_attention_heads, intermediate_size=config.intermediate_size,
        max_position_embeddings=config.max_position_embeddings, num_labels=2,
    )
    model = transformers.AlbertForSequenceClassification(hf_config).eval()
    return tokenizer, model


def bench_torch(tokenizer, model, precision: str, seq: int, batches, warmup: int, min_seconds: float = 0.0):
    import contextlib

    import torch

    def call(texts):
        autocast = torch.autocast("cpu", dtype=torch.bfloat16) if precision == "bf16" else contextlib.nullcontext()
        with torch.inference_mode(), autocast:
            encoded = tokenizer(texts, padding="max_length", truncation=True, max_length=seq, return_tensors="pt")
            return torch.softmax(model(**encoded).logits.float(), -1).numpy()

    return time_calls(call, batches, warmup=warmup, min_seconds=min_seconds)


class TorchWorker:
    """PyTorch in its own process (TF's thread pools and PyTorch's OpenMP threads in one process
    slow PyTorch down badly), driven case by case over a pipe so that the cases interleave."""

    def __init__(self, spm: str, config, seq: int, texts_path: str, warmup: int, threads=None):
        import json
        import subprocess

        self.process = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--torch-worker", json.dumps(
                {"spm": spm, "config": config.to_dict(), "seq": seq, "texts": texts_path, "warmup": warmup, "threads": threads})],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        ready = json.loads(self.process.stdout.readline())
        self.ready, self.versions = ready["ready"], ready.get("versions")

    def run(self, precision: str, batch_size: int, iters: int, min_seconds: float = 0.0):
        import json

        self.process.stdin.write(json.dumps([precision, batch_size, iters, min_seconds]) + "\n")
        self.process.stdin.flush()
        return json.loads(self.process.stdout.readline())["result"]

    def close(self):
        self.process.stdin.close()
        self.process.wait(timeout=60)


def torch_worker(spec_json: str) -> int:
    import json

    from albert_tf.config import AlbertConfig

    spec = json.loads(spec_json)
    with open(spec["texts"], encoding="utf-8") as f:
        texts = json.load(f)
    if spec.get("threads"):
        import torch

        torch.set_num_threads(spec["threads"])
    built = torch_model(spec["spm"], AlbertConfig(**spec["config"]), spec["seq"])
    versions = None
    if built is not None:
        import torch
        import transformers

        versions = f"torch {torch.__version__}, transformers {transformers.__version__}"
    print(json.dumps({"ready": built is not None, "versions": versions}), flush=True)
    for line in sys.stdin:
        precision, batch_size, iters, min_seconds = json.loads(line)
        batches = [texts[i * batch_size:(i + 1) * batch_size] for i in range(iters)]
        result = None if built is None else bench_torch(*built, precision, spec["seq"], batches, spec["warmup"],
                                                        min_seconds)
        print(json.dumps({"result": result}), flush=True)
    return 0


def main(argv=None) -> int:
    if argv is None and len(sys.argv) == 3 and sys.argv[1] == "--torch-worker":
        return torch_worker(sys.argv[2])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="base-v2", help="ALBERT preset (default base-v2)")
    parser.add_argument("--tiny", action="store_true", help="a 2-layer, 64-hidden model (functional check)")
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--batches", default="1,32")
    parser.add_argument("--precisions", default="fp32,bf16")
    parser.add_argument("--iters", type=int, default=20, help="requests timed per case of batch < 8, at least")
    parser.add_argument("--big-iters", type=int, default=3,
                        help="requests timed per case of batch >= 8, at least")
    parser.add_argument("--min-seconds", type=float, default=10.0, help="timed seconds per case, at least")
    parser.add_argument("--warmup", type=int, default=1, help="untimed requests before each case")
    parser.add_argument("--vocab-size", type=int, default=1000)
    parser.add_argument("--spm-model", help="an existing SentencePiece model (default: train one)")
    parser.add_argument("--corpus", help="text files (directory or glob) for the texts and the SentencePiece model")
    parser.add_argument("--torch", action="store_true", help="also time transformers' PyTorch ALBERT if installed")
    parser.add_argument("--torch-threads", default="",
                        help="comma-separated torch.set_num_threads values, one PyTorch worker (and row) each "
                             "(default: torch's own setting)")
    parser.add_argument("--no-server", action="store_true", help="skip the local-server rows")
    args = parser.parse_args(argv)
    big_iters = args.big_iters or args.iters

    import numpy as np
    import tensorflow as tf

    from albert_tf.config import AlbertConfig
    from albert_tf.export.saved_model import export_saved_model
    from albert_tf.model_server.client import predict_text
    from albert_tf.model_server.servable import SessionServable
    from albert_tf.model_server.server import LocalModelServer
    from albert_tf.tokenization.in_graph import AlbertTokenizerLayer

    def log(message):
        print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)

    batch_sizes = [int(b) for b in args.batches.split(",")]
    precisions = args.precisions.split(",")
    rows = []
    with tempfile.TemporaryDirectory(prefix="albert-serving-bench-") as tmp:
        files = corpus_files(args.corpus) if args.corpus else None
        spm = args.spm_model or train_vocab(tmp, args.vocab_size, files)
        layer = AlbertTokenizerLayer.from_sentencepiece(spm, sequence_length=args.seq)
        log(f"SentencePiece model: {args.spm_model or 'trained on the corpus'}, {layer.vocab_size} pieces")
        if args.tiny:
            config = AlbertConfig(vocab_size=layer.vocab_size, embedding_size=32, hidden_size=64, num_hidden_layers=2,
                                  num_attention_heads=2, intermediate_size=128, max_position_embeddings=max(args.seq, 128))
        else:
            config = AlbertConfig.preset(args.preset, vocab_size=max(layer.vocab_size, 8))
        # Words per text: enough to fill the sequence (SentencePiece makes about 1-2 pieces a word).
        corpus_words = read_corpus_words(files) if files else None
        texts = make_texts(max(batch_sizes) * max(args.iters, big_iters), args.seq, corpus_words=corpus_words)

        def batches_of(batch_size):
            iters = big_iters if batch_size >= 8 else args.iters
            return [texts[i * batch_size:(i + 1) * batch_size] for i in range(iters)]

        base = os.path.join(tmp, "export")
        servables, servers = {}, {}
        for precision in precisions:
            model = build_classifier(config, precision, args.seq)
            log(f"exporting {precision}")
            # The compatibility check (a fresh-process reload) is left out: it changes nothing timed.
            result = export_saved_model(model, layer, base, f"clf_{precision}", labels=["0", "1"], check=False)
            del model
            servables[precision] = SessionServable(result.path)
        if not args.no_server:
            server = LocalModelServer(base, model_names=[f"clf_{p}" for p in precisions], rest_port=None, poll_interval_s=0)
            server.start()
        workers = {}
        if args.torch:
            import json

            texts_path = os.path.join(tmp, "texts.json")
            with open(texts_path, "w", encoding="utf-8") as f:
                json.dump(texts, f)
            for threads in [int(t) for t in args.torch_threads.split(",") if t] or [None]:
                workers[threads] = TorchWorker(spm, config, args.seq, texts_path, args.warmup, threads)
        torch_rows = {}
        # Interleaved: every (batch size, precision) case runs its TF and PyTorch rows back to
        # back, so that a change of load on a shared machine hits both alike.
        try:
            for batch_size in batch_sizes:
                batches = batches_of(batch_size)
                for precision in precisions:
                    servable = servables[precision]

                    def in_process(batch, servable=servable):
                        return servable.run("serving_default", {"text": np.array([t.encode() for t in batch], object)})

                    log(f"TF {precision} in-process batch {batch_size}")
                    rows.append((precision, "albert_tf in-process (session)", batch_size,
                                 *time_calls(in_process, batches, warmup=args.warmup, min_seconds=args.min_seconds)))
                    for threads, worker in workers.items():
                        log(f"PyTorch {precision} batch {batch_size} threads {threads}")
                        torch_rows[(precision, batch_size, threads)] = worker.run(precision, batch_size, len(batches),
                                                                                  args.min_seconds)
                    if not args.no_server:
                        address = f"127.0.0.1:{server.grpc_port}"
                        log(f"TF {precision} local server batch {batch_size}")
                        rows.append((precision, "albert_tf local server (gRPC)", batch_size,
                                     *time_calls(lambda b, p=precision: predict_text(address, f"clf_{p}", b, timeout=900),
                                                 batches, warmup=args.warmup, min_seconds=args.min_seconds)))
        finally:
            for worker in workers.values():
                worker.close()
            if not args.no_server:
                server.stop()
            for servable in servables.values():
                servable.close()
    name = "tiny" if args.tiny else args.preset
    versions = [f"TF {tf.__version__}"] + sorted({w.versions for w in workers.values() if w.versions})
    print(f"\n{name}, seq {args.seq}, SentencePiece model of {layer.vocab_size} pieces, raw text in; each case "
          f">= {args.min_seconds:g} s and >= {args.iters} (batch < 8) / {big_iters} (batch >= 8) requests after "
          f"{args.warmup} warm-up; {', '.join(versions)}\n")
    print("| precision | path | batch | texts/s | p50 ms | p99 ms | requests | vs best PyTorch same precision and batch |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")

    def best_torch(precision, batch):
        measured = [m for (p, b, _), m in torch_rows.items() if (p, b) == (precision, batch) and m]
        return max(m[0] for m in measured) if measured else None

    for precision, path, batch, throughput, p50, p99, requests in rows:
        peer = best_torch(precision, batch)
        ratio = f"{throughput / peer:.2f}x" if peer else "–"
        print(f"| {precision} | {path} | {batch} | {throughput:.1f} | {p50:.1f} | {p99:.1f} | {requests} | {ratio} |")
    for (precision, batch, threads), measured in torch_rows.items():
        name = "PyTorch transformers (fast tokenizer" + (f", {threads} thread{'s' if threads > 1 else ''})" if threads else ")")
        if measured is None:
            print(f"| {precision} | {name} | {batch} | not run: transformers/torch not installed | | | | |")
        else:
            ratio = f"{measured[0] / best_torch(precision, batch):.2f}x"
            print(f"| {precision} | {name} | {batch} | {measured[0]:.1f} | {measured[1]:.1f} | {measured[2]:.1f} | "
                  f"{measured[3]} | {ratio} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
