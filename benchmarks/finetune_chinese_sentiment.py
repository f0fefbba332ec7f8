"""Chinese sentiment: WordPiece vocabulary, pretraining on People's Daily, fine-tuning, test accuracy.

The whole chain on the Chinese data beside the repository (`../shared/data/zh/`):

1. a FIXED held-out split of the review data (`sentiment_pos.txt` / `sentiment_neg.txt`, one
   review per line) by a hash of the text: 80 % train, 10 % dev, 10 % test, written as
   `label<TAB>text` TSV files into `WORK/data/` (rows ordered by the hash, so that
   `--max-train-examples N` takes a mixed, deterministic sample);
2. the raw text of the People's Daily corpus (`peoples_daily_199801_pos_tagged.txt`): the `/tag`
   suffixes are stripped, every paragraph is cut into sentences at 。！？ (one sentence per
   line) and `--paragraphs-per-document` consecutive paragraphs make one document;
3. a WordPiece `vocab.txt` learned on People's Daily plus the training reviews
   (`albert_tf.tokenization.build_wordpiece_vocab`; Chinese characters are single tokens);
4. SOP + n-gram MLM pretraining records of People's Daily with the Beam pipeline
   (`albert_tf.data.beam_pipeline.make_pretraining_data`, WordPiece `TokenizerSpec`);
5. a tiny ALBERT (default E=64, H=128, L=4, sharing all) pretrained with LAMB for
   `--pretrain-steps` updates (`albert_tf.training.pretraining.run_pretraining`);
6. fine-tuning with `albert_tf.tasks.finetune` (`albert-tf finetune --task classification`) from the pretrained
   encoder and, unless `--no-baseline`, the same recipe from random weights; dev and test
   accuracy of the best-dev weights are printed.

Every step reuses its output in `--work-dir` when it is complete (delete the folder, or pass
`--fresh`, to start over).

    python benchmarks/finetune_chinese_sentiment.py --work-dir /tmp/zh_sentiment
    python benchmarks/finetune_chinese_sentiment.py --pretrain-steps 50 --max-train-examples 500 --no-baseline
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import os
import re
import shutil
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO.parent / "shared" / "data" / "zh"
POS_FILE, NEG_FILE, CORPUS_FILE = "sentiment_pos.txt", "sentiment_neg.txt", "peoples_daily_199801_pos_tagged.txt"
SPLITS = (("train", 8), ("dev", 1), ("test", 1))  # tenths of the hash range
_SENTENCE_END = re.compile(r"(?<=[。！？!?])(?![”’」』）)])")
_PD_ID = re.compile(r"^\d{8}-\d{2}-\d{3}-\d{3}/m$")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(DEFAULT_DATA), help=f"directory with {POS_FILE}, {NEG_FILE}, {CORPUS_FILE}")
    parser.add_argument("--work-dir", default="zh_sentiment_work", help="outputs of every step (reused when complete)")
    parser.add_argument("--fresh", action="store_true", help="delete --work-dir first")
    data = parser.add_argument_group("vocabulary and pretraining data")
    data.add_argument("--vocab-size", type=int, default=16000)
    data.add_argument("--max-unique-chars", type=int, default=6000, help="characters kept in the vocabulary (rarer: [UNK])")
    data.add_argument("--max-corpus-lines", type=int, help="use only the first N People's Daily paragraphs")
    data.add_argument("--paragraphs-per-document", type=int, default=5)
    data.add_argument("--pretrain-seq-length", type=int, default=128)
    data.add_argument("--max-predictions-per-seq", type=int, default=20)
    data.add_argument("--dupe-factor", type=int, default=2)
    model = parser.add_argument_group("model and pretraining")
    model.add_argument("--embedding-size", type=int, default=64)
    model.add_argument("--hidden-size", type=int, default=128)
    model.add_argument("--num-layers", type=int, default=4)
    model.add_argument("--num-heads", type=int, default=2)
    model.add_argument("--intermediate-size", type=int, default=512)
    model.add_argument("--pretrain-steps", type=int, default=600, help="LAMB updates (0: no pretraining, baseline only)")
    model.add_argument("--pretrain-batch-size", type=int, default=32)
    model.add_argument("--pretrain-learning-rate", type=float, default=0.002)
    tune = parser.add_argument_group("fine-tuning (the same for the pretrained model and the baseline)")
    tune.add_argument("--max-seq-length", type=int, default=128)
    tune.add_argument("--batch-size", type=int, default=32)
    tune.add_argument("--learning-rate", type=float, default=1e-4)
    tune.add_argument("--epochs", type=float, default=1.0)
    tune.add_argument("--max-train-examples", type=int, default=4000, help="first N training reviews (0: all)")
    tune.add_argument("--max-eval-examples", type=int, help="first N dev/test reviews (default: all)")
    tune.add_argument("--baseline", action=argparse.BooleanOptionalAction, default=True, help="also fine-tune from random weights")
    parser.add_argument("--seed", type=int, default=12345)
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    return parser.parse_args(argv)


def _bucket(text: str) -> int:
    return int(hashlib.md5(text.encode("utf-8")).hexdigest(), 16)


def write_splits(data: Path, out: Path) -> dict:
    """train/dev/test TSV files (`label<TAB>text`) split by the MD5 of the text; returns counts."""
    rows = []
    for label, name in (("1", POS_FILE), ("0", NEG_FILE)):
        for line in (data / name).read_text(encoding="utf-8").splitlines():
            text = " ".join(line.split())
            if text:
                rows.append((_bucket(text), label, text))
    rows.sort()
    bounds, total, start = {}, sum(t for _, t in SPLITS), 0
    for split, tenths in SPLITS:
        bounds[split] = (start, start + tenths)
        start += tenths
    out.mkdir(parents=True, exist_ok=True)
    counts = {}
    for split, (low, high) in bounds.items():
        chosen = [(label, text) for h, label, text in rows if low <= h % total < high]
        tmp = out / f"{split}.tsv.tmp"
        with open(tmp, "w", encoding="utf-8", newline="") as f:
            writer = csv.writer(f, delimiter="\t", lineterminator="\n")
            writer.writerow(["label", "text"])
            writer.writerows(chosen)
        os.replace(tmp, out / f"{split}.tsv")
        counts[split] = {"examples": len(chosen), "positive": sum(label == "1" for label, _ in chosen)}
    return counts


def majority_accuracy(split_dir: Path, max_train=None, max_eval=None) -> dict:
    """{split: accuracy} of always predicting the most frequent label of the (used) training rows."""

    def labels(split, limit):
        with open(split_dir / f"{split}.tsv", encoding="utf-8", newline="") as f:
            return [row["label"] for row in csv.DictReader(f, delimiter="\t")][: limit or None]

    train = labels("train", max_train)
    top = max(sorted(set(train)), key=train.count)
    return {split: sum(v == top for v in labels(split, max_eval)) / max(1, len(labels(split, max_eval))) for split in ("dev", "test")}


def strip_tags(line: str) -> str:
    """Raw text of one People's Daily line: the words without their `/tag` (and `[...]nt` brackets)."""
    words = []
    for token in line.split():
        if _PD_ID.match(token):
            continue
        word = token.rsplit("/", 1)[0] if "/" in token else token
        if word.startswith("[") and len(word) > 1:
            word = word[1:]
        words.append(word)
    return "".join(words)


