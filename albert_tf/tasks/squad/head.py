"""SQuAD task models: the original v1.1 and v2.0 heads on token ids.

* `AlbertForSquadV1`: google-research/albert `create_v1_model`: one dense layer of 2 units on the
  sequence output gives the start and end logits; the loss is the mean of the start and end
  cross-entropies.
* `AlbertForSquadV2`: the original ALBERT SQuAD 2.0 head (`create_v2_model`, after XLNet):
  - start logits from a dense layer of 1 unit, masked by `p_mask` (-1e30 where an answer cannot
    be: question, `[SEP]`, padding);
  - end logits from `dense(H, tanh) -> LayerNorm -> dense(1)` over each position's state
    concatenated with the state at the start: the gold start when the inputs carry
    `start_positions` (training and `model.evaluate`), else each of the `start_n_top` most
    likely starts (prediction, a beam of `start_n_top x end_n_top` spans);
  - an answerability logit from `dense(H, tanh) -> dropout -> dense(1, no bias)` over the start
    state weighted by the start probabilities concatenated with the `[CLS]` state;
  - loss `(start_loss + end_loss) / 2 + 0.5 * BCE(cls_logits, is_impossible)`, the start/end
    losses being the negative log-likelihoods of the gold positions under the masked softmax.

Both take the dict of `albert_tf.tasks.squad.data.make_squad_dataset` (labels inside it, so
`model.fit` needs no `y`) and pass `unique_ids` through to their outputs when given, so that
`predict_squad` (`albert_tf.tasks.squad.evaluation`) matches every output to its feature.
"""

from __future__ import annotations

from typing import Any, Dict, Mapping

import keras
import tensorflow as tf
from keras import ops

from albert_tf.tasks.squad import SQUAD_V1, SQUAD_V2
from albert_tf.modeling import AlbertEncoder
from albert_tf.tasks.base import AlbertTaskModel
# Registers the serving classes: a model of these kinds exports once this module has built it.
from albert_tf.tasks.squad import serving  # noqa: F401

# The original's mask value for impossible positions (its logits are float32).
_MASK_VALUE = 1e30
# tf.contrib.layers.layer_norm, which the original end head uses, has variance epsilon 1e-12.
_LAYER_NORM_EPSILON = 1e-12
SQUAD_VERSIONS = ("v1", "v2")


def _initializer(stddev: float):
    return keras.initializers.TruncatedNormal(stddev=stddev)


def _with_unique_ids(outputs: Dict[str, Any], inputs: Mapping[str, Any]) -> Dict[str, Any]:
    if "unique_ids" in inputs:
        outputs["unique_ids"] = inputs["unique_ids"]
    return outputs


