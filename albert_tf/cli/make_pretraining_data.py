"""`albert-tf make-pretraining-data`: ALBERT pretraining TFRecords (SOP + n-gram MLM) with Apache Beam.

Runs `albert_tf.data.beam_pipeline` locally (Beam's FnApiRunner; ``--num-workers N`` for worker
processes), on Dask (``--runner dask``: Beam's DaskRunner on a LocalCluster of ``--num-workers``
processes, default one per CPU, started and stopped by the command, or on a running scheduler
given by ``--dask-address``) or on Dataflow/Flink/Spark with ``--runner`` and Beam options after
``--``, e.g.::

    albert-tf make-pretraining-data --input 'corpus/*.txt' --output-dir data/ \\
        --spm-model 30k-clean.model --dupe-factor 5 --runner dask --num-workers 2
    albert-tf make-pretraining-data --input /shared/corpus --output-dir /shared/data \\
        --spm-model /shared/30k-clean.model --runner dask --dask-address tcp://scheduler:8786
    albert-tf make-pretraining-data --input 'gs://b/corpus/*' --output-dir gs://b/data \\
        --spm-model gs://b/30k-clean.model --runner DataflowRunner -- --project=p --region=us-central1 \\
        --temp_location=gs://b/tmp --extra_package=dist/albert_tf-0.1.0-py3-none-any.whl

Remote workers need this package: build a wheel (``python -m build``) and pass it with
``--extra_package``, or use a custom worker container; the workers of a remote Dask scheduler
need it installed, and must see the inputs, the tokenizer and ``--output-dir``'s parent at the same
paths (a shared filesystem or ``gs://``). Each run writes into a temporary directory beside
``--output-dir`` and moves the shards into place only when the whole pipeline succeeded.

The input is read as ``albert-tf train-tokenizer`` reads it: a directory stands for the ``*.txt``
files directly in it, control characters are cleaned out as the original BERT text cleaning does
(counted in the summary and ``metadata.json``), and an unreadable file (invalid UTF-8, binary,
empty) stops the run, or with ``--on-error skip`` is left out and named in the summary.
"""

from __future__ import annotations

import argparse

NAME = "make-pretraining-data"
HELP = "Write ALBERT pretraining TFRecords (sentence-order prediction + n-gram masked LM) with Apache Beam."


def add_arguments(parser):
    parser.add_argument(
        "--input",
        nargs="+",
        required=True,
        help="input text files, directories (the *.txt files directly in them) or globs (local or gs://...)",
    )
    parser.add_argument("--output-dir", required=True, help="directory for the TFRecord shards and metadata.json")
    vocab = parser.add_mutually_exclusive_group(required=True)
    vocab.add_argument("--spm-model", help="SentencePiece model (the English ALBERT models)")
    vocab.add_argument("--vocab-file", help="WordPiece vocab.txt (the Chinese ALBERT models)")
    parser.add_argument(
        "--lower-case", action=argparse.BooleanOptionalAction, default=True, help="lower-case the text (uncased models)"
    )
    parser.add_argument(
        "--input-format",
        choices=("sentences", "paragraphs"),
        default="sentences",
        help="'sentences': one sentence per line (the original format); 'paragraphs': split each line "
        "into sentences. Blank lines separate documents in both.",
    )
    parser.add_argument("--max-seq-length", type=int, default=512)
    parser.add_argument("--max-predictions-per-seq", type=int, default=20)
    parser.add_argument(
        "--masked-lm-prob", type=float, default=0.15, help="0 writes unmasked instances, for masking on the fly"
    )
    parser.add_argument("--short-seq-prob", type=float, default=0.1)
    parser.add_argument(
        "--dupe-factor", type=int, default=40, help="copies of the corpus with different masks (40 as the original; "
        "use fewer for local runs or with masking on the fly)"
    )
    parser.add_argument("--ngram", type=int, default=3, help="longest n-gram (in words) masked together")
    parser.add_argument("--favor-shorter-ngram", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--whole-word-mask", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument(
        "--random-next-sentence",
        action="store_true",
        help="the original's NSP-style alternative: B from a random document half the time, instead of swapping",
    )
    parser.add_argument(
        "--on-error",
        choices=("raise", "skip"),
        default="raise",
        help="unreadable input files (invalid UTF-8, binary, empty): stop (default) or skip and report them",
    )
    parser.add_argument("--seed", type=int, default=12345)
    parser.add_argument("--num-shards", type=int, default=0, help="output files (0: the runner decides)")
    parser.add_argument(
        "--runner", default="DirectRunner", help="Beam runner: DirectRunner (local), dask, DataflowRunner, FlinkRunner, ..."
    )
    parser.add_argument(
        "--num-workers",
        type=int,
        default=None,
        help="worker processes: of the DirectRunner (default 1, in-process) or of the Dask LocalCluster "
        "(default: one per CPU)",
    )
    parser.add_argument(
        "--dask-address",
        help="with --runner dask: a running Dask scheduler (tcp://host:8786) instead of a LocalCluster",
    )
    parser.add_argument("--overwrite", action="store_true", help="replace the files of an earlier run in --output-dir")
    parser.add_argument("beam_args", nargs=argparse.REMAINDER, help="after '--': further Beam pipeline options")


