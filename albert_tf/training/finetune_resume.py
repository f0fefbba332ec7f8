"""Resuming an interrupted fine-tuning run: its build directory, interval checkpoints and the
check that a rerun has the same settings.

`run_finetuning` builds a local `model_dir` in ``.NAME.resume`` beside it (a remote one in the
local temporary directory, under a name derived from the path), not in a fresh staging folder, so
that a run killed outright (SIGKILL, out of memory, a machine restart) leaves what it had done.
After every evaluation interval it writes a `ResumeState`: every model and optimizer variable
(dropout seeds included: `albert_tf.training.checkpointing.training_state`), the evaluation history
and the best evaluation's weights, with ``resume.json`` written last, so a state is complete or
absent. A rerun with the same settings restores it, skips the batches already trained on (the
training data order is seeded) and continues: its final weights are those of an uninterrupted
run, bit for bit on a CPU. A rerun with other settings refuses, naming the first that differs.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tempfile
from typing import Any, Dict, List, Mapping, Optional

from albert_tf import file_io
from albert_tf.errors import ParameterError, param

STATE_FILE = "resume.json"
CHECKPOINT_SUBDIR = "resume"
FORMAT = 1


class ResumeSettingsDiffer(ParameterError):
    """A rerun into a directory whose interrupted run had other settings."""


def resume_dir(model_dir: str) -> str:
    """The fixed build directory of `model_dir`: ``.NAME.resume`` beside a local one."""
    model_dir = os.fspath(model_dir).rstrip("/")
    if file_io.is_remote(model_dir):
        digest = hashlib.sha1(model_dir.encode("utf-8")).hexdigest()[:12]
        name = model_dir.rpartition("/")[2]
        return os.path.join(tempfile.gettempdir(), f".{name}.resume-{digest}")
    parent, name = os.path.split(os.path.abspath(model_dir))
    return os.path.join(parent, f".{name}.resume")


def jsonable(value):
    return json.loads(json.dumps(value, sort_keys=True, default=str))


@dataclasses.dataclass
class ResumeState:
    """What an interrupted run had done when it last checkpointed (at the end of `epoch`)."""

    settings: Dict[str, Any]
    epoch: int
    step: int
    checkpoint: str
    best_weights: Optional[str]
    history: List[Dict[str, Any]]
    best_value: Optional[float]
    best_metrics: Dict[str, float]
    best_step: Optional[int]
    collapsed_in_a_row: int = 0

    def to_dict(self) -> Dict[str, Any]:
        return {"format": FORMAT, **dataclasses.asdict(self)}


def read_state(directory: str) -> Optional[ResumeState]:
    """The committed state of `directory`, or None (no state, or one this version cannot read)."""
    path = os.path.join(directory, STATE_FILE)
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.pop("format", None) != FORMAT:
        return None
    try:
        return ResumeState(**data)
    except TypeError:
        return None


def first_difference(saved: Mapping[str, Any], current: Mapping[str, Any]) -> Optional[str]:
    """The first setting (in `current`'s order) whose value differs from `saved`'s."""
    current = jsonable(dict(current))
    for key, value in current.items():
        if saved.get(key) != value:
            return key
    for key in saved:
        if key not in current:
            return key
    return None


def check_same_settings(directory: str, model_dir: str, state: ResumeState, settings: Mapping[str, Any]) -> None:
    """Raises `ResumeSettingsDiffer` naming the first setting of `settings` that is not the
    interrupted run's."""
    key = first_difference(state.settings, settings)
    if key is None:
        return
    before, now = state.settings.get(key), jsonable(dict(settings)).get(key)
    was = f"{param(key)} unset" if before is None else param(key, before)
    raise ResumeSettingsDiffer(
        f"{model_dir}: an interrupted run with {was} (now {now!r}) can resume there "
        f"(step {state.step}); rerun with its settings to continue it, or pass {param('overwrite', True)} "
        f"to start over (its work in {directory} is then discarded)"
    )


def write_state(directory: str, checkpoint, state: ResumeState, best_weights_source: Optional[str]) -> None:
    """Commits `state`: the variables of `checkpoint`, a copy of the best weights when they are
    new, then ``resume.json``; the previous state's files go once the new one is committed."""
    ckpt_dir = os.path.join(directory, CHECKPOINT_SUBDIR)
    os.makedirs(ckpt_dir, exist_ok=True)
    checkpoint.write(os.path.join(ckpt_dir, state.checkpoint))
    if best_weights_source is not None and state.best_weights and not os.path.exists(
        os.path.join(ckpt_dir, state.best_weights)
    ):
        with file_io.atomic_output(os.path.join(ckpt_dir, state.best_weights), suffix=".weights.h5") as tmp:
            with open(best_weights_source, "rb") as src, open(tmp, "wb") as dst:
                dst.write(src.read())
    file_io.atomic_write_json(os.path.join(directory, STATE_FILE), jsonable(state.to_dict()), ensure_ascii=True)
    for name in os.listdir(ckpt_dir):
        if not (name.startswith(state.checkpoint + ".") or name == state.best_weights):
            path = os.path.join(ckpt_dir, name)
            file_io.remove_tree(path) if os.path.isdir(path) else os.remove(path)


def restore(directory: str, checkpoint, state: ResumeState) -> None:
    """Restores the variables of `state` into `checkpoint`'s objects (every one must match)."""
    checkpoint.read(os.path.join(directory, CHECKPOINT_SUBDIR, state.checkpoint)).assert_consumed()


def best_weights_path(directory: str, state: ResumeState) -> Optional[str]:
    if not state.best_weights:
        return None
    return os.path.join(directory, CHECKPOINT_SUBDIR, state.best_weights)


def finish(directory: str) -> None:
    """Removes the resume files from a completed build directory before it is published."""
    file_io.remove_tree(os.path.join(directory, CHECKPOINT_SUBDIR))
    try:
        os.remove(os.path.join(directory, STATE_FILE))
    except FileNotFoundError:
        pass