def _position_nll(log_probs, positions):
    """Mean negative log-likelihood of `positions` ([batch] ints) under `log_probs` [batch, seq]."""
    positions = ops.reshape(ops.cast(positions, "int32"), (-1, 1))
    return -ops.mean(ops.take_along_axis(log_probs, positions, axis=1))


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertForSquadV1(AlbertTaskModel):
    """ALBERT for SQuAD v1.1: start/end logits from a dense layer of 2 units on every position.

    Inputs: `input_ids`, `input_mask`, `segment_ids` [batch, seq]; for training `start_positions`
    and `end_positions` [batch]; optionally `unique_ids` (passed through). Other keys (`p_mask`,
    `is_impossible`) are ignored. Outputs: `start_logits`, `end_logits` [batch, seq] float32.

    Args:
        encoder: The `AlbertEncoder`.
        dropout: Dropout on the sequence output before the dense layer; 0 as the original (which
            relies on the encoder's own dropout).

    Example:

    >>> import numpy as np
    >>> from albert_tf import AlbertConfig, AlbertEncoder
    >>> encoder = AlbertEncoder.from_albert_config(AlbertConfig(
    ...     vocab_size=50, embedding_size=8, hidden_size=16, num_hidden_layers=1,
    ...     num_attention_heads=2, intermediate_size=32))
    >>> model = AlbertForSquadV1(encoder)
    >>> out = model({"input_ids": np.ones((2, 6), "int32"), "input_mask": np.ones((2, 6), "int32"),
    ...              "segment_ids": np.zeros((2, 6), "int32")})
    >>> tuple(out["start_logits"].shape), tuple(out["end_logits"].shape)
    ((2, 6), (2, 6))
    """

    export_kind = SQUAD_V1

    reads_pooler = False

    def __init__(self, encoder: AlbertEncoder, dropout: float = 0.0, **kwargs):
        super().__init__(encoder, dropout=dropout, **kwargs)
        # === Metrics === (tracked as attributes, reported by fit/evaluate beside the loss)
        self.start_accuracy = keras.metrics.SparseCategoricalAccuracy(name="start_accuracy")
        self.end_accuracy = keras.metrics.SparseCategoricalAccuracy(name="end_accuracy")

    def build_head(self) -> keras.layers.Layer:
        # Original variables: cls/squad/output_weights [2, H] and output_bias [2].
        return keras.layers.Dense(
            2,
            kernel_initializer=_initializer(self.encoder.initializer_range),
            dtype=self.encoder.embeddings.dtype_policy,
            name="squad_logits",
        )

    def call_head(self, encoder_outputs, inputs, training=None):
        sequence = self.head_dropout(encoder_outputs["sequence_output"], training=training)
        logits = ops.cast(self.head(sequence), "float32")
        return _with_unique_ids({"start_logits": logits[..., 0], "end_logits": logits[..., 1]}, inputs)

    def compute_task_loss(self, inputs, outputs):
        start = _position_nll(ops.log_softmax(outputs["start_logits"], axis=-1), inputs["start_positions"])
        end = _position_nll(ops.log_softmax(outputs["end_logits"], axis=-1), inputs["end_positions"])
        return (start + end) / 2.0

    def update_task_metrics(self, inputs, outputs):
        self.start_accuracy.update_state(ops.reshape(inputs["start_positions"], (-1,)), outputs["start_logits"])
        self.end_accuracy.update_state(ops.reshape(inputs["end_positions"], (-1,)), outputs["end_logits"])


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertSquadV2Head(keras.layers.Layer):
    """The original ALBERT SQuAD 2.0 head (start, start-conditioned end, answerability).

    Call: `head(sequence_output, p_mask, start_positions=None, training=None)` with
    `sequence_output` [batch, seq, H] and `p_mask` [batch, seq] (1 where no answer can be).

    Returns, with `start_positions` (teacher forcing on the gold start):
        `start_log_probs`, `end_log_probs` [batch, seq], `cls_logits` [batch].
    Without (beam over the most likely starts):
        `start_top_log_probs`, `start_top_index` [batch, start_n_top],
        `end_top_log_probs`, `end_top_index` [batch, start_n_top * end_n_top] (the ends of start
        `i` at `i * end_n_top ...`), `cls_logits` [batch].

    Args:
        hidden_size: H, the width of the two hidden dense layers.
        start_n_top, end_n_top: Beam sizes at prediction (5 and 5 in the original).
        dropout: Dropout in the answerability branch (0.1).
        initializer_range: Stddev of the truncated-normal kernels.
    """

    def __init__(self, hidden_size, start_n_top=5, end_n_top=5, dropout=0.1, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        for name, value in (("start_n_top", start_n_top), ("end_n_top", end_n_top)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        self.hidden_size = hidden_size
        self.start_n_top = start_n_top
        self.end_n_top = end_n_top
        self.dropout = dropout
        self.initializer_range = initializer_range
        init = _initializer(initializer_range)
        policy = self.dtype_policy
        # Names follow the original scopes start_logits/, end_logits/dense_{0,1}, answer_class/.
        self.start_dense = keras.layers.Dense(1, kernel_initializer=init, dtype=policy, name="start_logits_dense")
        self.end_dense_0 = keras.layers.Dense(
            hidden_size, activation="tanh", kernel_initializer=init, dtype=policy, name="end_logits_dense_0"
        )
        self.end_layer_norm = keras.layers.LayerNormalization(
            epsilon=_LAYER_NORM_EPSILON, dtype=policy, name="end_logits_LayerNorm"
        )
        self.end_dense_1 = keras.layers.Dense(1, kernel_initializer=init, dtype=policy, name="end_logits_dense_1")
        self.answer_dense_0 = keras.layers.Dense(
            hidden_size, activation="tanh", kernel_initializer=init, dtype=policy, name="answer_class_dense_0"
        )
        self.answer_dropout = keras.layers.Dropout(dropout, dtype=policy, name="answer_class_dropout")
        self.answer_dense_1 = keras.layers.Dense(
            1, use_bias=False, kernel_initializer=init, dtype=policy, name="answer_class_dense_1"
        )

    def build(self, sequence_output_shape, p_mask_shape=None, start_positions_shape=None):
        hidden = sequence_output_shape[-1]
        self.start_dense.build((None, None, hidden))
        self.end_dense_0.build((None, None, 2 * hidden))
        self.end_layer_norm.build((None, None, self.hidden_size))
        self.end_dense_1.build((None, None, self.hidden_size))
        self.answer_dense_0.build((None, 2 * hidden))
        self.answer_dense_1.build((None, self.hidden_size))
        self.built = True

    def _end_logits(self, end_input):
        hidden = self.end_layer_norm(self.end_dense_0(end_input))
        return ops.cast(ops.squeeze(self.end_dense_1(hidden), -1), "float32")

    def call(self, sequence_output, p_mask, start_positions=None, training=None):
        sequence_output = ops.cast(sequence_output, "float32")
        p_mask = ops.cast(p_mask, "float32")
        seq_length = ops.shape(sequence_output)[1]

        start_logits = ops.cast(ops.squeeze(self.start_dense(sequence_output), -1), "float32")
        start_masked = start_logits * (1.0 - p_mask) - _MASK_VALUE * p_mask
        start_log_probs = ops.log_softmax(start_masked, axis=-1)
        outputs = {}

        if start_positions is not None:
            gold = ops.reshape(ops.cast(start_positions, "int32"), (-1,))
            start_state = tf.gather(sequence_output, gold, batch_dims=1)  # [B, H]
            start_states = ops.broadcast_to(start_state[:, None, :], ops.shape(sequence_output))
            end_logits = self._end_logits(ops.concatenate([sequence_output, start_states], axis=-1))
            end_masked = end_logits * (1.0 - p_mask) - _MASK_VALUE * p_mask
            outputs["start_log_probs"] = start_log_probs
            outputs["end_log_probs"] = ops.log_softmax(end_masked, axis=-1)
        else:
            start_top_log_probs, start_top_index = ops.top_k(start_log_probs, k=self.start_n_top)
            start_states = tf.gather(sequence_output, start_top_index, batch_dims=1)  # [B, K, H]
            shape = ops.shape(sequence_output)
            full = (shape[0], self.start_n_top, seq_length, shape[2])
            end_input = ops.concatenate(
                [
                    ops.broadcast_to(sequence_output[:, None, :, :], full),
                    ops.broadcast_to(start_states[:, :, None, :], full),
                ],
                axis=-1,
            )
            end_logits = self._end_logits(end_input)  # [B, K, S]
            mask = p_mask[:, None, :]
            end_log_probs = ops.log_softmax(end_logits * (1.0 - mask) - _MASK_VALUE * mask, axis=-1)
            end_top_log_probs, end_top_index = ops.top_k(end_log_probs, k=self.end_n_top)
            outputs["start_top_log_probs"] = start_top_log_probs
            outputs["start_top_index"] = ops.cast(start_top_index, "int32")
            outputs["end_top_log_probs"] = ops.reshape(end_top_log_probs, (-1, self.start_n_top * self.end_n_top))
            outputs["end_top_index"] = ops.reshape(
                ops.cast(end_top_index, "int32"), (-1, self.start_n_top * self.end_n_top)
            )

        # Answerability: no dependence on the end, so that each feature has one null score.
        cls_state = sequence_output[:, 0, :]
        start_probs = ops.softmax(start_masked, axis=-1)
        start_feature = ops.einsum("bsh,bs->bh", sequence_output, start_probs)
        answer = self.answer_dense_0(ops.concatenate([start_feature, cls_state], axis=-1))
        answer = self.answer_dropout(answer, training=training)
        outputs["cls_logits"] = ops.cast(ops.squeeze(self.answer_dense_1(answer), -1), "float32")
        return outputs

    def get_config(self):
        config = super().get_config()
        config.update(
            hidden_size=self.hidden_size,
            start_n_top=self.start_n_top,
            end_n_top=self.end_n_top,
            dropout=self.dropout,
            initializer_range=self.initializer_range,
        )
        return config


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertForSquadV2(AlbertTaskModel):
    """ALBERT for SQuAD v2.0 with the original head (`AlbertSquadV2Head`).

    Inputs: `input_ids`, `input_mask`, `segment_ids`, `p_mask` [batch, seq]; for training
    `start_positions`, `end_positions`, `is_impossible` [batch]; optionally `unique_ids`. With
    `start_positions` the outputs are `start_log_probs`, `end_log_probs` and `cls_logits` (the
    loss is defined on them); without, the beam outputs of the head, for `predict_squad`.

    Args:
        encoder: The `AlbertEncoder`.
        dropout: Dropout of the answerability branch (the original's `dropout_prob`, 0.1).
        start_n_top, end_n_top: Prediction beam sizes (5 and 5).

    Example:

    >>> import numpy as np
    >>> from albert_tf import AlbertConfig, AlbertEncoder
    >>> encoder = AlbertEncoder.from_albert_config(AlbertConfig(
    ...     vocab_size=50, embedding_size=8, hidden_size=16, num_hidden_layers=1,
    ...     num_attention_heads=2, intermediate_size=32))
    >>> model = AlbertForSquadV2(encoder, start_n_top=3, end_n_top=2)
    >>> inputs = {"input_ids": np.ones((2, 6), "int32"), "input_mask": np.ones((2, 6), "int32"),
    ...           "segment_ids": np.zeros((2, 6), "int32"), "p_mask": np.zeros((2, 6), "int32")}
    >>> out = model(inputs)
    >>> tuple(out["start_top_index"].shape), tuple(out["end_top_index"].shape), tuple(out["cls_logits"].shape)
    ((2, 3), (2, 6), (2,))
    """

    export_kind = SQUAD_V2

    reads_pooler = False

    def __init__(self, encoder: AlbertEncoder, dropout: float = 0.1, start_n_top: int = 5, end_n_top: int = 5, **kwargs):
        # Read by build_head, which the template calls from its __init__.
        self.start_n_top = start_n_top
        self.end_n_top = end_n_top
        super().__init__(encoder, dropout=dropout, **kwargs)
        self.start_accuracy = keras.metrics.SparseCategoricalAccuracy(name="start_accuracy")
        self.end_accuracy = keras.metrics.SparseCategoricalAccuracy(name="end_accuracy")
        self.answerable_accuracy = keras.metrics.BinaryAccuracy(name="answerable_accuracy", threshold=0.0)

    def build_head(self) -> keras.layers.Layer:
        return AlbertSquadV2Head(
            self.encoder.hidden_size,
            start_n_top=self.start_n_top,
            end_n_top=self.end_n_top,
            dropout=self.head_dropout.rate,
            initializer_range=self.encoder.initializer_range,
            dtype=self.encoder.embeddings.dtype_policy,
            name="squad_v2_head",
        )

    def call_head(self, encoder_outputs, inputs, training=None):
        outputs = self.head(
            encoder_outputs["sequence_output"],
            inputs["p_mask"],
            start_positions=inputs.get("start_positions"),
            training=training,
        )
        return _with_unique_ids(dict(outputs), inputs)

    def compute_task_loss(self, inputs, outputs):
        if "start_log_probs" not in outputs:
            raise ValueError("AlbertForSquadV2's loss needs start_positions, end_positions and is_impossible in the inputs")
        start = _position_nll(outputs["start_log_probs"], inputs["start_positions"])
        end = _position_nll(outputs["end_log_probs"], inputs["end_positions"])
        impossible = ops.cast(ops.reshape(inputs["is_impossible"], (-1,)), "float32")
        answerability = ops.mean(ops.binary_crossentropy(impossible, outputs["cls_logits"], from_logits=True))
        # The original scales the answerability loss by 0.5 to match the span losses.
        return (start + end) * 0.5 + 0.5 * answerability

    def update_task_metrics(self, inputs, outputs):
        if "start_log_probs" not in outputs:
            return
        self.start_accuracy.update_state(ops.reshape(inputs["start_positions"], (-1,)), outputs["start_log_probs"])
        self.end_accuracy.update_state(ops.reshape(inputs["end_positions"], (-1,)), outputs["end_log_probs"])
        self.answerable_accuracy.update_state(
            ops.cast(ops.reshape(inputs["is_impossible"], (-1,)), "float32"), outputs["cls_logits"]
        )

    def get_config(self):
        config = super().get_config()
        config.update(start_n_top=self.start_n_top, end_n_top=self.end_n_top)
        return config


def build_squad_model(encoder: AlbertEncoder, version: str, **kwargs) -> AlbertTaskModel:
    """`AlbertForSquadV1` for version "v1", `AlbertForSquadV2` for "v2" (kwargs go to the model)."""
    if version == "v1":
        return AlbertForSquadV1(encoder, **kwargs)
    if version == "v2":
        return AlbertForSquadV2(encoder, **kwargs)
    raise ValueError(f"version must be one of {SQUAD_VERSIONS}, got {version!r}")
