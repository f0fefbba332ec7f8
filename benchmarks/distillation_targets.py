"""Distillation targets (albert_tf issue 22, item 2), on Rotten Tomatoes and the Chinese reviews.

For each set (`--sets rt zh`):

1. data: RT as shipped (`../shared/data/en/rotten_tomatoes`); the Chinese reviews split by the
   MD5 of the text 80/10/10 (`finetune_chinese_sentiment.write_splits`), train cut to
   `--max-train` rows in hash order (a mixed, deterministic sample) for the CPU budget;
2. a WordPiece vocabulary learned on the training texts with the package's
   `albert_tf.tokenization.build_wordpiece_vocab`;
3. the teacher: `albert_tf.tasks.finetune` on the full training set from random weights (no
   pretrained encoder is available offline), `--teacher-layers` x `--teacher-hidden` all-shared;
4. part (a): a narrow student trained on `--labels` labels alone (`distill(alpha=0)`, plain
   supervised training) vs. the same student on those labels plus the teacher's soft labels on
   the remaining training snippets as unlabelled text (`unlabeled_from_train`), per seed;
5. part (b): students with the full labels plus soft labels (`shared:1`: the teacher's own block
   once; narrow configs), their batch-1 throughput against the teacher's and the fraction of the
   teacher's dev accuracy they keep.

Every run is a JSON line appended to `--results` as it finishes (a rerun skips the keys already
there); the tables are printed at the end. Thin caller of `albert_tf.distillation.distill`.

    python benchmarks/distillation_targets.py --work-dir ../runs/distill --sets rt zh --seeds 1 2 3
    python benchmarks/distillation_targets.py --work-dir ../runs/distill --results FILE --sets rt --report
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
DATA = REPO.parent / "shared" / "data"
RESULTS = REPO / "benchmarks" / "results" / "distillation_targets.jsonl"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--work-dir", required=True)
    p.add_argument("--data-root", default=str(DATA), help="the shared data folder (en/rotten_tomatoes, zh)")
    p.add_argument("--results", default=str(RESULTS))
    p.add_argument("--sets", nargs="+", default=["rt", "zh"], choices=["rt", "zh"])
    p.add_argument("--parts", nargs="+", default=["a", "b"], choices=["a", "b"])
    p.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    p.add_argument("--max-seq-length", type=int, default=64)
    p.add_argument("--max-train", type=int, default=10271, help="training rows kept (RT has 10,271)")
    p.add_argument("--max-dev", type=int, default=None, help="dev rows kept (default all)")
    p.add_argument("--vocab-size", type=int, default=8000)
    p.add_argument("--teacher-layers", type=int, default=6)
    p.add_argument("--teacher-hidden", type=int, default=256)
    p.add_argument("--teacher-epochs", type=float, default=2.0)
    p.add_argument("--teacher-learning-rate", type=float, help="default: the recipe's for the teacher's size")
    p.add_argument("--labels", type=int, default=1000, help="part (a): labelled examples")
    p.add_argument("--baseline-epochs", type=float, default=8.0, help="part (a): epochs over the labels alone")
    p.add_argument("--student-epochs", type=float, default=2.0, help="epochs over a transfer set of the whole train set")
    p.add_argument("--students-b", nargs="+", default=["shared:1", "narrow:2x128"],
                   help="part (b): shared:N, narrow:LxH (E=64, H/64 heads, I=4H) or a preset")
    p.add_argument("--student-a", default="narrow:2x128", help="part (a)'s student")
    p.add_argument("--temperature", type=float, default=2.0)
    p.add_argument("--alpha", type=float, default=0.7)
    p.add_argument("--report", action="store_true", help="print the tables of --results and run nothing")
    p.add_argument("--timing-seconds", type=float, default=20.0, help="batch-1 timing per model, in 5 interleaved rounds")
    return p.parse_args(argv)


def _done_keys(path: Path):
    if not path.is_file():
        return {}
    return {r["key"]: r for r in (json.loads(l) for l in path.read_text().splitlines() if l.strip())}


def _append(path: Path, record):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(record, sort_keys=True) + "\n")
    print("RESULT " + json.dumps(record, sort_keys=True), flush=True)


def prepare_set(name: str, work: Path, args) -> Path:
    """The set's train/dev(/test) TSVs under `work/name/data`."""
    import csv

    out = work / name / "data"
    if (out / "dev.tsv").is_file():
        return out
    out.mkdir(parents=True, exist_ok=True)
    if name == "rt":
        source = Path(args.data_root) / "en" / "rotten_tomatoes"
        splits = {"train": source / "train.tsv", "dev": source / "dev.tsv"}
    else:
        from finetune_chinese_sentiment import write_splits

        full = work / name / "full"
        write_splits(Path(args.data_root) / "zh", full)
        splits = {"train": full / "train.tsv", "dev": full / "dev.tsv"}
    for split, path in splits.items():
        with open(path, encoding="utf-8", newline="") as f:
            rows = list(csv.reader(f, delimiter="\t"))
        limit = args.max_train if split == "train" else args.max_dev
        body = rows[1:][: limit or None]
        with open(out / f"{split}.tsv", "w", encoding="utf-8", newline="") as f:
            writer = csv.writer(f, delimiter="\t", lineterminator="\n")
            writer.writerow(rows[0])
            writer.writerows(body)
    return out


