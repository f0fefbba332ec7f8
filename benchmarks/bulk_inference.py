"""Bulk inference throughput: `bulk_infer` on 1 and 2 Dask workers (and Beam's DirectRunner in
process) against a single-process `predict` loop (`predict_model_dir`, what `albert-tf predict
--input` runs), on the same model and the same Rotten Tomatoes snippets; the answers are checked
equal (labels identical, probabilities within 1e-5).

The model is a small classifier (the `small` preset's shape unless `--model DIR` names a fine-tuned
model directory) fine-tuned for a few steps on Rotten Tomatoes with a SentencePiece model trained
on its training snippets: throughput, not accuracy, is measured. Each bulk run's wall time
includes everything a user waits for: reading, the Dask cluster's start and stop, the model loaded
once per worker, scoring, and writing the PredictionLogs and answers.

    python benchmarks/bulk_inference.py --texts 2000
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_common  # noqa: E402

RT = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "en" / "rotten_tomatoes"


def _snippets(split: str):
    with open(RT / f"{split}.tsv", encoding="utf-8", newline="") as f:
        return [r for r in csv.DictReader(f, delimiter="\t") if r.get("text") and r["text"].strip()]


def _train_model(work: Path, train_steps: int) -> str:
    from albert_tf.config import AlbertConfig
    from albert_tf.tasks import FinetuneSettings, finetune

    data = work / "data"
    data.mkdir()
    rows = _snippets("train")
    for split, part in (("train", rows[:2000]), ("dev", _snippets("dev")[:200])):
        with open(data / f"{split}.tsv", "w", encoding="utf-8", newline="") as f:
            writer = csv.writer(f, delimiter="\t", lineterminator="\n")
            writer.writerow(["label", "text"])
            writer.writerows((r["label"], r["text"]) for r in part)
    texts = work / "rt_train.txt"
    texts.write_text("\n".join(r["text"] for r in rows) + "\n", encoding="utf-8")
    spm_model = bench_common.train_sample_spm(work, [texts], vocab_size=4000)
    config = AlbertConfig.preset("small")
    config = AlbertConfig(**{**config.to_dict(), "vocab_size": 4000})
    config.to_json_file(str(work / "albert_config.json"))
    finetune(FinetuneSettings(
        task="classification", data=str(data), model_dir=str(work / "model"), text_column="text", label_column="label",
        config=str(work / "albert_config.json"), spm_model=spm_model, max_seq_length=128, batch_size=32,
        num_train_steps=train_steps, quiet=True,
    ))
    return str(work / "model")


def _same(got, want) -> None:
    import numpy as np

    labels = [r["label"] for r in got] == [r["label"] for r in want]
    close = all(np.allclose(list(g["probabilities"].values()), list(w["probabilities"].values()), atol=1e-5)
                for g, w in zip(got, want))
    if not (labels and close and len(got) == len(want)):
        raise SystemExit("bulk inference answers differ from predict's")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--texts", type=int, default=2000, help="Rotten Tomatoes snippets to score (dev + test)")
    parser.add_argument("--model", help="a fine-tuned classifier directory (default: train a small one)")
    parser.add_argument("--train-steps", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--shard-size", type=int, default=256)
    parser.add_argument("--workers", default="1,2", help="Dask worker counts to run")
    args = parser.parse_args()

    from albert_tf.inference.bulk import bulk_infer
    from albert_tf.tasks import predict_model_dir

    isa = bench_common.cpu_isa()
    print(f"CPU: {isa['model']} ({os.cpu_count()} cores); ISA: {', '.join(isa['flags']) or 'none'}"
          f"{'; missing ' + ', '.join(isa['missing']) if isa['missing'] else ''}")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        model = args.model or _train_model(work, args.train_steps)
        snippets = [r["text"] for r in _snippets("dev") + _snippets("test")][: args.texts]
        texts = work / "texts.txt"
        texts.write_text("\n".join(snippets) + "\n", encoding="utf-8")
        n = len(snippets)
        print(f"{n} texts, {sum(map(len, snippets)) / n:.0f} characters on average; batch {args.batch_size}, "
              f"shards of {args.shard_size}")

        start = time.perf_counter()
        want = predict_model_dir(model, input=str(texts), batch_size=args.batch_size).records
        base = time.perf_counter() - start
        rows = [("predict loop (1 process)", base, None)]
        runs = [("bulk, DirectRunner", {})] + [(f"bulk, Dask {w} worker{'s' if int(w) > 1 else ''}", {"num_workers": int(w)})
                                               for w in args.workers.split(",") if w]
        for name, options in runs:
            output = work / name.replace(" ", "_").replace(",", "")
            start = time.perf_counter()
            summary = bulk_infer(model, [str(texts)], str(output), batch_size=args.batch_size,
                                 shard_size=args.shard_size, answers_format="jsonl", **options)
            seconds = time.perf_counter() - start
            with open(summary.answers, encoding="utf-8") as f:
                _same([json.loads(line) for line in f], want)
            rows.append((name, seconds, summary.num_shards))
        print("\n| run | wall s | texts/s | vs predict loop |\n|---|---:|---:|---:|")
        for name, seconds, _ in rows:
            print(f"| {name} | {seconds:.1f} | {n / seconds:.0f} | {base / seconds:.2f}x |")
        print("\nanswers: every bulk run equals the predict loop (labels identical, probabilities within 1e-5)")


if __name__ == "__main__":
    main()
