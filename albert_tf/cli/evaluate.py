"""`albert-tf evaluate`: score a fine-tuned model directory on labelled data.

Reads `task.json` of a `albert-tf finetune` output, tokenizes the split(s) of `--data` exactly as
in training, and prints the task's metrics (GLUE metrics; entity precision/recall/F1 and token
accuracy for NER; the official exact match and F1 for SQuAD, with the v2 threshold search;
accuracy for RACE) as JSON, optionally also writing them to `--output`. A table is read in its own
format (its extension, else its first line), whatever the training files' was. Scoring that runs
longer than a few seconds reports its progress on stderr.

SQuAD: `--data` is the directory of the official files (split `dev`, the default, or `train`) or
one SQuAD JSON file; v2 answers "no answer" by the threshold tuned on dev at training time, and
also reports the best threshold for the file scored (`best_f1`, `best_f1_thresh`).
`--predictions-dir` receives the official `predictions.json`, `nbest_predictions.json` (and
`null_odds.json`). RACE: `--data` is the `RACE/` folder and a split one of its folders.
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
    parser.add_argument(
        "--predictions-dir",
        help="SQuAD: also write predictions.json, nbest_predictions.json (and null_odds.json) here, per split "
        "in a subfolder when several are scored",
    )


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
    elif spec.kind == "squad" and os.path.isfile(args.data):
        requested, explicit = [os.path.basename(args.data)], False
    else:
        available = split_names(spec, args.data)
        requested = available.get("dev", []) + available.get("test", [])
        explicit = False
        if not requested:
            raise CommandError(f"no dev or test split for {spec.task} in {args.data}")
    if spec.kind in ("squad", "multiple_choice"):
        if args.on_error != "raise":
            raise CommandError(f"--on-error {args.on_error} is not supported for {spec.task}")
        if args.max_examples is not None:
            raise CommandError(f"--max-examples is not supported for {spec.task}; cut the data files instead")
        results = _evaluate_reading(args, spec, tokenizer, requested, explicit)
        _report(results, args.output)
        return 0
    if args.predictions_dir:
        raise CommandError("--predictions-dir is for SQuAD models")
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
        results[split] = evaluate_examples(model, spec, tokenizer, examples, args.batch_size, f"evaluating {split}")
        results[split]["num_examples"] = len(examples)
    if not results:
        raise CommandError("no labelled split to evaluate")
    _report(results, args.output)
    return 0


def _report(results, output) -> None:
    text = json.dumps(results, indent=2, sort_keys=True)
    print(text)
    if output:
        tmp = f"{output}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text + "\n")
        os.replace(tmp, output)


def _evaluate_reading(args, spec, tokenizer, requested, explicit):
    """{split: metrics} of a SQuAD or RACE model; `--data` as a SQuAD file is its one split."""
    from albert_tf.cli.finetune import (
        evaluate_squad_file,
        load_model,
        predict_race_records,
        race_scores,
        race_split_path,
        read_race_split,
        squad_split_file,
    )

    squad = spec.kind == "squad"
    if squad and os.path.isfile(args.data):
        # The file is the one split, whatever --split says.
        requested = [os.path.basename(args.data)]
    # Read every split before the model is loaded, so that a bad file fails fast.
    sources = {}
    for split in requested:
        if squad:
            sources[split] = squad_split_file(spec.task, args.data, split)
        else:
            examples = read_race_split(spec, race_split_path(args.data, split))
            if any(e.label is None for e in examples):
                if explicit:
                    raise CommandError(f"split {split!r} has no answers to evaluate against; use `albert-tf predict`")
                continue
            sources[split] = examples
    if not sources:
        raise CommandError("no labelled split to evaluate")
    model = load_model(args.model_dir)
    results = {}
    for split, source in sources.items():
        if not squad:
            records = predict_race_records(model, spec, tokenizer, source, args.batch_size, f"evaluating {split}")
            results[split] = race_scores(records)
            continue
        results[split], outputs = evaluate_squad_file(model, spec, tokenizer, source, args.batch_size, label=f"evaluating {split}")
        if args.predictions_dir:
            from albert_tf.tasks.squad import write_squad_outputs

            target = args.predictions_dir if len(sources) == 1 else os.path.join(args.predictions_dir, split)
            write_squad_outputs(outputs, target)
    return results
