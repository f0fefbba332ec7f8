"""Fine-tuning recipes measured over seeds, data sets, model sizes and initialisations.

Backs the defaults of `albert_tf.training.recipes`. Two parts, both on real data beside the
repository (`../shared/data`):

* `--part recipes`: on Rotten Tomatoes, one model size from random weights, several recipes
  (the original's uncorrected AdamW at 2e-5 and at the small-model rate, bias correction, the
  `[CLS]` pooler vs the token mean), `--seeds` seeds each;
* `--part matrix`: the default recipe (`recommended_recipe`) on three sets, Rotten Tomatoes
  (English reviews), the Chinese product reviews and People's Daily NER (entity F1), for each
  size, from random weights and from a package-pretrained encoder (`--pretrained LANG:SIZE=DIR`,
  a directory with `albert_config.json` and a checkpoint `init_encoder` reads; the random twin
  has the same architecture and vocabulary), `--seeds` seeds each.

Every run is judged against the best constant answer of its dev set (majority class; the "O" tag
for NER, entity F1 0) and flagged *collapsed* by `albert_tf.evaluation.check_collapse`. Each cell
reports the mean ± sd of the dev metric, the gain over the constant answer and the collapses. For
pretrained encoders it also reports how distinct their text vectors are before fine-tuning: the
mean pairwise cosine of the `[CLS]` pooled output and of the token mean over dev texts (1.0: the
same vector for every text).

    python benchmarks/finetune_recipes.py --part recipes --seeds 5
    python benchmarks/finetune_recipes.py --part matrix --seeds 5 \\
        --pretrained en:tiny=../runs/sotu_tiny/tf1 --vocab en=../runs/sotu_tiny/spm.model \\
        --pretrained zh:tiny=../runs/zh_tiny/pretrain --vocab zh=../runs/zh_tiny/vocab.txt

Results: one JSON line per run in `--out` (default `benchmarks/results/finetune_recipes.jsonl`,
appended, so an interrupted sweep resumes where it stopped) and a Markdown table on stdout.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from albert_tf.config import SMALL_SIZES

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
# The "tiny" and "small" presets of `albert_tf.config` (E/H/L/heads/I), one definition for both.
SIZES = SMALL_SIZES
SETS = {"rt": "en", "zh": "zh", "ner": "zh"}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--part", choices=("recipes", "matrix"), default="matrix")
    p.add_argument("--data", default=str(DATA))
    p.add_argument("--sets", default="rt,zh,ner")
    p.add_argument("--sizes", default="tiny,small")
    p.add_argument("--inits", default="random,pretrained")
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--pretrained", action="append", default=[], help="LANG:SIZE=DIR (repeatable)")
    p.add_argument("--vocab", action="append", default=[], help="LANG=spm.model or vocab.txt (repeatable)")
    p.add_argument("--max-train", type=int, default=4000, help="training examples (sentences for NER)")
    p.add_argument("--max-dev", type=int, default=1500)
    p.add_argument("--seq-length", type=int, default=64)
    p.add_argument("--epochs", type=float, help="override the recipe's epochs")
    p.add_argument("--recipe-size", default="tiny", help="--part recipes: the model size")
    p.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "finetune_recipes.jsonl"))
    p.add_argument("--work", default=None, help="scratch folder (default: a temporary one)")
    return p.parse_args(argv)


def _bucket(text: str) -> int:
    return int(hashlib.md5(text.encode("utf-8")).hexdigest(), 16) % 10


# --- data ----------------------------------------------------------------------------------------


def load_rt(data: Path, max_train: int, max_dev: int):
    from albert_tf.data.tables import read_table

    folder = data / "en" / "rotten_tomatoes"
    train = read_table(str(folder / "train.tsv"), text_column="text", label_column="label")[:max_train]
    dev = read_table(str(folder / "dev.tsv"), text_column="text", label_column="label")[:max_dev]
    return train, dev


def load_zh_sentiment(data: Path, max_train: int, max_dev: int):
    """The reviews split by a hash of the text: buckets 0-7 train, 8 dev (as the Chinese benchmark)."""
    from albert_tf.data.tables import TextExample

    splits = {"train": [], "dev": []}
    for label, name in (("1", "sentiment_pos.txt"), ("0", "sentiment_neg.txt")):
        with open(data / "zh" / name, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                text = " ".join(line.split())
                if not text:
                    continue
                bucket = _bucket(text)
                split = "train" if bucket < 8 else ("dev" if bucket == 8 else None)
                if split:
                    splits[split].append((hashlib.md5(text.encode()).hexdigest(), TextExample(text, None, label, name, number)))
    ordered = {k: [e for _, e in sorted(v, key=lambda pair: pair[0])] for k, v in splits.items()}
    return ordered["train"][:max_train], ordered["dev"][:max_dev]


def load_ner(data: Path, max_train: int, max_dev: int, seq_length: int):
    from albert_tf.tasks.tagging.data import read_peoples_daily, split_long_sentences

    sentences = split_long_sentences(read_peoples_daily(str(data / "zh" / "peoples_daily_199801_pos_tagged.txt")), seq_length - 2)
    train = [s for s in sentences if _bucket("".join(s.tokens)) < 8][:max_train]
    dev = [s for s in sentences if _bucket("".join(s.tokens)) == 8][:max_dev]
    return train, dev


# --- vocabularies --------------------------------------------------------------------------------


def tokenizer_for(path: str):
    from albert_tf.tokenization import SentencePieceTokenizer, WordPieceTokenizer

    return SentencePieceTokenizer(path) if path.endswith(".model") else WordPieceTokenizer(path, lower_case=True)


def default_vocab(lang: str, texts, work: Path) -> str:
    """A vocabulary trained on the fine-tuning texts when no pretrained one is given."""
    from albert_tf.tokenization import build_wordpiece_vocab, train_sentencepiece

    work.mkdir(parents=True, exist_ok=True)
    corpus = work / f"{lang}_text.txt"
    corpus.write_text("\n".join(texts) + "\n", encoding="utf-8")
    if lang == "en":
        prefix = work / "en_spm"
        if not (work / "en_spm.model").exists():
            train_sentencepiece([str(corpus)], str(prefix), 4000, seed=1, hard_vocab_limit=False)
        return str(work / "en_spm.model")
    path = work / "zh_vocab.txt"
    if not path.exists():
        build_wordpiece_vocab([str(corpus)], str(path), 6000, lower_case=True)
    return str(path)


# --- one run -------------------------------------------------------------------------------------


@dataclasses.dataclass
class Task:
    name: str
    kind: str  # "classification" | "tagging"
    train: list
    dev: list


def encoded(task: Task, tokenizer, seq_length: int):
    if task.kind == "classification":
        from albert_tf.tasks.classification.data import LabelVocab
        from albert_tf.evaluation import majority_class_baseline
        from albert_tf.tasks.classification import encode_examples

        labels = LabelVocab(["0", "1"])
        train = encode_examples(task.train, tokenizer, seq_length=seq_length, label_vocab=labels)
        dev = encode_examples(task.dev, tokenizer, seq_length=seq_length, label_vocab=labels)
        constant = majority_class_baseline(dev["labels"], ["accuracy", "mcc"], label_names=labels.labels)
        return train, dev, constant, None
    from albert_tf.tasks.tagging.data import TagVocab
    from albert_tf.evaluation import majority_tag_baseline
    from albert_tf.tasks.tagging import encode_sentences

    vocab = TagVocab.from_sentences(task.train + task.dev)
    train = encode_sentences(task.train, tokenizer, seq_length=seq_length, tag_vocab=vocab)
    dev = encode_sentences(task.dev, tokenizer, seq_length=seq_length, tag_vocab=vocab)
    gold = dev.features["labels"][dev.features["labels"] >= 0]
    return train.features, dev, majority_tag_baseline(gold, vocab.tags), vocab


def text_vector_cosines(encoder, features, n: int = 256):
    """Mean pairwise cosine of the pooled output and of the token mean over the first n texts."""
    import numpy as np

    from albert_tf.tasks.classification import masked_mean

    inputs = {k: features[k][:n] for k in ("input_ids", "input_mask", "segment_ids")}
    out = encoder(inputs, training=False)
    result = {}
    for name, vectors in (("cls", out["pooled_output"]), ("mean", masked_mean(out["sequence_output"], inputs["input_mask"]))):
        v = np.asarray(vectors, dtype=np.float64)
        v = v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
        sims = v @ v.T
        result[name] = float((sims.sum() - np.trace(sims)) / (len(v) * (len(v) - 1)))
    return result


def run_one(task: Task, prepared, config, preprocessor, *, init, recipe, seed: int, work: Path):
    """One fine-tuning run of the task's raw-text model (as `albert-tf finetune` trains it: on the
    encoded features, as its head) on the tokenizer layer `preprocessor`."""
    import tensorflow as tf

    from albert_tf.checkpoints.any_format import init_encoder
    from albert_tf.modeling import AlbertEncoder
    from albert_tf.tasks.classification import AlbertTextClassifier, make_eval_fn
    from albert_tf.tasks.runner import on_head, task_model_of
    from albert_tf.tasks.tagging import AlbertTextTagger
    from albert_tf.tasks.tagging import make_eval_fn as tagging_eval_fn
    from albert_tf.training.finetuning import FinetuningRunConfig, run_finetuning
    from albert_tf.training.finetuning_config import resolve_finetuning_config

    train, dev, constant, tag_vocab = prepared
    cosines = {}

    def build():
        encoder = AlbertEncoder.from_albert_config(config)
        if init:
            init_encoder(encoder, init)
        if task.kind == "classification":
            cosines.update(text_vector_cosines(encoder, dev))
            return AlbertTextClassifier(encoder, preprocessor, 2, dropout=recipe.dropout, pooling=recipe.pooling,
                                        compile=False, task_model_name=None)
        return AlbertTextTagger(encoder, preprocessor, tag_vocab.tags, dropout=recipe.dropout,
                                token_unit="char" if SETS[task.name] == "zh" else "word", compile=False,
                                task_model_name=None)

    if task.kind == "classification":
        eval_fn, metric = make_eval_fn(["accuracy", "mcc"], regression=False, diagnostics=True), "accuracy"
        dev_data = tf.data.Dataset.from_tensor_slices(dev)
    else:
        eval_fn, metric = tagging_eval_fn(dev, task.dev, tag_vocab), "entity_f1"
        dev_data = tf.data.Dataset.from_tensor_slices(dev.features)
    n = len(next(iter(train.values())))
    # The variant under test, as the one fine-tuning configuration every run is built from.
    run = resolve_finetuning_config(
        task.kind, config, learning_rate=recipe.learning_rate, batch_size=recipe.batch_size, num_epochs=recipe.epochs,
        warmup_proportion=recipe.warmup_fraction, bias_correction=recipe.bias_correction, pooling=recipe.pooling,
        dropout=recipe.dropout, weight_decay=recipe.weight_decay, seed=seed,
    )
    steps, _ = run.schedule(n)
    started = time.time()
    with tempfile.TemporaryDirectory(dir=work) as tmp:
        run_config = FinetuningRunConfig.from_config(
            run, n, os.path.join(tmp, "run"), best_metric=metric, shuffle_buffer=n, collapse_metric=metric,
            tensorboard=False, verbose=0, eval_every_n_steps=max(1, steps // 3),
        )
        result = run_finetuning(
            build, tf.data.Dataset.from_tensor_slices(train), dev_data, run_config, eval_fn=on_head(eval_fn),
            constant_baseline=constant, saved_model=task_model_of,
        )
    best = result.best_metrics
    return {
        "metric": metric,
        "value": float(best[metric]),
        "constant": float(constant.metrics[metric]),
        "mcc": float(best["mcc"]) if "mcc" in best else None,
        "collapsed": result.collapsed,
        "steps": steps,
        "seconds": round(time.time() - started, 1),
        "cosines": cosines,
        "curve": [round(h.get(f"eval_{metric}", float("nan")), 4) for h in result.history],
    }


# --- the sweeps ----------------------------------------------------------------------------------


def load_task(name: str, args) -> Task:
    data = Path(args.data)
    if name == "rt":
        return Task("rt", "classification", *load_rt(data, args.max_train, args.max_dev))
    if name == "zh":
        return Task("zh", "classification", *load_zh_sentiment(data, args.max_train, args.max_dev))
    if name == "ner":
        return Task("ner", "tagging", *load_ner(data, args.max_train, args.max_dev, args.seq_length))
    raise SystemExit(f"unknown set {name!r}; expected rt, zh or ner")


def task_texts(task: Task):
    if task.kind == "classification":
        return [e.text_a for e in task.train]
    return ["".join(s.tokens) for s in task.train]


def find_config(init_dir: str):
    """The `albert_config.json` of a pretraining output (in it, its `tf1/`, or beside it)."""
    for candidate in (Path(init_dir), Path(init_dir) / "tf1", Path(init_dir).parent):
        if (candidate / "albert_config.json").is_file():
            return str(candidate / "albert_config.json")
    return None


def done_keys(path: str):
    keys = set()
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    keys.add(json.loads(line)["key"])
    return keys


def append(path: str, record) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(record, sort_keys=True) + "\n")


def recipes_to_compare(size: str):
    from albert_tf.config import AlbertConfig
    from albert_tf.training.recipes import recommended_recipe

    default = recommended_recipe(AlbertConfig(vocab_size=100, max_position_embeddings=128, **SIZES[size]))
    return {
        "original (uncorrected AdamW, 2e-5, [CLS])": dataclasses.replace(default, learning_rate=2e-5, bias_correction=False, pooling="cls"),
        f"uncorrected AdamW, {default.learning_rate:g}, [CLS]": dataclasses.replace(default, bias_correction=False, pooling="cls"),
        f"uncorrected AdamW, {default.learning_rate:g}, mean": dataclasses.replace(default, bias_correction=False),
        f"bias-corrected AdamW, {default.learning_rate:g}, [CLS]": dataclasses.replace(default, pooling="cls"),
        f"default: bias-corrected AdamW, {default.learning_rate:g}, mean": default,
    }


def main(argv=None) -> int:
    args = parse_args(argv)
    sys.path.insert(0, str(REPO))
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from albert_tf.config import AlbertConfig
    from albert_tf.tokenization.resolve import kind_of_file, tokenizer_layer
    from albert_tf.training.recipes import recommended_recipe

    work = Path(args.work or tempfile.mkdtemp(prefix="albert_recipes_"))
    work.mkdir(parents=True, exist_ok=True)
    pretrained = dict(item.split("=", 1) for item in args.pretrained)
    vocabs = dict(item.split("=", 1) for item in args.vocab)
    finished = done_keys(args.out)
    sets = args.sets.split(",") if args.part == "matrix" else ["rt"]
    sizes = args.sizes.split(",") if args.part == "matrix" else [args.recipe_size]
    for set_name in sets:
        task = load_task(set_name, args)
        lang = SETS[set_name]
        vocab = vocabs.get(lang) or default_vocab(lang, task_texts(task), work)
        tokenizer = tokenizer_for(vocab)
        preprocessor = tokenizer_layer(kind_of_file(vocab), vocab, sequence_length=args.seq_length)
        prepared = encoded(task, tokenizer, args.seq_length)
        print(f"[{set_name}] {len(task.train)} train / {len(task.dev)} dev; constant answer: {prepared[2].description}", flush=True)
        for size in sizes:
            init_dir = pretrained.get(f"{lang}:{size}")
            config_file = find_config(init_dir) if init_dir else None
            if config_file:
                config = AlbertConfig.from_json_file(config_file)
            else:
                config = AlbertConfig(vocab_size=tokenizer.vocab_size, max_position_embeddings=128, **SIZES[size])
            if args.part == "recipes":
                variants = recipes_to_compare(size)
                inits = [("random", None)]
            else:
                variants = {"default": recommended_recipe(config, task.kind)}
                inits = [(name, init_dir if name == "pretrained" else None) for name in args.inits.split(",")]
            for recipe_name, recipe in variants.items():
                if args.epochs:
                    recipe = dataclasses.replace(recipe, epochs=args.epochs)
                for init_name, init in inits:
                    if init_name == "pretrained" and not init:
                        print(f"  [{set_name} {size}] no --pretrained {lang}:{size}: pretrained runs skipped", flush=True)
                        continue
                    for seed in range(1, args.seeds + 1):
                        key = (f"{args.part}|{set_name}|{size}|{init_name}|{recipe_name}|{seed}|{args.max_train}|{vocab}"
                               f"|{recipe.learning_rate}|{recipe.epochs}")
                        if key in finished:
                            continue
                        outcome = run_one(task, prepared, config, preprocessor, init=init, recipe=recipe, seed=seed, work=work)
                        record = {"key": key, "part": args.part, "set": set_name, "size": size, "init": init_name,
                                  "recipe": recipe_name, "recipe_fields": recipe.to_dict(), "seed": seed,
                                  "train_examples": len(task.train), "dev_examples": len(task.dev), **outcome}
                        append(args.out, record)
                        print(f"  {set_name} {size} {init_name} [{recipe_name}] seed {seed}: {outcome['metric']} "
                              f"{outcome['value']:.4f} (constant {outcome['constant']:.4f})"
                              f"{'  COLLAPSED' if outcome['collapsed'] else ''}  {outcome['seconds']} s", flush=True)
    print(summary_table(args.out, args.part))
    return 0


def summary_table(path: str, part: str) -> str:
    """Mean ± sd per cell, with the gain over the constant answer and the collapses."""
    import numpy as np

    cells = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            if r["part"] != part:
                continue
            key = (r["set"], r["train_examples"], r["size"], r["init"], r["recipe"], r["recipe_fields"]["epochs"])
            cells.setdefault(key, []).append(r)
    lines = ["| set | train | size | init | recipe | epochs | runs | dev metric (mean ± sd) | constant | gain | collapsed | [CLS] / mean cosine before |",
             "|---|---:|---|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for (set_name, train, size, init, recipe, epochs), runs in sorted(cells.items()):
        values = np.array([r["value"] for r in runs])
        constant = runs[0]["constant"]
        collapsed = sum(r["collapsed"] for r in runs)
        cos = runs[0].get("cosines") or {}
        shown_cos = f"{cos['cls']:.4f} / {cos['mean']:.4f}" if cos else "–"
        lines.append(
            f"| {set_name} | {train} | {size} | {init} | {recipe} | {epochs:g} | {len(runs)} | {runs[0]['metric']} {values.mean():.4f} ± "
            f"{values.std(ddof=1) if len(values) > 1 else 0:.4f} | {constant:.4f} | {values.mean() - constant:+.4f} | "
            f"{collapsed}/{len(runs)} | {shown_cos} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
