"""The checkpoints of a training run: `training_state` (every model and optimizer variable, the
dropout seed generators included) and `restore_newest_readable`, which resumes from the newest
checkpoint that reads back completely, passing over (with a warning) the ones that do not.
"""

from __future__ import annotations

import logging
import os
import re
from typing import List

from albert_tf.training.pretraining_config import PretrainingError

# Its lines are the run's: logged under the run's name, as `albert-tf pretrain` prints them.
logger = logging.getLogger("albert_tf.training.pretraining")

CHECKPOINT_SUBDIR = "checkpoints"
CHECKPOINT_NAME = "ckpt"
_CHECKPOINT_NUMBER = re.compile(r"-(\d+)$")


def _checkpoint_candidates(directory: str) -> List[str]:
    """Checkpoint prefixes in `directory`, newest (highest step) first.

    Both the manager's state file and the ``.index`` files on disk are consulted: the state
    file may name a checkpoint whose index is gone, and a crash between writing a checkpoint and
    updating the state file leaves one only the disk knows.
    """
    import tensorflow as tf

    prefixes = set()
    state = tf.train.get_checkpoint_state(directory)
    if state is not None:
        # Relative entries come back joined to `directory` already; joining again named a
        # checkpoint that does not exist (and warned it "unreadable") for a relative model_dir.
        prefixes.update(state.all_model_checkpoint_paths)
    for index in tf.io.gfile.glob(os.path.join(directory, f"{CHECKPOINT_NAME}-*.index")):
        prefixes.add(index[: -len(".index")])
    numbered = []
    for prefix in prefixes:
        match = _CHECKPOINT_NUMBER.search(prefix)
        if match:
            numbered.append((int(match.group(1)), prefix))
    return [p for _, p in sorted(numbered, reverse=True)]


def _read_fully(prefix: str) -> None:
    """Reads every tensor of a checkpoint once (one at a time, so memory stays one tensor).

    Raises whatever the reader raises for a missing index or shard, a truncated file
    (`IndexError`: "Read less bytes than requested") or a checksum mismatch (`DataLossError`).
    Checking before restoring keeps "unreadable" apart from "does not match the model" and
    never assigns half a checkpoint; it costs one extra read of the checkpoint.
    """
    import tensorflow as tf

    reader = tf.train.load_checkpoint(prefix)
    for name in reader.get_variable_to_shape_map():
        reader.get_tensor(name)


def restore_newest_readable(checkpoint, directory: str):
    """Restores the newest checkpoint of `directory` that reads back completely.

    Unreadable checkpoints are skipped with a warning, not deleted: training overwrites them
    when it reaches their step again.

    Args:
        checkpoint: The `tf.train.Checkpoint` to restore into.
        directory: A `CheckpointManager` directory.

    Returns:
        `(restored_prefix or None, [unreadable prefixes skipped])`.

    Raises:
        PretrainingError: A readable checkpoint does not match the model (a different config).
    """
    import tensorflow as tf

    skipped = []
    for prefix in _checkpoint_candidates(directory):
        try:
            _read_fully(prefix)
        except (tf.errors.OpError, IndexError) as e:
            message = str(e).strip().splitlines()[0] if str(e).strip() else ""
            logger.warning(
                "checkpoint %s is unreadable (%s: %s); falling back to the previous checkpoint",
                prefix,
                type(e).__name__,
                message,
            )
            skipped.append(prefix)
            continue
        try:
            checkpoint.restore(prefix).assert_existing_objects_matched()
        except (AssertionError, ValueError, tf.errors.InvalidArgumentError) as e:
            raise PretrainingError(
                f"checkpoint {prefix} does not match this model and optimizer (was the run started with "
                f"another config?): {e}"
            ) from None
        return prefix, skipped
    return None, skipped


def training_state(model, optimizer):
    """The `tf.train.Checkpoint` of a run: every model and optimizer variable.

    Lists rather than the Keras objects themselves: Keras 3 models expose only part of their
    variables to TensorFlow's object graph (not the dropout seed generators, and the encoder's
    weights only through the optimizer), so the variables are collected explicitly, in their
    deterministic creation order.
    """
    import tensorflow as tf

    return tf.train.Checkpoint(model=list(model.variables), optimizer=list(optimizer.variables))
