"""TF float32 vs LiteRT float32 vs LiteRT dynamic-int8 (`export_saved_model(..., tflite=...)`) for one
ALBERT-shaped classifier: batch latency, file size and agreement with TF float32.

The classifier (random weights of `--preset`'s shapes with `--vocab-size` tokens; speed does not
depend on the values) is exported once with a dynamic-int8 `model.tflite` and once more as float32
TFLite (`write_tflite` beside it), and its encoder as dynamic-int8 TFLite for the pooled output.
Cases, at `--batch` rows and each `--lengths` (every row all real tokens):

* `tf_fp32`: the export's `tokens` computation as a `tf.function` over any length (the
  SavedModel's graph, oneDNN fusions included; its `tokens` signature is fixed at the export's length);
* `tf_fp32_saved_model`: the SavedModel's `tokens` signature loaded as TF Serving loads it
  (`SessionServable`), at the export length only;
* `litert_fp32`, `litert_int8`: `TfliteModel` (XNNPACK) with `--threads` threads.

The cases of one length run interleaved, one call each in turn, so machine load hits all alike.

Agreement on `--check-rows` random rows: logits cosine and probabilities max abs diff vs `tf_fp32`,
and pooled-output cosine of the int8 encoder. Prints the CPU's ISA flags and one JSON object.

    python benchmarks/tflite_int8.py                        # ALBERT-base shapes, vocab 2000, batch 1, lengths 48 and 128
    python benchmarks/tflite_int8.py --lengths 128 --min-seconds 20
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_common  # noqa: E402

ISA_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_int8", "amx_bf16")
SAMPLE = Path(__file__).resolve().parents[1] / "albert_tf" / "resources" / "sample" / "rotten_tomatoes" / "train.tsv"


def isa_flags():
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return {}
    present = set(re.findall(r"\b(" + "|".join(ISA_FLAGS) + r")\b", text))
    model = re.search(r"model name\s*:\s*(.*)", text)
    return {"cpu": model.group(1) if model else None, "cores": os.cpu_count(), **{f: f in present for f in ISA_FLAGS}}


def _cosine(a, b):
    import numpy as np

    a, b = np.ravel(a).astype(np.float64), np.ravel(b).astype(np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def _inputs(rows, length, vocab, seed):
    import numpy as np

    rng = np.random.default_rng(seed)
    ids = rng.integers(5, vocab, (rows, length)).astype(np.int32)
    ids[:, 0] = 2
    return {"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": np.zeros_like(ids)}


def _interleaved(calls, min_seconds: float, warmup: int = 2):
    """Per-call seconds of each case, run one call each in turn (so a change of machine load hits
    every case alike) until every case has `min_seconds` of timed calls."""
    import time

    for call in calls.values():
        for _ in range(warmup):
            call()
    times = {name: [] for name in calls}
    while min(sum(t) for t in times.values()) < min_seconds or min(len(t) for t in times.values()) < 3:
        for name, call in calls.items():
            start = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - start)
    return times


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="base-v2")
    parser.add_argument("--vocab-size", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--lengths", default="48,128")
    parser.add_argument("--threads", type=int, default=None, help="LiteRT threads (default: the CPU count)")
    parser.add_argument("--min-seconds", type=float, default=10.0)
    parser.add_argument("--check-rows", type=int, default=16)
    parser.add_argument("--work", help="directory for the exports (default: a temporary one)")
    args = parser.parse_args(argv)

    import numpy as np
    import tensorflow as tf

    from albert_tf import file_io  # noqa: F401 (the exports write through it)
    from albert_tf.config import AlbertConfig
    from albert_tf.export import signatures, tflite
    from albert_tf.export.saved_model import export_saved_model
    from albert_tf.model_server.servable import SessionServable
    from albert_tf.modeling import AlbertEncoder
    from albert_tf.tasks.classification import AlbertForClassification
    from albert_tf.tokenization.in_graph import AlbertTokenizerLayer

    lengths = [int(x) for x in args.lengths.split(",")]
    threads = args.threads or os.cpu_count()
    work = Path(args.work or tempfile.mkdtemp(prefix="tflite_int8_"))
    work.mkdir(parents=True, exist_ok=True)
    texts = work / "texts.txt"
    texts.write_text("\n".join(line.split("\t", 1)[1] for line in SAMPLE.read_text(encoding="utf-8").splitlines()[1:]))
    spm_model = bench_common.train_sample_spm(work, [texts], vocab_size=args.vocab_size)
    export_length = max(lengths)
    layer = AlbertTokenizerLayer.from_sentencepiece(spm_model, sequence_length=export_length)
    config = AlbertConfig.preset(args.preset).replace(vocab_size=args.vocab_size, max_position_embeddings=max(512, export_length))
    model = AlbertForClassification(AlbertEncoder.from_albert_config(config), num_labels=2)
    model(_inputs(1, 8, args.vocab_size, 0))

    result = export_saved_model(model, layer, str(work / "base"), "cls", labels=["neg", "pos"], check=False, tflite="dynamic-int8")
    int8_path = os.path.join(result.path, tflite.TFLITE_FILE)
    module = signatures.ServingModule(model, layer, labels=["neg", "pos"])
    fp32_info = tflite.write_tflite(str(work / "fp32"), module, "float32")
    encoder_module = signatures.ServingModule(model.encoder, layer)
    encoder_info = tflite.write_tflite(str(work / "enc_int8"), encoder_module, "dynamic-int8")
    variables = sum(p.stat().st_size for p in Path(result.path, "variables").iterdir())

    any_length = tf.function(
        lambda input_ids, input_mask, segment_ids: module._token_outputs(
            {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids}),
        input_signature=[tf.TensorSpec([None, None], tf.int32, name=k) for k in signatures.TOKEN_KEYS],
    )
    encoder_any_length = tf.function(
        lambda input_ids, input_mask, segment_ids: encoder_module._token_outputs(
            {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids}),
        input_signature=[tf.TensorSpec([None, None], tf.int32, name=k) for k in signatures.TOKEN_KEYS],
    )
    encoder_int8 = tflite.TfliteModel(str(work / "enc_int8" / tflite.TFLITE_FILE), num_threads=threads)
    servable = SessionServable(result.path)
    litert = {
        "litert_fp32": tflite.TfliteModel(str(work / "fp32" / tflite.TFLITE_FILE), num_threads=threads),
        "litert_int8": tflite.TfliteModel(int8_path, num_threads=threads),
    }
    cases = {"tf_fp32": lambda f: {k: v.numpy() for k, v in any_length(**{k: tf.constant(v) for k, v in f.items()}).items()},
             **litert}

    report = {
        "isa": isa_flags(), "preset": args.preset, "vocab_size": args.vocab_size, "batch": args.batch,
        "litert_threads": threads, "tf_threads": "default (all cores)",
        "bytes": {"saved_model_variables": variables, "litert_fp32": fp32_info["bytes"], "litert_int8": result.tflite["bytes"]},
        "latency_ms": {}, "agreement": {},
    }
    for length in lengths:
        batch = _inputs(args.batch, length, args.vocab_size, 1)
        calls = {name: (lambda call=call: call(batch)) for name, call in cases.items()}
        if length == export_length:
            calls["tf_fp32_saved_model"] = lambda: servable.run("tokens", batch)
        row = {k: bench_common.spread(v) for k, v in _interleaved(calls, args.min_seconds).items()}
        report["latency_ms"][length] = {
            k: {"median": round(v["median_s"] * 1e3, 2), "min": round(v["min_s"] * 1e3, 2), "max": round(v["max_s"] * 1e3, 2),
                "calls": v["calls"]} for k, v in row.items()}
        check = _inputs(args.check_rows, length, args.vocab_size, 2)
        reference = cases["tf_fp32"](check)
        pooled_reference = encoder_any_length(**{k: tf.constant(v) for k, v in check.items()})["pooled_output"].numpy()
        agreement = {}
        for name in litert:
            got = cases[name](check)
            agreement[name] = {
                "logits_cosine": round(_cosine(got["logits"], reference["logits"]), 6),
                "probabilities_max_abs_diff": float(np.max(np.abs(got["probabilities"] - reference["probabilities"]))),
                "label_agreement": float(np.mean(got["label_id"] == reference["label_id"])),
            }
        agreement["litert_int8"]["pooled_cosine"] = round(_cosine(encoder_int8(check)["pooled_output"], pooled_reference), 6)
        report["agreement"][length] = agreement
        print(json.dumps({length: report["latency_ms"][length]}), flush=True)
    servable.close()
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
