"""Token classification (NER): the per-token head, sub-word label alignment and entity scoring.

`AlbertTokenClassifier`: sequence output -> dropout -> dense(`num_labels`) per token, trained
with the cross-entropy averaged over the labelled positions. Every word of a sentence is split
into sub-word pieces; its tag labels the word's first piece and the other pieces (and `[CLS]`,
`[SEP]`, padding) get the label `IGNORE_LABEL` (-100), which weighs 0 in the loss and the token
accuracy, the usual alignment of BERT-style NER.

`encode_sentences` builds the features and remembers where each word's first piece is, so that
`decode_predictions` maps piece logits back to one tag per word; `make_eval_fn` scores them at the
entity level (exact spans, `albert_tf.metrics.entity_scores`) and by token accuracy. A word whose
pieces fall beyond the sequence length is predicted `O` (and counted, with a warning): split long
sentences first (`albert_tf.data.tagging.split_long_sentences`).

`predict_text_entities` tags raw texts (split into words or characters by
`albert_tf.data.tagging.split_with_offsets`, importable from here too)
and returns the entities with their labels, character spans in the text and scores: the
reference of the exported serving signature (`albert_tf.export.tagging`).
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any, Dict, List, Sequence, Tuple

import keras
import numpy as np
from keras import ops

# TOKEN_UNITS and split_with_offsets live in albert_tf.data.tagging; imported here by their old names.
from albert_tf.data.tagging import TOKEN_UNITS, TaggedSentence, TagVocab, split_with_offsets  # noqa: F401
from albert_tf.kinds import KIND_TAGGER
from albert_tf.metrics import entity_scores, get_entities, token_accuracy
from albert_tf.tasks.base import AlbertTaskModel

logger = logging.getLogger(__name__)

IGNORE_LABEL = -100
FEATURE_NAMES = ("input_ids", "input_mask", "segment_ids")


def _label_weights(labels):
    return ops.cast(ops.greater_equal(labels, 0), "float32")


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertTokenClassifier(AlbertTaskModel):
    """Per-token classifier on the sequence output.

    Inputs: `input_ids`, `input_mask`, `segment_ids` [batch, seq] and, for training, `labels`
    [batch, seq] (tag ids; `IGNORE_LABEL` where not scored). Outputs: `{"logits": [batch, seq,
    num_labels]}`. Metrics: `token_accuracy` over the labelled positions.

    Args:
        encoder: An `AlbertEncoder`.
        num_labels: Number of tags (>= 2).
        dropout: Dropout on the sequence output.
    """

    export_kind = KIND_TAGGER

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


@dataclasses.dataclass
class EncodedSentences:
    """Model features of tagged sentences and the word -> piece alignment.

    Attributes:
        features: int32 `input_ids`, `input_mask`, `segment_ids`, `labels` [n, seq_length].
        word_positions: Per sentence, the position of each word's first piece (-1 when the word
            was cut off by the sequence length).
        truncated_words: Words that did not fit.
    """

    features: Dict[str, np.ndarray]
    word_positions: List[List[int]]
    truncated_words: int


def encode_sentences(
    sentences: Sequence[TaggedSentence], tokenizer, *, seq_length: int, tag_vocab: TagVocab, with_labels: bool = True
) -> EncodedSentences:
    """Tokenizes every word, packs `[CLS] pieces [SEP]`, labels the first piece of each word.

    A word the tokenizer turns into no piece at all (e.g. a lone control character) becomes
    the unknown token, so every word keeps a position and a prediction.

    Raises:
        DataFormatError: A tag outside `tag_vocab`, naming the sentence's file and line.
        ValueError: `seq_length < 3` or no sentences.
    """
    if seq_length < 3:
        raise ValueError(f"seq_length must be >= 3, got {seq_length}")
    if not sentences:
        raise ValueError("no sentences to encode")
    n = len(sentences)
    input_ids = np.full((n, seq_length), tokenizer.pad_id, dtype=np.int32)
    input_mask = np.zeros((n, seq_length), dtype=np.int32)
    labels = np.full((n, seq_length), IGNORE_LABEL, dtype=np.int32)
    positions: List[List[int]] = []
    truncated = 0
    budget = seq_length - 2
    for row, sentence in enumerate(sentences):
        pieces: List[int] = []
        word_positions: List[int] = []
        for word, tag in zip(sentence.tokens, sentence.tags):
            tag_id = tag_vocab.id_of(tag, sentence) if with_labels else None
            ids = tokenizer.encode(word) or [tokenizer.unk_id]
            if len(pieces) + 1 > budget:
                word_positions.append(-1)
                truncated += 1
                continue
            position = len(pieces) + 1  # after [CLS]
            word_positions.append(position)
            if with_labels:
                labels[row, position] = tag_id
            pieces.extend(ids[: budget - len(pieces)])
        sequence = [tokenizer.cls_id] + pieces + [tokenizer.sep_id]
        input_ids[row, : len(sequence)] = sequence
        input_mask[row, : len(sequence)] = 1
        positions.append(word_positions)
    if truncated:
        logger.warning("%d word(s) beyond seq_length=%d are predicted 'O'; split long sentences first", truncated, seq_length)
    features = {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": np.zeros_like(input_ids)}
    if with_labels:
        features["labels"] = labels
    return EncodedSentences(features, positions, truncated)


def decode_predictions(logits: np.ndarray, word_positions: Sequence[Sequence[int]], tag_vocab: TagVocab) -> List[List[str]]:
    """One tag per word from piece logits [n, seq, num_labels] (argmax at each first piece)."""
    predicted = np.asarray(logits).argmax(axis=-1)
    out = []
    for row, positions in enumerate(word_positions):
        out.append([tag_vocab.tag_of(predicted[row, p]) if p >= 0 else "O" for p in positions])
    return out


def predict_logits(model, features: Dict[str, np.ndarray], batch_size: int = 32, *, callbacks=None) -> np.ndarray:
    """Piece logits [n, seq, num_labels] for encoded features (`callbacks` go to `model.predict`)."""
    import tensorflow as tf

    dataset = tf.data.Dataset.from_tensor_slices({k: features[k] for k in FEATURE_NAMES}).batch(batch_size)
    return np.asarray(model.predict(dataset, verbose=0, callbacks=callbacks)["logits"])


def score_tagging(
    logits: np.ndarray, encoded: EncodedSentences, sentences: Sequence[TaggedSentence], tag_vocab: TagVocab
) -> Dict[str, float]:
    """Entity precision / recall / F1 over the words, token accuracy over the labelled pieces,
    and the mean cross-entropy over the labelled pieces (`loss`)."""
    predicted_tags = decode_predictions(logits, encoded.word_positions, tag_vocab)
    entities = entity_scores(predicted_tags, [list(s.tags) for s in sentences])
    labels = encoded.features["labels"]
    mask = labels >= 0
    logits = np.asarray(logits, dtype=np.float64)
    shifted = logits - logits.max(axis=-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    picked = np.take_along_axis(log_probs, np.where(mask, labels, 0)[..., None], axis=-1)[..., 0]
    return {
        "entity_precision": float(entities["precision"]),
        "entity_recall": float(entities["recall"]),
        "entity_f1": float(entities["f1"]),
        "token_accuracy": token_accuracy(logits.argmax(axis=-1), labels, weights=mask),
        "loss": float(-picked[mask].mean()),
    }


def make_eval_fn(encoded: EncodedSentences, sentences: Sequence[TaggedSentence], tag_vocab: TagVocab, batch_size: int = 32):
    """`eval_fn(model, eval_data) -> metrics` for `run_finetuning`; `eval_data` is ignored in
    favour of the encoded dev sentences, whose word alignment the entity scores need."""

    def eval_fn(model, eval_data=None, callbacks=None) -> Dict[str, float]:
        logits = predict_logits(model, encoded.features, batch_size, callbacks=callbacks)
        return score_tagging(logits, encoded, sentences, tag_vocab)

    return eval_fn


def entity_spans(
    tags: Sequence[str], probabilities: Sequence[float], spans: Sequence[Tuple[str, int, int]], text: str
) -> List[Dict[str, Any]]:
    """The entities of one text's unit tags, with character spans.

    Args:
        tags: One tag per unit (entities as `albert_tf.metrics.get_entities` reads them).
        probabilities: The probability of each unit's tag.
        spans: The units' `(unit, start, end)` from `split_with_offsets`.
        text: The text the spans point into.

    Returns:
        `{"label", "start", "end", "text", "score"}` per entity: its type, the first character
        of its first unit and the end (exclusive) of its last one, `text[start:end]`, and the
        mean probability of its units' tags.
    """
    entities = []
    for label, first, last in get_entities(tags):
        start, end = spans[first][1], spans[last][2]
        score = float(np.mean(probabilities[first : last + 1]))
        entities.append({"label": label, "start": start, "end": end, "text": text[start:end], "score": score})
    return entities


def predict_text_entities(
    model, tokenizer, texts: Sequence[str], tag_vocab: TagVocab, *, seq_length: int, token_unit: str = "word",
    batch_size: int = 32,
) -> List[Dict[str, Any]]:
    """Tags raw texts: per text its `words` (units), their `tags` and the `entities` (`entity_spans`).

    Each text is split by `split_with_offsets`, encoded by `encode_sentences` (one tag per unit,
    `O` for a unit cut off by `seq_length`) and tagged by the argmax at each unit's first piece.

    Args:
        model: The fine-tuned `AlbertTokenClassifier`.
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
    logits = predict_logits(model, encoded.features, batch_size).astype(np.float64)
    tags = decode_predictions(logits, encoded.word_positions, tag_vocab)
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
    probabilities = shifted / shifted.sum(axis=-1, keepdims=True)
    records = []
    for row, (text, text_spans, text_tags) in enumerate(zip(texts, spans, tags)):
        positions = encoded.word_positions[row]
        # A unit cut off by the sequence length is "O", which belongs to no entity: 0.
        unit_probabilities = [
            float(probabilities[row, p].max()) if p >= 0 else 0.0 for p in positions
        ]
        records.append({
            "words": [u for u, _, _ in text_spans],
            "tags": text_tags,
            "entities": entity_spans(text_tags, unit_probabilities, text_spans, text),
        })
    return records
