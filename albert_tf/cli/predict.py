"""`albert-tf predict`: predictions of a fine-tuned model directory, locally.

Input: texts on the command line (`--text-b` gives the second text of each pair, in order), a
file (`--input`: a TSV/CSV/JSONL table with the training columns, in the file's own format
whatever the training files' was, or one text per line for `.txt`; for NER one sentence per line
in `.txt`, else CoNLL columns), or a split of a data directory (`--data` with `--split`, e.g. a
GLUE test file). Output:
one JSON object per example on stdout (classification: `label` and `probabilities`; regression:
`prediction`; NER: `tokens`, `tags`, `entities`), or with `--output` a JSONL file, or for `--data`
a GLUE-submission style `index<TAB>prediction` TSV when `--output` ends in `.tsv`. Prediction that
runs longer than a few seconds reports its progress on stderr, so stdout stays the predictions.

SQuAD models answer the questions of a SQuAD JSON file (`--input`, or `--data DIR --split dev`):
one `{"id", "answer"}` object per question on stdout, or with `--output DIR` the official
`predictions.json`, `nbest_predictions.json` (and for v2 `null_odds.json`, with "no answer" by the
threshold tuned on dev at training time). RACE models read RACE files (`--input` a file, folder
or glob, or `--data RACE/ --split test`) and give one record per question: `id`,
`question_index`, `prediction` (the option letter), `probabilities` and the gold `answer` when the
file has one.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from albert_tf.cli import CommandError

NAME = "predict"
HELP = "Predict with a fine-tuned model (from `albert-tf finetune`) on texts, a file or a data split."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("texts", nargs="*", metavar="TEXT", help="texts to classify / tag")
    parser.add_argument("--model-dir", help="output directory of `albert-tf finetune` (local prediction)")
    parser.add_argument("--server", help="HOST:PORT of TF Serving or `albert-tf serve` (gRPC 8500 / REST 8501)")
    parser.add_argument("--model", help="served model name (with --server)")
    parser.add_argument("--protocol", choices=("grpc", "rest"), default="grpc", help="protocol for --server")
    parser.add_argument("--text-b", action="append", help="second text of a pair task (once per TEXT, in order)")
    parser.add_argument("--input", help="file of examples: .tsv/.csv/.jsonl with the training columns, or .txt (one text per line)")
    parser.add_argument("--data", help="data directory (or corpus file) to read --split from")
    parser.add_argument("--split", help="split of --data (default test; dev for SQuAD)")
    parser.add_argument(
        "--output",
        help="write predictions here (.jsonl, or .tsv for index<TAB>prediction; for SQuAD a directory of the official files)",
    )
    parser.add_argument("--batch-size", type=int, default=32)


def _examples_from_texts(spec, texts, texts_b):
    from albert_tf.data.glue import TextExample
    from albert_tf.data.tagging import TaggedSentence

    if spec.kind == "tagging":
        if texts_b:
            raise CommandError("--text-b is for sentence-pair tasks")
        sentences = []
        for i, text in enumerate(texts):
            tokens = [c for c in text if not c.isspace()] if spec.token_unit == "char" else text.split()
            if not tokens:
                raise CommandError(f"text {i + 1} is empty")
            sentences.append(TaggedSentence(tuple(tokens), tuple("O" for _ in tokens), "<command line>", i + 1))
        return sentences
    if spec.is_pair:
        if not texts_b or len(texts_b) != len(texts):
            raise CommandError(f"{spec.task} is a sentence-pair task: give one --text-b per TEXT ({len(texts)} texts, {len(texts_b or [])} --text-b)")
    elif texts_b:
        raise CommandError(f"{spec.task} takes single texts; --text-b is for sentence-pair tasks")
    examples = []
    for i, text in enumerate(texts):
        if not text.strip():
            raise CommandError(f"text {i + 1} is empty")
        b = texts_b[i] if texts_b else None
        if b is not None and not b.strip():
            raise CommandError(f"--text-b {i + 1} is empty")
        examples.append(TextExample(text, b, None, "<command line>", i + 1, str(i)))
    return examples


def _examples_from_file(spec, path):
    from albert_tf.data.glue import DataFormatError, TextExample, _read_text, detect_file_format, read_table
    from albert_tf.data.tagging import read_conll

    try:
        if path.lower().endswith(".txt") and spec.kind != "tagging":
            lines = _read_text(path).split("\n")
            examples = [TextExample(l.rstrip("\r"), None, None, path, n, str(n - 1)) for n, l in enumerate(lines, 1) if l.strip()]
            if spec.is_pair:
                raise CommandError(f"{spec.task} is a pair task: give a .tsv/.csv/.jsonl --input with both text columns")
            if not examples:
                raise CommandError(f"{path} has no text")
            return examples
        if spec.kind == "tagging":
            if path.lower().endswith(".txt"):
                texts = [l for l in _read_text(path).split("\n") if l.strip()]
                if not texts:
                    raise CommandError(f"{path} has no text")
                return _examples_from_texts(spec, texts, None)
            # CoNLL columns: the first is the token; tags, if any, are ignored.
            return read_conll(path, with_tags=False)
        columns = spec.columns
        if not columns.get("text"):
            from albert_tf.data.glue import glue_layout

            layout = glue_layout(spec.task)
            text, text_b = layout.test_text_a, layout.test_text_b
        else:
            text, text_b = columns["text"], columns.get("text_b")
        # The file's own format (its extension, else its first line), not the training files'.
        return read_table(
            path, text_column=text, text_b_column=text_b, table_format=detect_file_format(path, columns.get("format")),
            tsv_quoting=columns.get("quoting") or "csv",
        )
    except DataFormatError as e:
        raise CommandError(str(e)) from None


def _predict_on_server(args) -> int:
    """Raw texts to a served model (TF Serving or the local stand-in); one JSON object per text."""
    from albert_tf.model_server.client import ServingClientError, format_predictions, predict_text

    if not args.model:
        raise CommandError("--server needs --model NAME (the served model's name)")
    if not args.texts or args.input or args.data:
        raise CommandError("with --server, give the texts as TEXT arguments")
    try:
        outputs = predict_text(args.server, args.model, args.texts, text_b=args.text_b, protocol=args.protocol)
    except (ServingClientError, ValueError) as e:
        raise CommandError(str(e)) from None
    for record in format_predictions(outputs):
        print(json.dumps(record, ensure_ascii=False, sort_keys=True))
    return 0


def run(args) -> int:
    from albert_tf.cli.finetune import TaskSpec, load_model, predict_examples, read_split, tokenizer_from_model_dir, write_predictions_tsv

    if args.server:
        return _predict_on_server(args)
    if not args.model_dir:
        raise CommandError("give --model-dir, or --server HOST:PORT with --model NAME")
    if args.batch_size < 1:
        raise CommandError(f"--batch-size must be >= 1, got {args.batch_size}")
    sources = sum(bool(x) for x in (args.texts, args.input, args.data))
    if sources != 1:
        raise CommandError("give exactly one of: TEXT arguments, --input FILE, or --data DIR (with --split)")
    spec = TaskSpec.read(args.model_dir)
    tokenizer = tokenizer_from_model_dir(args.model_dir, spec)
    if spec.kind in ("squad", "multiple_choice"):
        return _predict_reading(args, spec, tokenizer)
    if args.texts:
        examples = _examples_from_texts(spec, args.texts, args.text_b)
    elif args.input:
        if args.text_b:
            raise CommandError("--text-b goes with TEXT arguments, not --input")
        examples = _examples_from_file(spec, args.input)
    else:
        if not os.path.exists(args.data):
            raise CommandError(f"--data not found: {args.data}")
        examples = read_split(spec, args.data, args.split or "test")
    model = load_model(args.model_dir)
    records = predict_examples(model, spec, tokenizer, examples, args.batch_size)
    if args.output and args.output.lower().endswith(".tsv"):
        write_predictions_tsv(args.output, examples, records, spec)
        return 0
    lines = [json.dumps(record, ensure_ascii=False, sort_keys=True) for record in records]
    if args.output:
        tmp = f"{args.output}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        os.replace(tmp, args.output)
    else:
        print("\n".join(lines))
    return 0


def _predict_reading(args, spec, tokenizer) -> int:
    """SQuAD answers or RACE choices for `--input` or a split of `--data`."""
    from albert_tf.cli.finetune import (
        load_model,
        predict_race_records,
        predict_squad_path,
        race_split_path,
        read_race_split,
        squad_split_file,
        write_jsonl,
    )

    if args.texts or args.text_b:
        raise CommandError(f"{spec.task} reads questions from a file: give --input FILE or --data DIR, not TEXT arguments")
    if args.data and not os.path.exists(args.data):
        raise CommandError(f"--data not found: {args.data}")
    if spec.kind == "squad":
        if args.output and args.output.lower().endswith((".json", ".jsonl", ".tsv")):
            raise CommandError(f"for {spec.task}, --output is a directory (it receives predictions.json, nbest_predictions.json, ...)")
        path = args.input or squad_split_file(spec.task, args.data, args.split or "dev")
        if not os.path.isfile(path):
            raise CommandError(f"SQuAD file {path} does not exist")
        model = load_model(args.model_dir)
        outputs = predict_squad_path(model, spec, tokenizer, path, args.batch_size)
        if outputs["skipped"]:
            print(f"{path}: {len(outputs['skipped'])} question(s) could not be aligned and got a default answer", file=sys.stderr)
        if args.output:
            from albert_tf.tasks.squad import write_squad_outputs

            write_squad_outputs(outputs, args.output)
        else:
            for qas_id, answer in outputs["predictions"].items():
                print(json.dumps({"id": qas_id, "answer": answer}, ensure_ascii=False, sort_keys=True))
        return 0
    if args.output and args.output.lower().endswith(".tsv"):
        raise CommandError(f"for {spec.task}, --output is a .jsonl file")
    examples = read_race_split(spec, args.input or race_split_path(args.data, args.split or "test"))
    model = load_model(args.model_dir)
    records = predict_race_records(model, spec, tokenizer, examples, args.batch_size)
    if args.output:
        write_jsonl(args.output, records)
    else:
        for record in records:
            print(json.dumps(record, ensure_ascii=False, sort_keys=True))
    return 0
