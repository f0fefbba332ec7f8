"""Every Python block of the README runs in the suite, as written: the library blocks here (the
encoder, the checkpoints, pretraining, fine-tuning with its collapse check, in order in one
process, as a reader pastes them), the blocks on the command line's and the main job's models in
`tests/test_first_hour.py` and `tests/test_first_hour_main_job.py`."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# The first line of each block the first-hour tests run (on the models they make first).
RUN_BY_THE_FIRST_HOUR = (
    "from albert_tf import AlbertTextClassifier",  # the quickstart, and the API block on rt/model
    "from albert_tf.tasks import FinetuneSettings",
)
# The first line of each library block this module runs, in the README's order.
LIBRARY_BLOCKS = (
    "import numpy as np",
    "from albert_tf.checkpoints.huggingface import",
    "import tensorflow as tf",
    "from albert_tf.data.features import examples_dataset",
)


def python_blocks():
    return re.findall(r"```python\n(.*?)```", (REPO / "README.md").read_text(encoding="utf-8"), flags=re.S)


def test_every_python_block_is_run_by_the_suite():
    starts = [block.splitlines()[0] for block in python_blocks()]
    unrun = [s for s in starts if not s.startswith(RUN_BY_THE_FIRST_HOUR + LIBRARY_BLOCKS)]
    assert not unrun, f"README blocks no test runs: {unrun}"
    library = [s for s in starts if s.startswith(LIBRARY_BLOCKS)]
    assert [next(p for p in LIBRARY_BLOCKS if s.startswith(p)) for s in library] == list(LIBRARY_BLOCKS)


@pytest.mark.slow
def test_the_library_blocks_run_in_order_as_written(tmp_path):
    blocks = [b for b in python_blocks() if b.splitlines()[0].startswith(LIBRARY_BLOCKS)]
    (tmp_path / "out").mkdir()
    run = subprocess.run([sys.executable, "-c", "\n".join(blocks)], cwd=tmp_path, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    printed = run.stdout
    assert "11683584" in printed.replace(",", "")  # count_parameters of base-v2
    assert "missing" in printed.lower() or "loaded" in printed.lower(), printed
    assert "config optimization: 16 steps (warmup 1)" in printed
    assert (tmp_path / "out" / "model.safetensors").is_file() and (tmp_path / "out" / "finetuned" / "COMPLETE").is_file()
