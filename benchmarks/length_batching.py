"""Load benchmark of `albert-tf serve`'s batching: by length bucket against arrival order.

An ALBERT classifier (random weights: speed does not depend on them; `--export-base` serves an
existing export instead) is exported length-aware (`length_bucket` 16) with a SentencePiece model
trained on the Rotten Tomatoes train split (realistic piece counts: dev averages about 48
pieces). `albert-tf serve` runs it in two subprocesses: with the length-grouping batcher (the default)
and with `--no-length-grouping` (arrival order, as TF Serving batches). For each client count of
`--clients`, one batcher after the other, N closed-loop clients on loopback (gRPC, or REST with
`--protocol rest`) send the Rotten Tomatoes dev texts one per request, in a random order, for
`--seconds` after `--warmup-seconds` untimed; the table gives throughput (texts/s) and latency
p50 / p90 / p99 per case.

Throughput at the same p99: for each bound (every p99 the arrival-order batcher reached), the
best throughput of each batcher among its cases with p99 within the bound, and their ratio. The
headline row is the bound of arrival order's best-throughput case.

The header prints the CPU model and its ISA extensions (`bench_common.cpu_isa`) and the
versions. The server and the clients share the machine: run it on an idle one.

    python benchmarks/length_batching.py                    # base-v2, seq 128, clients 4..64
    python benchmarks/length_batching.py --length-chunk 0   # the graph computes each batch at once
    python benchmarks/length_batching.py --quick            # a functional check (tiny model, seconds)

`--length-chunk` is the export's (`albert-tf export --length-chunk`): by default (`auto`) an
ALBERT-base classifier's graph sorts every batch it is given by length and runs it in chunks of 8,
which also cuts the padding of arrival-order batches; 0 computes a batch at once (as before
2026-12-07).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_common  # noqa: E402

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

REPO = Path(__file__).resolve().parents[1]
RT = REPO.parent / "shared" / "data" / "en" / "rotten_tomatoes"
MODEL_NAME = "clf"


def read_texts(path: Path):
    """The `text` column of a Rotten Tomatoes TSV (`label<TAB>text`, with a header)."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()[1:]
    return [line.split("\t", 1)[1] for line in lines if "\t" in line]


def train_spm(directory: str, texts, vocab_size: int) -> str:
    from albert_tf.tokenization import sentencepiece_vocab

    corpus = os.path.join(directory, "corpus.txt")
    with open(corpus, "w", encoding="utf-8") as f:
        f.write("\n".join(texts) + "\n")
    return sentencepiece_vocab.train_sentencepiece([corpus], os.path.join(directory, "rt"), vocab_size=vocab_size,
                                                   seed=0, hard_vocab_limit=False, num_threads=2).model_file


def export(base: str, args, spm: str) -> None:
    """A random-weight classifier exported length-aware to `base/clf/1`, with `args`' batching."""
    import numpy as np

    from albert_tf.config import AlbertConfig
    from albert_tf.export.saved_model import export_saved_model
    from albert_tf.export.serving_config import BatchingConfig
    from albert_tf.modeling import AlbertEncoder
    from albert_tf.tasks.classification import AlbertForClassification
    from albert_tf.tokenization.in_graph import AlbertTokenizerLayer

    layer = AlbertTokenizerLayer.from_sentencepiece(spm, sequence_length=args.seq)
    if args.tiny:
        config = AlbertConfig(vocab_size=layer.vocab_size, embedding_size=32, hidden_size=64, num_hidden_layers=2,
                              num_attention_heads=2, intermediate_size=128, max_position_embeddings=max(args.seq, 128))
    else:
        config = AlbertConfig.preset(args.preset, vocab_size=layer.vocab_size)
    model = AlbertForClassification(AlbertEncoder.from_albert_config(config), num_labels=2)
    model({k: np.zeros((1, args.seq), "int32") for k in ("input_ids", "input_mask", "segment_ids")})
    batching = BatchingConfig(max_batch_size=args.max_batch_size, batch_timeout_micros=args.batch_timeout_micros,
                              num_batch_threads=args.num_batch_threads)
    export_saved_model(model, layer, base, MODEL_NAME, labels=["0", "1"], batching=batching, check=False,
                       length_chunk=args.length_chunk)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """`albert-tf serve` on `base` in a subprocess (arrival order with `grouping=False`)."""

    def __init__(self, base: str, grouping: bool, grpc_max_threads=None):
        self.grpc_port, self.rest_port = free_port(), free_port()
        command = [sys.executable, "-m", "albert_tf", "serve", "--export-base", base, "--port", str(self.grpc_port),
                   "--rest-api-port", str(self.rest_port), "--poll-seconds", "0"]
        if grpc_max_threads:
            command += ["--grpc-max-threads", str(grpc_max_threads)]
        if not grouping:
            command.append("--no-length-grouping")
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = self.process.stdout.readline()
        if not line.startswith("serving"):
            self.process.kill()
            raise SystemExit(f"albert-tf serve did not start: {line.strip() or 'no output'}")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()


