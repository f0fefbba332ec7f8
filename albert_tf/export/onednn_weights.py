"""oneDNN's frozen-weights mode (`TF_ONEDNN_ASSUME_FROZEN_WEIGHTS`) for a process that only serves.

TensorFlow's oneDNN kernel of a fused MatMul (+ bias, + GELU) takes a weight read from a variable as
one that may change between calls: it keeps the weight in its plain layout and runs oneDNN's
training-mode inner product, which picks a `gemm:jit` kernel for bf16. With the variable set to 1 it
takes every weight as a constant: the inference-mode primitive, the weight reordered once into the
blocked layout of the AMX / AVX512_BF16 `brgemm` kernels and cached by each matmul op. On the bf16
ALBERT-base export (RT dev traffic, 2 cores of a Xeon with AMX; `benchmarks/onednn_frozen_weights.py`):
batch 32 1.31x, batch 1 1.12x, for about 165 MB more memory (one blocked copy of the weights per
matmul op: ALBERT's 12 layers share their weights but not their ops). An fp32 export loses by it
(batch 1 0.68x, batch 32 0.93x, 420 MB more), so `auto` turns it on only where every SavedModel
the process will run is a bf16 export.

Two facts decide where it may be set. TensorFlow reads the variable once, when the first such kernel
is built, so it must be set before any model runs. And a kernel that cached a weight never sees that
weight change: in a process that trains, fine-tunes or assigns weights the answers would be silently
stale. Hence only `albert-tf serve` sets it, at start, before its models load; `LocalModelServer`,
which tests and notebooks run beside training, never does. TF Serving reads the same variable: the
export writes it by the same rule into the export base's `serving.env`
(`albert_tf.export.serving_config`), which `serving/docker-compose.yml` passes to the server.
"""

from __future__ import annotations

import os
from typing import Iterable, List, MutableMapping, Optional, Tuple

ENV_VAR = "TF_ONEDNN_ASSUME_FROZEN_WEIGHTS"
MODES = ("auto", "on", "off")
BF16_PRECISION = "mixed_bfloat16"


def export_precision(version_dir: str) -> str:
    """The precision `export.json` records for an export version ("unknown" when it records none)."""
    from albert_tf.weight_index import is_export, read_export_info

    if not is_export(version_dir):
        return "unknown"
    try:
        info = read_export_info(version_dir)
    except (OSError, ValueError):
        return "unknown"
    return str(info.get("precision") or "unknown") if isinstance(info, dict) else "unknown"


def frozen_weights_wanted(mode: str, version_dirs: Iterable[str]) -> Tuple[bool, str]:
    """(on?, why) for `mode` and the SavedModel versions TensorFlow will run in this process."""
    if mode not in MODES:
        raise ValueError(f"oneDNN frozen-weights mode must be one of {', '.join(MODES)}, got {mode!r}")
    if mode != "auto":
        return mode == "on", f"--onednn-frozen-weights {mode}"
    dirs: List[str] = list(version_dirs)
    if not dirs:
        return False, "no SavedModel runs in TensorFlow here"
    other = [d for d in dirs if export_precision(d) != BF16_PRECISION]
    if other:
        return False, f"{other[0]} is a {export_precision(other[0])} export, not bf16"
    return True, f"every SavedModel served ({len(dirs)}) is a bf16 export"


def apply_frozen_weights(mode: str, version_dirs: Iterable[str], environ: Optional[MutableMapping[str, str]] = None) -> str:
    """Sets `ENV_VAR` in `environ` (default this process's: see the module docstring, only in a
    process that never changes weights, before any model runs) by `mode`; returns one line saying
    what is in force and why. A value the user set in the environment is kept as it is."""
    environ = os.environ if environ is None else environ
    if ENV_VAR in environ:
        frozen_weights_wanted(mode, ())  # still refuses a bad mode
        return f"oneDNN frozen weights: {ENV_VAR}={environ[ENV_VAR]} as set in the environment"
    on, why = frozen_weights_wanted(mode, version_dirs)
    if on:
        environ[ENV_VAR] = "1"
    return f"oneDNN frozen weights: {'on' if on else 'off'} ({why})"