def write_corpus(path: Path, paragraphs_file: Path, out: Path, per_document: int, max_lines=None) -> int:
    """Sentence-per-line documents (blank line between) and a paragraph-per-line copy; returns paragraphs."""
    paragraphs = []
    for line in path.read_text(encoding="utf-8").splitlines():
        text = strip_tags(line)
        if text:
            paragraphs.append(text)
            if max_lines and len(paragraphs) >= max_lines:
                break
    lines = []
    for i, text in enumerate(paragraphs):
        if i and i % per_document == 0:
            lines.append("")
        lines.extend(s.strip() for s in _SENTENCE_END.split(text) if s.strip())
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    paragraphs_file.write_text("\n".join(paragraphs) + "\n", encoding="utf-8")
    return len(paragraphs)


def _pretraining_history(pretrain_dir: Path) -> list:
    """The metrics lines (one per checkpoint interval) the pretraining run wrote."""
    path = pretrain_dir / "metrics.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _pretraining_done(pretrain_dir: Path, steps: int) -> bool:
    """Whether `pretrain_dir` holds the exported encoder of a finished run of `steps` updates."""
    history = _pretraining_history(pretrain_dir)
    return (pretrain_dir / "encoder.keras").is_file() and bool(history) and history[-1].get("step") == steps


def model_config(args, vocab_size: int) -> dict:
    return {
        "vocab_size": vocab_size, "embedding_size": args.embedding_size, "hidden_size": args.hidden_size,
        "num_hidden_layers": args.num_layers, "num_attention_heads": args.num_heads,
        "intermediate_size": args.intermediate_size, "max_position_embeddings": max(512, args.max_seq_length),
    }