def grpc_sender(port: int, model: str):
    import grpc
    from tensorflow.core.framework import tensor_pb2, types_pb2
    from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)

    def send(text: str) -> None:
        request = predict_pb2.PredictRequest()
        request.model_spec.name = model
        tensor = tensor_pb2.TensorProto(dtype=types_pb2.DT_STRING, string_val=[text.encode()])
        tensor.tensor_shape.dim.add(size=1)
        request.inputs["text"].CopyFrom(tensor)
        request.output_filter.append("label_id")
        stub.Predict(request, timeout=120)

    return send, channel.close


def rest_sender(port: int, model: str):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)

    def send(text: str) -> None:
        connection.request("POST", f"/v1/models/{model}:predict", json.dumps({"instances": [text]}),
                           {"Content-Type": "application/json"})
        response = connection.getresponse()
        body = response.read()
        if response.status != 200:
            raise RuntimeError(f"REST {response.status}: {body[:200]!r}")

    return send, connection.close


def load(server: Server, protocol: str, model: str, clients: int, texts, seconds: float, warmup: float, seed: int):
    """N closed-loop clients for `warmup` + `seconds`; the latencies of the requests that started
    in the timed window, and its length."""
    rng = random.Random(seed)
    order = list(texts)
    rng.shuffle(order)
    lock, position = threading.Lock(), [0]
    latencies, errors = [], []
    start = time.monotonic() + 1.0  # every client connected first
    timed_from, stop_at = start + warmup, start + warmup + seconds

    def client():
        send, close = grpc_sender(server.grpc_port, model) if protocol == "grpc" else rest_sender(server.rest_port, model)
        mine = []
        try:
            send(order[0])  # the connection, outside the window
            time.sleep(max(0.0, start - time.monotonic()))
            while True:
                with lock:
                    text = order[position[0] % len(order)]
                    position[0] += 1
                began = time.monotonic()
                if began >= stop_at:
                    break
                send(text)
                if began >= timed_from:
                    mine.append(time.monotonic() - began)
        except Exception as e:  # noqa: BLE001 - reported with the table, never hidden
            errors.append(f"{type(e).__name__}: {str(e).splitlines()[0][:200]}")
        finally:
            close()
            with lock:
                latencies.extend(mine)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return latencies, seconds, errors


def summarize(latencies, seconds):
    import numpy as np

    if not latencies:
        return {"texts_per_s": 0.0, "p50": float("nan"), "p90": float("nan"), "p99": float("nan"), "n": 0}
    ms = np.asarray(latencies) * 1e3
    return {"texts_per_s": len(ms) / seconds, "p50": float(np.percentile(ms, 50)), "p90": float(np.percentile(ms, 90)),
            "p99": float(np.percentile(ms, 99)), "n": len(ms)}


