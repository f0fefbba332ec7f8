"""The raw-text tagger, the keras-hub way: texts in, entities with character spans out.

`AlbertTextTagger` holds the in-graph tokenizer (`model.preprocessor`), the `AlbertEncoder`
(`model.encoder`) and the id-level head `AlbertForTagging` (`model.task_model`). Its labels
are converted in Python, as `albert-tf finetune` converts them (`encode_sentences`), so it takes
lists of texts; its `predict` returns `entity_record`s, the entities the export serves.
`MaskedTokenAccuracy` is its Keras metric.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

import keras
import numpy as np
import tensorflow as tf

from albert_tf.tasks.tagging import TAGGING
from albert_tf.tasks.tagging.data import (
    IGNORE_LABEL,
    TOKEN_UNITS,
    TaggedSentence,
    TagVocab,
    encode_sentences,
    split_with_offsets,
)
from albert_tf.tasks.tagging.head import AlbertForTagging
from albert_tf.tasks.tagging.metrics import decode_predictions, entity_spans, unit_probabilities
from albert_tf.tasks.text_task import (
    DEFAULT_BATCH_SIZE,
    AlbertTextTask,
    check_parts,
    export_text_model,
    python_tokenizer,
    token_inputs,
)
from albert_tf.tokenization.in_graph import DEFAULT_LENGTH_BUCKET, check_length_bucket, packed_width


def split_units(text: str, token_unit: str) -> List[Tuple[str, int, int]]:
    """The tagging units of `text` with their character spans `(unit, start, end)` (end exclusive):
    whitespace-separated words ("word") or the characters that are not whitespace ("char").

    `albert_tf.tasks.tagging.data.split_with_offsets` without its check of `token_unit` (any unit but
    "char" splits into words; `AlbertTextTagger` checks its unit when it is built)."""
    return split_with_offsets(text, token_unit, strict=False)


@keras.saving.register_keras_serializable(package="albert_tf")
class MaskedTokenAccuracy(keras.metrics.Mean):
    """Accuracy of per-token logits over the labelled tokens (labels >= 0; `IGNORE_LABEL` is -100)."""

    def __init__(self, name: str = "token_accuracy", dtype=None):
        super().__init__(name=name, dtype=dtype)

    def update_state(self, y_true, y_pred, sample_weight=None):
        from keras import ops

        labels = ops.cast(y_true, "int32")
        correct = ops.cast(ops.equal(ops.cast(ops.argmax(y_pred, axis=-1), "int32"), labels), "float32")
        weights = ops.cast(ops.greater_equal(labels, 0), "float32")
        if sample_weight is not None:
            sample_weight = ops.cast(sample_weight, "float32")
            if len(sample_weight.shape) == 1:  # per example: the same weight on each of its tokens
                sample_weight = ops.expand_dims(sample_weight, -1)
            weights = weights * sample_weight
        return super().update_state(correct, sample_weight=weights)


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertTextTagger(AlbertTextTask):
    """Token tagging (NER) on raw text: entities with their labels and character spans.

    The text is split into tagging units, whitespace-separated words (`token_unit="word"`, e.g.
    English CoNLL) or single characters (`"char"`, e.g. Chinese People's Daily), and encoded as
    `albert-tf finetune --task` tagging does (`albert_tf.tasks.tagging.data.encode_sentences`: each
    unit's tag on its first piece, the other pieces ignored); predictions are decoded per unit
    (`decode_predictions`) and grouped into BIO entities (`get_entities`). The
    head is `AlbertForTagging` (`task_model`).

    Inputs: a list of texts. Labels for `fit` / `evaluate`: per text, either one tag per unit
    (`["B-PER", "I-PER", "O"]`, or the tags' ids in `tags`) or its entities as `(start, end,
    label)` character spans (or dicts with those keys), end exclusive, which tag every unit they
    overlap (`B-` on the first). A tag the model has not is an error, before training.
    `predict` returns, per text, a list of `entity_record`s (`{"label", "start", "end", "text",
    "score"}`).

    Character spans are exact in the original text but cover whole units: with words, punctuation
    attached to a word (`"Paris,"`) is inside the span, as the tokenizer never sees the word
    without it; units whose pieces fall beyond `sequence_length` are tagged `O` (split long texts
    first). The tokenizer's own normalization (NFKD, lower-casing) does not move the spans, since
    they are taken from the units, not from the pieces.

    Compiled by default with the tagging recipe's bias-corrected AdamW, the cross-entropy over the
    labelled pieces (`SparseCategoricalCrossentropy(ignore_class=-100)`) and `token_accuracy`.

    Args:
        encoder: An `AlbertEncoder`.
        preprocessor: The `AlbertTokenizerLayer` of the encoder's vocabulary (its
            `sequence_length` is the model's).
        tags: The BIO tags in id order, "O" first (e.g. `["O", "B-PER", "I-PER"]`).
        dropout: Dropout before the head.
        token_unit: "word" or "char".
        compile: Compile with the defaults above.
        **kwargs: `keras.Model` arguments (`name`, ...).

    Example:

    >>> model = AlbertTextTagger.from_pretrained("albert_base", tags=["O", "B-PER", "I-PER"])  # doctest: +SKIP
    >>> model.fit(["Ada Lovelace wrote"], [[(0, 12, "PER")]], epochs=3)  # doctest: +SKIP
    >>> model.predict(["Ada Lovelace wrote"])  # doctest: +SKIP
    [[{'label': 'PER', 'start': 0, 'end': 12, 'text': 'Ada Lovelace', 'score': 0.97}]]
    """

    kind = TAGGING

    def __init__(self, encoder, preprocessor, tags: Sequence[str], dropout: float = 0.1, token_unit: str = "word",
                 compile: bool = True, length_bucket: Optional[int] = DEFAULT_LENGTH_BUCKET,
                 task_model_name: Optional[str] = "token_classifier", **kwargs):
        check_parts(encoder, preprocessor)
        if token_unit not in TOKEN_UNITS:
            raise ValueError(f"token_unit must be one of {', '.join(TOKEN_UNITS)}, got {token_unit!r}")
        tag_vocab = TagVocab(tags)
        # === Layers ===
        self.encoder = encoder
        self.preprocessor = preprocessor
        self.task_model = AlbertForTagging(encoder, num_labels=len(tag_vocab), dropout=dropout,
                                                name=task_model_name)

        # === Functional Model ===
        inputs = token_inputs()
        outputs = self.task_model(inputs)["logits"]
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)
        self.length_bucket = check_length_bucket(length_bucket)

        # === Config ===
        self.tags = list(tag_vocab.tags)
        self.tag_vocab = tag_vocab
        self.dropout = dropout
        self.token_unit = token_unit
        if compile:
            self.compile()

    head_fields = ("tags",)
    default_name = "albert_text_tagger"

    @classmethod
    def from_pretrained(cls, path, tags: Optional[Sequence[str]] = None, *, token_unit: Optional[str] = None,
                        sequence_length: Optional[int] = None, dropout: Optional[float] = None,
                        new_head: bool = False, seed: Optional[int] = None, compile: bool = True, config=None,
                        tokenizer=None, lower_case: Optional[bool] = None, dtype=None,
                        allow_vocab_mismatch: bool = False, name: Optional[str] = None) -> "AlbertTextTagger":
        """The tagger stored at `path`, whole, or a new one on the pretrained encoder there: `tags`
        are needed for a new head, and other `tags` than the stored ones make one (other
        arguments as `AlbertTextClassifier.from_pretrained`)."""
        return cls._restore(
            path, dict(tags=None if tags is None else list(tags), token_unit=token_unit, dropout=dropout),
            new_head=new_head, seed=seed, compile=compile, name=name, sequence_length=sequence_length, dtype=dtype,
            config=config, tokenizer=tokenizer, lower_case=lower_case, allow_vocab_mismatch=allow_vocab_mismatch,
        )

    @classmethod
    def arguments_from_spec(cls, spec, head_config):
        return {**super().arguments_from_spec(spec, head_config), "tags": list(spec.labels),
                "token_unit": spec.token_unit}

    @classmethod
    def complete_arguments(cls, config, encoder):
        if not config.get("tags"):
            raise ValueError("tags are needed for a new tagger head: pass tags= (the BIO tags in id order, 'O' first)")
        return config

    def spec_fields(self):
        return dict(task="tagging", kind=TAGGING, labels=list(self.tags), token_unit=self.token_unit,
                    metrics=["entity_f1", "entity_precision", "entity_recall", "token_accuracy"],
                    best_metric="entity_f1")

    def default_loss(self):
        return keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=IGNORE_LABEL)

    def default_metrics(self):
        return [MaskedTokenAccuracy(name="token_accuracy")]

    best_metric = "token_accuracy"

    # --- text <-> units <-> pieces -------------------------------------------------------------------

    def _unit_tags(self, units, labels, index: int) -> List[str]:
        """One tag per unit from a text's labels: tags (names, or ids into `tags`) as they are, or
        entity spans as BIO; one line for a tag the model has not."""
        labels = [label.item() if isinstance(label, np.generic) else label for label in labels]
        if all(_is_tag(label) for label in labels) and (labels or not units):
            if len(labels) != len(units):
                raise ValueError(f"text {index}: {len(labels)} tags for {len(units)} {self.token_unit} units")
            return [self._tag_name(label, index) for label in labels]
        tags = ["O"] * len(units)
        for entity in labels:
            if isinstance(entity, dict):
                start, end, label = entity["start"], entity["end"], entity["label"]
            elif isinstance(entity, (tuple, list)) and len(entity) == 3:
                start, end, label = entity
            else:
                raise ValueError(f"text {index}: labels are one tag per {self.token_unit} (names or ids) or entity "
                                 f"spans (start, end, label), got {entity!r}")
            covered = [i for i, (_, a, b) in enumerate(units) if a < end and b > start]
            if not covered:
                raise ValueError(f"text {index}: the entity ({start}, {end}, {label!r}) covers no {self.token_unit}")
            for position, i in enumerate(covered):
                tags[i] = ("B-" if position == 0 else "I-") + str(label)
                if tags[i] not in self.tags:
                    raise ValueError(f"text {index}: the entity ({start}, {end}, {label!r}) needs the tag {tags[i]}, "
                                     f"which the model has not; its tags are {', '.join(self.tags)}")
        return tags

    def _tag_name(self, tag, index: int) -> str:
        """A unit's tag, given as a name or as its id in `tags`, as a name of the model's tags."""
        if isinstance(tag, str):
            if tag not in self.tags:
                raise ValueError(f"text {index}: unknown tag {tag!r}; the model's tags are {', '.join(self.tags)}")
            return tag
        if not 0 <= tag < len(self.tags):
            raise ValueError(f"text {index}: tag id {tag} is out of range: tag ids are 0..{len(self.tags) - 1} "
                             f"({', '.join(self.tags)})")
        return self.tags[tag]

    def encode(self, texts, y=None):
        """Encodes texts (and labels) as `encode_sentences` does for `albert-tf finetune`.

        Returns:
            `(features, units, encoded)`: the feature dict (with `labels` when `y` is given), the
            units of each text (`split_units`) and the `EncodedSentences` (word positions).
        """
        if isinstance(texts, (str, bytes)) or isinstance(texts, (tf.data.Dataset, dict, tuple)):
            raise ValueError("the tagger takes a list of texts (str)")
        texts = [t.decode("utf-8") if isinstance(t, bytes) else t for t in list(texts)]
        if not texts or not all(isinstance(t, str) for t in texts):
            raise ValueError("the tagger takes a non-empty list of texts (str)")
        if y is not None and len(y) != len(texts):
            raise ValueError(f"{len(y)} label lists for {len(texts)} texts")
        units = [split_units(text, self.token_unit) for text in texts]
        sentences = []
        for i, text_units in enumerate(units):
            tokens = tuple(u[0] for u in text_units) or ("",)
            tags = tuple(self._unit_tags(text_units, y[i], i)) if y is not None else ("O",) * len(tokens)
            sentences.append(TaggedSentence(tokens, tags or ("O",), "<text>", i))
        encoded = encode_sentences(sentences, python_tokenizer(self.preprocessor),
                                   seq_length=self.preprocessor.sequence_length, tag_vocab=self.tag_vocab,
                                   with_labels=y is not None)
        return encoded.features, units, encoded

    def make_dataset(self, x, y=None, sample_weight=None, *, batch_size=None, shuffle=False):
        """The batched dataset of encoded texts (`encode`) and their per-piece labels."""
        features, _, _ = self.encode(x, y)
        labels = features.pop("labels", None)
        weights = None
        if sample_weight is not None:
            # Per token, as the loss is (Keras' masked loss does not broadcast per-example weights).
            per_text = np.asarray(sample_weight, dtype="float32").reshape(-1, 1)
            weights = np.broadcast_to(per_text, features["input_ids"].shape).copy()
        dataset = tf.data.Dataset.from_tensor_slices(keras.utils.pack_x_y_sample_weight(features, labels, weights))
        if shuffle:
            dataset = dataset.shuffle(len(features["input_ids"]), reshuffle_each_iteration=True)
        return dataset.batch(batch_size or DEFAULT_BATCH_SIZE).prefetch(tf.data.AUTOTUNE)

    def _validation_dataset(self, data, batch_size):
        if not isinstance(data, (tuple, list)) or len(data) not in (2, 3):
            raise ValueError("validation_data must be (texts, labels) or (texts, labels, sample_weight)")
        return self.make_dataset(*data, batch_size=batch_size)

    def predict(self, x, batch_size=None, **kwargs):
        """The entities of each text: a list (per text) of `entity_record`s (`label`, `start`,
        `end`, `text`, `score`), character offsets into the text, end exclusive, as
        `predict_text_entities` gives them and the export serves them."""
        features, units, encoded = self.encode(x)
        dataset = tf.data.Dataset.from_tensor_slices(features).batch(batch_size or DEFAULT_BATCH_SIZE)
        if self.length_bucket is not None:
            dataset = dataset.map(lambda batch: _cut_to_bucket(batch, self.length_bucket))
        logits = keras.Model.predict(self, dataset, **kwargs)
        if self.length_bucket is not None:
            # Batches of different widths: `decode_predictions` reads the first pieces only.
            logits = _padded_concat(logits, self.preprocessor.sequence_length)
        tags = decode_predictions(logits, encoded.word_positions, self.tag_vocab)
        probabilities = unit_probabilities(logits, encoded.word_positions)
        results = []
        for text, text_units, text_tags, text_probabilities in zip(list(x), units, tags, probabilities):
            text = text.decode("utf-8") if isinstance(text, bytes) else text
            results.append(entity_spans(text_tags[: len(text_units)], text_probabilities, text_units, text))
        return results

    def export(self, export_base, model_name: Optional[str] = None, version: Optional[int] = None, **kwargs):
        """Writes the TF Serving SavedModel (`albert_tf.tasks.tagging.serving`: text in, entities with
        character spans out, plus the `tokens` signature) through `export_saved_model`."""
        kwargs.setdefault("task_settings", {"token_unit": self.token_unit})
        return export_text_model(self, export_base, model_name, version, labels=self.tags, **kwargs)

    def get_config(self):
        config = super().get_config()
        config.update({"tags": list(self.tags), "dropout": self.dropout, "token_unit": self.token_unit})
        return config


def _is_tag(label) -> bool:
    """Whether a label is one unit's tag (a name, or an id into the model's tags), not an entity."""
    return isinstance(label, str) or (isinstance(label, (int, np.integer)) and not isinstance(label, bool))


def _cut_to_bucket(features: Dict[str, tf.Tensor], length_bucket: int) -> Dict[str, tf.Tensor]:
    """Fixed-length features of a batch without the padding columns beyond its length bucket."""
    sequence_length = features["input_mask"].shape[-1]
    width = packed_width(tf.reduce_sum(features["input_mask"], axis=-1), sequence_length, length_bucket)
    return {k: v[..., :width] for k, v in features.items()}


def _padded_concat(values, length: int) -> np.ndarray:
    """Keras `predict`'s outputs of batches of different widths (axis 1; a `RaggedTensor` then)
    as one array padded with zeros to `length`."""
    if isinstance(values, tf.RaggedTensor):
        values = values.to_tensor()
    values = np.asarray(values)
    return np.pad(values, [(0, 0), (0, length - values.shape[1])] + [(0, 0)] * (values.ndim - 2))
