"""Token classification (NER) served from raw text: entities and their character spans, in the graph.

`TaggerServing` (export kind `tagging`) is the serving module of an `AlbertForTagging`:
`serving_default` takes `text` and returns the entities of each text, padded to the batch's
largest count: `entity_labels`, `entity_texts` (string `[-1, E]`), `entity_starts`,
`entity_ends` (int32 code-point offsets into the text, end exclusive, -1 padding),
`entity_scores` (float), `num_entities` (int32 `[-1]`), and the tagged units `words`,
`word_tags` (string `[-1, W]`), `num_words`; `tokens` returns per token `logits`,
`probabilities` (`[-1, seq, tags]`), `tag_id` (int32) and `tag` (string). Column `i` of the
entity outputs is the `i`-th `entity_record` that `predict_text_entities` and
`AlbertTextTagger.predict` give for the text.

`TaggingGraph` turns a `text` string tensor `[batch]` into the entities of each text with TF and
tensorflow-text ops only, reproducing the Python path of `albert_tf.tasks.tagging`
(`predict_text_entities`, and `AlbertTextTagger.predict`):

1. the text (invalid UTF-8 replaced by U+FFFD, as `bytes.decode("utf-8", "replace")`) is cut
   into the units the model tags, with their code-point spans: `token_unit="word"` — runs of
   non-whitespace characters (`str.split()`, whitespace being `str.isspace`); `"char"` — every
   character that is not whitespace (People's Daily);
2. every unit is tokenized on its own with the training tokenizer (`AlbertTokenizerLayer`:
   `tokenizer.encode(word)`, `[UNK]` for a unit that gives no piece) and the pieces are packed
   `[CLS] pieces [SEP]`, cut at `sequence_length - 2` pieces (`encode_sentences`);
3. each unit's tag is the argmax of the logits at its first piece; a unit whose first piece
   was cut off is tagged `O` (`decode_predictions`);
4. entities are read from the unit tags as `albert_tf.tasks.tagging.metrics.get_entities` reads them
   (conlleval: an entity starts at `B-X`/`S-X`, at `I-X`/`E-X` after `O` or after another type,
   and after an `E-`/`S-` tag; it ends before the next tag that does not continue it), so BIO,
   IOB1 and BIOES tag sets decode alike in both paths.

An entity's span is the characters from the first character of its first unit to the last
character of its last unit: code-point offsets `[start, end)` into the text as sent (after the
UTF-8 replacement above), so for valid UTF-8 `text[start:end] == entity_text` in Python.
Because the model tags whole units, the spans need no sub-word offsets: they are exact for
SentencePiece and WordPiece vocabularies alike, whatever the normalization (NFKD, accents,
case) does to the pieces. The whitespace *inside* an entity of several words is the text's own.
The price is the Python path's: a word is everything between two whitespace runs, so
punctuation attached to a word ("Paris,") is part of it and of its entity's span; models trained
on CoNLL data (punctuation as separate tokens) want text with space-separated punctuation.
Offsets count code points (Python `str` indices), not UTF-16 units or bytes.
An entity's score is the mean, over its units, of the softmax probability of the unit's
predicted tag.

Outputs are dense: per text `num_entities` and `num_words`; the entity outputs are padded to
the batch's largest entity count (at least 1 column) with "" / -1 / 0.0, the word outputs to its
largest unit count. Under server-side batching the padding width is that of the merged batch:
read `num_entities` / `num_words`, not the width.
"""

from __future__ import annotations

from typing import Dict, Optional, Sequence

import tensorflow as tf

from albert_tf.export.signatures import TEXT_KEY, ServingModule, register_serving, serving_function, string_spec
from albert_tf.tasks.tagging import TAGGING
from albert_tf.tasks.tagging.data import TagVocab, check_token_unit
from albert_tf.tasks.tagging.metrics import split_tag
from albert_tf.tokenization import unicode_classes
from albert_tf.tokenization.in_graph import (
    check_length_bucket, masked, pad_columns, positions_in_rows, sanitize_utf8, value_rowids,
)

# Tag prefixes as small ints; "O" (and padding) is 0.
_OUTSIDE, _BEGIN, _INSIDE, _END, _SINGLE = 0, 1, 2, 3, 4
_PREFIX_CODES = {"O": _OUTSIDE, "B": _BEGIN, "I": _INSIDE, "E": _END, "S": _SINGLE}


