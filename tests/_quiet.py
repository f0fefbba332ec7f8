"""What a command may print on stderr besides its own lines: the TensorFlow runtime's start-up
notices that no flag of ours can turn off (absl logs them before `TF_CPP_MIN_LOG_LEVEL` applies).
Everything else on stderr is a new warning, and `unexpected_stderr` returns it."""

from __future__ import annotations

import re
from typing import List

RUNTIME_NOTICES = [
    re.compile(p) for p in (
        r"^WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR$",
        r"^I0000 .*device_compiler\.h:\d+\] Compiled cluster using XLA!",
        r"^I0000 .*mlir_graph_optimization_pass\.cc:\d+\] MLIR V1 optimization pass is not enabled$",
        r"^\S+ \S+: E tensorflow/core/util/util\.cc:\d+\] oneDNN supports DT_INT64 only on platforms with AVX-512",
        r"^\S+ \S+: I tensorflow/core/framework/local_rendezvous\.cc:\d+\] Local rendezvous is aborting with status: OUT_OF_RANGE",
    )
]
# The package's own lines on stderr (`albert-tf pretrain`'s log, progress of long evaluations, one-line notices
# such as `from_pretrained`'s new head).
OWN_LINES = [
    re.compile(p) for p in (r"^INFO albert_tf\.", r"^albert_tf: ", r"^\w[^:]*: \d+(/\d+)? batches.*, \d+s(, done)?$")
]


def unexpected_stderr(stderr: str) -> List[str]:
    """The lines of `stderr` that are neither runtime notices nor the package's progress lines."""
    return [
        line for line in stderr.splitlines()
        if line.strip() and not any(p.search(line) for p in RUNTIME_NOTICES + OWN_LINES)
    ]
