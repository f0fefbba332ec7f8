"""What a finished pretraining run exports, each file published atomically (temporary name, then
rename): ``pretrainer.keras`` (the model with its heads), ``encoder.keras``, and an
original-format TF1 checkpoint ``tf1/model.ckpt`` with ``tf1/albert_config.json``.
"""

from __future__ import annotations

import os
import tempfile
from typing import Dict

from albert_tf import file_io
from albert_tf.config import AlbertConfig

PRETRAINER_FILE = "pretrainer.keras"
ENCODER_FILE = "encoder.keras"
TF1_SUBDIR = "tf1"
TF1_CHECKPOINT = "model.ckpt"
ALBERT_CONFIG_FILE = "albert_config.json"


def save_keras_atomically(model, path: str) -> None:
    # Keras insists on the ".keras" ending, temporary name included.
    with file_io.atomic_output(path, suffix=".keras") as tmp:
        model.save(tmp)


def export_tf1(model, albert_config: AlbertConfig, directory: str) -> Dict[str, str]:
    """The original-format checkpoint and `albert_config.json` in `directory`."""
    import tensorflow as tf

    from albert_tf.checkpoints.original import save_original_checkpoint

    if not file_io.is_remote(directory):
        os.makedirs(directory, exist_ok=True)
        prefix = save_original_checkpoint(
            os.path.join(directory, TF1_CHECKPOINT), model.encoder, model.mlm_head, model.sentence_head
        )
        config_path = os.path.join(directory, ALBERT_CONFIG_FILE)
        albert_config.to_json_file(config_path)
        return {"tf1_checkpoint": prefix, "albert_config": config_path}
    # `save_original_checkpoint` writes local files: stage them, then copy, index last (a
    # prefix without its index is no checkpoint) and the state file after it.
    tf.io.gfile.makedirs(directory)
    staging = tempfile.mkdtemp(prefix="albert_tf1_")
    try:
        save_original_checkpoint(
            os.path.join(staging, TF1_CHECKPOINT), model.encoder, model.mlm_head, model.sentence_head
        )
        albert_config.to_json_file(os.path.join(staging, ALBERT_CONFIG_FILE))
        file_io.copy_tree(staging, directory, order=lambda n: (n.endswith(".index"), n == "checkpoint"))
    finally:
        file_io.remove_tree(staging)
    return {"tf1_checkpoint": f"{directory}/{TF1_CHECKPOINT}", "albert_config": f"{directory}/{ALBERT_CONFIG_FILE}"}
