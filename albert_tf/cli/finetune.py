"""`albert-tf finetune`: fine-tune ALBERT on classification, regression, NER, SQuAD or RACE.

Tasks (`--task`):

* a GLUE task: `cola`, `sst-2`, `mrpc`, `sts-b`, `qqp`, `mnli`, `qnli`, `rte`, `wnli`, read from
  the standard GLUE files in `--data`, with the original ALBERT hyper-parameters as defaults
  (`albert_tf.tasks.presets`);
* `classification` / `regression`: any `train` / `dev` / `test` `.tsv`, `.csv` or `.jsonl` files
  in `--data`, with the text in `--text-column` (and `--text-b-column`) and the label in
  `--label-column`; the label list is read from the training file;
* `conll`: token classification from CoNLL-style BIO files in `--data` (`train.txt`,
  `dev.txt`/`valid.txt`, `test.txt`, or the `eng.train`/`eng.testa`/`eng.testb` names);
* `peoples-daily`: Chinese NER (PER/LOC/ORG per character) from the People's Daily corpus file
  given as `--data`, split by position into 80% train, 10% dev, 10% test;
* `squad-v1` / `squad-v2`: extractive question answering from `train-v1.1.json` /
  `dev-v1.1.json` (`train-v2.0.json` / `dev-v2.0.json`) in `--data`, with a SentencePiece
  tokenizer, scored by the official EM/F1; for v2 the no-answer threshold tuned on dev is stored
  in `task.json` for `predict`;
* `race`: multiple choice from the `RACE/` folder given as `--data` (`train/`, `dev/`, optionally
  `test/`, each with `middle/` and `high/`), scored by accuracy.

SQuAD and RACE take the original hyper-parameters of Table 14 of the paper as defaults
(`albert_tf.tasks.presets.TASK_PRESETS`).

The encoder starts from `--init` (any checkpoint kind `albert_tf.checkpoints.any_format.init_encoder`
reads) or from random weights; its architecture is `--config` or the one stored with the
checkpoint. The run is `albert_tf.training.finetuning.run_finetuning`: Keras `model.fit` with
the original AdamW recipe, dev evaluation every `--eval-every` steps, the best weights by the
task's dev metric kept. `--model-dir` receives, atomically, everything `albert-tf evaluate` and
`albert-tf predict` need: `model.keras`, `albert_config.json`, the tokenizer file, `task.json`
(task, labels, sequence length, columns, tokenizer settings), `eval_results.json` (the best
model on every dev split and on labelled test files) and, for unlabelled test files,
`predictions_<split>.tsv` (SQuAD: the official `predictions.json`, `nbest_predictions.json` and,
for v2, `null_odds.json` of the dev file in `predictions_dev/`; RACE: `predictions_test.jsonl`
for an unlabelled test folder).

The tokenizer must have exactly the model's `vocab_size` tokens (`--allow-vocab-mismatch` accepts
a smaller one), and an `--init` that is no checkpoint kind is refused before any data is read.
Progress: a bar per evaluation interval on a terminal, one line per interval otherwise; evaluations
and predictions that run longer than a few seconds report on stderr.

The run is the library's `albert_tf.tasks.runner.finetune` (`FinetuneSettings` mirrors these flags);
this module maps the flags onto it and reports its `TaskError`s as one-line command errors.
"""

from __future__ import annotations

import argparse

from albert_tf.cli import library_errors
from albert_tf.tasks.family import task_names

