"""`AlbertPretrainer`: the encoder with its MLM and SOP (or NSP) heads, losses and metrics for `model.fit`.

Losses as the original `run_pretraining.py`:
* MLM: sum(weight * cross-entropy) / (sum(weight) + 1e-5) over the masked positions;
* sentence task (SOP, or NSP for the paper's ablation): mean cross-entropy of the 2-way head;
* total = MLM + sentence loss.

Inputs are the feature dicts of the pretraining data (`input_ids`, `input_mask`, `segment_ids`,
`masked_lm_positions`, `masked_lm_ids`, `masked_lm_weights`, `next_sentence_labels`) — the labels
travel inside `x`, so `model.fit(dataset)` needs no `y`.
"""

from __future__ import annotations

import keras
from keras import ops

from albert_tf.losses import scale_loss_for_replicas
from albert_tf.modeling import ENCODER_INPUTS, AlbertEncoder, AlbertMLMHead, AlbertSOPHead
from albert_tf.quantization import RefuseKerasQuantize
from albert_tf.serialization import NestedLayersConfig
from albert_tf.train_step_trace import BuildsOptimizerBeforeFit

SENTENCE_TASKS = ("sop", "nsp")


def masked_lm_loss(mlm_logits, masked_lm_ids, masked_lm_weights):
    """The original weighted MLM loss, and the per-position correctness for the accuracy metric."""
    ids = ops.cast(masked_lm_ids, "int32")
    weights = ops.cast(masked_lm_weights, "float32")
    per_position = keras.losses.sparse_categorical_crossentropy(ids, mlm_logits, from_logits=True)
    loss = ops.sum(weights * per_position) / (ops.sum(weights) + 1e-5)
    correct = ops.cast(ops.equal(ops.cast(ops.argmax(mlm_logits, axis=-1), "int32"), ids), "float32")
    return loss, correct


def sentence_loss(sentence_logits, labels):
    """Mean cross-entropy of the 2-way sentence head, and the per-example correctness."""
    labels = ops.reshape(ops.cast(labels, "int32"), (-1,))
    loss = ops.mean(keras.losses.sparse_categorical_crossentropy(labels, sentence_logits, from_logits=True))
    correct = ops.cast(ops.equal(ops.cast(ops.argmax(sentence_logits, axis=-1), "int32"), labels), "float32")
    return loss, correct


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertPretrainer(RefuseKerasQuantize, NestedLayersConfig, BuildsOptimizerBeforeFit, keras.Model):
    """ALBERT pretraining model: encoder + tied MLM head + sentence-order head.

    Args:
        encoder: an `AlbertEncoder`.
        sentence_task: "sop" (ALBERT) or "nsp" (BERT's next-sentence prediction, for the ablation);
            the head is the same 2-way classifier, only the data's labels differ.

    Example:

    >>> import numpy as np
    >>> from albert_tf import AlbertConfig, AlbertEncoder
    >>> config = AlbertConfig(vocab_size=50, embedding_size=8, hidden_size=16, num_hidden_layers=2,
    ...                       num_attention_heads=2, intermediate_size=32)
    >>> model = AlbertPretrainer(AlbertEncoder.from_albert_config(config))
    >>> batch = {"input_ids": np.full((2, 8), 7, "int32"), "input_mask": np.ones((2, 8), "int32"),
    ...          "segment_ids": np.zeros((2, 8), "int32"), "masked_lm_positions": np.ones((2, 3), "int32"),
    ...          "masked_lm_ids": np.full((2, 3), 9, "int32"), "masked_lm_weights": np.ones((2, 3), "float32"),
    ...          "next_sentence_labels": np.zeros((2, 1), "int32")}
    >>> tuple(model(batch)["mlm_logits"].shape)
    (2, 3, 50)
    """

    # `get_config` / `from_config` (`NestedLayersConfig`): the encoder nested, then these.
    config_fields = ("sentence_task",)

    def __init__(self, encoder: AlbertEncoder, sentence_task: str = "sop", **kwargs):
        if sentence_task not in SENTENCE_TASKS:
            raise ValueError(f"sentence_task must be one of {SENTENCE_TASKS}, got {sentence_task!r}")
        super().__init__(**kwargs)
        # === Layers ===
        self.encoder = encoder
        policy = encoder.embeddings.dtype_policy
        self.mlm_head = AlbertMLMHead(
            encoder.vocab_size,
            encoder.embedding_size,
            activation=encoder.hidden_act,
            initializer_range=encoder.initializer_range,
            dtype=policy,
            name="predictions",
        )
        self.sentence_head = AlbertSOPHead(
            encoder.hidden_size, initializer_range=encoder.initializer_range, dtype=policy, name="seq_relationship"
        )
        # === Metrics === (Keras adds its own "loss" tracker; these are tracked as attributes)
        self.mlm_loss_tracker = keras.metrics.Mean(name="mlm_loss")
        self.sentence_loss_tracker = keras.metrics.Mean(name=f"{sentence_task}_loss")
        self.mlm_accuracy = keras.metrics.Mean(name="mlm_accuracy")
        self.sentence_accuracy = keras.metrics.Mean(name=f"{sentence_task}_accuracy")
        # === Config ===
        self.sentence_task = sentence_task

    def call(self, inputs, training=None):
        outputs = self.encoder({k: inputs[k] for k in ENCODER_INPUTS}, training=training)
        mlm_logits = self.mlm_head(
            outputs["sequence_output"], self.encoder.embeddings.word_embeddings, inputs["masked_lm_positions"]
        )
        sentence_logits = self.sentence_head(outputs["pooled_output"])
        return {"mlm_logits": mlm_logits, "sentence_logits": sentence_logits}

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        mlm, mlm_correct = masked_lm_loss(y_pred["mlm_logits"], x["masked_lm_ids"], x["masked_lm_weights"])
        sentence, sentence_correct = sentence_loss(y_pred["sentence_logits"], x["next_sentence_labels"])
        self.mlm_loss_tracker.update_state(mlm)
        self.sentence_loss_tracker.update_state(sentence)
        # Weighted by the real masked positions, so the accuracy is over predictions, not batches.
        self.mlm_accuracy.update_state(mlm_correct, sample_weight=ops.cast(x["masked_lm_weights"], "float32"))
        self.sentence_accuracy.update_state(sentence_correct)
        loss = mlm + sentence
        if self.losses:
            loss = loss + ops.sum(ops.stack([ops.cast(l, "float32") for l in self.losses]))
        return scale_loss_for_replicas(loss)

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        results = super().compute_metrics(x, y, y_pred, sample_weight)
        # Perplexity of the running mean MLM loss, as the original's evaluation reports it.
        results["mlm_perplexity"] = ops.exp(self.mlm_loss_tracker.result())
        return results
