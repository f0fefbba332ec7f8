"""The `albert-tf` command line: one module per subcommand, each with `add_parser` and `run`.

A subcommand module defines `NAME`, `HELP`, `add_arguments(parser)` and `run(args) -> int`.
Heavy imports (TensorFlow) happen inside `run`, so `albert-tf --help` stays fast. `main` sets
TensorFlow's logging environment first (`quiet_tensorflow_startup`).
"""

from __future__ import annotations

import argparse
import contextlib
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
    parser = argparse.ArgumentParser(prog="albert-tf", description="ALBERT for TensorFlow 2 / Keras 3.")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for module_name in SUBCOMMAND_MODULES:
        module = importlib.import_module(module_name)
        sub = subparsers.add_parser(module.NAME, help=module.HELP, description=module.HELP)
        module.add_arguments(sub)
        sub.set_defaults(_run=module.run)
    return parser


# Device factories other than the GPU's: every one TensorFlow or its TPU runtime registers.
_NON_GPU_DEVICE_TYPES = "CPU,TPU,TPU_SYSTEM,XLA_CPU"


def _cuda_driver_present() -> bool:
    """Whether the CUDA driver library loads, exactly as TensorFlow's CUDA stub looks for it."""
    import ctypes

    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True


def _has_device_plugins() -> bool:
    """Whether PluggableDevice plugins (loaded by `import tensorflow`) are installed."""
    for entry in sys.path:
        folder = os.path.join(entry or ".", "tensorflow-plugins")
        if os.path.isdir(folder) and os.listdir(folder):
            return True
    return False


def quiet_tensorflow_startup() -> None:
    """Sets TensorFlow's logging environment before TensorFlow is imported.

    * ``TF_CPP_MIN_LOG_LEVEL=1``: no C++ INFO lines (CUDA probing, CPU features); warnings and
      errors still show.
    * Without a CUDA driver (``libcuda.so.1`` does not load, so no GPU can be used), the GPU
      device factory is left out (``TF_ENABLED_DEVICE_TYPES``): probing it is what logs
      "failed call to cuInit" at error level in every command. ``CUDA_VISIBLE_DEVICES`` is not
      touched, and a machine with a driver (or with device plugins) keeps every device.

    A variable the user has set is left as it is.
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    if (
        "TF_ENABLED_DEVICE_TYPES" not in os.environ
        and sys.platform.startswith("linux")
        and not _cuda_driver_present()
        and not _has_device_plugins()
    ):
        os.environ["TF_ENABLED_DEVICE_TYPES"] = _NON_GPU_DEVICE_TYPES


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
