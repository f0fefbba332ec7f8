"""Does pretraining at a CPU budget pay off? Probes behind the "Fine-tuning recipes" remarks.

Two parts, both on the outputs of `benchmarks/pretrain_sotu.py` (records, vocabulary, encoder) and
the Rotten Tomatoes data beside the repository (`../shared/data/en/rotten_tomatoes`):

* `--part optimizer`: short pretraining runs of the same architecture from the same random
  weights on the same SOTU records, one per `--optimizers` entry (`NAME:LR`, e.g. `lamb:0.003`,
  `adamw:0.001`), each `--steps` updates × `--batch-size`; held-out MLM and SOP accuracy on all
  held-out records. Shows which optimizer leaves the unigram plateau first at a small batch.
* `--part adaptive`: task-adaptive pretraining (Gururangan et al., 2020, "Don't Stop
  Pretraining"): the SOTU encoder is pretrained further (SOP + n-gram MLM, LAMB) on the task's own
  training texts used as unlabelled text (all of `train.tsv`; dev is never seen), then fine-tuned
  with the package's default recipe (`recommended_recipe`) for `--seeds` seeds on the first
  `--max-train` labelled snippets, exactly as `finetune_recipes.py --part matrix` does. The
  snippets are short and unrelated, so `--snippets-per-document` of them make one pseudo-document
  (SOP then only learns to spot the seam; MLM is what is being tested).
  With `--learning-rates`, the plain SOTU encoder is also fine-tuned at those rates (does a gentler
  rate keep more of what pretraining learned?).

Results: one JSON line per run in `--out` (default `benchmarks/results/pretraining_payoff.jsonl`)
and a summary on stdout.

    python benchmarks/pretraining_payoff.py --part optimizer --run ../runs/sotu_tiny --steps 600 \\
        --optimizers lamb:0.003,adamw:0.001
    python benchmarks/pretraining_payoff.py --part adaptive --run ../runs/sotu_tiny --steps 2000 --seeds 5 \\
        --learning-rates 0.0003
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--part", choices=("optimizer", "adaptive"), required=True)
    p.add_argument("--run", default=str(REPO.parent / "runs" / "sotu_tiny"),
                   help="a pretrain_sotu.py output: data/{train,eval}, spm.model, tf1/ (checkpoint + albert_config.json)")
    p.add_argument("--data", default=str(DATA))
    p.add_argument("--steps", type=int, default=600, help="pretraining updates per run")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--optimizers", default="lamb:0.003,adamw:0.001")
    p.add_argument("--adaptive-lr", type=float, default=0.002, help="LAMB peak rate of the adaptive pretraining")
    p.add_argument("--adaptive-seq", type=int, default=64)
    p.add_argument("--adaptive-predictions", type=int, default=10)
    p.add_argument("--dupe-factor", type=int, default=5)
    p.add_argument("--snippets-per-document", type=int, default=8)
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--max-train", type=int, default=4000)
    p.add_argument("--learning-rates", default="", help="also fine-tune the plain encoder at these rates (comma list)")
    p.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "pretraining_payoff.jsonl"))
    p.add_argument("--work", default=None, help="scratch folder (default: a temporary one)")
    return p.parse_args(argv)


def append(path: str, record) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(record, sort_keys=True) + "\n")


def run_config(run: str):
    from albert_tf.config import AlbertConfig

    return AlbertConfig.from_json_file(os.path.join(run, "tf1", "albert_config.json"))


def optimizer_part(args, work: Path) -> None:
    from albert_tf.data.tfrecords import make_pretraining_dataset
    from albert_tf.training.pretraining import PretrainingRunConfig, run_pretraining

    with open(os.path.join(args.run, "run_config.json")) as f:
        original = json.load(f)
    seq, predictions = original["max_seq_length"], original["max_predictions_per_seq"]
    train = sorted(glob.glob(os.path.join(args.run, "data", "train", "*.tfrecord")))
    held_out = sorted(glob.glob(os.path.join(args.run, "data", "eval", "*.tfrecord")))
    for entry in args.optimizers.split(","):
        name, rate = entry.split(":")
        config = PretrainingRunConfig(
            model_dir=str(work / f"optimizer_{name}_{rate}"), model_config=run_config(args.run),
            batch_size=args.batch_size, max_seq_length=seq, max_predictions_per_seq=predictions,
            num_train_steps=args.steps, num_warmup_steps=max(1, args.steps // 10), learning_rate=float(rate),
            optimizer=name, checkpoint_every_n_steps=args.steps, keep_checkpoints=1, seed=12345, log_every=0, verbose=0,
        )
        start = time.time()
        result = run_pretraining(config, lambda: make_pretraining_dataset(
            train, seq, predictions, args.batch_size, is_training=True, seed=12345))
        seconds = time.time() - start
        held = result.model.evaluate(make_pretraining_dataset(held_out, seq, predictions, args.batch_size, is_training=False),
                                     verbose=0, return_dict=True)
        record = {"part": "optimizer", "optimizer": name, "learning_rate": float(rate), "steps": args.steps,
                  "batch_size": args.batch_size, "seconds": round(seconds, 1),
                  "train_last": result.history[-1] if result.history else None,
                  "held_out": {k: round(float(v), 4) for k, v in held.items()}}
        append(args.out, record)
        print(f"{name} {rate}: {args.steps} steps in {seconds:.0f} s; held-out MLM {record['held_out']['mlm_accuracy']:.4f} "
              f"SOP {record['held_out']['sop_accuracy']:.4f}", flush=True)


def adaptive_pretraining(args, work: Path) -> str:
    """Pretrains the SOTU encoder further on the RT training texts; returns the saved weights."""
    import keras

    from albert_tf.checkpoints.any_format import init_encoder
    from albert_tf.data.beam_pipeline import PipelineConfig, TokenizerSpec, make_pretraining_data
    from albert_tf.data.tables import read_table
    from albert_tf.data.pretraining_instances import InstanceConfig
    from albert_tf.data.tfrecords import make_pretraining_dataset
    from albert_tf.modeling import AlbertEncoder
    from albert_tf.pretrainer import AlbertPretrainer
    from albert_tf.training import create_optimizer

    rows = read_table(str(Path(args.data) / "en" / "rotten_tomatoes" / "train.tsv"), text_column="text", label_column="label")
    texts = [r.text_a.strip() for r in rows if r.text_a.strip()]
    corpus = work / "rt_train_unlabelled.txt"
    with open(corpus, "w", encoding="utf-8") as f:
        for i, text in enumerate(texts):
            f.write(text + "\n")
            if i % args.snippets_per_document == args.snippets_per_document - 1:
                f.write("\n")
    records = work / "rt_records"
    summary = make_pretraining_data(
        [str(corpus)], str(records),
        PipelineConfig(instance=InstanceConfig(max_seq_length=args.adaptive_seq, max_predictions_per_seq=args.adaptive_predictions),
                       tokenizer=TokenizerSpec(spm_model=os.path.join(args.run, "spm.model")), dupe_factor=args.dupe_factor,
                       seed=7, input_format="sentences", num_shards=1),
        overwrite=True,
    )
    print(f"adaptive data: {len(texts)} snippets -> {summary.counters.get('instances')} instances", flush=True)
    keras.utils.set_random_seed(3)
    encoder = AlbertEncoder.from_albert_config(run_config(args.run))
    init_encoder(encoder, os.path.join(args.run, "tf1"))
    model = AlbertPretrainer(encoder)
    model.compile(optimizer=create_optimizer("lamb", learning_rate=args.adaptive_lr, num_train_steps=args.steps,
                                             num_warmup_steps=max(1, args.steps // 10)))
    dataset = make_pretraining_dataset(sorted(glob.glob(str(records / "*.tfrecord"))), args.adaptive_seq,
                                       args.adaptive_predictions, args.batch_size, is_training=True, seed=3)
    start = time.time()
    history = model.fit(dataset, steps_per_epoch=args.steps, epochs=1, verbose=0).history
    last = {k: round(float(v[-1]), 4) for k, v in history.items()}
    print(f"adaptive pretraining: {args.steps} steps in {time.time() - start:.0f} s, last batch {last}", flush=True)
    out = work / "adapted"
    out.mkdir(exist_ok=True)
    weights = str(out / "encoder.weights.h5")
    encoder.save_weights(weights)
    append(args.out, {"part": "adaptive-pretraining", "steps": args.steps, "learning_rate": args.adaptive_lr,
                      "instances": summary.counters.get("instances"), "seconds": round(time.time() - start, 1), "train_last": last})
    return weights


def finetune_seeds(args, work: Path, name: str, init: str, learning_rate=None) -> None:
    sys.path.insert(0, str(REPO / "benchmarks"))
    import finetune_recipes

    from albert_tf.training.recipes import recommended_recipe

    recipe_args = finetune_recipes.parse_args(["--max-train", str(args.max_train), "--data", args.data])
    task = finetune_recipes.load_task("rt", recipe_args)
    prepared = finetune_recipes.encoded(task, finetune_recipes.tokenizer_for(os.path.join(args.run, "spm.model")), 64)
    config = run_config(args.run)
    recipe = recommended_recipe(config, task.kind)
    if learning_rate:
        recipe = dataclasses.replace(recipe, learning_rate=learning_rate)
    values = []
    for seed in range(1, args.seeds + 1):
        outcome = finetune_recipes.run_one(task, prepared, config, init=init, recipe=recipe, seed=seed, work=work)
        values.append(outcome["value"])
        append(args.out, {"part": "finetune", "variant": name, "seed": seed, "learning_rate": recipe.learning_rate,
                          "train_examples": len(task.train), **outcome})
        print(f"  {name} seed {seed}: accuracy {outcome['value']:.4f} (constant {outcome['constant']:.4f})"
              f"{'  COLLAPSED' if outcome['collapsed'] else ''}", flush=True)
    spread = statistics.stdev(values) if len(values) > 1 else 0.0
    print(f"{name}: accuracy {statistics.mean(values):.4f} ± {spread:.4f} over {len(values)} seeds", flush=True)


def main(argv=None) -> int:
    args = parse_args(argv)
    sys.path.insert(0, str(REPO))
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    work = Path(args.work or tempfile.mkdtemp(prefix="albert_payoff_"))
    work.mkdir(parents=True, exist_ok=True)
    if args.part == "optimizer":
        optimizer_part(args, work)
        return 0
    weights = adaptive_pretraining(args, work)
    finetune_seeds(args, work, "SOTU + task-adaptive pretraining, default recipe", weights)
    for rate in filter(None, args.learning_rates.split(",")):
        finetune_seeds(args, work, f"SOTU pretraining, fine-tuned at {rate}", os.path.join(args.run, "tf1"), float(rate))
    return 0


if __name__ == "__main__":
    sys.exit(main())