def vocab_for(name: str, data: Path, args) -> Path:
    from albert_tf.data.tables import read_table
    from albert_tf.tokenization import build_wordpiece_vocab

    vocab = data.parent / "vocab.txt"
    if not vocab.is_file():
        texts = data.parent / "train_texts.txt"
        examples = read_table(str(data / "train.tsv"), text_column="text", label_column="label")
        texts.write_text("\n".join(e.text_a for e in examples) + "\n", encoding="utf-8")
        build_wordpiece_vocab([str(texts)], str(vocab), args.vocab_size, max_unique_chars=3000 if name == "zh" else None)
    return vocab


def _vocab_size(vocab: Path) -> int:
    return sum(1 for line in vocab.read_text(encoding="utf-8").splitlines() if line.strip())


def write_config(path: Path, vocab_size: int, layers: int, hidden: int, embedding: int = 128):
    config = dict(vocab_size=vocab_size, embedding_size=embedding, hidden_size=hidden, num_hidden_layers=layers,
                  num_attention_heads=max(1, hidden // 64), intermediate_size=4 * hidden, max_position_embeddings=512,
                  hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
    path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    return path


def student_arg(spec: str, work: Path, vocab_size: int) -> str:
    if spec.startswith("narrow:"):
        layers, hidden = (int(x) for x in spec[len("narrow:"):].split("x"))
        return str(write_config(work / f"student_{layers}x{hidden}.json", vocab_size, layers, hidden, embedding=64))
    return spec


def batch1_seconds(model_dirs, seq: int, seconds: float, rounds: int = 5):
    """{name: median seconds of one batch-1 forward pass (a compiled call, length `seq`)}, the
    models timed in turns for `rounds` rounds of `seconds / rounds` each, so that the machine's
    changing load falls on all of them alike."""
    import statistics

    import numpy as np
    import tensorflow as tf

    from bench_common import spread, time_calls
    from albert_tf.tasks.resources import load_model

    ids = np.full((1, seq), 5, "int32")
    inputs = {"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": np.zeros_like(ids)}
    calls = {}
    for name, model_dir in model_dirs.items():
        model = load_model(str(model_dir))
        fn = tf.function(lambda x, model=model: model(x, training=False))
        fn(inputs)
        calls[name] = fn
    medians = {name: [] for name in calls}
    for _ in range(rounds):
        for name, fn in calls.items():
            times = time_calls(lambda fn=fn: fn(inputs)["logits"].numpy(), min_seconds=seconds / rounds, warmup=2)
            medians[name].append(spread(times)["median_s"])
    return {name: statistics.median(values) for name, values in medians.items()}


def main(argv=None) -> int:
    args = parse_args(argv)
    from albert_tf.distillation import DistillSettings, distill
    from albert_tf.tasks.runner import FinetuneSettings, finetune

    work = Path(args.work_dir).resolve()
    results = Path(args.results)
    done = _done_keys(results)
    if args.report:
        for name in args.sets:
            teachers = [r for r in done.values() if r.get("set") == name and r["part"] == "teacher"]
            if teachers:
                print_tables(done, name, teachers[-1]["dev_accuracy"])
        return 0
    for name in args.sets:
        data = prepare_set(name, work, args)
        vocab = vocab_for(name, data, args)
        size = _vocab_size(vocab)
        base = work / name
        teacher = base / "teacher"
        key = f"teacher|{name}|{args.teacher_layers}x{args.teacher_hidden}|{args.teacher_epochs}"
        if args.teacher_learning_rate:
            key += f"|lr={args.teacher_learning_rate}"
        if key not in done:
            started = time.time()
            outcome = finetune(FinetuneSettings(
                task="classification", data=str(data), model_dir=str(teacher), text_column="text", label_column="label",
                config=str(write_config(base / "teacher.json", size, args.teacher_layers, args.teacher_hidden)),
                vocab_file=str(vocab), max_seq_length=args.max_seq_length, num_epochs=args.teacher_epochs, batch_size=32,
                learning_rate=args.teacher_learning_rate,
                seed=1, overwrite=True, quiet=True,
            ))
            done[key] = {"key": key, "set": name, "part": "teacher", "dev_accuracy": outcome.result.best_metrics["accuracy"],
                         "constant": outcome.constant_baseline.metrics["accuracy"], "seconds": round(time.time() - started, 1),
                         "vocab_size": size, "seq": args.max_seq_length}
            _append(results, done[key])
        teacher_acc = done[key]["dev_accuracy"]

        def run(part, student, seed, **kw):
            rkey = f"{part}|{name}|{student}|{seed}|" + ",".join(f"{k}={v}" for k, v in sorted(kw.items()))
            if rkey in done:
                return done[rkey]
            started = time.time()
            model_dir = base / "students" / rkey.replace("|", "_").replace(":", "-").replace(",", "_").replace("=", "")
            o = distill(DistillSettings(
                teacher=str(teacher), student=student_arg(student, base, size), data=str(data), model_dir=str(model_dir),
                seed=seed, batch_size=32, overwrite=True, quiet=True, temperature=args.temperature, **kw,
            ))
            record = {"key": rkey, "set": name, "part": part, "student": student, "seed": seed, "settings": kw,
                      "dev_accuracy": o.student_metrics["accuracy"], "teacher_dev_accuracy": o.teacher_metrics["accuracy"],
                      "constant": o.constant_baseline.metrics["accuracy"], "steps": o.num_train_steps,
                      "num_labeled": o.num_labeled, "num_unlabeled": o.num_unlabeled,
                      "seconds": round(time.time() - started, 1), "model_dir": str(model_dir)}
            done[rkey] = record
            _append(results, record)
            return record

        def throughput():
            firsts = {}
            for student in args.students_b:
                first = next((r for r in done.values() if r.get("part") == "b" and r.get("set") == name and r["student"] == student), None)
                if first is not None:
                    firsts[student] = Path(first["model_dir"])
            tkey = f"throughput|{name}|" + ",".join(sorted(firsts))
            if tkey in done or not firsts:
                return
            timed = batch1_seconds({"teacher": teacher, **firsts}, args.max_seq_length, args.timing_seconds)
            done[tkey] = {"key": tkey, "set": name, "part": "throughput", "batch1_s": timed, "seq": args.max_seq_length,
                          "speedup": {k: timed["teacher"] / v for k, v in timed.items() if k != "teacher"}}
            _append(results, done[tkey])

        # Seed by seed, every part (and the timings after the first), so that a cut-short run has
        # whole comparisons.
        for seed in args.seeds:
            if "a" in args.parts:
                run("a_labels_only", args.student_a, seed, max_labeled=args.labels, alpha=0.0, num_epochs=args.baseline_epochs)
                run("a_distilled", args.student_a, seed, max_labeled=args.labels, unlabeled_from_train=True,
                    alpha=args.alpha, num_epochs=args.student_epochs)
            if "b" in args.parts:
                for student in args.students_b:
                    run("b", student, seed, alpha=args.alpha, num_epochs=args.student_epochs)
                throughput()
            print_tables(done, name, teacher_acc)
    return 0


def _mean(values):
    return sum(values) / len(values) if values else float("nan")


def print_tables(done, name, teacher_acc):
    rows = [r for r in done.values() if r.get("set") == name]
    constant = next((r["constant"] for r in rows if "constant" in r), float("nan"))
    print(f"\n== {name}: teacher dev accuracy {teacher_acc:.4f}, best constant {constant:.4f}")
    only = [r["dev_accuracy"] for r in rows if r["part"] == "a_labels_only"]
    dist = [r["dev_accuracy"] for r in rows if r["part"] == "a_distilled"]
    if only or dist:
        gain = _mean(dist) - _mean(only)
        print(f"(a) labels only: {_mean(only):.4f} (n={len(only)}) | + soft labels on the rest: {_mean(dist):.4f} "
              f"(n={len(dist)}) | gain {gain:+.4f} (target >= +0.02: {'met' if gain >= 0.02 else 'NOT met'})")
    timings = [r for r in rows if r["part"] == "throughput"]
    speedups = max(timings, key=lambda r: len(r["speedup"]))["speedup"] if timings else {}
    print("(b) | student | dev accuracy (mean, n) | of teacher | batch-1 speed-up | target (>=4x and >=97%) |")
    for student in sorted({r["student"] for r in rows if r["part"] == "b"}):
        accs = [r["dev_accuracy"] for r in rows if r["part"] == "b" and r["student"] == student]
        speed = speedups.get(student, float("nan"))
        kept = _mean(accs) / teacher_acc
        met = speed >= 4 and kept >= 0.97
        print(f"| {student} | {_mean(accs):.4f} ({len(accs)}) | {kept:.3f} | {speed:.2f}x | {'met' if met else 'not met'} |")


if __name__ == "__main__":
    sys.exit(main())