def same_p99(results):
    """Rows of (bound ms, best arrival texts/s, best grouping texts/s) at each arrival-order p99."""
    rows = []
    for bound in sorted({r["p99"] for (mode, _), r in results.items() if mode == "arrival"}):
        best = {}
        for mode in ("arrival", "length"):
            within = [r["texts_per_s"] for (m, _), r in results.items() if m == mode and r["p99"] <= bound]
            best[mode] = max(within) if within else None
        rows.append((bound, best["arrival"], best["length"]))
    return rows


def piece_stats(spm: str, texts, seq: int, batch: int, seed: int):
    """Mean pieces per text, and the mean padded width per text of a batch of `batch` in random
    arrival order and of batches of one 16-piece bucket (what the batching changes)."""
    from albert_tf.tokenization import SentencePieceTokenizer
    from albert_tf.tokenization.packing import bucketed_width

    tokenizer = SentencePieceTokenizer(spm)
    lengths = [min(seq, len(tokenizer.tokenize(t)) + 2) for t in texts]
    rng = random.Random(seed)
    order = list(lengths)
    rng.shuffle(order)
    arrival = [bucketed_width(max(order[i:i + batch]), seq, 16) for i in range(0, len(order), batch)]
    sizes = [len(order[i:i + batch]) for i in range(0, len(order), batch)]
    padded_arrival = sum(w * n for w, n in zip(arrival, sizes)) / len(order)
    padded_grouped = sum(bucketed_width(n, seq, 16) for n in lengths) / len(lengths)
    return sum(lengths) / len(lengths), padded_arrival, padded_grouped


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="base-v2", help="ALBERT preset (default base-v2)")
    parser.add_argument("--tiny", action="store_true", help="a 2-layer, 64-hidden model")
    parser.add_argument("--seq", type=int, default=128, help="sequence length (RT dev's longest is about 100 pieces)")
    parser.add_argument("--vocab-size", type=int, default=8000, help="SentencePiece model trained on RT train")
    parser.add_argument("--spm-model", help="an existing SentencePiece model instead")
    parser.add_argument("--export-base", help="serve this export base's --model-name model instead of exporting one "
                        "(its batching_parameters.txt then sets the batching; length-aware: exported with length_bucket)")
    parser.add_argument("--model-name", default=MODEL_NAME, help=f"the served model (default {MODEL_NAME})")
    parser.add_argument("--data", default=str(RT / "dev.tsv"), help="the texts sent (TSV label<TAB>text)")
    parser.add_argument("--clients", default="4,8,16,32,64", help="closed-loop client counts, comma-separated")
    parser.add_argument("--seconds", type=float, default=30.0, help="timed seconds per case")
    parser.add_argument("--warmup-seconds", type=float, default=5.0, help="untimed seconds before each case")
    parser.add_argument("--protocol", choices=("grpc", "rest"), default="grpc")
    parser.add_argument("--max-batch-size", type=int, default=32)
    parser.add_argument("--batch-timeout-micros", type=int, default=2000)
    parser.add_argument("--num-batch-threads", type=int, default=4)
    parser.add_argument("--length-chunk", default="auto",
                        help="the export's length_chunk: auto (default), 0 (the batch at once) or rows per chunk")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--grpc-max-threads", type=int, default=None,
                        help="the servers' gRPC handler threads (default: the server's, enough for full batches; "
                        "16 was the fixed count before 2026-12-07)")
    parser.add_argument("--quick", action="store_true", help="functional check: tiny model, 2 short cases per batcher")
    args = parser.parse_args(argv)
    if args.length_chunk != "auto":
        rows = int(args.length_chunk) if args.length_chunk.isdigit() else -1
        if rows < 0:
            parser.error(f"--length-chunk must be auto or an integer >= 0, got {args.length_chunk!r}")
        args.length_chunk = rows or None
    if args.quick:
        args.tiny, args.vocab_size, args.clients, args.seconds, args.warmup_seconds = True, 2000, "2,8", 2.0, 1.0
    if not Path(args.data).is_file():
        raise SystemExit(f"--data not found: {args.data}")
    clients = [int(c) for c in args.clients.split(",")]
    texts = read_texts(Path(args.data))

    def log(message):
        print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)

    results = {}
    with tempfile.TemporaryDirectory(prefix="albert-length-batching-") as tmp:
        base = args.export_base
        spm = args.spm_model
        if base is None:
            if spm is None:
                train = Path(args.data).with_name("train.tsv")
                spm = train_spm(tmp, read_texts(train) if train.is_file() else texts, args.vocab_size)
            base = os.path.join(tmp, "export")
            log("exporting")
            export(base, args, spm)
        # Both servers up at once, the cases interleaved (each client count: arrival order, then
        # length buckets), so that a change of load on the machine hits both batchers alike.
        servers = {}
        try:
            for mode in ("arrival", "length"):
                servers[mode] = Server(base, grouping=mode == "length", grpc_max_threads=args.grpc_max_threads)
            for count in clients:
                for mode, server in servers.items():
                    log(f"{mode}: {count} clients")
                    latencies, seconds, errors = load(server, args.protocol, args.model_name, count, texts,
                                                      args.seconds, args.warmup_seconds, args.seed)
                    if errors:
                        raise SystemExit(f"{mode}, {count} clients: {len(errors)} failed clients, first: {errors[0]}")
                    results[(mode, count)] = summarize(latencies, seconds)
        finally:
            for server in servers.values():
                server.stop()
        stats = piece_stats(spm, texts, args.seq, args.max_batch_size, args.seed) if spm else None
    report(args, results, stats)
    return 0