def tagging_settings(settings, tags: Sequence[str]) -> Dict:
    """The complete tagging settings (`token_unit`, default "word"), checked.

    Raises:
      ValueError: an unknown `token_unit` or setting.
    """
    settings = dict(settings or {})
    unknown = sorted(set(settings) - {"token_unit"})
    if unknown:
        raise ValueError(f"unknown tagging settings {unknown}; expected token_unit")
    return {"token_unit": check_token_unit(settings.get("token_unit") or "word")}


class TaggingGraph:
    """The in-graph tagging pipeline for one `AlbertForTagging` and its tokenizer layer.

    Args:
      model: an `AlbertForTagging`.
      tokenizer: the `AlbertTokenizerLayer` of training (its `sequence_length` is the feature length).
      tags: the tags in id order (task.json's `labels`).
      settings: from `tagging_settings`.
      length_bucket: None packs every text to `sequence_length`; an int packs a batch to its
        longest text rounded up to a multiple of it (same tags: padding is masked out).

    Raises:
      ValueError: tags that are not a valid tag set or do not match the model.
    """

    def __init__(self, model, tokenizer, tags: Sequence[str], settings: Dict, length_bucket: Optional[int] = None):
        vocab = TagVocab(tags)
        if len(vocab) != int(model.num_labels):
            raise ValueError(f"{len(vocab)} tags for a token classifier of {model.num_labels} labels")
        self.model = model
        self.tokenizer = tokenizer
        self.settings = settings
        self.seq = int(tokenizer.sequence_length)
        self.length_bucket = check_length_bucket(length_bucket)
        self.tags = list(vocab.tags)
        split = [split_tag(tag) for tag in self.tags]
        types = sorted({kind for prefix, kind in split if prefix != "O"})
        self._tag_table = tf.constant(self.tags, tf.string)
        self._prefix_table = tf.constant([_PREFIX_CODES[prefix] for prefix, _ in split], tf.int32)
        self._type_table = tf.constant([types.index(kind) if prefix != "O" else -1 for prefix, kind in split], tf.int32)
        # One extra "" so that an empty type list still gathers.
        self._type_names = tf.constant(types + [""], tf.string)

    # --- text -> units with code-point spans -----------------------------------------------------

    def split(self, text: tf.Tensor):
        """(units ragged [B, (W)], start char, end char (exclusive) ragged int32 [B, (W)])."""
        chars = tf.strings.unicode_split(text, "UTF-8")
        flat = chars.flat_values
        rows = value_rowids(chars.row_splits)
        position = positions_in_rows(chars.row_splits, rows)
        space = tf.strings.regex_full_match(flat, unicode_classes.re2_class("isspace"))
        keep = tf.logical_not(space)
        if self.settings["token_unit"] == "char":
            starts_unit = keep
        else:
            previous_space = tf.concat([[True], space[:-1]], axis=0)
            starts_unit = tf.logical_and(keep, tf.logical_or(previous_space, tf.equal(position, 0)))
        # Every kept character belongs to the unit most recently started: the rows are laid
        # out one after the other, and a unit never spans a row (position 0 always starts one).
        unit_of_char = tf.cumsum(tf.cast(starts_unit, tf.int32)) - 1
        num_units = tf.reduce_sum(tf.cast(starts_unit, tf.int32))
        kept_unit = masked(unit_of_char, keep)
        kept_position = masked(position, keep)
        units = tf.strings.unsorted_segment_join(masked(flat, keep), kept_unit, num_units)
        start = tf.math.unsorted_segment_min(kept_position, kept_unit, num_units)
        end = tf.math.unsorted_segment_max(kept_position, kept_unit, num_units) + 1
        unit_rows = masked(rows, starts_unit)
        batch = tf.shape(text, out_type=tf.int64)[0]
        make = lambda values: tf.RaggedTensor.from_value_rowids(values, tf.cast(unit_rows, tf.int64), nrows=batch)  # noqa: E731
        return make(units), make(start), make(end)

    # --- units -> model features ---------------------------------------------------------------

    def features(self, text: tf.Tensor) -> Dict[str, tf.Tensor]:
        """The model inputs and the unit layout of a batch of texts (see the module docstring)."""
        layer = self.tokenizer
        text = sanitize_utf8(tf.reshape(text, [-1]))
        units, starts, ends = self.split(text)
        flat_units = units.flat_values
        pieces = tf.cast(layer.tokenize(flat_units), tf.int32).with_row_splits_dtype(tf.int64)
        # A unit with no piece is one [UNK] (`tokenizer.encode(word) or [unk_id]`).
        count = tf.size(flat_units, out_type=tf.int64)
        unk_row = tf.RaggedTensor.from_tensor(tf.constant([[layer.unk_id]], tf.int32), row_splits_dtype=tf.int64)
        selector = tf.where(tf.equal(pieces.row_lengths(), 0), count, tf.range(count, dtype=tf.int64))
        pieces = tf.gather(tf.concat([pieces, unk_row], axis=0), selector)
        row_pieces = tf.RaggedTensor.from_row_splits(pieces, units.row_splits).merge_dims(1, 2)
        features = layer.pack(row_pieces, length_bucket=self.length_bucket)
        # Position of each unit's first piece: 1 + the pieces of the row's earlier units; -1 when
        # that is beyond the `sequence_length - 2` pieces kept.
        lengths = tf.cast(pieces.row_lengths(), tf.int32)
        before = tf.cumsum(lengths, exclusive=True)
        padded = tf.concat([before, [tf.reduce_sum(lengths)]], axis=0)
        row_base = tf.gather(padded, tf.cast(units.row_splits[:-1], tf.int32))
        within = before - tf.gather(row_base, value_rowids(units.row_splits))
        position = tf.where(within < self.seq - 2, within + 1, -1)
        width = tf.maximum(tf.cast(tf.reduce_max(tf.concat([units.row_lengths(), [0]], axis=0)), tf.int32), 1)
        features.update(
            text=text,
            units=pad_columns(units.to_tensor(""), width, ""),
            unit_start=pad_columns(starts.to_tensor(-1), width, -1),
            unit_end=pad_columns(ends.to_tensor(-1), width, -1),
            unit_position=pad_columns(units.with_flat_values(position).to_tensor(-1), width, -1),
            num_units=tf.cast(units.row_lengths(), tf.int32),
        )
        return features

    # --- logits -> unit tags -> entities ---------------------------------------------------------

    def unit_tags(self, features: Dict[str, tf.Tensor], logits: tf.Tensor):
        """(tag id [B, W] (-1 for a cut-off or padding unit), probability of that tag [B, W])."""
        position = features["unit_position"]
        logits = tf.cast(logits, tf.float32)
        at_unit = tf.gather(logits, tf.maximum(position, 0), batch_dims=1)  # [B, W, L]
        tag_id = tf.argmax(at_unit, axis=-1, output_type=tf.int32)
        probability = tf.gather(tf.nn.softmax(at_unit, axis=-1), tag_id, batch_dims=2)
        scored = position >= 0
        return tf.where(scored, tag_id, -1), tf.where(scored, probability, 0.0)

    def entities(self, features: Dict[str, tf.Tensor], tag_id: tf.Tensor, probability: tf.Tensor) -> Dict[str, tf.Tensor]:
        """The entity outputs of the unit tags (the `get_entities` rule, vectorized)."""
        scored = tag_id >= 0
        safe = tf.maximum(tag_id, 0)
        prefix = tf.where(scored, tf.gather(self._prefix_table, safe), _OUTSIDE)
        kind = tf.where(scored, tf.gather(self._type_table, safe), -1)
        batch = tf.shape(prefix)[0]
        previous_prefix = tf.concat([tf.fill([batch, 1], _OUTSIDE), prefix[:, :-1]], axis=1)
        previous_kind = tf.concat([tf.fill([batch, 1], -1), kind[:, :-1]], axis=1)
        inside = tf.not_equal(prefix, _OUTSIDE)
        # After `O` nothing is open, so a tag that is not `O` starts an entity; otherwise the open
        # one (whose type is the previous unit's) ends before a B/S tag, a type change or an E/S.
        begins = tf.logical_and(
            inside,
            tf.reduce_any(
                tf.stack([
                    tf.equal(previous_prefix, _OUTSIDE),
                    tf.equal(prefix, _BEGIN),
                    tf.equal(prefix, _SINGLE),
                    tf.not_equal(kind, previous_kind),
                    tf.equal(previous_prefix, _END),
                    tf.equal(previous_prefix, _SINGLE),
                ]),
                axis=0,
            ),
        )
        entity = tf.cumsum(tf.cast(begins, tf.int32), axis=1) - 1  # [B, W]: its entity, if inside
        num_entities = tf.reduce_sum(tf.cast(begins, tf.int32), axis=1)
        width = tf.maximum(tf.reduce_max(tf.concat([num_entities, [0]], axis=0)), 1)
        shape = tf.stack([batch, width])
        unit_index = tf.broadcast_to(tf.range(tf.shape(prefix)[1])[None, :], tf.shape(prefix))

        def scatter(mask, values, initial, combine):
            where = tf.cast(tf.where(mask), tf.int32)
            index = tf.stack([where[:, 0], tf.gather_nd(entity, where)], axis=1)
            return combine(tf.fill(shape, initial), index, tf.gather_nd(values, where))

        first_unit = scatter(begins, unit_index, 0, tf.tensor_scatter_nd_update)
        last_unit = scatter(inside, unit_index, 0, tf.tensor_scatter_nd_max)
        type_id = scatter(begins, kind, 0, tf.tensor_scatter_nd_update)
        score_sum = scatter(inside, probability, 0.0, tf.tensor_scatter_nd_add)
        count = scatter(inside, tf.ones_like(probability), 0.0, tf.tensor_scatter_nd_add)
        valid = tf.range(width)[None, :] < num_entities[:, None]
        start = tf.gather(features["unit_start"], first_unit, batch_dims=1)
        end = tf.gather(features["unit_end"], last_unit, batch_dims=1)
        text = tf.broadcast_to(features["text"][:, None], shape)
        entity_text = tf.strings.substr(text, tf.where(valid, start, 0), tf.where(valid, end - start, 0), unit="UTF8_CHAR")
        return {
            "entity_labels": tf.where(valid, tf.gather(self._type_names, type_id), ""),
            "entity_texts": tf.where(valid, entity_text, ""),
            "entity_starts": tf.where(valid, start, -1),
            "entity_ends": tf.where(valid, end, -1),
            "entity_scores": tf.where(valid, score_sum / tf.maximum(count, 1.0), 0.0),
            "num_entities": num_entities,
        }

    def __call__(self, text: tf.Tensor) -> Dict[str, tf.Tensor]:
        features = self.features(text)
        inputs = {k: features[k] for k in ("input_ids", "input_mask", "segment_ids")}
        logits = self.model(inputs, training=False)["logits"]
        tag_id, probability = self.unit_tags(features, logits)
        outputs = self.entities(features, tag_id, probability)
        real = tf.range(tf.shape(tag_id)[1])[None, :] < features["num_units"][:, None]
        outputs.update(
            words=features["units"],
            word_tags=tf.where(tag_id >= 0, tf.gather(self._tag_table, tf.maximum(tag_id, 0)), tf.where(real, "O", "")),
            num_words=features["num_units"],
        )
        return outputs


