"""The `albert-tf` command line: one module per subcommand, each with `add_parser` and `run`.

A subcommand module defines `NAME`, `HELP`, `add_arguments(parser)` and `run(args) -> int`.
Heavy imports (TensorFlow) happen inside `run`, so `albert-tf --help` stays fast. `main` sets
TensorFlow's logging environment first (`quiet_tensorflow_startup`).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import sys
from typing import List, Optional

from albert_tf import runtime_env as _runtime_env

# Order is the order shown in `albert-tf --help`.
SUBCOMMAND_MODULES = [
    "albert_tf.cli.info",
    "albert_tf.cli.train_tokenizer",
    "albert_tf.cli.make_pretraining_data",
    "albert_tf.cli.pretrain",
    "albert_tf.cli.finetune",
    "albert_tf.cli.distill",
    "albert_tf.cli.evaluate",
    "albert_tf.cli.predict",
    "albert_tf.cli.bulk_infer",
    "albert_tf.cli.export",
    "albert_tf.cli.serve",
    "albert_tf.cli.data_skew",
    "albert_tf.cli.pipeline",
]


class CommandError(Exception):
    """A user error the CLI reports as one line, exiting with status 2 (or the subclass's
    `exit_code`)."""

    exit_code = 2


@contextlib.contextmanager
def library_errors():
    """Reports the library's user errors (`albert_tf.errors.ParameterError`: `TaskError` and the
    rest) as `CommandError`s: the same one-line message with its parameters as flags
    (``overwrite=True`` reads ``--overwrite``), exit status 2."""
    from albert_tf.errors import ParameterError

    try:
        yield
    except ParameterError as e:
        raise CommandError(e.cli_message) from None


def build_parser() -> argparse.ArgumentParser:
    from albert_tf import __version__

    parser = argparse.ArgumentParser(prog="albert-tf", description="ALBERT for TensorFlow 2 / Keras 3.")
    parser.add_argument("--version", action="version", version=f"albert-tf {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for module_name in SUBCOMMAND_MODULES:
        module = importlib.import_module(module_name)
        sub = subparsers.add_parser(module.NAME, help=module.HELP, description=module.HELP)
        module.add_arguments(sub)
        sub.set_defaults(_run=module.run)
    return parser


_NON_GPU_DEVICE_TYPES = _runtime_env.NON_GPU_DEVICE_TYPES
_cuda_driver_present = _runtime_env.cuda_driver_present
_has_device_plugins = _runtime_env.has_device_plugins


def quiet_tensorflow_startup() -> None:
    """`albert_tf.runtime_env.quiet_tensorflow_startup`, with this module's driver and plugin probes."""
    _runtime_env.quiet_tensorflow_startup(lambda: _cuda_driver_present(), lambda: _has_device_plugins())


def main(argv: Optional[List[str]] = None) -> int:
    quiet_tensorflow_startup()
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
