"""The output directory of a fine-tuning run: its file names, the checks before a run may write
it, its atomic publication (`COMPLETE` last), and reading a completed one back.

`albert_tf.training.finetuning.run_finetuning` builds the directory in staging and `publish`es it
whole; nothing half-written is ever at `model_dir`.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict

from albert_tf import file_io
from albert_tf.errors import param
from albert_tf.training.finetuning_config import FinetuningError

MODEL_FILE = "model.keras"
BEST_WEIGHTS_FILE = "best.weights.h5"
RUN_INFO_FILE = "finetuning.json"
EVAL_HISTORY_FILE = "eval_history.jsonl"
COMPLETE_FILE = "COMPLETE"
LOG_SUBDIR = "logs"


class ModelDirExistsError(FinetuningError, FileExistsError):
    """`model_dir` holds a run or other files, and `overwrite` is off."""


def is_complete(model_dir: str) -> bool:
    """Whether `model_dir` is the finished output of a fine-tuning run (its `COMPLETE` exists)."""
    import tensorflow as tf

    return tf.io.gfile.exists(os.path.join(model_dir, COMPLETE_FILE))


def check_writable_target(model_dir: str, overwrite: bool) -> None:
    import tensorflow as tf

    if not tf.io.gfile.exists(model_dir):
        return
    if not tf.io.gfile.isdir(model_dir):
        raise ModelDirExistsError(f"{param('model_dir')} {model_dir} exists and is not a directory")
    if tf.io.gfile.listdir(model_dir) and not overwrite:
        what = "a completed fine-tuning run" if is_complete(model_dir) else "a non-empty directory"
        raise ModelDirExistsError(
            f"{param('model_dir')} {model_dir} is {what}; pass {param('overwrite', True)} to replace it"
        )


def publish(staging: str, model_dir: str, overwrite: bool) -> None:
    """Makes the finished staging directory `model_dir` (replacing an old one if allowed); on a
    remote `model_dir` the files are copied up with `COMPLETE` last, so a reader never sees it
    before every other file is there."""
    check_writable_target(model_dir, overwrite)
    file_io.publish_directory(staging, model_dir, overwrite=overwrite, order=lambda rel: rel == COMPLETE_FILE)


def read_run_info(model_dir: str) -> Dict[str, Any]:
    """The `finetuning.json` of a completed run.

    Raises:
        FileNotFoundError: `model_dir` is not a completed fine-tuning output.
        FinetuningError: the file is malformed.
    """
    import tensorflow as tf

    if not is_complete(model_dir):
        raise FileNotFoundError(
            f"{model_dir} is not a completed fine-tuning directory (no {COMPLETE_FILE} file)"
        )
    path = os.path.join(model_dir, RUN_INFO_FILE)
    try:
        with tf.io.gfile.GFile(path, "r") as f:
            info = json.load(f)
    except tf.errors.NotFoundError:
        raise FileNotFoundError(f"{path} is missing") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise FinetuningError(f"{path} is not valid JSON: {e}") from None
    if not isinstance(info, dict):
        raise FinetuningError(f"{path} must hold a JSON object")
    return info


def load_finetuned_model(model_dir: str, compile: bool = False):
    """The task model saved by `run_finetuning` in `model_dir` (with the best weights).

    The task modules (`albert_tf.tasks.*`) register their model classes with Keras when
    imported; import the module of the task before calling this.

    Raises:
        FileNotFoundError: `model_dir` is not a completed fine-tuning output.
    """
    import keras

    if not is_complete(model_dir):
        raise FileNotFoundError(
            f"{model_dir} is not a completed fine-tuning directory (no {COMPLETE_FILE} file)"
        )
    return keras.saving.load_model(os.path.join(model_dir, MODEL_FILE), compile=compile)
