"""TensorFlow's start-up environment, set before TensorFlow is imported: no C++ INFO lines, and no
GPU probing where no GPU can be used (`quiet_tensorflow_startup`).

`import albert_tf` applies it when TensorFlow is not imported yet, so a Python session sees the
same quiet start as the `albert-tf` command, which applies it first thing in `main`.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from typing import Callable, Iterator, Optional, Sequence

# Device factories other than the GPU's: every one TensorFlow or its TPU runtime registers.
NON_GPU_DEVICE_TYPES = "CPU,TPU,TPU_SYSTEM,XLA_CPU"

# What TensorFlow and absl write on stderr as TensorFlow starts, whatever TF_CPP_MIN_LOG_LEVEL
# says (absl logs them before or beside TensorFlow's own logging): nothing a user can act on, so
# a command's summary leaves them out (`native_notices_dropped`) and a log file keeps them.
TENSORFLOW_STARTUP_NOTICES = tuple(re.compile(p) for p in (
    r"All log messages before absl::InitializeLog\(\) is called are written to STDERR",
    r"MLIR V1 optimization pass is not enabled",
    r"oneDNN custom operations are on",
    r"This TensorFlow binary is optimized to use available CPU instructions",
    r"rebuild TensorFlow with the appropriate compiler flags",
    r"Unable to register (cuDNN|cuFFT|cuBLAS) factory",
    r"computation placer already registered",
    r"TF-TRT Warning: Could not find TensorRT",
    r"Could not find cuda drivers on your machine",
))


def is_startup_notice(line: str) -> bool:
    """Whether `line` is one of TensorFlow's start-up notices (`TENSORFLOW_STARTUP_NOTICES`)."""
    return any(p.search(line) for p in TENSORFLOW_STARTUP_NOTICES)


def cuda_driver_present() -> bool:
    """Whether the CUDA driver library loads, exactly as TensorFlow's CUDA stub looks for it."""
    import ctypes

    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True


def has_device_plugins() -> bool:
    """Whether PluggableDevice plugins (loaded by `import tensorflow`) are installed."""
    for entry in sys.path:
        folder = os.path.join(entry or ".", "tensorflow-plugins")
        if os.path.isdir(folder) and os.listdir(folder):
            return True
    return False


def quiet_tensorflow_startup(
    driver_present: Callable[[], bool] = cuda_driver_present,
    device_plugins: Callable[[], bool] = has_device_plugins,
) -> None:
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
        and not driver_present()
        and not device_plugins()
    ):
        os.environ["TF_ENABLED_DEVICE_TYPES"] = NON_GPU_DEVICE_TYPES


@contextlib.contextmanager
def native_notices_dropped(notices: Sequence[re.Pattern], kept_in: Optional[str] = None) -> Iterator[None]:
    """Runs the block with the process's stderr (file descriptor 2, where C++ code logs) captured,
    then writes back every captured line that matches none of `notices`.

    For runtime notices that say nothing the user can act on and that no setting turns off (the
    TFLite converter's "Ignored output_format" warnings, `TENSORFLOW_STARTUP_NOTICES`); anything
    else, errors included, still reaches stderr, after the block. `kept_in`: a log file the
    dropped lines are appended to.
    """
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as capture:
        os.dup2(capture.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            lines = capture.read().decode("utf-8", "replace").splitlines(keepends=True)
            dropped = [line for line in lines if any(p.search(line) for p in notices)]
            kept = "".join(line for line in lines if not any(p.search(line) for p in notices))
            if kept_in and dropped:
                with open(kept_in, "a", encoding="utf-8") as log:
                    log.write("".join(dropped))
            if kept:
                os.write(2, kept.encode("utf-8"))