def run(args) -> int:
    from albert_tf.cli import CommandError
    from albert_tf.data.beam_pipeline import (
        PipelineConfig,
        PipelineError,
        TokenizerSpec,
        make_pretraining_data,
    )
    from albert_tf.data.dask_runner import is_dask_runner
    from albert_tf.data.documents import MalformedInputError
    from albert_tf.data.pretraining_instances import InstanceConfig
    from albert_tf.tokenization import corpus_files

    beam_args = list(args.beam_args or [])
    if beam_args and beam_args[0] == "--":
        beam_args = beam_args[1:]
    dask = is_dask_runner(args.runner)
    if args.num_workers is not None and args.num_workers < 1:
        raise CommandError(f"--num-workers must be at least 1, got {args.num_workers}")
    if args.num_workers is not None and args.num_workers > 1 and not dask and args.runner != "DirectRunner":
        raise CommandError(
            "--num-workers applies to the DirectRunner and dask; give other runners their own options after --"
        )
    if args.dask_address and not dask:
        raise CommandError("--dask-address needs --runner dask")
    if args.dask_address and args.num_workers is not None:
        raise CommandError("--num-workers sizes a local Dask cluster; a running one at --dask-address has its own")
    try:
        spec = TokenizerSpec(spm_model=args.spm_model, vocab_file=args.vocab_file, lower_case=args.lower_case)
        config = PipelineConfig(
            instance=InstanceConfig(
                max_seq_length=args.max_seq_length,
                max_predictions_per_seq=args.max_predictions_per_seq,
                masked_lm_prob=args.masked_lm_prob,
                short_seq_prob=args.short_seq_prob,
                ngram=args.ngram,
                favor_shorter_ngram=args.favor_shorter_ngram,
                do_whole_word_mask=args.whole_word_mask,
                random_next_sentence=args.random_next_sentence,
            ),
            tokenizer=spec,
            piece_style=spec.piece_style,
            dupe_factor=args.dupe_factor,
            seed=args.seed,
            input_format=args.input_format,
            num_shards=args.num_shards,
            on_error=args.on_error,
        )
    except ValueError as e:
        raise CommandError(str(e)) from None
    try:
        summary = make_pretraining_data(
            args.input,
            args.output_dir,
            config,
            runner=args.runner,
            pipeline_args=beam_args,
            overwrite=args.overwrite,
            num_workers=args.num_workers,
            dask_address=args.dask_address,
        )
    except MalformedInputError as e:
        raise CommandError(f"{e} (--on-error skip leaves such files out)") from None
    except (FileNotFoundError, PipelineError) as e:
        raise CommandError(str(e)) from None
    except (OSError, ValueError) as e:
        # A tokenizer that cannot be loaded, a vocabulary without [MASK], ...
        raise CommandError(str(e)) from None
    counters = summary.counters
    print(
        f"wrote {counters.get('instances', 0)} instances from {counters.get('documents', 0)} documents "
        f"in {counters.get('files', 0)} files to {len(summary.files)} shards in {summary.output_dir}"
    )
    if summary.cleaned_files:
        print(corpus_files.describe_cleaning(counters.get("cleaned_characters", 0), list(summary.cleaned_files)))
    if summary.skipped_files:
        print(corpus_files.describe_skipped(summary.skipped_files))
    single = counters.get("single_sentence_documents", 0)
    if single:
        print(f"note: {single} documents have a single sentence; their instances take B from another document")
    return 0
