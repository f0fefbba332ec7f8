"""Atomic step outputs: build a directory beside its final name, rename it into place when done."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from typing import Any, Dict, Iterator

SUMMARY_FILE = "summary.json"


@contextlib.contextmanager
def staged_directory(output_dir: str) -> Iterator[str]:
    """Yields a fresh directory that becomes `output_dir` when the block finishes without error.

    The staging directory sits beside `output_dir` (same filesystem, so the rename is atomic); on
    an error it is removed and `output_dir` is left as it was. An existing *empty* `output_dir`
    (orchestrators create artifact folders ahead of the step) is replaced; a non-empty one is
    refused, as it would be another run's output.
    """
    output_dir = os.path.abspath(output_dir)
    if os.path.isdir(output_dir) and os.listdir(output_dir):
        raise FileExistsError(f"output directory {output_dir} is not empty; a step never overwrites an output")
    parent, name = os.path.split(output_dir)
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=f".{name}.partial-", dir=parent)
    try:
        yield staging
        if os.path.isdir(output_dir):
            os.rmdir(output_dir)
        os.rename(staging, output_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def write_summary(directory: str, summary: Dict[str, Any]) -> None:
    """Writes `summary.json` (what the step did: counts, paths, metrics) into `directory`."""
    with open(os.path.join(directory, SUMMARY_FILE), "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=2, sort_keys=True, ensure_ascii=False)
        f.write("\n")


def read_summary(directory: str) -> Dict[str, Any]:
    """The `summary.json` a step wrote into `directory`.

    Raises:
        FileNotFoundError: `directory` is not a finished step output.
    """
    path = os.path.join(directory, SUMMARY_FILE)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{directory} is not a finished pipeline step output (no {SUMMARY_FILE})")
    with open(path, encoding="utf-8") as f:
        return json.load(f)
