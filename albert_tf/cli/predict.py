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
import sys

from albert_tf.cli import CommandError, library_errors

NAME = "predict"
HELP = "Predict with a fine-tuned model (from `albert-tf finetune`) on texts, a file or a data split."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("texts", nargs="*", metavar="TEXT", help="texts to classify / tag")
    parser.add_argument("--model-dir", help="output directory of `albert-tf finetune` (local prediction)")
    parser.add_argument("--server", help="HOST:PORT of TF Serving or `albert-tf serve` (gRPC 8500 / REST 8501)")
    parser.add_argument("--model", help="served model name (with --server)")
    parser.add_argument("--protocol", choices=("grpc", "rest"), default="grpc", help="protocol for --server")
    parser.add_argument(
        "--vocab",
        help="with --server, for a model served from model.tflite (token ids in): the export's version directory "
        "(or its spiece.model / vocab.txt); the texts are tokenized here",
    )
    parser.add_argument("--text-b", action="append", help="second text of a pair task (once per TEXT, in order)")
    parser.add_argument("--input", help="file of examples: .tsv/.csv/.jsonl with the training columns, or .txt (one text per line)")
    parser.add_argument("--data", help="data directory (or corpus file) to read --split from")
    parser.add_argument("--split", help="split of --data (default test; dev for SQuAD)")
    parser.add_argument(
        "--output",
        help="write predictions here (.jsonl, or .tsv for index<TAB>prediction; for SQuAD a directory of the official files)",
    )
    parser.add_argument("--batch-size", type=int, default=32)


def _predict_on_server(args) -> int:
    """Raw texts to a served model (TF Serving or the local stand-in); one JSON object per text."""
    from albert_tf.errors import ParameterError
    from albert_tf.model_server.client import ServingClientError, format_predictions, predict_text

    if not args.model:
        raise CommandError("--server needs --model NAME (the served model's name)")
    if not args.texts or args.input or args.data:
        raise CommandError("with --server, give the texts as TEXT arguments")
    try:
        outputs = predict_text(args.server, args.model, args.texts, text_b=args.text_b, protocol=args.protocol,
                               vocab=args.vocab)
    except ParameterError as e:
        raise CommandError(e.cli_message) from None
    except (ServingClientError, ValueError) as e:
        raise CommandError(str(e)) from None
    for record in format_predictions(outputs):
        print(json.dumps(record, ensure_ascii=False, sort_keys=True))
    return 0


def run(args) -> int:
    from albert_tf.tasks.inference import predict_model_dir

    if args.server:
        return _predict_on_server(args)
    if not args.model_dir:
        raise CommandError("give --model-dir, or --server HOST:PORT with --model NAME")
    with library_errors():
        predictions = predict_model_dir(
            args.model_dir, texts=args.texts, text_b=args.text_b, input=args.input, data=args.data, split=args.split,
            batch_size=args.batch_size, output=args.output,
        )
    for note in predictions.notes:
        print(note, file=sys.stderr)
    if predictions.records is not None:
        print("\n".join(json.dumps(record, ensure_ascii=False, sort_keys=True) for record in predictions.records))
    return 0
