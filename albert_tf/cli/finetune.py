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
(`albert_tf.tasks.presets.READING_PRESETS`).

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

The helpers at the bottom (`TaskSpec`, `load_tokenizer`, `read_split`, `resolve_model_config`,
`check_tokenizer_fits`, ...) are shared with the `evaluate`, `predict` and `export` subcommands.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import logging
import os
import shutil
import sys
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from albert_tf.cli import CommandError
from albert_tf.tasks.spec import (  # noqa: F401  (re-exported: the CLI modules and benchmarks use these names)
    CONFIG_FILE,
    GLUE_TASKS,
    RESULTS_FILE,
    TASK_FILE,
    TaskSpecError,
    write_json,
)
from albert_tf.tasks.spec import TaskSpec as _TaskSpec

NAME = "finetune"
HELP = "Fine-tune ALBERT on a GLUE task, a TSV/CSV/JSONL classification or regression task, NER, SQuAD or RACE."

TABLE_TASKS = ("classification", "regression")
TAGGING_TASKS = ("conll", "peoples-daily")
SQUAD_TASKS = ("squad-v1", "squad-v2")
RACE_TASKS = ("race",)
READING_TASKS = SQUAD_TASKS + RACE_TASKS
TASKS = GLUE_TASKS + TABLE_TASKS + TAGGING_TASKS + READING_TASKS


# Defaults of the non-GLUE tasks: the BERT/ALBERT fine-tuning recipe's usual values.
GENERIC_DEFAULTS = dict(learning_rate=2e-5, batch_size=32, num_epochs=3.0, warmup_proportion=0.1, max_seq_length=128)
CONLL_FILES = {
    "train": ("train.txt", "train.conll", "train.bio", "eng.train"),
    "dev": ("dev.txt", "valid.txt", "validation.txt", "dev.conll", "dev.bio", "eng.testa"),
    "test": ("test.txt", "test.conll", "test.bio", "eng.testb"),
}
PEOPLES_DAILY_FRACTIONS = (0.8, 0.1, 0.1)
# The official SQuAD file names, by task and split.
SQUAD_FILES = {
    "squad-v1": {"train": "train-v1.1.json", "dev": "dev-v1.1.json"},
    "squad-v2": {"train": "train-v2.0.json", "dev": "dev-v2.0.json"},
}
SQUAD_PREDICTIONS_DIR = "predictions_dev"
# Flags that only mean something for some tasks: (attribute, tasks).
READING_FLAGS = (
    ("doc_stride", SQUAD_TASKS),
    ("max_query_length", SQUAD_TASKS),
    ("n_best_size", SQUAD_TASKS),
    ("max_answer_length", SQUAD_TASKS),
    ("max_qa_length", RACE_TASKS),
)
# Training examples held in the shuffle buffer: all of any GLUE task but MNLI/QQP/QNLI, whose
# full buffers would hold gigabytes of features at length 512.
SHUFFLE_BUFFER = 100_000

logger = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    task = parser.add_argument_group("task and data")
    task.add_argument("--task", required=True, type=str.lower, choices=TASKS, metavar="TASK", help=f"one of {', '.join(TASKS)}")
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
    train.add_argument("--weight-decay", type=float, default=0.01)
    train.add_argument("--pooling", choices=("mean", "cls"),
                       help="classifier input: token mean or the [CLS] pooler (default: by model size, albert_tf.training.recipes)")
    train.add_argument("--bias-correction", action=argparse.BooleanOptionalAction, default=None,
                       help="Adam's bias correction in AdamW (default: on, as the recipes; --no-bias-correction: the original update)")
    train.add_argument("--gradient-accumulation-steps", type=int, default=1)
    train.add_argument("--precision", choices=("float32", "mixed_bfloat16"), default="float32")
    train.add_argument("--strategy", default="default", help="default, one_device, mirrored, multi_worker or tpu")
    train.add_argument("--tpu", help="TPU name or address for --strategy tpu")
    train.add_argument("--jit-compile", action=argparse.BooleanOptionalAction, default=None, help="XLA (default: on for GPU/TPU)")
    train.add_argument("--seed", type=int, default=12345)
    train.add_argument("--quiet", action="store_true", help="no progress bars")


# --- the task spec stored in the model directory -------------------------------------------------


class TaskSpec(_TaskSpec):
    """`albert_tf.tasks.spec.TaskSpec` whose `read` reports a bad model directory as a
    `CommandError` (one line, exit status 2)."""

    @classmethod
    def read(cls, model_dir: str) -> "TaskSpec":
        try:
            return super().read(model_dir)
        except TaskSpecError as e:
            raise CommandError(str(e)) from None


# --- shared helpers ------------------------------------------------------------------------------


def load_tokenizer(kind: str, path: str, lower_case: bool):
    """A `SentencePieceTokenizer` ("sentencepiece") or `WordPieceTokenizer` ("wordpiece")."""
    from albert_tf.tokenization import SentencePieceTokenizer, WordPieceTokenizer

    if not os.path.isfile(path):
        raise CommandError(f"tokenizer file not found: {path}")
    try:
        if kind == "sentencepiece":
            return SentencePieceTokenizer(path, lower_case=lower_case)
        if kind == "wordpiece":
            return WordPieceTokenizer(path, lower_case=lower_case)
    except (ValueError, OSError) as e:
        raise CommandError(str(e)) from None
    raise CommandError(f"unknown tokenizer type {kind!r}")


def tokenizer_from_model_dir(model_dir: str, spec: TaskSpec):
    return load_tokenizer(spec.tokenizer["type"], os.path.join(model_dir, spec.tokenizer["file"]), spec.tokenizer["lower_case"])