@register_serving
class TaggerServing(ServingModule):
    """An `AlbertForTagging`: entities from `text` in the graph (`TaggingGraph`)."""

    kind = TAGGING

    def _check_labels(self, labels):
        if labels is None:
            raise ValueError("a token classifier export needs its tags in id order (labels=task.json's labels)")
        return [str(l) for l in labels]

    def _check_task_settings(self, task_settings):
        self._reject_pair()
        settings = tagging_settings(task_settings, self.labels)
        self._objects.task = TaggingGraph(self.model, self.tokenizer, self.labels, settings,
                                          length_bucket=self.length_bucket)
        return settings

    def text_input_mask(self, **inputs):
        mask = self._objects.task.features(inputs[TEXT_KEY])["input_mask"]
        return mask, tf.range(tf.shape(mask)[0])

    def _token_outputs(self, features):
        logits = tf.cast(self.model(features, training=False)["logits"], tf.float32)
        tag_id = tf.argmax(logits, axis=-1, output_type=tf.int32)
        return {
            "logits": logits,
            "probabilities": tf.nn.softmax(logits, axis=-1),
            "tag_id": tag_id,
            "tag": tf.gather(self._label_table, tag_id),
        }

    def _text_function(self):
        return serving_function(lambda text: self._objects.task(text), input_signature=[string_spec(TEXT_KEY)])
