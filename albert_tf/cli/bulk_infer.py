"""`albert-tf bulk-infer`: a large unlabelled set scored by a fine-tuned model on Apache Beam
(`albert_tf.inference.bulk.bulk_infer`), TFX's BulkInferrer.

Input: text files (one text per line), TSV/CSV/JSONL tables (the model's text column, or
`--text-column`), or TFRecord files of tf.Examples with a bytes feature `text`. Output: TF Serving
`PredictionLog` shards (`prediction_logs-SSSSS-of-NNNNN.gz`: `classify_log` for a classifier,
`regress_log` for a regressor), `metadata.json`, and with `--answers` the records `albert-tf
predict` gives (`answers.jsonl`, or `answers.tsv` as `index<TAB>prediction`). Runs on Beam's
DirectRunner in this process, on a local Dask cluster (`--num-workers N`) or on a running Dask
scheduler (`--dask-address`). A killed run resumes: the next run with the same model and input
scores only the shards that are not complete.
"""

from __future__ import annotations

import argparse

from albert_tf.cli import CommandError

NAME = "bulk-infer"
HELP = ("Score a large unlabelled set with a fine-tuned model or pushed version on Beam (DirectRunner or Dask): "
        "TF Serving PredictionLogs, optionally the answers; resumes a killed run.")
# Library parameter -> this command's flag, for one-line errors.
_FLAGS = {"output_dir": "output", "answers_format": "answers"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, help="model directory of `albert-tf finetune`, or a pushed version <base>/<name>/<version>")
    parser.add_argument("--input", required=True, nargs="+", metavar="FILE",
                        help=".txt (one text per line), .tsv/.csv/.jsonl tables, .tfrecord[.gz] of tf.Examples (feature `text`); globs expand")
    parser.add_argument("--output", required=True, help="output directory (must not exist or be empty, unless --overwrite)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--dask-address", help="a running Dask scheduler, e.g. tcp://host:8786")
    where.add_argument("--num-workers", type=int, help="worker processes of a local Dask cluster started for the run")
    parser.add_argument("--answers", choices=("jsonl", "tsv"), help="also write the answers as albert-tf predict gives them")
    parser.add_argument("--text-column", help="the tables' text column (default: the model's)")
    parser.add_argument("--batch-size", type=int, default=32, help="texts per model call (default 32)")
    parser.add_argument("--shard-size", type=int, default=1024, help="texts per output shard, the unit of resumption (default 1024)")
    parser.add_argument("--overwrite", action="store_true", help="replace a non-empty --output")


def run(args) -> int:
    from albert_tf.data.pipeline_output import PipelineError
    from albert_tf.errors import ParameterError
    from albert_tf.inference.bulk import bulk_infer

    try:
        summary = bulk_infer(
            args.model, args.input, args.output, dask_address=args.dask_address, num_workers=args.num_workers,
            batch_size=args.batch_size, text_column=args.text_column, answers_format=args.answers,
            shard_size=args.shard_size, overwrite=args.overwrite,
        )
    except ParameterError as e:
        raise CommandError(e.for_cli(_FLAGS)) from None
    except PipelineError as e:
        raise CommandError(str(e)) from None
    resumed = summary.num_shards - len(summary.shards_scored)
    note = f" ({resumed} complete from an earlier run)" if resumed else ""
    print(f"scored {summary.num_texts} texts in {summary.num_shards} shards{note}: {summary.output_dir}")
    return 0
