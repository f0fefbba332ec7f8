"""The `albert-tf` command line: one module per subcommand, each with `add_parser` and `run`.

A subcommand module defines `NAME`, `HELP`, `add_arguments(parser)` and `run(args) -> int`.
Heavy imports (TensorFlow) happen inside `run`, so `albert-tf --help` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import List, Optional

# Order is the order shown in `albert-tf --help`.
SUBCOMMAND_MODULES = [
    "albert_tf.cli.info",
    "albert_tf.cli.train_tokenizer",
    "albert_tf.cli.make_pretraining_data",
    "albert_tf.cli.pretrain",
    "albert_tf.cli.finetune",
    "albert_tf.cli.evaluate",
    "albert_tf.cli.predict",
    "albert_tf.cli.export",
    "albert_tf.cli.serve",
    "albert_tf.cli.pipeline",
]


class CommandError(Exception):
    """A user error the CLI reports as one line, exiting with status 2 (or the subclass's
    `exit_code`)."""

    exit_code = 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="albert-tf", description="ALBERT for TensorFlow 2 / Keras 3.")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for module_name in SUBCOMMAND_MODULES:
        module = importlib.import_module(module_name)
        sub = subparsers.add_parser(module.NAME, help=module.HELP, description=module.HELP)
        module.add_arguments(sub)
        sub.set_defaults(_run=module.run)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    # TensorFlow's C++ INFO lines (CUDA probing, CPU features) are noise on a terminal.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args._run(args) or 0)
    except CommandError as e:
        print(f"albert-tf {args.command}: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