def finetune(args, data_dir: Path, model_dir: Path, vocab: Path, *, init=None, config=None) -> dict:
    """One `albert-tf finetune --task classification` run (`albert_tf.tasks.finetune`); returns its
    eval results and run info."""
    from albert_tf.tasks import FinetuneSettings
    from albert_tf.tasks import finetune as run_finetune
    from albert_tf.tasks.spec import RESULTS_FILE

    settings = FinetuneSettings(
        task="classification", data=str(data_dir), text_column="text", label_column="label", model_dir=str(model_dir),
        vocab_file=str(vocab), max_seq_length=args.max_seq_length, batch_size=args.batch_size,
        learning_rate=args.learning_rate, num_epochs=args.epochs, seed=args.seed, overwrite=True,
        init=str(init) if init else None, config=None if init else str(config),
        max_train_examples=args.max_train_examples or None, max_eval_examples=args.max_eval_examples or None,
        quiet=args.quiet,
    )
    started = time.time()
    run_finetune(settings)
    results = json.loads((model_dir / RESULTS_FILE).read_text(encoding="utf-8"))
    info = json.loads((model_dir / "finetuning.json").read_text(encoding="utf-8"))
    return {"results": results, "steps": info["num_train_steps"], "best_step": info["best_step"], "seconds": time.time() - started}


