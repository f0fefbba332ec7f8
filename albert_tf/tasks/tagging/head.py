"""The token-classification (NER) head on token ids, and tagging raw texts with it.

`AlbertForTagging`: sequence output -> dropout -> dense(`num_labels`) per token, trained
with the cross-entropy averaged over the labelled positions (the pieces `encode_sentences`
labels; the others carry `IGNORE_LABEL`). A word whose pieces fall beyond the sequence length is
predicted `O` (and counted, with a warning): split long sentences first
(`albert_tf.tasks.tagging.data.split_long_sentences`).

`predict_text_entities` tags raw texts (split into words or characters by `split_with_offsets`)
and returns the entities as `entity_record`s: the reference of the exported serving signature
(`albert_tf.tasks.tagging.serving`).
"""

from __future__ import annotations

from typing import Any, Dict, List, Sequence

import keras
from keras import ops

from albert_tf.tasks.tagging import TAGGING
from albert_tf.tasks.base import AlbertTaskModel
# Registers the serving class: a token classifier exports once this module has built it.
from albert_tf.tasks.tagging import serving  # noqa: F401
from albert_tf.tasks.tagging.data import TaggedSentence, TagVocab, encode_sentences, split_with_offsets
from albert_tf.tasks.tagging.metrics import decode_predictions, entity_spans, predict_logits, unit_probabilities


def _label_weights(labels):
    return ops.cast(ops.greater_equal(labels, 0), "float32")


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertForTagging(AlbertTaskModel):
    """Per-token classifier on the sequence output.

    Inputs: `input_ids`, `input_mask`, `segment_ids` [batch, seq] and, for training, `labels`
    [batch, seq] (tag ids; `IGNORE_LABEL` where not scored). Outputs: `{"logits": [batch, seq,
    num_labels]}`. Metrics: `token_accuracy` over the labelled positions.

    Args:
        encoder: An `AlbertEncoder`.
        num_labels: Number of tags (>= 2).
        dropout: Dropout on the sequence output.
    """

    export_kind = TAGGING

    reads_pooler = False

    def __init__(self, encoder, num_labels: int, dropout: float = 0.1, **kwargs):
        if isinstance(num_labels, bool) or not isinstance(num_labels, int) or num_labels < 2:
            raise ValueError(f"num_labels must be an integer >= 2, got {num_labels!r}")
        self.num_labels = num_labels
        super().__init__(encoder, dropout=dropout, **kwargs)
        # The head reads the sequence output only: the pooler gets no gradient, so it is frozen
        # rather than handed to the optimizer (which would warn and keep moments for it).
        self.encoder.pooler.trainable = False
        self.token_accuracy = keras.metrics.Mean(name="token_accuracy")

    def build_head(self):
        return keras.layers.Dense(
            self.num_labels,
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=self.encoder.initializer_range),
            dtype=self.encoder.embeddings.dtype_policy,
            name="token_classifier",
        )

    def call_head(self, encoder_outputs, inputs, training=None):
        sequence = self.head_dropout(encoder_outputs["sequence_output"], training=training)
        return {"logits": self.head(sequence)}

    def compute_task_loss(self, inputs, outputs):
        labels = ops.cast(inputs["labels"], "int32")
        weights = _label_weights(labels)
        safe_labels = ops.where(labels >= 0, labels, ops.zeros_like(labels))
        per_token = keras.losses.sparse_categorical_crossentropy(safe_labels, outputs["logits"], from_logits=True)
        return ops.sum(per_token * weights) / ops.maximum(ops.sum(weights), 1.0)

    def update_task_metrics(self, inputs, outputs):
        labels = ops.cast(inputs["labels"], "int32")
        predicted = ops.cast(ops.argmax(outputs["logits"], axis=-1), "int32")
        correct = ops.cast(ops.equal(predicted, labels), "float32")
        self.token_accuracy.update_state(correct, sample_weight=_label_weights(labels))

    def get_config(self):
        config = super().get_config()
        config["num_labels"] = self.num_labels
        return config


def predict_text_entities(
    model, tokenizer, texts: Sequence[str], tag_vocab: TagVocab, *, seq_length: int, token_unit: str = "word",
    batch_size: int = 32,
) -> List[Dict[str, Any]]:
    """Tags raw texts: per text its `words` (units), their `tags` and the `entities` (`entity_record`s).

    Each text is split by `split_with_offsets`, encoded by `encode_sentences` (one tag per unit,
    `O` for a unit cut off by `seq_length`) and tagged by the argmax at each unit's first piece.

    Args:
        model: The fine-tuned `AlbertForTagging`.
        tokenizer: Its Python tokenizer.
        texts: The raw texts.
        tag_vocab: The task's tags.
        seq_length: The model's sequence length.
        token_unit: "word" or "char" (`TaskSpec.token_unit`).
        batch_size: Prediction batch size.
    """
    if not texts:
        return []
    spans = [split_with_offsets(text, token_unit) for text in texts]
    sentences = [TaggedSentence(tuple(u for u, _, _ in s), tuple("O" for _ in s), "<text>", i) for i, s in enumerate(spans)]
    encoded = encode_sentences(sentences, tokenizer, seq_length=seq_length, tag_vocab=tag_vocab, with_labels=False)
    logits = predict_logits(model, encoded.features, batch_size)
    tags = decode_predictions(logits, encoded.word_positions, tag_vocab)
    probabilities = unit_probabilities(logits, encoded.word_positions)
    return [
        {"words": [u for u, _, _ in text_spans], "tags": text_tags,
         "entities": entity_spans(text_tags, text_probabilities, text_spans, text)}
        for text, text_spans, text_tags, text_probabilities in zip(texts, spans, tags, probabilities)
    ]