def _find_tokenizer_file(args) -> Tuple[str, str, Optional[bool]]:
    """(type, path, lower_case) from --spm-model / --vocab-file, else the tokenizer stored with
    --init: a fine-tuning output's `task.json` entry, a pretraining run's `tokenizer.json` (also
    from its `tf1/` or `checkpoints/`, `albert_tf.training.pretraining.find_tokenizer`), else a
    tokenizer file beside it. lower_case is the casing stored with it, None where none is."""
    from albert_tf.training.pretraining import find_tokenizer

    if args.spm_model and args.vocab_file:
        raise CommandError("pass --spm-model or --vocab-file, not both")
    if args.spm_model:
        return "sentencepiece", args.spm_model, None
    if args.vocab_file:
        return "wordpiece", args.vocab_file, None
    if args.init:
        directory = args.init if os.path.isdir(args.init) else os.path.dirname(os.path.abspath(args.init))
        task_file = os.path.join(directory, TASK_FILE)
        if os.path.isfile(task_file):
            with open(task_file, encoding="utf-8") as f:
                tokenizer = json.load(f).get("tokenizer", {})
            if tokenizer.get("file") and os.path.isfile(os.path.join(directory, tokenizer["file"])):
                return tokenizer["type"], os.path.join(directory, tokenizer["file"]), tokenizer.get("lower_case")
        pretrained = find_tokenizer(args.init)
        if pretrained is not None:
            return pretrained.kind, pretrained.path, pretrained.lower_case
        for name in sorted(os.listdir(directory)):
            if name.endswith(".model"):
                return "sentencepiece", os.path.join(directory, name), None
        for name in ("vocab.txt", "vocab_chinese.txt"):
            if os.path.isfile(os.path.join(directory, name)):
                return "wordpiece", os.path.join(directory, name), None
    raise CommandError("no tokenizer: pass --spm-model (SentencePiece .model) or --vocab-file (WordPiece vocab.txt)")


# What `--init` accepts (`albert_tf.checkpoints.any_format.init_encoder`), for the message that says a
# path is none of them.
INIT_KINDS = (
    "a .keras, .weights.h5, .safetensors or .npz file, a TF checkpoint prefix (or its .index / .data-* "
    "file), a directory of a TF checkpoint, a fine-tuning or pretraining output directory, a Hugging Face "
    "model directory or a keras-hub preset directory"
)
_CHECKPOINT_SUFFIXES = (".keras", ".weights.h5", ".safetensors", ".safetensors.index.json", ".npz", ".bin", ".pt", ".pth")


def _is_checkpoint_path(path: str) -> bool:
    """Whether `path` is of a kind `init_encoder` reads (not whether it loads)."""
    from albert_tf.checkpoints import any_format as init_module
    from albert_tf.checkpoints.original import CheckpointError, resolve_checkpoint_prefix

    if os.path.isfile(path) and path.lower().endswith(_CHECKPOINT_SUFFIXES):
        return True
    if os.path.isdir(path):
        markers = (
            init_module.FINETUNED_MODEL, init_module.PRETRAINING_ENCODER, init_module.PRETRAINING_CHECKPOINTS,
            "model.safetensors", "model.safetensors.index.json",
        )
        keras_hub_preset = all(os.path.isfile(os.path.join(path, name)) for name in ("config.json", "model.weights.h5"))
        if keras_hub_preset or any(os.path.exists(os.path.join(path, name)) for name in markers):
            return True
    try:
        resolve_checkpoint_prefix(path)
    except CheckpointError:
        return False
    return True


def check_init(path: str) -> None:
    """Refuses an `--init` that is no checkpoint kind at all, before any work is done.

    Raises:
        CommandError: `path` is missing or of no kind `init_encoder` reads.
    """
    if not os.path.exists(path) and not os.path.exists(path + ".index"):
        raise CommandError(f"--init not found: {path}")
    if not _is_checkpoint_path(path):
        raise CommandError(
            f"--init {path} is not a checkpoint, a checkpoint directory, a Hugging Face dir or a keras-hub "
            f"preset; --init takes {INIT_KINDS}"
        )


def resolve_model_config(config: Optional[str], init: Optional[str]):
    """The encoder architecture: `config` (a preset or `albert_config.json`), else the one stored
    with the `init` checkpoint.

    Returns:
        `(AlbertConfig, where it came from)`, the latter for messages ("the model config X").

    Raises:
        CommandError: No usable config, or an `init` that is no checkpoint.
    """
    from albert_tf.checkpoints.any_format import config_from_init
    from albert_tf.checkpoints.original import CheckpointError
    from albert_tf.config import ConfigError, load_config

    if init:
        check_init(init)
    try:
        if config:
            return load_config(config), f"the model config {config}"
        if init:
            found = config_from_init(init)
            if found is not None:
                return found, f"the model of --init {init}"
    except (ConfigError, CheckpointError) as e:
        raise CommandError(str(e)) from None
    if init:
        raise CommandError(
            f"--init {init} is a checkpoint without a stored architecture (no albert_config.json, config.json or "
            f".keras config beside it): pass --config (a preset such as base-v2, or an albert_config.json)"
        )
    raise CommandError("no model architecture: pass --config (a preset such as base-v2, or an albert_config.json)")


def check_tokenizer_fits(tokenizer, tokenizer_file: str, config, config_source: str, allow_mismatch: bool) -> None:
    """`albert_tf.tokenization.tokenizers.check_vocab_size` as a one-line `CommandError`; an allowed
    smaller tokenizer is reported on stderr."""
    from albert_tf.tokenization.tokenizers import VocabSizeMismatch, check_vocab_size

    try:
        warning = check_vocab_size(
            tokenizer.vocab_size, config.vocab_size, tokenizer_source=f"the tokenizer {tokenizer_file}",
            model_source=config_source, allow_smaller=allow_mismatch,
            allow_hint="pass --allow-vocab-mismatch to use it anyway",
        )
    except VocabSizeMismatch as e:
        raise CommandError(str(e)) from None
    if warning:
        print(f"warning: {warning} (--allow-vocab-mismatch)", file=sys.stderr, flush=True)


def _limit(items: List, count: Optional[int]) -> List:
    return items if count is None else items[:count]


def conll_split_file(data_dir: str, split: str) -> Optional[str]:
    for name in CONLL_FILES[split]:
        path = os.path.join(data_dir, name)
        if os.path.isfile(path):
            return path
    return None


def peoples_daily_splits(path: str) -> Dict[str, list]:
    """The corpus cut by position into train / dev / test (80 / 10 / 10 %)."""
    from albert_tf.data.tagging import read_peoples_daily

    sentences = read_peoples_daily(path)
    n = len(sentences)
    first = int(n * PEOPLES_DAILY_FRACTIONS[0])
    second = first + int(n * PEOPLES_DAILY_FRACTIONS[1])
    return {"train": sentences[:first], "dev": sentences[first:second], "test": sentences[second:]}