def main(argv=None) -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    args = parse_args(argv)
    data = Path(args.data)
    missing = [n for n in (POS_FILE, NEG_FILE, CORPUS_FILE) if not (data / n).is_file()]
    if missing:
        print(f"no Chinese data at {data}: missing {', '.join(missing)}", file=sys.stderr)
        return 2
    work = Path(args.work_dir)
    if args.fresh and work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    timings = {}

    # 1. The fixed split.
    split_dir = work / "data"
    started = time.time()
    counts = write_splits(data, split_dir)
    print(f"[1/5] split by MD5 of the text -> {split_dir}: {json.dumps(counts)}", flush=True)

    # 2.-3. Corpus and vocabulary.
    vocab_file = work / "vocab.txt"
    corpus = work / "peoples_daily_sentences.txt"
    if not vocab_file.is_file() or not corpus.is_file():
        paragraphs = work / "peoples_daily_paragraphs.txt"
        n = write_corpus(data / CORPUS_FILE, paragraphs, corpus, args.paragraphs_per_document, args.max_corpus_lines)
        train_texts = work / "train_texts.txt"
        from albert_tf.data.tables import read_table

        texts = [e.text_a for e in read_table(str(split_dir / "train.tsv"), text_column="text", label_column="label")]
        train_texts.write_text("\n".join(texts) + "\n", encoding="utf-8")
        from albert_tf.tokenization import build_wordpiece_vocab

        vocab = build_wordpiece_vocab(
            [str(paragraphs), str(train_texts)], str(vocab_file), args.vocab_size, max_unique_chars=args.max_unique_chars
        )
        print(f"[2/5] {n} People's Daily paragraphs -> {corpus}; WordPiece vocab of {vocab.vocab_size} tokens "
              f"({vocab.num_words} distinct words) in {vocab.seconds:.0f} s", flush=True)
    else:
        print(f"[2/5] reusing {vocab_file} and {corpus}", flush=True)
    vocab_size = sum(1 for line in vocab_file.read_text(encoding="utf-8").splitlines() if line.strip())
    config_file = work / "albert_config.json"
    config_file.write_text(json.dumps(model_config(args, vocab_size), indent=2) + "\n", encoding="utf-8")
    timings["data + vocab"] = time.time() - started

    # 4.-5. Pretraining records and the pretrained model.
    pretrain_dir = work / "pretrain"
    if args.pretrain_steps:
        from albert_tf.data.beam_pipeline import PipelineConfig, TokenizerSpec, make_pretraining_data
        from albert_tf.data.pipeline_output import read_metadata
        from albert_tf.data.pretraining_instances import InstanceConfig

        records = work / "records"
        started = time.time()
        try:
            meta = read_metadata(str(records))
            print(f"[3/5] reusing pretraining records in {records}", flush=True)
        except Exception:  # absent or incomplete
            summary = make_pretraining_data(
                str(corpus), str(records),
                PipelineConfig(
                    instance=InstanceConfig(max_seq_length=args.pretrain_seq_length, max_predictions_per_seq=args.max_predictions_per_seq),
                    tokenizer=TokenizerSpec(vocab_file=str(vocab_file)), piece_style="wordpiece",
                    dupe_factor=args.dupe_factor, seed=args.seed, input_format="sentences", num_shards=2,
                ),
                overwrite=True,
            )
            meta = read_metadata(str(records))
            print(f"[3/5] SOP + n-gram records (Beam, dupe factor {args.dupe_factor}): {summary}", flush=True)
        timings["records"] = time.time() - started

        from albert_tf.data.tfrecords import list_files, make_pretraining_dataset
        from albert_tf.training.pretraining import PretrainingRunConfig, run_pretraining

        started = time.time()
        run_config = PretrainingRunConfig(
            model_dir=str(pretrain_dir), model_config=str(config_file), batch_size=args.pretrain_batch_size,
            max_seq_length=args.pretrain_seq_length, max_predictions_per_seq=args.max_predictions_per_seq,
            num_train_steps=args.pretrain_steps, num_warmup_steps=args.pretrain_steps // 10,
            learning_rate=args.pretrain_learning_rate, checkpoint_every_n_steps=max(1, args.pretrain_steps // 4),
            keep_checkpoints=2, seed=args.seed, log_every=0, verbose=0 if args.quiet else 2,
        )
        files = list_files(str(records / "*.tfrecord"))

        def dataset_fn():
            return make_pretraining_dataset(
                files, args.pretrain_seq_length, args.max_predictions_per_seq, args.pretrain_batch_size,
                is_training=True, seed=args.seed,
            )

        if _pretraining_done(pretrain_dir, args.pretrain_steps):
            print(f"[4/5] reusing the pretrained model in {pretrain_dir} ({args.pretrain_steps} steps)", flush=True)
        else:
            print(f"[4/5] pretraining E={args.embedding_size} H={args.hidden_size} L={args.num_layers} "
                  f"for {args.pretrain_steps} steps x batch {args.pretrain_batch_size} -> {pretrain_dir}", flush=True)
            run_pretraining(run_config, dataset_fn)
            timings["pretraining"] = time.time() - started
        history = _pretraining_history(pretrain_dir)
        if history:
            keys = ("loss", "mlm_accuracy", "sop_accuracy")
            print("      step " + f"{history[0]['step']} -> {history[-1]['step']}: "
                  + "; ".join(f"{k} {history[0].get(k, float('nan')):.4f} -> {history[-1].get(k, float('nan')):.4f}" for k in keys),
                  flush=True)
    else:
        print("[3/5] [4/5] no pretraining (--pretrain-steps 0)", flush=True)

    # 6. Fine-tuning.
    runs = {}
    if args.pretrain_steps:
        print(f"[5/5] fine-tuning from {pretrain_dir}", flush=True)
        runs["pretrained"] = finetune(args, split_dir, work / "finetune_pretrained", vocab_file, init=pretrain_dir)
    if args.baseline or not args.pretrain_steps:
        print("[5/5] fine-tuning from random weights (baseline)", flush=True)
        runs["random"] = finetune(args, split_dir, work / "finetune_random", vocab_file, config=config_file)
    for name, run in runs.items():
        timings[f"fine-tuning {name}"] = run["seconds"]

    print()
    print("| init | dev accuracy | test accuracy | fine-tuning steps | best dev step |")
    print("|---|---:|---:|---:|---:|")
    for name, run in runs.items():
        r = run["results"]
        print(f"| {name} | {r['dev']['accuracy']:.4f} | {r['test']['accuracy']:.4f} | {run['steps']} | {run['best_step']} |")
    print()
    for name, run in runs.items():
        print(f"{name}: test accuracy {run['results']['test']['accuracy']:.4f} (dev {run['results']['dev']['accuracy']:.4f})")
    majority = majority_accuracy(split_dir, args.max_train_examples, args.max_eval_examples)
    print("majority class (the most frequent training label): " + ", ".join(f"{k} {v:.4f}" for k, v in majority.items()))
    print("seconds: " + ", ".join(f"{k} {v:.0f}" for k, v in timings.items()))
    summary = {"args": vars(args), "splits": counts, "majority": majority, "vocab_size": vocab_size, "timings": timings,
               "pretraining": _pretraining_history(pretrain_dir),
               "runs": {k: {"results": v["results"], "steps": v["steps"], "best_step": v["best_step"]} for k, v in runs.items()}}
    (work / "summary.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
