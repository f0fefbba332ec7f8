"""Multiple choice (RACE): one score per choice from the pooled output, softmax over the choices.

`AlbertForMultipleChoice` is google-research/albert `race_utils.create_model`: the `[batch, choices,
seq]` inputs are run through the encoder as `[batch * choices, seq]`, the pooled output gets
dropout (0.1) and a dense layer of 1 unit, and the scores are reshaped to `[batch, choices]`; the
loss is the cross-entropy of the softmax over the choices and the metric the accuracy. The number
of choices is read from the inputs (4 for RACE).
"""

from __future__ import annotations

import keras
from keras import ops

from albert_tf.tasks.multiple_choice import MULTIPLE_CHOICE
from albert_tf.modeling import AlbertEncoder
from albert_tf.tasks.base import ENCODER_INPUTS, AlbertTaskModel
# Registers the serving class: a multiple-choice model exports once this module has built it.
from albert_tf.tasks.multiple_choice import serving  # noqa: F401


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertForMultipleChoice(AlbertTaskModel):
    """ALBERT for multiple choice: pooled output -> dropout -> dense 1 per choice -> softmax.

    Inputs: `input_ids`, `input_mask`, `segment_ids` [batch, choices, seq]; for training `labels`
    [batch] (the index of the right choice). Output: `logits` [batch, choices] float32.

    Args:
        encoder: The `AlbertEncoder`.
        dropout: Dropout on the pooled output (0.1 as the original).

    Example:

    >>> import numpy as np
    >>> from albert_tf import AlbertConfig, AlbertEncoder
    >>> encoder = AlbertEncoder.from_albert_config(AlbertConfig(
    ...     vocab_size=50, embedding_size=8, hidden_size=16, num_hidden_layers=1,
    ...     num_attention_heads=2, intermediate_size=32))
    >>> model = AlbertForMultipleChoice(encoder)
    >>> out = model({"input_ids": np.ones((2, 4, 6), "int32"), "input_mask": np.ones((2, 4, 6), "int32"),
    ...              "segment_ids": np.zeros((2, 4, 6), "int32")})
    >>> tuple(out["logits"].shape)
    (2, 4)
    """

    export_kind = MULTIPLE_CHOICE

    pooled_output_only = True

    def __init__(self, encoder: AlbertEncoder, dropout: float = 0.1, **kwargs):
        super().__init__(encoder, dropout=dropout, **kwargs)
        self.accuracy = keras.metrics.SparseCategoricalAccuracy(name="accuracy")

    def build_head(self) -> keras.layers.Layer:
        # Original variables: output_weights [1, H], output_bias [1].
        return keras.layers.Dense(
            1,
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=self.encoder.initializer_range),
            dtype=self.encoder.embeddings.dtype_policy,
            name="choice_score",
        )

    def call(self, inputs, training=None):
        shape = ops.shape(inputs["input_ids"])
        if len(inputs["input_ids"].shape) != 3:
            raise ValueError(
                f"multiple-choice inputs must be [batch, choices, seq], got shape {tuple(inputs['input_ids'].shape)}"
            )
        flat = dict(inputs)
        for name in ENCODER_INPUTS:
            flat[name] = ops.reshape(inputs[name], (-1, shape[2]))
        flat["num_choices"] = shape[1]
        return super().call(flat, training=training)

    def call_head(self, encoder_outputs, inputs, training=None):
        pooled = self.head_dropout(encoder_outputs["pooled_output"], training=training)
        scores = ops.cast(self.head(pooled), "float32")
        return {"logits": ops.reshape(scores, (-1, inputs["num_choices"]))}

    def compute_task_loss(self, inputs, outputs):
        labels = ops.reshape(inputs["labels"], (-1,))
        return ops.mean(ops.sparse_categorical_crossentropy(labels, outputs["logits"], from_logits=True))

    def update_task_metrics(self, inputs, outputs):
        self.accuracy.update_state(ops.reshape(inputs["labels"], (-1,)), outputs["logits"])
