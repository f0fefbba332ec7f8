"""`albert-tf evaluate`: score a fine-tuned model directory on labelled data.

Reads `task.json` of a `albert-tf finetune` output, tokenizes the split(s) of `--data` exactly as
in training, and prints the task's metrics (GLUE metrics; entity precision/recall/F1 and token
accuracy for NER) as JSON, optionally also writing them to `--output`.
"""

from __future__ import annotations

import argparse
import json
import os

from albert_tf.cli import CommandError

NAME = "evaluate"
HELP = "Evaluate a fine-tuned model (from `albert-tf finetune`) on labelled dev/test data."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model-dir", required=True, help="output directory of `albert-tf finetune`")
    parser.add_argument("--data", required=True, help="data directory (the corpus file for peoples-daily)")
    parser.add_argument(
        "--split",
        action="append",
        help="split to score (repeatable; e.g. dev, dev_mismatched, test); default: every dev split and labelled test split",
    )
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-examples", type=int, help="score only the first N examples of each split")
    parser.add_argument("--on-error", choices=("raise", "skip"), default="raise", help="malformed rows: stop (default) or skip")
    parser.add_argument("--output", help="also write the metrics JSON to this file")


def run(args) -> int:
    from albert_tf.cli.finetune import (
        TaskSpec,
        evaluate_examples,
        has_labels,
        load_model,
        read_split,
        split_names,
        tokenizer_from_model_dir,
    )

    if args.batch_size < 1:
        raise CommandError(f"--batch-size must be >= 1, got {args.batch_size}")
    if args.max_examples is not None and args.max_examples < 1:
        raise CommandError(f"--max-examples must be >= 1, got {args.max_examples}")
    spec = TaskSpec.read(args.model_dir)
    if not os.path.exists(args.data):
        raise CommandError(f"--data not found: {args.data}")
    tokenizer = tokenizer_from_model_dir(args.model_dir, spec)
    cache: dict = {}
    if args.split:
        requested = list(args.split)
        explicit = True
    else:
        available = split_names(spec, args.data)
        requested = available.get("dev", []) + available.get("test", [])
        explicit = False
        if not requested:
            raise CommandError(f"no dev or test split for {spec.task} in {args.data}")
    model = load_model(args.model_dir)
    results = {}
    for split in requested:
        examples = read_split(spec, args.data, split, on_error=args.on_error, cache=cache)
        if args.max_examples is not None:
            examples = examples[: args.max_examples]
        if not has_labels(spec, examples):
            if explicit:
                raise CommandError(f"split {split!r} has no labels to evaluate against; use `albert-tf predict`")
            continue
        results[split] = evaluate_examples(model, spec, tokenizer, examples, args.batch_size)
        results[split]["num_examples"] = len(examples)
    if not results:
        raise CommandError("no labelled split to evaluate")
    text = json.dumps(results, indent=2, sort_keys=True)
    print(text)
    if args.output:
        tmp = f"{args.output}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text + "\n")
        os.replace(tmp, args.output)
    return 0
