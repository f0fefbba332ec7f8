"""The output directory of the pretraining-data pipeline: its file names (``part-SSSSS-of-NNNNN.tfrecord``
shards, ``metadata.json``), the check before a run may write it, its publication once the run has
succeeded (`move_into_place`), and reading its ``metadata.json`` back (`read_metadata`).
"""

from __future__ import annotations

import json
import os
import re
from typing import Dict, List

from albert_tf import file_io
from albert_tf.data.beam_import import FileSystems

METADATA_FILE = "metadata.json"
SHARD_PREFIX = "part"
SHARD_SUFFIX = ".tfrecord"


class PipelineError(RuntimeError):
    """The pipeline could not produce output; no output directory was written."""



def join(directory: str, name: str) -> str:
    return FileSystems.join(directory, name)


def list_dir(directory: str) -> List[str]:
    result = FileSystems.match([join(directory, "*")])[0]
    return sorted(m.path for m in result.metadata_list)


_OUR_FILES = re.compile(
    rf"^(?:{re.escape(METADATA_FILE)}|{SHARD_PREFIX}-\d{{5}}-of-\d{{5}}{re.escape(SHARD_SUFFIX)})$"
)



def check_output_dir(output_dir: str, overwrite: bool) -> List[str]:
    """The files of an earlier run in `output_dir`, which the new run will replace.

    Raises:
        PipelineError: `output_dir` is not empty and not `overwrite`, or holds files this pipeline
            did not write.
    """
    existing = list_dir(output_dir) if FileSystems.exists(output_dir) else []
    if existing and not overwrite:
        raise PipelineError(f"output directory {output_dir} is not empty (pass overwrite to replace an earlier run)")
    foreign = [p for p in existing if not _OUR_FILES.match(os.path.basename(p))]
    if foreign:
        raise PipelineError(
            f"output directory {output_dir} has files this pipeline did not write "
            f"({os.path.basename(foreign[0])}, ...); refusing to overwrite it"
        )
    return existing


def move_into_place(temp_dir: str, output_dir: str, shards: List[str], existing: List[str]) -> None:
    """Replaces the `existing` files of `output_dir` by the `shards` of the run staged in `temp_dir`."""
    if existing:
        FileSystems.delete(existing)
    if not FileSystems.exists(output_dir) and not file_io.is_remote(output_dir):
        # Locally a directory rename is atomic: the output appears complete or not at all.
        others = [p for p in list_dir(temp_dir) if p not in shards]
        if others:
            FileSystems.delete(others)
        file_io.publish_directory(temp_dir, output_dir)
        return
    if not FileSystems.exists(output_dir):
        FileSystems.mkdirs(output_dir)
    FileSystems.rename(shards, [join(output_dir, os.path.basename(p)) for p in shards])


def read_metadata(output_dir: str) -> Dict:
    """The ``metadata.json`` of an output directory (settings, vocabulary ids, counters)."""
    path = join(output_dir, METADATA_FILE)
    if not FileSystems.exists(path):
        raise FileNotFoundError(f"{path} does not exist; is {output_dir} an output of make-pretraining-data?")
    with FileSystems.open(path) as f:
        return json.loads(f.read().decode("utf-8"))