NAME = "finetune"
HELP = "Fine-tune ALBERT on a GLUE task, a TSV/CSV/JSONL classification or regression task, NER, SQuAD or RACE."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    task = parser.add_argument_group("task and data")
    tasks = task_names()
    task.add_argument("--task", required=True, type=str.lower, choices=tasks, metavar="TASK", help=f"one of {', '.join(tasks)}")
    task.add_argument(
        "--data", required=True,
        help="data directory (the People's Daily corpus file for peoples-daily; the RACE/ folder for race)",
    )
    task.add_argument("--text-column", help="classification/regression: column (or JSON key) of the text")
    task.add_argument("--text-b-column", help="classification/regression: column of the second text of a pair")
    task.add_argument("--label-column", help="classification/regression: column of the label")
    task.add_argument("--table-format", choices=("tsv", "csv", "jsonl"), help="file format (default: from the extension)")
    task.add_argument(
        "--tsv-quoting", choices=("csv", "none"), default="csv",
        help="TSV fields quoted the CSV way where needed (default, as pandas/csv write them) or quotes as literal text",
    )
    task.add_argument("--on-error", choices=("raise", "skip"), default="raise", help="malformed rows: stop (default) or skip and count them")
    task.add_argument("--max-train-examples", type=int, help="use only the first N training examples")
    task.add_argument("--max-eval-examples", type=int, help="use only the first N examples of each dev/test split")

    reading = parser.add_argument_group("reading comprehension (SQuAD / RACE)")
    reading.add_argument("--doc-stride", type=int, help="SQuAD: tokens between the starts of a long context's windows (default 128)")
    reading.add_argument("--max-query-length", type=int, help="SQuAD: question tokens kept (default 64)")
    reading.add_argument("--n-best-size", type=int, help="SQuAD: candidate spans per question (default 20)")
    reading.add_argument("--max-answer-length", type=int, help="SQuAD: longest answer in tokens (default 30)")
    reading.add_argument("--max-qa-length", type=int, help="RACE: question+option tokens kept, from the end (default 128)")

    model = parser.add_argument_group("model")
    model.add_argument("--init", help="checkpoint to start from (.keras, TF1/TF2 checkpoint, Hugging Face, keras-hub, or a run directory); default: random weights")
    model.add_argument("--config", help="preset (base-v2, ...) or albert_config.json; default: the one stored with --init")
    model.add_argument("--spm-model", help="SentencePiece model (English models); default: the one stored with --init")
    model.add_argument("--vocab-file", help="WordPiece vocab.txt (Chinese models); default: the one stored with --init")
    model.add_argument(
        "--lower-case", action=argparse.BooleanOptionalAction, default=None,
        help="lower-case the text (default: as stored with the --init tokenizer, else on)",
    )
    model.add_argument(
        "--allow-vocab-mismatch", action="store_true",
        help="accept a tokenizer with fewer tokens than the model's vocab_size (refused by default: it usually "
        "means the wrong file; a larger one is always refused)",
    )
    model.add_argument("--dropout", type=float, help="dropout before the task head (default 0.1)")
    model.add_argument("--encoder-dropout", type=float, help="dropout inside the encoder (default: the GLUE preset's, else the config's)")

    train = parser.add_argument_group("training (GLUE defaults from the original ALBERT recipe)")
    train.add_argument("--model-dir", required=True, help="output directory (written atomically)")
    train.add_argument("--overwrite", action="store_true", help="replace an existing --model-dir once the run completes")
    train.add_argument("--max-seq-length", type=int)
    train.add_argument("--learning-rate", type=float)
    train.add_argument("--batch-size", type=int)
    train.add_argument("--eval-batch-size", type=int)
    train.add_argument("--num-train-steps", type=int, help="optimizer updates (default: the preset's, else --num-epochs)")
    train.add_argument("--num-epochs", type=float, help="passes over the training data when --num-train-steps is not given (default 3)")
    train.add_argument("--warmup-steps", type=int)
    train.add_argument("--warmup-proportion", type=float, help="warmup as a fraction of the steps (default 0.1)")
    train.add_argument("--eval-every", type=int, help="steps between dev evaluations (default: one epoch)")
    train.add_argument("--weight-decay", type=float, help="AdamW's weight decay (default: the recipe's, 0.01)")
    train.add_argument("--pooling", choices=("mean", "cls"),
                       help="classifier input: token mean or the [CLS] pooler (default: by model size, albert_tf.training.recipes)")
    train.add_argument("--bias-correction", action=argparse.BooleanOptionalAction, default=None,
                       help="Adam's bias correction in AdamW (default: on, as the recipes; --no-bias-correction: the original update)")
    train.add_argument("--gradient-accumulation-steps", type=int, help="batches per update (default 1)")
    train.add_argument("--precision", choices=("float32", "mixed_bfloat16"), help="default float32")
    train.add_argument("--strategy", help="default (the default), one_device, mirrored, multi_worker or tpu")
    train.add_argument("--tpu", help="TPU name or address for --strategy tpu")
    train.add_argument("--jit-compile", action=argparse.BooleanOptionalAction, default=None, help="XLA (default: on for GPU/TPU)")
    train.add_argument("--seed", type=int, help="default 12345")
    train.add_argument("--quiet", action="store_true", help="no progress bars")


def run(args) -> int:
    from albert_tf.tasks.runner import FinetuneSettings, finetune

    with library_errors():
        finetune(FinetuneSettings.from_namespace(args))
    return 0
