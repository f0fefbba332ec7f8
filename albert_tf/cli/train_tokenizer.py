"""`albert-tf train-tokenizer`: train a SentencePiece model, or build a WordPiece vocab.txt.

SentencePiece (default) follows the original ALBERT recipe (`train_sentencepiece`) and writes
`<prefix>.model` and `<prefix>.vocab`; `--wordpiece` builds a BERT vocabulary for the Chinese
models (`build_wordpiece_vocab`) and writes `<prefix>.txt`.

The input is read as `albert-tf make-pretraining-data` reads it: a directory stands for the
`*.txt` files directly in it, control characters are cleaned out as the original BERT text
cleaning does (counted in the summary), and an unreadable file (invalid UTF-8, binary) stops the
run, or with `--on-error skip` is left out and named in the summary.
"""

from __future__ import annotations

import argparse

from albert_tf.cli import CommandError
# Both modules import sentencepiece / tensorflow-text only inside the training functions.
from albert_tf.tokenization import corpus_files, sentencepiece_vocab, wordpiece_vocab

_SENTENCEPIECE_DEFAULT_VOCAB = sentencepiece_vocab.DEFAULT_VOCAB_SIZE
_WORDPIECE_DEFAULT_VOCAB = wordpiece_vocab.DEFAULT_VOCAB_SIZE

NAME = "train-tokenizer"
HELP = "Train a SentencePiece model (or, with --wordpiece, a WordPiece vocab.txt) from raw text files."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "inputs",
        nargs="+",
        metavar="INPUT",
        help="UTF-8 text files, directories (the *.txt files directly in them) or glob patterns, "
        "one sentence/paragraph per line",
    )
    parser.add_argument(
        "--output-prefix",
        required=True,
        help="output path without extension: writes PREFIX.model and PREFIX.vocab (PREFIX.txt with --wordpiece)",
    )
    parser.add_argument(
        "--vocab-size",
        type=int,
        default=None,
        help=f"vocabulary size (default {_SENTENCEPIECE_DEFAULT_VOCAB}; {_WORDPIECE_DEFAULT_VOCAB} with --wordpiece)",
    )
    parser.add_argument(
        "--model-type",
        choices=("unigram", "bpe"),
        default=None,
        help="SentencePiece model type (default unigram, as the original)",
    )
    parser.add_argument("--wordpiece", action="store_true", help="build a WordPiece vocab.txt instead")
    parser.add_argument(
        "--lower-case",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="lower-case the text, for uncased models (default: on)",
    )
    parser.add_argument(
        "--input-sentence-size",
        type=int,
        default=None,
        help="SentencePiece: train on a random sample of at most this many sentences (default 10000000; 0 = all)",
    )
    parser.add_argument(
        "--character-coverage",
        type=float,
        default=None,
        help="SentencePiece: share of characters covered (default 0.99995)",
    )
    parser.add_argument(
        "--hard-vocab-limit",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="SentencePiece: fail when the corpus cannot fill --vocab-size (default); "
        "--no-hard-vocab-limit accepts a smaller vocabulary",
    )
    parser.add_argument(
        "--max-unique-chars",
        type=int,
        default=None,
        help="WordPiece: number of characters kept (default vocab size / 4)",
    )
    parser.add_argument(
        "--on-error",
        choices=("raise", "skip"),
        default="raise",
        help="unreadable input files (invalid UTF-8, binary): stop (default) or skip and report them",
    )
    parser.add_argument("--seed", type=int, default=None, help="SentencePiece: random seed of the sentence sampling")
    parser.add_argument("--verbose", action="store_true", help="show SentencePiece's training log")


def run(args: argparse.Namespace) -> int:
    if args.vocab_size is not None and args.vocab_size <= 0:
        raise CommandError(f"--vocab-size must be positive, got {args.vocab_size}")
    if args.wordpiece:
        sentencepiece_only = {
            "--model-type": args.model_type,
            "--input-sentence-size": args.input_sentence_size,
            "--character-coverage": args.character_coverage,
            "--seed": args.seed,
        }
        given = [flag for flag, value in sentencepiece_only.items() if value is not None]
        if not args.hard_vocab_limit:
            given.append("--no-hard-vocab-limit")
        if given:
            raise CommandError(f"{', '.join(given)} apply to SentencePiece only, not with --wordpiece")
        return _run_wordpiece(args)
    if args.max_unique_chars is not None:
        raise CommandError("--max-unique-chars applies to --wordpiece only")
    return _run_sentencepiece(args)


def _run_sentencepiece(args: argparse.Namespace) -> int:
    options = {}
    if args.input_sentence_size is not None:
        options["input_sentence_size"] = args.input_sentence_size
    if args.character_coverage is not None:
        options["character_coverage"] = args.character_coverage
    try:
        result = sentencepiece_vocab.train_sentencepiece(
            args.inputs,
            args.output_prefix,
            args.vocab_size or _SENTENCEPIECE_DEFAULT_VOCAB,
            model_type=args.model_type or "unigram",
            lower_case=args.lower_case,
            hard_vocab_limit=args.hard_vocab_limit,
            seed=args.seed,
            verbose=args.verbose,
            on_error=args.on_error,
            **options,
        )
    except corpus_files.UnreadableTextError as e:
        raise CommandError(f"{e} (--on-error skip leaves such files out)") from None
    except (FileNotFoundError, ValueError) as e:
        raise CommandError(str(e)) from None
    print(
        f"wrote {result.model_file} and {result.vocab_file}: {result.vocab_size} pieces from "
        f"{result.num_training_sentences} of {result.num_sentences} sentences in {result.seconds:.1f}s"
    )
    _print_input_report(result)
    return 0


def _run_wordpiece(args: argparse.Namespace) -> int:
    try:
        result = wordpiece_vocab.build_wordpiece_vocab(
            args.inputs,
            args.output_prefix + ".txt",
            args.vocab_size or _WORDPIECE_DEFAULT_VOCAB,
            lower_case=args.lower_case,
            max_unique_chars=args.max_unique_chars,
            on_error=args.on_error,
        )
    except corpus_files.UnreadableTextError as e:
        raise CommandError(f"{e} (--on-error skip leaves such files out)") from None
    except (FileNotFoundError, ValueError) as e:
        raise CommandError(str(e)) from None
    print(
        f"wrote {result.vocab_file}: {result.vocab_size} tokens from {result.num_words} distinct words "
        f"in {result.num_lines} lines in {result.seconds:.1f}s"
    )
    _print_input_report(result)
    return 0


def _print_input_report(result) -> None:
    # The same lines as make-pretraining-data prints for the same input.
    if result.cleaned_files:
        print(corpus_files.describe_cleaning(result.cleaned_characters, result.cleaned_files))
    if result.skipped_files:
        print(corpus_files.describe_skipped(result.skipped_files))