def split_names(spec: TaskSpec, data: str) -> Dict[str, List[str]]:
    """{"dev": [...], "test": [...]} split names available for the task in `data`."""
    from albert_tf.data.glue import find_split_file, glue_layout

    if spec.task in GLUE_TASKS:
        layout = glue_layout(spec.task)
        return {
            "dev": [s for s in layout.dev_files if os.path.isfile(os.path.join(data, layout.dev_files[s]))],
            "test": [s for s in layout.test_files if os.path.isfile(os.path.join(data, layout.test_files[s]))],
        }
    if spec.task == "conll":
        return {kind: [kind] for kind in ("dev", "test") if conll_split_file(data, kind)}
    if spec.task == "peoples-daily":
        return {"dev": ["dev"], "test": ["test"]}
    if spec.task in SQUAD_TASKS:
        # The official test set is hidden; SQuAD runs are scored on dev.
        return {"dev": ["dev"]} if os.path.isfile(os.path.join(data, SQUAD_FILES[spec.task]["dev"])) else {}
    if spec.task in RACE_TASKS:
        return {kind: [kind] for kind in ("dev", "test") if os.path.isdir(os.path.join(data, kind))}
    out = {}
    for kind in ("dev", "test"):
        try:
            find_split_file(data, kind)
            out[kind] = [kind]
        except ValueError:
            pass
    return out


def read_split(
    spec: TaskSpec, data: str, split: str, *, on_error: str = "raise", cache: Optional[dict] = None,
    table_format: Optional[str] = None,
):
    """The examples (`TextExample`s or `TaggedSentence`s) of `split` for the task.

    Args:
        table_format: A table's format as given on this command line (`finetune --table-format`);
            by default each file's own (`albert_tf.data.glue.detect_file_format`: its extension,
            else its first line), not the format the model was trained on.

    Raises:
        CommandError: A missing or malformed file (the message names the file and line).
    """
    from albert_tf.data.glue import (
        DataFormatError,
        MissingColumnError,
        detect_file_format,
        find_split_file,
        read_glue_split,
        read_table,
    )
    from albert_tf.data.tagging import read_conll, split_long_sentences

    try:
        if spec.task in GLUE_TASKS:
            try:
                return read_glue_split(spec.task, data, split, on_error=on_error)
            except MissingColumnError as e:
                # Most often a table of another layout given to a GLUE task name.
                raise CommandError(
                    f"{e}: not the GLUE {spec.task} layout; for any other table use --task classification "
                    f"--text-column COLUMN --label-column COLUMN"
                ) from None
        if spec.kind == "tagging":
            if spec.task == "peoples-daily":
                if cache is None or "peoples-daily" not in cache:
                    splits = peoples_daily_splits(data)
                    if cache is not None:
                        cache["peoples-daily"] = splits
                else:
                    splits = cache["peoples-daily"]
                sentences = splits[split]
            else:
                path = conll_split_file(data, split)
                if path is None:
                    raise CommandError(f"no CoNLL {split} file in {data} (looked for {', '.join(CONLL_FILES[split])})")
                sentences = read_conll(path)
            # Long sentences are cut so that every token gets a prediction.
            return split_long_sentences(sentences, max(1, spec.max_seq_length - 2))
        path = find_split_file(data, split)
        label_column = spec.columns.get("label")
        options = dict(
            text_column=spec.columns["text"], text_b_column=spec.columns.get("text_b"),
            table_format=table_format or detect_file_format(path, spec.columns.get("format")),
            tsv_quoting=spec.columns.get("quoting") or "csv", on_error=on_error,
        )
        if split == "test":
            # A test file may or may not carry labels.
            try:
                return read_table(path, label_column=label_column, **options)
            except MissingColumnError as e:
                if label_column and e.column == label_column:
                    return read_table(path, **options)
                raise
        return read_table(path, label_column=label_column, **options)
    except (DataFormatError, ValueError) as e:
        if isinstance(e, CommandError):
            raise
        raise CommandError(str(e)) from None


def _progress(model, label: Optional[str]):
    """`albert_tf.training.finetuning.prediction_progress` under `label`; none when it is None
    (`--quiet`)."""
    from albert_tf.training.finetuning import prediction_progress

    return prediction_progress(model, label or "", verbose=label is not None)


def has_labels(spec: TaskSpec, examples) -> bool:
    if spec.kind == "tagging":
        return True
    return all(e.label is not None for e in examples)


def evaluate_examples(
    model, spec: TaskSpec, tokenizer, examples, batch_size: int, label: Optional[str] = "evaluating"
) -> Dict[str, float]:
    """The task's metrics of `model` on labelled examples (progress under `label` when it is slow;
    None: none)."""
    from albert_tf.data.glue import DataFormatError
    try:
        if spec.kind == "tagging":
            from albert_tf.tasks import tagging

            vocab = spec.label_vocab()
            encoded = tagging.encode_sentences(examples, tokenizer, seq_length=spec.max_seq_length, tag_vocab=vocab)
            with _progress(model, label):
                logits = tagging.predict_logits(model, encoded.features, batch_size)
            return tagging.score_tagging(logits, encoded, examples, vocab)
        from albert_tf.tasks import classification

        regression = spec.kind == "regression"
        features = classification.encode_examples(
            examples, tokenizer, seq_length=spec.max_seq_length, label_vocab=spec.label_vocab(), regression=regression
        )
        with _progress(model, label):
            scores = classification.predict_scores(model, features, batch_size)
        return classification.score_predictions(scores, features["labels"], spec.metrics, regression)
    except DataFormatError as e:
        raise CommandError(str(e)) from None


def predict_examples(
    model, spec: TaskSpec, tokenizer, examples, batch_size: int, label: Optional[str] = "predicting"
) -> List[Dict[str, Any]]:
    """One prediction record per example: classification `label` and `probabilities`, regression
    `prediction`, tagging `tags` and `entities` (progress under `label` when it is slow; None:
    none)."""
    import numpy as np

    if spec.kind == "tagging":
        from albert_tf.metrics import get_entities
        from albert_tf.tasks import tagging

        vocab = spec.label_vocab()
        encoded = tagging.encode_sentences(examples, tokenizer, seq_length=spec.max_seq_length, tag_vocab=vocab, with_labels=False)
        with _progress(model, label):
            logits = tagging.predict_logits(model, encoded.features, batch_size)
        records = []
        for sentence, tags in zip(examples, tagging.decode_predictions(logits, encoded.word_positions, vocab)):
            joiner = "" if spec.token_unit == "char" else " "
            entities = [
                {"type": kind, "text": joiner.join(sentence.tokens[start : end + 1]), "start": start, "end": end + 1}
                for kind, start, end in get_entities(tags)
            ]
            records.append({"tokens": list(sentence.tokens), "tags": tags, "entities": entities})
        return records
    from albert_tf.tasks import classification

    features = classification.encode_examples(examples, tokenizer, seq_length=spec.max_seq_length, with_labels=False)
    with _progress(model, label):
        scores = classification.predict_scores(model, features, batch_size)
    if spec.kind == "regression":
        return [{"prediction": float(v)} for v in scores]
    shifted = scores - scores.max(axis=-1, keepdims=True)
    probabilities = np.exp(shifted) / np.exp(shifted).sum(axis=-1, keepdims=True)
    return [
        {"label": spec.labels[int(p.argmax())], "probabilities": {label: float(q) for label, q in zip(spec.labels, p)}}
        for p in probabilities
    ]


