"""`AlbertTaskModel`: the one template every fine-tuning head follows.

A task model is the encoder plus a head layer. `call` runs the encoder on the three encoder
inputs and hands its outputs (and the full input dict, for heads that need more, e.g. SQuAD's
answer-start positions) to the head; the head returns a dict of float32 tensors. Subclasses
define only `build_head()` and `compute_task_loss()`; metrics are declared by the subclass as
Keras metric attributes and updated in `update_task_metrics()`.
Labels travel inside the input dict (`labels`, `start_positions`, ...), so `model.fit(dataset)`
needs no `y`, exactly as for `AlbertPretrainer`.
"""

from __future__ import annotations

from typing import Dict, Optional

import keras
import tensorflow as tf
from keras import ops

from albert_tf import legacy_names
from albert_tf.losses import scale_loss_for_replicas
from albert_tf.modeling import ENCODER_INPUTS, AlbertEncoder
from albert_tf.quantization import RefuseKerasQuantize
from albert_tf.serialization import NestedLayersConfig
from albert_tf.train_step_trace import BuildsOptimizerBeforeFit

# A task model's `.keras` file saved before the heads were renamed still loads (this module is
# imported by every head, so before any of their weights are read).
legacy_names.install()


class AlbertTaskModel(RefuseKerasQuantize, NestedLayersConfig, BuildsOptimizerBeforeFit, keras.Model):
    """Encoder + head. Subclasses implement `build_head`, `compute_task_loss`, `update_task_metrics`.

    Args:
        encoder: an `AlbertEncoder` (random, pretrained, or imported from a checkpoint).
        dropout: dropout on the encoder output before the head (the original's 0.1 by default).
    """

    # Heads that read only `encoder_outputs["pooled_output"]` set this, so that the encoder skips
    # the work the pooler never reads (`AlbertEncoder.pooled_output`).
    pooled_output_only = False
    # Heads that never read `pooled_output` set this to False: the pooler is then not trained
    # (not a trainable variable), rather than trained on gradients that do not exist, which
    # Keras warns about at every run.
    reads_pooler = True
    # `get_config` / `from_config` (`NestedLayersConfig`): the encoder nested, then these;
    # subclasses add their own arguments in `get_config`.
    config_fields = ("dropout",)
    # The export kind (its task kind, `export.json`'s "kind") of the subclass's SavedModels: what
    # `albert_tf.export` serves it as, read from the model, so the export imports no task module.
    export_kind: Optional[str] = None

    def __init__(self, encoder: AlbertEncoder, dropout: float = 0.1, **kwargs):
        super().__init__(**kwargs)
        # === Layers ===
        self.encoder = encoder
        if not self.reads_pooler and getattr(encoder, "pooler", None) is not None:
            encoder.pooler.trainable = False
        self.head_dropout = keras.layers.Dropout(dropout, name="head_dropout")
        self.head = self.build_head()
        # === Config ===
        self.dropout = dropout

    # --- what a task defines -------------------------------------------------------------------

    def build_head(self) -> keras.layers.Layer:
        raise TypeError(f"{type(self).__name__} is a task template subclass without build_head()")

    def compute_task_loss(self, inputs: Dict[str, tf.Tensor], outputs: Dict[str, tf.Tensor]) -> tf.Tensor:
        raise TypeError(f"{type(self).__name__} is a task template subclass without compute_task_loss()")

    def update_task_metrics(self, inputs: Dict[str, tf.Tensor], outputs: Dict[str, tf.Tensor]) -> None:
        """Update the subclass's metric attributes (default: none beyond the loss)."""

    def call_head(self, encoder_outputs, inputs, training=None) -> Dict[str, tf.Tensor]:
        """Default: the head on the dropped-out pooled output."""
        pooled = self.head_dropout(encoder_outputs["pooled_output"], training=training)
        return self.head(pooled)

    # --- the shared machinery -----------------------------------------------------------------

    def call(self, inputs, training=None):
        encoder_inputs = {k: inputs[k] for k in ENCODER_INPUTS}
        if self.pooled_output_only:
            encoder_outputs = {"pooled_output": self.encoder.pooled_output(encoder_inputs, training=training)}
        else:
            encoder_outputs = self.encoder(encoder_inputs, training=training)
        outputs = self.call_head(encoder_outputs, inputs, training=training)
        return {k: ops.cast(v, "float32") if v.dtype.is_floating else v for k, v in outputs.items()}

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        loss = self.compute_task_loss(x, y_pred)
        self.update_task_metrics(x, y_pred)
        if self.losses:
            loss = loss + ops.sum(ops.stack([ops.cast(l, "float32") for l in self.losses]))
        return scale_loss_for_replicas(loss)