def report(args, results, stats) -> None:
    import tensorflow as tf

    isa = bench_common.cpu_isa()
    model = "export " + args.export_base if args.export_base else ("tiny" if args.tiny else args.preset)
    batching = ("the export's batching_parameters.txt" if args.export_base else
                f"max_batch_size {args.max_batch_size}, batch_timeout_micros {args.batch_timeout_micros}, "
                f"num_batch_threads {args.num_batch_threads}")
    batching += f", gRPC threads {args.grpc_max_threads or 'the server default'}"
    if not args.export_base:
        batching += f"; export length_chunk {args.length_chunk or 0}"
    print(f"\n{model}, seq {args.seq}, {args.protocol}, one RT text per request, closed loop, {args.seconds:g} s per "
          f"case after {args.warmup_seconds:g} s; {batching}; TF {tf.__version__}, "
          f"Python {sys.version.split()[0]}; CPU {isa['model']} ({', '.join(isa['flags']) or 'none of'}"
          f"{'; no ' + ', '.join(isa['missing']) if isa['missing'] else ''}), {os.cpu_count()} logical CPUs")
    if stats:
        print(f"pieces per text {stats[0]:.1f}; padded width per text, batches of {args.max_batch_size}: arrival "
              f"order {stats[1]:.1f}, one 16-piece bucket {stats[2]:.1f}")
    print("\n| batcher | clients | texts/s | p50 ms | p90 ms | p99 ms | requests |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for (mode, count), r in sorted(results.items(), key=lambda kv: (kv[0][0] != "arrival", kv[0][1])):
        name = "arrival order" if mode == "arrival" else "length buckets"
        print(f"| {name} | {count} | {r['texts_per_s']:.1f} | {r['p50']:.1f} | {r['p90']:.1f} | {r['p99']:.1f} | {r['n']} |")
    rows = same_p99(results)
    headline = max((r for r in results.items() if r[0][0] == "arrival"), key=lambda kv: kv[1]["texts_per_s"])[1]["p99"]
    print("\nthroughput at the same p99 bound (best case within it):\n")
    print("| p99 bound ms | arrival order texts/s | length buckets texts/s | ratio |")
    print("|---:|---:|---:|---:|")
    for bound, arrival, grouped in rows:
        ratio = f"{grouped / arrival:.2f}x" if arrival and grouped else "–"
        mark = " (arrival's best)" if bound == headline else ""
        print(f"| {bound:.1f}{mark} | {arrival or 0:.1f} | {grouped or 0:.1f} | {ratio} |")


if __name__ == "__main__":
    sys.exit(main())