def write_predictions_tsv(path: str, examples, records, spec: TaskSpec) -> None:
    """GLUE-submission style `index<TAB>prediction` (tagging: the tags, space-separated)."""
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("index\tprediction\n")
        for index, (example, record) in enumerate(zip(examples, records)):
            if spec.kind == "tagging":
                value = " ".join(record["tags"])
                guid = f"{example.source}:{example.line}"
            else:
                value = record["label"] if spec.kind == "classification" else f"{record['prediction']:.6f}"
                guid = example.guid if example.guid and ":" not in example.guid else str(index)
            f.write(f"{guid}\t{value}\n")
    os.replace(tmp, path)


def load_model(model_dir: str):
    """The fine-tuned task model of `model_dir` (best weights)."""
    from albert_tf.checkpoints.any_format import register_saved_classes
    from albert_tf.training.finetuning import load_finetuned_model

    register_saved_classes()
    try:
        return load_finetuned_model(model_dir)
    except (FileNotFoundError, ValueError, OSError) as e:
        raise CommandError(f"cannot load the model in {model_dir}: {e}") from None


# --- SQuAD and RACE --------------------------------------------------------------------------------


@contextlib.contextmanager
def reading_data_errors():
    """Turns the SQuAD / RACE readers' errors (malformed or missing files, bad lengths) into
    `CommandError`s; their messages name the file."""
    from albert_tf.data.race import RaceDataError
    from albert_tf.data.squad import SquadDataError

    try:
        yield
    except (SquadDataError, RaceDataError, FileNotFoundError) as e:
        raise CommandError(str(e)) from None


def squad_split_file(task: str, data: str, split: str) -> str:
    """The SQuAD JSON file of `split` ("train" or "dev") in the directory `data`, or `data`
    itself when it is a file.

    Raises:
        CommandError: An unknown split or a missing file.
    """
    if os.path.isfile(data):
        return data
    names = SQUAD_FILES[task]
    if split not in names:
        raise CommandError(f"{task} has the splits {', '.join(names)} (as {', '.join(names.values())}), not {split!r}")
    path = os.path.join(data, names[split])
    if not os.path.isfile(path):
        raise CommandError(f"SQuAD {split} file {path} does not exist")
    return path


def race_split_path(data: str, split: str) -> str:
    """The folder of a RACE split (`RACE/<split>`).

    Raises:
        CommandError: No such folder.
    """
    path = os.path.join(data, split)
    if not os.path.isdir(path):
        raise CommandError(f"no RACE {split} folder {path}")
    return path


def read_race_split(spec: TaskSpec, path: str):
    """The `RaceExample`s of a split folder, file or glob, at the run's levels."""
    from albert_tf.data.race import LEVELS, read_race_examples

    with reading_data_errors():
        return read_race_examples(path, levels=tuple(spec.settings.get("levels", LEVELS)))


def predict_race_records(
    model, spec: TaskSpec, tokenizer, examples, batch_size: int, label: Optional[str] = "predicting"
) -> List[Dict[str, Any]]:
    """One record per RACE question: `id`, `question_index`, `prediction` (the option letter),
    `probabilities` and, when known, the gold `answer` (progress under `label` when it is slow;
    None: none)."""
    from albert_tf.tasks.multiple_choice import predict_race_examples
    if not examples:
        raise CommandError("there are no RACE questions to predict")
    with reading_data_errors(), _progress(model, label):
        return predict_race_examples(
            model, tokenizer, examples, max_seq_length=spec.max_seq_length,
            max_qa_length=spec.settings["max_qa_length"], batch_size=batch_size,
        )


def race_scores(records: Sequence[Dict[str, Any]]) -> Dict[str, float]:
    """`accuracy` and `num_examples` of prediction records that all carry their `answer`."""
    from albert_tf.tasks.multiple_choice import race_accuracy

    return {
        "accuracy": race_accuracy([r["prediction"] for r in records], [r["answer"] for r in records]),
        "num_examples": len(records),
    }


def evaluate_squad_file(
    model, spec: TaskSpec, tokenizer, path: str, batch_size: int, *, tune_threshold: bool = False,
    label: Optional[str] = "evaluating",
):
    """The official scores of `model` on a SQuAD file, and its predictions.

    Args:
        tune_threshold: v2: tune the no-answer threshold on this file (as after training) rather
            than apply the one stored in `spec.settings`.

    Returns:
        `(metrics, outputs)` of `albert_tf.tasks.squad.evaluate_squad`, the metrics as floats
        and with `num_examples`.
    """
    from albert_tf.tasks.squad import evaluate_squad, prepare_squad_task
    settings = spec.settings
    with reading_data_errors():
        data = prepare_squad_task(
            tokenizer, version=settings["version"], eval_file=path, max_seq_length=spec.max_seq_length,
            doc_stride=settings["doc_stride"], max_query_length=settings["max_query_length"], eval_batch_size=batch_size,
            n_best_size=settings["n_best_size"], max_answer_length=settings["max_answer_length"],
        )
    if not data.eval_features:
        raise CommandError(f"{path} has no question to evaluate")
    threshold = None if tune_threshold else settings.get("null_score_diff_threshold")
    with _progress(model, label):
        metrics, outputs = evaluate_squad(
            model, data.eval_json, data.eval_examples, data.eval_features, data.eval_dataset,
            version=settings["version"], batch_size=batch_size, n_best_size=settings["n_best_size"],
            max_answer_length=settings["max_answer_length"], null_score_diff_threshold=threshold,
        )
    metrics = {k: float(v) for k, v in metrics.items()}
    metrics["num_examples"] = len(data.eval_examples)
    return metrics, outputs


def predict_squad_path(
    model, spec: TaskSpec, tokenizer, path: str, batch_size: int, label: Optional[str] = "predicting"
) -> Dict[str, Any]:
    """`albert_tf.tasks.squad.predict_squad_file` with the run's settings (and, for v2, its tuned
    no-answer threshold); progress under `label` when it is slow (None: none)."""
    from albert_tf.tasks.squad import predict_squad_file
    settings = spec.settings
    with reading_data_errors(), _progress(model, label):
        return predict_squad_file(
            model, tokenizer, path, version=settings["version"], max_seq_length=spec.max_seq_length,
            doc_stride=settings["doc_stride"], max_query_length=settings["max_query_length"], batch_size=batch_size,
            n_best_size=settings["n_best_size"], max_answer_length=settings["max_answer_length"],
            null_score_diff_threshold=settings.get("null_score_diff_threshold"),
        )


