"""The classification and regression heads on token ids (GLUE-style tasks).

The models follow google-research/albert `run_classifier.py`: the pooled output (tanh dense on
`[CLS]`) -> dropout (0.1) -> a dense layer initialised with a truncated normal of the encoder's
`initializer_range`, giving `num_labels` logits trained with the mean cross-entropy, or one value
trained with the mean squared error for regression (STS-B). Labels travel in the input dict
(`labels`: int class ids, or float targets), so `model.fit(dataset)` needs no `y`.
"""

from __future__ import annotations

from typing import Optional

import keras
from keras import ops

from albert_tf.tasks.classification import CLASSIFICATION, REGRESSION
from albert_tf.tasks.base import AlbertTaskModel
# Registers the serving classes: a model of these kinds exports once this module has built it.
from albert_tf.tasks.classification import serving  # noqa: F401

POOLING_MODES = ("cls", "mean")


def masked_mean(sequence_output, input_mask):
    """The mean of `sequence_output` [batch, seq, H] over the positions where `input_mask` is 1."""
    mask = ops.cast(ops.expand_dims(input_mask, -1), sequence_output.dtype)
    total = ops.sum(sequence_output * mask, axis=1)
    return total / ops.maximum(ops.sum(mask, axis=1), ops.cast(1.0, sequence_output.dtype))


def _check_pooling(pooling: str) -> str:
    if pooling not in POOLING_MODES:
        raise ValueError(f"pooling must be one of {', '.join(POOLING_MODES)}, got {pooling!r}")
    return pooling


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertForClassification(AlbertTaskModel):
    """Sentence(-pair) classifier: pooled output -> dropout -> dense(`num_labels`).

    Inputs: `input_ids`, `input_mask`, `segment_ids` [batch, seq] and, for training and
    evaluation, `labels` [batch] (class ids). Outputs: `{"logits": [batch, num_labels]}`.
    Metrics: `accuracy`.

    Args:
        encoder: An `AlbertEncoder`.
        num_labels: Number of classes (>= 2).
        dropout: Dropout on the pooled output (0.1 as the original).
        pooling: "cls" (the original: the encoder's pooler, tanh dense on `[CLS]`) or "mean" (the
            mean of the last layer over the real tokens). Small encoders trained from scratch or
            briefly pretrained learn reliably only with "mean": their `[CLS]` output is nearly
            the same for every text (see `albert_tf.training.recipes`).
    """

    export_kind = CLASSIFICATION

    pooled_output_only = True

    def __init__(self, encoder, num_labels: int, dropout: float = 0.1, pooling: str = "cls", **kwargs):
        if isinstance(num_labels, bool) or not isinstance(num_labels, int) or num_labels < 2:
            raise ValueError(f"num_labels must be an integer >= 2, got {num_labels!r}")
        self.num_labels = num_labels
        self.pooling = _check_pooling(pooling)
        # The mean reads every position, so the encoder must run in full.
        self.pooled_output_only = pooling == "cls"
        self.reads_pooler = pooling == "cls"
        super().__init__(encoder, dropout=dropout, **kwargs)
        self.accuracy = keras.metrics.Mean(name="accuracy")

    def build_head(self):
        return keras.layers.Dense(
            self.num_labels,
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=self.encoder.initializer_range),
            dtype=self.encoder.embeddings.dtype_policy,
            name="classifier",
        )

    def call_head(self, encoder_outputs, inputs, training=None):
        pooled = self.head_dropout(pooled_features(self.pooling, encoder_outputs, inputs), training=training)
        return {"logits": self.head(pooled)}

    def compute_task_loss(self, inputs, outputs):
        labels = ops.reshape(ops.cast(inputs["labels"], "int32"), (-1,))
        return ops.mean(keras.losses.sparse_categorical_crossentropy(labels, outputs["logits"], from_logits=True))

    def update_task_metrics(self, inputs, outputs):
        labels = ops.reshape(ops.cast(inputs["labels"], "int32"), (-1,))
        predicted = ops.cast(ops.argmax(outputs["logits"], axis=-1), "int32")
        self.accuracy.update_state(ops.cast(ops.equal(predicted, labels), "float32"))

    def get_config(self):
        config = super().get_config()
        config["num_labels"] = self.num_labels
        config["pooling"] = self.pooling
        return config


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertForRegression(AlbertTaskModel):
    """Sentence(-pair) regression: pooled output -> dropout -> dense(1), mean squared error.

    Inputs as `AlbertForClassification`, with float `labels` [batch]. Outputs:
    `{"predictions": [batch]}`.

    Args:
        encoder: An `AlbertEncoder`.
        dropout: Dropout on the pooled output.
        pooling: "cls" or "mean", as `AlbertForClassification`.
    """

    export_kind = REGRESSION

    pooled_output_only = True

    def __init__(self, encoder, dropout: float = 0.1, pooling: str = "cls", **kwargs):
        self.pooling = _check_pooling(pooling)
        self.pooled_output_only = pooling == "cls"
        self.reads_pooler = pooling == "cls"
        super().__init__(encoder, dropout=dropout, **kwargs)

    def build_head(self):
        return keras.layers.Dense(
            1,
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=self.encoder.initializer_range),
            dtype=self.encoder.embeddings.dtype_policy,
            name="regressor",
        )

    def call_head(self, encoder_outputs, inputs, training=None):
        pooled = self.head_dropout(pooled_features(self.pooling, encoder_outputs, inputs), training=training)
        return {"predictions": ops.squeeze(self.head(pooled), axis=-1)}

    def compute_task_loss(self, inputs, outputs):
        labels = ops.reshape(ops.cast(inputs["labels"], "float32"), (-1,))
        return ops.mean(ops.square(outputs["predictions"] - labels))

    def get_config(self):
        config = super().get_config()
        config["pooling"] = self.pooling
        return config


def pooled_features(pooling: str, encoder_outputs, inputs):
    """The head's input: the encoder's `pooled_output` ("cls") or the masked token mean ("mean")."""
    if pooling == "cls":
        return encoder_outputs["pooled_output"]
    return masked_mean(encoder_outputs["sequence_output"], inputs["input_mask"])


def build_task_model(encoder, num_labels: Optional[int], dropout: float = 0.1, pooling: str = "cls") -> AlbertTaskModel:
    """An `AlbertForClassification` for `num_labels` classes, or an `AlbertForRegression` for None."""
    if num_labels is None:
        return AlbertForRegression(encoder, dropout=dropout, pooling=pooling)
    return AlbertForClassification(encoder, num_labels=num_labels, dropout=dropout, pooling=pooling)
