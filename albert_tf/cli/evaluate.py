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

from albert_tf import file_io
from albert_tf.cli import library_errors

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
    from albert_tf.tasks.inference import evaluate_model_dir

    with library_errors():
        results = evaluate_model_dir(
            args.model_dir, args.data, splits=args.split, batch_size=args.batch_size, max_examples=args.max_examples,
            on_error=args.on_error, predictions_dir=args.predictions_dir,
        )
    _report(results, args.output)
    return 0


def _report(results, output) -> None:
    text = json.dumps(results, indent=2, sort_keys=True)
    print(text)
    if output:
        file_io.atomic_write_text(output, text + "\n")