def write_jsonl(path: str, records: Sequence[Dict[str, Any]]) -> None:
    """One JSON object per line, written atomically."""
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n")
    os.replace(tmp, path)


# --- the finetune command ------------------------------------------------------------------------


def _task_settings(args) -> Dict[str, Any]:
    """Hyper-parameters from the command line, else the task's preset (GLUE, SQuAD, RACE), else
    the generic defaults (steps and warmup are settled by `_steps`, which knows the training-set
    size)."""
    from albert_tf.tasks.presets import finetune_preset, reading_preset

    if args.task in GLUE_TASKS:
        preset = finetune_preset(args.task)
    elif args.task in READING_TASKS:
        preset = reading_preset(args.task)
    else:
        preset = None

    def pick(value, preset_field, default):
        if value is not None:
            return value
        return getattr(preset, preset_field) if preset is not None else default

    batch_size = pick(args.batch_size, "batch_size", GENERIC_DEFAULTS["batch_size"])
    return {
        "preset": preset,
        "learning_rate": pick(args.learning_rate, "learning_rate", GENERIC_DEFAULTS["learning_rate"]),
        "batch_size": batch_size,
        "eval_batch_size": args.eval_batch_size or batch_size,
        "max_seq_length": pick(args.max_seq_length, "max_seq_length", GENERIC_DEFAULTS["max_seq_length"]),
        "dropout": pick(args.dropout, "classifier_dropout", 0.1),
        "encoder_dropout": pick(args.encoder_dropout, "encoder_dropout", None),
        "metrics": list(preset.metrics) if preset else None,
        "best_metric": preset.best_metric if preset else None,
    }


def _tokenizer_entry(args, tokenizer_type: str, tokenizer_file: str) -> Dict[str, Any]:
    return {"type": tokenizer_type, "file": os.path.basename(tokenizer_file), "lower_case": bool(args.lower_case)}


def _build_spec(args, settings, tokenizer_type, tokenizer_file, train_examples) -> TaskSpec:
    from albert_tf.data.glue import LabelVocab, glue_layout
    from albert_tf.data.tagging import TagVocab

    tokenizer = _tokenizer_entry(args, tokenizer_type, tokenizer_file)
    if args.task in GLUE_TASKS:
        layout = glue_layout(args.task)
        kind = "regression" if layout.is_regression else "classification"
        labels = list(layout.labels) if layout.labels else None
        return TaskSpec(args.task, kind, labels, settings["max_seq_length"], settings["metrics"], settings["best_metric"], tokenizer)
    if args.task in TAGGING_TASKS:
        vocab = TagVocab.from_sentences(train_examples)
        return TaskSpec(
            args.task, "tagging", list(vocab.tags), settings["max_seq_length"],
            ["entity_f1", "entity_precision", "entity_recall", "token_accuracy"], "entity_f1", tokenizer,
            token_unit="char" if args.task == "peoples-daily" else "word",
        )
    regression = args.task == "regression"
    columns = {"text": args.text_column, "text_b": args.text_b_column, "label": args.label_column, "format": args.table_format, "quoting": args.tsv_quoting}
    if regression:
        return TaskSpec(args.task, "regression", None, settings["max_seq_length"], ["pearson", "spearman"], "pearson", tokenizer, columns)
    try:
        vocab = LabelVocab.from_examples(train_examples)
    except ValueError as e:
        raise CommandError(str(e)) from None
    metrics = ["accuracy", "f1"] if len(vocab) == 2 else ["accuracy"]
    return TaskSpec(args.task, "classification", list(vocab.labels), settings["max_seq_length"], metrics, "accuracy", tokenizer, columns)


