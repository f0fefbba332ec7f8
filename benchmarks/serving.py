"""End-to-end raw-text serving benchmark of an exported ALBERT classifier.

For each precision (fp32, bf16) a classifier is built (random weights: speed does not depend on
them), exported with `albert_tf.export.export_saved_model` (tokenization in the graph), and timed
on raw texts of about `--seq` tokens:

* in-process: the SavedModel loaded as TF Serving loads it (`SessionServable`, session run);
* local server: the same through `albert_tf.serving.server.LocalModelServer` over gRPC (one
  client, so batch 32 is one request of 32 texts).

For batch 1 and 32 it prints throughput (texts/s) and latency p50/p99 (ms per request) as a
Markdown table. With `--torch`, and only if `transformers` and `torch` are importable (they are
not dependencies of this project: use a separate benchmark environment), the same architecture
in PyTorch (`AlbertForSequenceClassification` + `AlbertTokenizer` on the same SentencePiece
model) is timed for comparison; otherwise that row says it was not run.

    python benchmarks/serving.py --preset base-v2 --seq 128 --iters 50
    python benchmarks/serving.py --tiny --seq 32 --iters 5        # a quick functional check
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

WORDS = ("the people of this nation have made a law that states every year congress and the "
         "president shall report on the state of the union to all citizens in good faith").split()


def make_texts(count: int, words: int, seed: int = 0):
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(words)) for _ in range(count)]


def train_vocab(directory: str, vocab_size: int) -> str:
    from albert_tf.tokenization import sentencepiece_vocab

    corpus = os.path.join(directory, "corpus.txt")
    with open(corpus, "w", encoding="utf-8") as f:
        f.write("\n".join(make_texts(2000, 20, seed=1)))
    return sentencepiece_vocab.train_sentencepiece([corpus], os.path.join(directory, "bench"), vocab_size=vocab_size,
                                                   seed=0, hard_vocab_limit=False).model_file


def build_classifier(config, precision: str, seq: int):
    import keras
    import numpy as np

    from albert_tf.modeling import AlbertEncoder
    from albert_tf.tasks.classification import AlbertClassifier

    previous = keras.mixed_precision.dtype_policy()
    keras.mixed_precision.set_dtype_policy("mixed_bfloat16" if precision == "bf16" else "float32")
    try:
        model = AlbertClassifier(AlbertEncoder.from_albert_config(config), num_labels=2)
        model({k: np.zeros((1, seq), "int32") for k in ("input_ids", "input_mask", "segment_ids")})
    finally:
        keras.mixed_precision.set_dtype_policy(previous)
    return model


def percentiles(latencies):
    import numpy as np

    return float(np.percentile(latencies, 50) * 1e3), float(np.percentile(latencies, 99) * 1e3)


def time_calls(call, batches, warmup: int):
    for batch in batches[:warmup]:
        call(batch)
    latencies = []
    start = time.perf_counter()
    for batch in batches:
        t = time.perf_counter()
        call(batch)
        latencies.append(time.perf_counter() - t)
    elapsed = time.perf_counter() - start
    return sum(len(b) for b in batches) / elapsed, *percentiles(latencies)


def bench_torch(spm: str, config, batch_size: int, seq: int, batches):
    """(texts/s, p50, p99) of transformers' ALBERT, or None when transformers/torch are missing."""
    try:
        import torch
        import transformers
    except ImportError:
        return None
    tokenizer = transformers.AlbertTokenizer(vocab_file=spm)
    hf_config = transformers.AlbertConfig(
        vocab_size=max(config.vocab_size, tokenizer.vocab_size), embedding_size=config.embedding_size,
        hidden_size=config.hidden_size, num_hidden_layers=config.num_hidden_layers,
        num_attention_heads=config.num_attention_heads, intermediate_size=config.intermediate_size,
        max_position_embeddings=config.max_position_embeddings, num_labels=2,
    )
    model = transformers.AlbertForSequenceClassification(hf_config).eval()

    def call(texts):
        with torch.inference_mode():
            encoded = tokenizer(texts, padding="max_length", truncation=True, max_length=seq, return_tensors="pt")
            return torch.softmax(model(**encoded).logits, -1)

    return time_calls(call, batches, warmup=2)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="base-v2", help="ALBERT preset (default base-v2)")
    parser.add_argument("--tiny", action="store_true", help="a 2-layer, 64-hidden model (functional check)")
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--batches", default="1,32")
    parser.add_argument("--precisions", default="fp32,bf16")
    parser.add_argument("--iters", type=int, default=30, help="requests timed per case")
    parser.add_argument("--vocab-size", type=int, default=1000)
    parser.add_argument("--torch", action="store_true", help="also time transformers' PyTorch ALBERT if installed")
    args = parser.parse_args(argv)

    import numpy as np
    import tensorflow as tf

    from albert_tf.config import AlbertConfig
    from albert_tf.export.saved_model import export_saved_model
    from albert_tf.serving.client import predict_text
    from albert_tf.serving.servable import SessionServable
    from albert_tf.serving.server import LocalModelServer
    from albert_tf.tokenization.in_graph import AlbertTokenizerLayer

    batch_sizes = [int(b) for b in args.batches.split(",")]
    rows = []
    with tempfile.TemporaryDirectory(prefix="albert-serving-bench-") as tmp:
        spm = train_vocab(tmp, args.vocab_size)
        layer = AlbertTokenizerLayer.from_sentencepiece(spm, sequence_length=args.seq)
        if args.tiny:
            config = AlbertConfig(vocab_size=layer.vocab_size, embedding_size=32, hidden_size=64, num_hidden_layers=2,
                                  num_attention_heads=2, intermediate_size=128, max_position_embeddings=max(args.seq, 128))
        else:
            config = AlbertConfig.preset(args.preset, vocab_size=max(layer.vocab_size, 8))
        # Words per text: enough to fill the sequence (SentencePiece makes about 1-2 pieces a word).
        texts = make_texts(max(batch_sizes) * args.iters, args.seq)
        base = os.path.join(tmp, "export")
        for precision in args.precisions.split(","):
            model = build_classifier(config, precision, args.seq)
            result = export_saved_model(model, layer, base, f"clf_{precision}", labels=["0", "1"])
            servable = SessionServable(result.path)
            for batch_size in batch_sizes:
                batches = [texts[i * batch_size:(i + 1) * batch_size] for i in range(args.iters)]
                def in_process(batch):
                    return servable.run("serving_default", {"text": np.array([t.encode() for t in batch], object)})
                rows.append((precision, "in-process (session)", batch_size, *time_calls(in_process, batches, warmup=3)))
            servable.close()
            with LocalModelServer(base, model_names=[f"clf_{precision}"], rest_port=None, poll_interval_s=0) as server:
                address = f"127.0.0.1:{server.grpc_port}"
                for batch_size in batch_sizes:
                    batches = [texts[i * batch_size:(i + 1) * batch_size] for i in range(args.iters)]
                    rows.append((precision, "local server (gRPC)", batch_size,
                                 *time_calls(lambda b: predict_text(address, f"clf_{precision}", b), batches, warmup=3)))
        torch_rows = []
        if args.torch:
            for batch_size in batch_sizes:
                batches = [texts[i * batch_size:(i + 1) * batch_size] for i in range(args.iters)]
                measured = bench_torch(spm, config, batch_size, args.seq, batches)
                torch_rows.append((batch_size, measured))
    name = "tiny" if args.tiny else args.preset
    print(f"\n{name}, seq {args.seq}, {args.iters} requests per case, raw text in (TF {tf.__version__})\n")
    print("| precision | path | batch | texts/s | p50 ms | p99 ms |")
    print("|---|---|---:|---:|---:|---:|")
    for precision, path, batch, throughput, p50, p99 in rows:
        print(f"| {precision} | {path} | {batch} | {throughput:.1f} | {p50:.1f} | {p99:.1f} |")
    for batch, measured in torch_rows:
        if measured is None:
            print(f"| fp32 | PyTorch transformers | {batch} | not run: transformers/torch not installed | | |")
        else:
            print(f"| fp32 | PyTorch transformers | {batch} | {measured[0]:.1f} | {measured[1]:.1f} | {measured[2]:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