def _check_args(args) -> None:
    if args.task in TABLE_TASKS:
        if not args.text_column or not args.label_column:
            raise CommandError(f"--task {args.task} needs --text-column and --label-column")
    elif args.text_column or args.text_b_column or args.label_column:
        raise CommandError(f"--text-column/--text-b-column/--label-column are for --task classification or regression, not {args.task}")
    if args.task == "peoples-daily":
        if not os.path.isfile(args.data):
            raise CommandError(f"--data for peoples-daily must be the corpus file; not a file: {args.data}")
    elif not os.path.isdir(args.data):
        raise CommandError(f"--data must be a directory: {args.data}")
    for name in ("max_seq_length", "batch_size", "num_train_steps", "eval_every", "max_train_examples", "max_eval_examples"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise CommandError(f"--{name.replace('_', '-')} must be >= 1, got {value}")
    for name, tasks in READING_FLAGS:
        value = getattr(args, name)
        flag = "--" + name.replace("_", "-")
        if value is None:
            continue
        if args.task not in tasks:
            raise CommandError(f"{flag} is for --task {' / '.join(tasks)}, not {args.task}")
        if value < 1:
            raise CommandError(f"{flag} must be >= 1, got {value}")
    if args.task in READING_TASKS:
        # Their readers convert whole files; a malformed question stops the run with its place named.
        for name in ("max_train_examples", "max_eval_examples"):
            if getattr(args, name) is not None:
                raise CommandError(f"--{name.replace('_', '-')} is not supported for {args.task}; cut the data files instead")
        if args.on_error != "raise":
            raise CommandError(f"--on-error {args.on_error} is not supported for {args.task}")
    if args.num_epochs is not None and not args.num_epochs > 0:
        raise CommandError(f"--num-epochs must be > 0, got {args.num_epochs}")
    if args.warmup_proportion is not None and not 0 <= args.warmup_proportion <= 1:
        raise CommandError(f"--warmup-proportion must be in [0, 1], got {args.warmup_proportion}")
    if args.init:
        check_init(args.init)


@dataclasses.dataclass
class _Plan:
    """What a task contributes to a run.

    Attributes:
        spec: The task spec (written to the model directory after `write_results`, which may
            add to its `settings`).
        train_data, eval_data: Unbatched datasets of feature dicts (labels inside).
        eval_fn: The dev evaluation for `run_finetuning` (None: `model.evaluate`).
        num_train: Training elements (SQuAD: features), the size of an epoch.
        summary: "... train / ... dev ..." for the log.
        build_head: `build_head(encoder) -> task model`.
        write_results: `write_results(directory, model) -> {split: metrics}`: the final dev/test
            evaluations; unlabelled test data get prediction files in `directory`.
    """

    spec: TaskSpec
    train_data: Any
    eval_data: Any
    eval_fn: Optional[Callable[[Any, Any], Dict[str, float]]]
    num_train: int
    summary: str
    build_head: Callable[[Any], Any]
    write_results: Callable[[str, Any], Dict[str, Any]]
    # The dev set's best constant answer (`albert_tf.evaluation.baselines`): the collapse check.
    constant_baseline: Any = None


def _table_plan(args, settings, tokenizer_type, tokenizer_file, tokenizer) -> _Plan:
    """GLUE, classification/regression tables and tagging."""
    cache: Dict[str, Any] = {}
    # Read the training data with a provisional spec (the label list comes from it for tables).
    provisional = TaskSpec(
        args.task, "tagging" if args.task in TAGGING_TASKS else "classification", None, settings["max_seq_length"], [], "",
        {}, {"text": args.text_column, "text_b": args.text_b_column, "label": args.label_column, "format": args.table_format, "quoting": args.tsv_quoting},
    )
    reading = dict(on_error=args.on_error, cache=cache, table_format=args.table_format)
    train_examples = _limit(read_split(provisional, args.data, "train", **reading), args.max_train_examples)
    spec = _build_spec(args, settings, tokenizer_type, tokenizer_file, train_examples)
    splits = split_names(spec, args.data)
    if not splits.get("dev"):
        raise CommandError(f"no dev split for {args.task} in {args.data}: the run selects its best weights on dev data")
    dev_split = splits["dev"][0]
    dev_examples = _limit(read_split(spec, args.data, dev_split, **reading), args.max_eval_examples)
    train_data, eval_data, eval_fn, constant = _prepare_data(spec, tokenizer, train_examples, dev_examples, args, settings)
    eval_batch_size = settings["eval_batch_size"]

    def build_head(encoder):
        from albert_tf.tasks.classification import build_task_model
        from albert_tf.tasks.tagging import AlbertTokenClassifier

        if spec.kind == "tagging":
            return AlbertTokenClassifier(encoder, num_labels=len(spec.labels), dropout=settings["dropout"])
        return build_task_model(encoder, None if spec.kind == "regression" else len(spec.labels),
                                dropout=settings["dropout"], pooling=settings["pooling"])

    def write_results(directory: str, model) -> Dict[str, Any]:
        results: Dict[str, Any] = {}
        for kind in ("dev", "test"):
            for split in splits.get(kind, []):
                examples = dev_examples if split == dev_split else _limit(
                    read_split(spec, args.data, split, **reading), args.max_eval_examples
                )
                if has_labels(spec, examples):
                    label = None if args.quiet else f"evaluating {split}"
                    results[split] = evaluate_examples(model, spec, tokenizer, examples, eval_batch_size, label)
                    print(f"{split}: " + ", ".join(f"{k}={v:.4f}" for k, v in sorted(results[split].items())), flush=True)
                else:
                    label = None if args.quiet else f"predicting {split}"
                    records = predict_examples(model, spec, tokenizer, examples, eval_batch_size, label)
                    write_predictions_tsv(os.path.join(directory, f"predictions_{split}.tsv"), examples, records, spec)
                    print(f"{split}: wrote predictions_{split}.tsv ({len(records)} predictions)", flush=True)
        return results

    return _Plan(
        spec, train_data, eval_data, eval_fn, len(train_examples),
        f"{len(train_examples)} train / {len(dev_examples)} dev examples", build_head, write_results, constant,
    )


def _squad_plan(args, settings, tokenizer_type, tokenizer_file, tokenizer) -> _Plan:
    """SQuAD v1.1 / v2.0 from the official files in `--data`."""
    from albert_tf.data.squad import DEFAULT_DOC_STRIDE, DEFAULT_MAX_QUERY_LENGTH
    from albert_tf.tasks import squad_postprocessing as post
    from albert_tf.tasks.squad import build_squad_model, evaluate_squad, prepare_squad_task, write_squad_outputs
    if tokenizer_type != "sentencepiece":
        raise CommandError(
            f"{args.task} needs a SentencePiece tokenizer (--spm-model): the answer alignment follows the "
            f"original SentencePiece preprocessing"
        )
    version = "v1" if args.task == "squad-v1" else "v2"
    train_file = squad_split_file(args.task, args.data, "train")
    dev_file = squad_split_file(args.task, args.data, "dev")
    options = dict(
        max_seq_length=settings["max_seq_length"],
        doc_stride=args.doc_stride or DEFAULT_DOC_STRIDE,
        max_query_length=args.max_query_length or DEFAULT_MAX_QUERY_LENGTH,
        n_best_size=args.n_best_size or post.DEFAULT_N_BEST_SIZE,
        max_answer_length=args.max_answer_length or post.DEFAULT_MAX_ANSWER_LENGTH,
    )
    eval_batch_size = settings["eval_batch_size"]
    with reading_data_errors():
        data = prepare_squad_task(
            tokenizer, version=version, train_file=train_file, eval_file=dev_file, eval_batch_size=eval_batch_size, **options
        )
    for path, count in ((train_file, len(data.train_features)), (dev_file, len(data.eval_features))):
        if not count:
            raise CommandError(f"{path} gives no SQuAD features (no question whose answer could be aligned)")
    for path, skipped in data.skipped.items():
        if skipped:
            print(f"{path}: left out {len(skipped)} question(s): {skipped[0].reason} ...", flush=True)
    spec = TaskSpec(
        args.task, "squad", None, settings["max_seq_length"], list(settings["metrics"]), data.best_metric,
        _tokenizer_entry(args, tokenizer_type, tokenizer_file), settings=dict(data.settings),
    )

    def build_head(encoder):
        return build_squad_model(encoder, version, dropout=settings["dropout"])

    def write_results(directory: str, model) -> Dict[str, Any]:
        # v2: the no-answer threshold is tuned on dev here and kept for `predict`, as the original
        # run_squad_v2 tunes it on the dev predictions.
        with _progress(model, None if args.quiet else "evaluating dev"):
            metrics, outputs = evaluate_squad(
                model, data.eval_json, data.eval_examples, data.eval_features, data.eval_dataset, version=version,
                batch_size=eval_batch_size, n_best_size=options["n_best_size"], max_answer_length=options["max_answer_length"],
            )
        metrics = {k: float(v) for k, v in metrics.items()}
        if version == "v2":
            spec.settings["null_score_diff_threshold"] = metrics["null_score_diff_threshold"]
        write_squad_outputs(outputs, os.path.join(directory, SQUAD_PREDICTIONS_DIR))
        print("dev: " + ", ".join(f"{k}={v:.4f}" for k, v in sorted(metrics.items())), flush=True)
        return {"dev": metrics}

    summary = (
        f"{len(data.train_examples)} train questions ({len(data.train_features)} features) / "
        f"{len(data.eval_examples)} dev questions ({len(data.eval_features)} features)"
    )
    return _Plan(spec, data.train_dataset, data.eval_dataset, data.eval_fn, len(data.train_features), summary, build_head, write_results)


def _race_plan(args, settings, tokenizer_type, tokenizer_file, tokenizer) -> _Plan:
    """RACE from the `RACE/` folder in `--data`."""
    from albert_tf.data.race import DEFAULT_MAX_QA_LENGTH
    from albert_tf.tasks.multiple_choice import MultipleChoiceModel, prepare_race_task

    train_path = race_split_path(args.data, "train")
    dev_path = race_split_path(args.data, "dev")
    with reading_data_errors():
        data = prepare_race_task(
            tokenizer, train_path=train_path, eval_path=dev_path, max_seq_length=settings["max_seq_length"],
            max_qa_length=args.max_qa_length or DEFAULT_MAX_QA_LENGTH,
        )
    num_choices = len(data.train_examples[0].options)
    spec = TaskSpec(
        args.task, "multiple_choice", [chr(ord("A") + i) for i in range(num_choices)], settings["max_seq_length"],
        list(settings["metrics"]), data.best_metric, _tokenizer_entry(args, tokenizer_type, tokenizer_file),
        settings=dict(data.settings),
    )
    eval_batch_size = settings["eval_batch_size"]

    def build_head(encoder):
        return MultipleChoiceModel(encoder, dropout=settings["dropout"])

    def write_results(directory: str, model) -> Dict[str, Any]:
        results = {"dev": race_scores(predict_race_records(
            model, spec, tokenizer, data.eval_examples, eval_batch_size, None if args.quiet else "evaluating dev"
        ))}
        print(f"dev: accuracy={results['dev']['accuracy']:.4f}", flush=True)
        if os.path.isdir(os.path.join(args.data, "test")):
            examples = read_race_split(spec, race_split_path(args.data, "test"))
            records = predict_race_records(model, spec, tokenizer, examples, eval_batch_size, None if args.quiet else "test")
            if all(e.label is not None for e in examples):
                results["test"] = race_scores(records)
                print(f"test: accuracy={results['test']['accuracy']:.4f}", flush=True)
            else:
                write_jsonl(os.path.join(directory, "predictions_test.jsonl"), records)
                print(f"test: wrote predictions_test.jsonl ({len(records)} predictions)", flush=True)
        return results

    summary = f"{len(data.train_examples)} train / {len(data.eval_examples)} dev questions"
    return _Plan(spec, data.train_dataset, data.eval_dataset, None, len(data.train_examples), summary, build_head, write_results)


def run(args) -> int:
    _check_args(args)
    from albert_tf.training.finetuning import FinetuningError, is_complete

    if os.path.exists(args.model_dir) and os.listdir(args.model_dir) and not args.overwrite:
        what = "a completed fine-tuning run" if is_complete(args.model_dir) else "not empty"
        raise CommandError(f"--model-dir {args.model_dir} is {what}; pass --overwrite to replace it")

    from albert_tf.training.strategies import StrategyError, get_strategy

    # First TensorFlow work of the process: multi-worker and TPU strategies must configure the
    # runtime before anything else runs.
    try:
        strategy = get_strategy(args.strategy, tpu=args.tpu)
    except StrategyError as e:
        raise CommandError(str(e)) from None
    settings = _task_settings(args)
    config, config_source = resolve_model_config(args.config, args.init)
    tokenizer_type, tokenizer_file, stored_lower_case = _find_tokenizer_file(args)
    if args.lower_case is None:
        # The casing the tokenizer was made with, where it was stored with it; else lower-cased.
        args.lower_case = True if stored_lower_case is None else bool(stored_lower_case)
    tokenizer = load_tokenizer(tokenizer_type, tokenizer_file, args.lower_case)
    check_tokenizer_fits(tokenizer, tokenizer_file, config, config_source, args.allow_vocab_mismatch)
    if settings["max_seq_length"] > config.max_position_embeddings:
        given = "" if args.max_seq_length is not None else f" (the {args.task} default)"
        raise CommandError(
            f"--max-seq-length {settings['max_seq_length']}{given} exceeds the max_position_embeddings of "
            f"{config_source} ({config.max_position_embeddings}); pass --max-seq-length "
            f"{config.max_position_embeddings} or less"
        )
    if settings["encoder_dropout"] is not None:
        config = config.replace(
            hidden_dropout_prob=settings["encoder_dropout"], attention_probs_dropout_prob=settings["encoder_dropout"]
        )

    from albert_tf.training.recipes import recommended_recipe

    recipe = recommended_recipe(config, "tagging" if args.task in TAGGING_TASKS else "classification")
    if args.task in TAGGING_TASKS and args.num_epochs is None and args.num_train_steps is None:
        args.num_epochs = recipe.epochs
    if args.learning_rate is None and (settings["preset"] is None or recipe.size_class != "base"):
        # The presets' rates are the paper's, for base-size models and larger; smaller encoders
        # collapse at them (BENCHMARKS.md, "Fine-tuning recipes").
        settings["learning_rate"] = recipe.learning_rate
    settings["pooling"] = args.pooling or recipe.pooling
    settings["bias_correction"] = recipe.bias_correction if args.bias_correction is None else args.bias_correction
    make_plan = _squad_plan if args.task in SQUAD_TASKS else _race_plan if args.task in RACE_TASKS else _table_plan
    plan = make_plan(args, settings, tokenizer_type, tokenizer_file, tokenizer)
    spec = plan.spec
    steps, warmup = _steps(args, settings, plan.num_train, spec)

    from albert_tf.checkpoints.any_format import init_encoder
    from albert_tf.checkpoints.original import CheckpointError
    from albert_tf.modeling import AlbertEncoder
    from albert_tf.training.finetuning import run_finetuning

    init_info: Dict[str, Any] = {}

    def build_model():
        encoder = AlbertEncoder.from_albert_config(config, dtype=args.precision)
        if args.init:
            try:
                result = init_encoder(encoder, args.init)
            except (CheckpointError, ValueError) as e:
                raise CommandError(str(e)) from None
            init_info.update(kind=result.kind, source=result.source)
            print(f"initialised the encoder from {result.source} ({result.kind})", flush=True)
        else:
            print("no --init: the encoder starts from random weights", flush=True)
        return plan.build_head(encoder)

    def save_assets(directory: str, model) -> None:
        shutil.copyfile(tokenizer_file, os.path.join(directory, spec.tokenizer["file"]))
        config.to_json_file(os.path.join(directory, CONFIG_FILE))
        results = plan.write_results(directory, model)
        write_json(os.path.join(directory, RESULTS_FILE), results)
        spec.write(directory)

    print(
        f"fine-tuning {args.task}: {plan.summary}, "
        f"{steps} steps (warmup {warmup}), batch {settings['batch_size']}, lr {settings['learning_rate']}, "
        f"seq {spec.max_seq_length}, pooling {settings['pooling']}, "
        f"{'bias-corrected' if settings['bias_correction'] else 'uncorrected'} AdamW",
        flush=True,
    )
    try:
        result = run_finetuning(
            build_model,
            plan.train_data,
            plan.eval_data,
            num_train_steps=steps,
            warmup_steps=warmup,
            learning_rate=settings["learning_rate"],
            model_dir=args.model_dir,
            eval_fn=plan.eval_fn,
            best_metric=spec.best_metric,
            eval_every_n_steps=args.eval_every,
            batch_size=settings["batch_size"],
            eval_batch_size=settings["eval_batch_size"],
            shuffle_buffer=min(plan.num_train, SHUFFLE_BUFFER),
            weight_decay=args.weight_decay,
            gradient_accumulation_steps=args.gradient_accumulation_steps,
            jit_compile=args.jit_compile,
            precision=args.precision,
            strategy=strategy,
            seed=args.seed,
            save_assets=save_assets,
            metadata={"task": spec.task, "init": init_info, "config": config.to_dict(), "data": os.path.abspath(args.data)},
            overwrite=args.overwrite,
            verbose=0 if args.quiet else "auto",  # "auto": a bar on a terminal, one line per interval otherwise
            bias_correction=settings["bias_correction"],
            constant_baseline=plan.constant_baseline,
            collapse_metric=spec.best_metric if plan.constant_baseline is not None else None,
        )
    except (FinetuningError, FileExistsError) as e:
        raise CommandError(str(e)) from None
    shown = ", ".join(f"{k}={v:.4f}" for k, v in sorted(result.best_metrics.items()))
    print(f"best dev {spec.best_metric} at step {result.best_step}: {shown}")
    if plan.constant_baseline is not None:
        constant = plan.constant_baseline
        print(f"best constant answer: {spec.best_metric}={constant.metrics[spec.best_metric]:.4f} ({constant.description})")
    if result.collapsed:
        print(f"WARNING: the model collapsed: {result.collapse.reason}. It answers like a constant; see "
              f"albert_tf.training.recipes for settings that learn (learning rate, --pooling mean, more epochs).",
              flush=True)
    print(f"wrote {result.model_dir}")
    return 0


def _steps(args, settings, num_train: int, spec: TaskSpec) -> Tuple[int, int]:
    """(train steps, warmup steps): `--num-train-steps`, else `--num-epochs`, else the GLUE
    preset's steps, else 3 epochs; warmup `--warmup-steps`, else `--warmup-proportion`, else the
    preset's when its steps are used, else 10%. Epochs count full batches, as the run does
    (`albert_tf.training.finetuning.steps_for_epochs`)."""
    from albert_tf.training.finetuning import steps_for_epochs

    preset = settings["preset"]
    uses_preset_steps = False
    if args.num_train_steps is not None:
        steps = args.num_train_steps
    elif args.num_epochs is not None or preset is None:
        epochs = args.num_epochs if args.num_epochs is not None else GENERIC_DEFAULTS["num_epochs"]
        steps = steps_for_epochs(num_train, epochs, settings["batch_size"], args.gradient_accumulation_steps)
    else:
        steps, uses_preset_steps = preset.num_train_steps, True
    if args.warmup_steps is not None:
        warmup = args.warmup_steps
    elif args.warmup_proportion is not None:
        warmup = int(steps * args.warmup_proportion)
    elif uses_preset_steps:
        warmup = preset.warmup_steps
    else:
        warmup = int(steps * GENERIC_DEFAULTS["warmup_proportion"])
    if warmup > steps:
        raise CommandError(f"--warmup-steps ({warmup}) exceeds the number of training steps ({steps})")
    return steps, warmup


def _prepare_data(spec: TaskSpec, tokenizer, train_examples, dev_examples, args, settings):
    """(train dataset, dev dataset, eval_fn, the dev set's best constant answer), unbatched
    datasets of encoded features."""
    from albert_tf.data.glue import DataFormatError
    from albert_tf.evaluation import majority_class_baseline, majority_tag_baseline, mean_baseline

    try:
        if spec.kind == "tagging":
            from albert_tf.tasks import tagging
            from albert_tf.tasks.classification import examples_dataset

            vocab = spec.label_vocab()
            train = tagging.encode_sentences(train_examples, tokenizer, seq_length=spec.max_seq_length, tag_vocab=vocab)
            dev = tagging.encode_sentences(dev_examples, tokenizer, seq_length=spec.max_seq_length, tag_vocab=vocab)
            eval_fn = tagging.make_eval_fn(dev, dev_examples, vocab, batch_size=settings["eval_batch_size"])
            gold = dev.features["labels"][dev.features["labels"] >= 0]
            constant = majority_tag_baseline(gold, vocab.tags) if gold.size else None
            return examples_dataset(train.features), examples_dataset(dev.features), eval_fn, constant
        from albert_tf.tasks import classification

        regression = spec.kind == "regression"
        vocab = spec.label_vocab()
        train = classification.encode_examples(train_examples, tokenizer, seq_length=spec.max_seq_length, label_vocab=vocab, regression=regression)
        dev = classification.encode_examples(dev_examples, tokenizer, seq_length=spec.max_seq_length, label_vocab=vocab, regression=regression)
        eval_fn = classification.make_eval_fn(spec.metrics, regression, diagnostics=True)
        names = list(spec.metrics) + ([] if spec.best_metric in spec.metrics else [spec.best_metric])
        if regression:
            constant = mean_baseline(dev["labels"], names)
        else:
            constant = majority_class_baseline(dev["labels"], names, label_names=vocab.labels)
        return classification.examples_dataset(train), classification.examples_dataset(dev), eval_fn, constant
    except DataFormatError as e:
        raise CommandError(str(e)) from None
