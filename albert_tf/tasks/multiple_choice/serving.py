"""Serving multiple choice (RACE models) from raw text: one score per choice, all in the graph.

`MultipleChoiceServing` is the export of an `AlbertForMultipleChoice` (export kind `multiple_choice`,
registered with `albert_tf.export.signatures.register_serving`): `serving_default` takes `text`,
`question` and `choices` and answers through `MultipleChoiceGraph`; `tokens` takes token ids
`[batch, choices, seq]`.

`MultipleChoiceGraph` turns `text` (the article / context, string `[batch]`), `question`
(string `[batch]`, "" when there is none) and `choices` (string `[batch, num_choices]`) into the
model's choice scores with TF and tensorflow-text ops only, reproducing the RACE conversion of
`albert_tf.tasks.multiple_choice.data` (the original `race_utils.py`) for `RaceExample(article=text,
question=question, options=choices)`:

1. the question and every choice are preprocessed (SentencePiece vocabularies: the tokenizer's
   `preprocess_text`; WordPiece: as given) and combined: every "_" of the question replaced by
   the choice when the question has one (cloze questions), else `question + " " + choice` (so an
   empty question gives the choice alone);
2. the combined text keeps its *last* `max_qa_length` pieces; the (preprocessed) text is cut to
   what is left of `sequence_length - 3`;
3. each choice becomes `[CLS] text [SEP] question+choice [SEP]` padded with 0 (segment ids 0 up
   to the first `[SEP]`, 1 after), and the model scores all choices of the batch at once.

`num_choices` is dynamic: the head scores each choice on its own (one dense unit on the pooled
output) and the softmax runs over the choices given, so a model fine-tuned with RACE's 4 options
serves any number >= 1 (a request of 0 choices fails with INVALID_ARGUMENT). Within one request
every row has the same number of choices (a dense tensor); TF Serving batches together only
requests of the same number.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

import tensorflow as tf

from albert_tf.export.signatures import TOKEN_KEYS, ServingModule, register_serving, serving_function, string_spec
from albert_tf.tasks.multiple_choice import MULTIPLE_CHOICE
from albert_tf.tasks.multiple_choice.data import DEFAULT_MAX_QA_LENGTH
from albert_tf.tokenization.in_graph import (
    check_length_bucket, packed_width, pad_columns, positions_in_rows, sanitize_utf8, value_rowids,
)

TEXT_KEY = "text"
QUESTION_KEY = "question"
CHOICES_KEY = "choices"


def multiple_choice_settings(settings: Optional[Dict[str, Any]], sequence_length: int) -> Dict[str, Any]:
    """The complete settings (`max_qa_length`, default 128 capped to `sequence_length - 3`), checked.

    Raises:
      ValueError: an unknown setting, or a `max_qa_length` that is not a positive integer of at
        most `sequence_length - 3` (the conversion's rule).
    """
    settings = dict(settings or {})
    # task.json's RACE settings also hold the reading options (`levels`, `max_seq_length`).
    settings.pop("levels", None)
    settings.pop("max_seq_length", None)
    unknown = sorted(set(settings) - {"max_qa_length"})
    if unknown:
        raise ValueError(f"unknown multiple-choice settings {unknown}; expected max_qa_length")
    value = settings.get("max_qa_length")
    if value is None:
        value = min(DEFAULT_MAX_QA_LENGTH, sequence_length - 3)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= sequence_length - 3:
        raise ValueError(f"max_qa_length must be an integer in [1, sequence_length - 3 = {sequence_length - 3}], got {value!r}")
    return {"max_qa_length": value}


class MultipleChoiceGraph:
    """The in-graph multiple-choice pipeline for one `AlbertForMultipleChoice` and its tokenizer layer.

    Args:
      model: an `AlbertForMultipleChoice`.
      tokenizer: the `AlbertTokenizerLayer` of training (its `sequence_length` is the row length).
      settings: from `multiple_choice_settings`.
      length_bucket: None packs every choice to `sequence_length`; an int packs a batch to its
        longest choice row rounded up to a multiple of it (same scores: padding is masked out).
    """

    def __init__(self, model, tokenizer, settings: Dict[str, Any], length_bucket: Optional[int] = None):
        self.model = model
        self.tokenizer = tokenizer
        self.settings = settings
        self.seq = int(tokenizer.sequence_length)
        self.max_qa_length = int(settings["max_qa_length"])
        self.length_bucket = check_length_bucket(length_bucket)

    def _preprocess(self, texts: tf.Tensor) -> tf.Tensor:
        # The conversion preprocesses with the tokenizer's `preprocess` where it has one
        # (SentencePiece); the WordPiece tokenizer has none, so its text goes in as given.
        if self.tokenizer.is_sentencepiece:
            return self.tokenizer.preprocess(texts)
        return sanitize_utf8(texts)

    def choice_texts(self, question: tf.Tensor, choices: tf.Tensor) -> tf.Tensor:
        """The question combined with each choice, `[batch * num_choices]` (`race.choice_texts`)."""
        num_choices = tf.shape(choices)[1]
        question = tf.repeat(self._preprocess(question), num_choices)
        option = self._preprocess(tf.reshape(choices, [-1]))
        # `question.replace("_", option)`: the parts between the blanks, the option after all
        # but the last part (the rewrite of `regex_replace` is one scalar, not one per row).
        parts = tf.strings.split(question, sep="_")
        rows = value_rowids(parts.row_splits)
        position = positions_in_rows(parts.row_splits, rows)
        splits = tf.cast(parts.row_splits, tf.int32)
        last = tf.gather(splits[1:] - splits[:-1] - 1, rows)
        filled_parts = tf.where(
            position < last, tf.strings.join([parts.flat_values, tf.gather(option, rows)]), parts.flat_values
        )
        filled = tf.strings.reduce_join(parts.with_flat_values(filled_parts), axis=-1)
        has_blank = tf.strings.regex_full_match(question, "(?s).*_.*")
        return tf.where(has_blank, filled, tf.strings.join([question, option], separator=" "))

    def features(self, text: tf.Tensor, question: tf.Tensor, choices: tf.Tensor) -> Dict[str, tf.Tensor]:
        """`input_ids`, `input_mask`, `segment_ids` int32 `[batch, num_choices, sequence_length]`
        (length-aware: `[batch, num_choices, width]`, see the class)."""
        layer, seq = self.tokenizer, self.seq
        text = tf.reshape(text, [-1])
        question = tf.reshape(question, [-1])
        checks = [
            tf.debugging.assert_equal(
                tf.shape(text)[0], tf.shape(other)[0], message=f"text and {name} must have the same batch size"
            )
            for name, other in (("question", question), ("choices", choices))
        ]
        checks.append(tf.debugging.assert_positive(tf.shape(choices)[1],
                                                   message="choices must have at least one choice per row"))
        # Before the rest: a bad request must report its check, not whichever shape error of the
        # graph's other ops happens to run first.
        with tf.control_dependencies([check for check in checks if check is not None]):
            text, question, choices = tf.identity(text), tf.identity(question), tf.identity(choices)
        num_choices = tf.shape(choices)[1]
        batch = tf.shape(text)[0]
        example = tf.repeat(tf.range(batch), num_choices)  # [B * C]

        ending = tf.cast(layer.tokenize(self.choice_texts(question, choices)), tf.int32)
        ending_total = tf.cast(ending.row_lengths(), tf.int32)
        ending_length = tf.minimum(ending_total, self.max_qa_length)
        ending_first = ending_total - ending_length  # the last `max_qa_length` pieces
        context = tf.cast(layer.tokenize(self._preprocess(text)), tf.int32)
        context_length = tf.minimum(tf.gather(tf.cast(context.row_lengths(), tf.int32), example), seq - 3 - ending_length)

        ending_dense = pad_columns(ending.to_tensor(0), 1, 0)
        context_dense = tf.gather(pad_columns(context.to_tensor(0), 1, 0), example)
        width = packed_width(context_length + ending_length + 3, seq, self.length_bucket)
        position = tf.range(width)[None, :]
        c_len, e_len = context_length[:, None], ending_length[:, None]
        ending_index = ending_first[:, None] + position - c_len - 2  # [B * C, seq]
        context_index = tf.broadcast_to(tf.clip_by_value(position - 1, 0, tf.shape(context_dense)[1] - 1), tf.shape(ending_index))
        from_context = tf.gather(context_dense, context_index, batch_dims=1)
        from_ending = tf.gather(ending_dense, tf.clip_by_value(ending_index, 0, tf.shape(ending_dense)[1] - 1), batch_dims=1)
        total = c_len + e_len + 3
        input_ids = tf.where(
            tf.equal(position, 0), layer.cls_id,
            tf.where(position <= c_len, from_context,
                     tf.where(tf.equal(position, c_len + 1), layer.sep_id,
                              tf.where(position < c_len + 2 + e_len, from_ending,
                                       tf.where(tf.equal(position, total - 1), layer.sep_id, 0)))),
        )
        input_mask = tf.cast(position < total, tf.int32)
        segment_ids = tf.cast(tf.logical_and(position >= c_len + 2, position < total), tf.int32)
        shape = tf.stack([batch, num_choices, width])
        static = seq if self.length_bucket is None else None
        return {
            name: tf.ensure_shape(tf.reshape(value, shape), [None, None, static])
            for name, value in (("input_ids", input_ids), ("input_mask", input_mask), ("segment_ids", segment_ids))
        }

    def scores(self, features: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
        """`logits`, `scores` (softmax over the choices) `[batch, num_choices]` and `predicted_choice` `[batch]`."""
        logits = tf.cast(self.model(features, training=False)["logits"], tf.float32)
        return {
            "logits": logits,
            "scores": tf.nn.softmax(logits, axis=-1),
            "predicted_choice": tf.argmax(logits, axis=-1, output_type=tf.int32),
        }

    def __call__(self, text: tf.Tensor, question: tf.Tensor, choices: tf.Tensor) -> Dict[str, tf.Tensor]:
        return self.scores(self.features(text, question, choices))


@register_serving
class MultipleChoiceServing(ServingModule):
    """An `AlbertForMultipleChoice`: one score per choice (`MultipleChoiceGraph`)."""

    kind = MULTIPLE_CHOICE

    def _check_task_settings(self, task_settings):
        self._reject_pair()
        settings = multiple_choice_settings(task_settings, self.sequence_length)
        self._objects.task = MultipleChoiceGraph(self.model, self.tokenizer, settings, length_bucket=self.length_bucket)
        return settings

    def text_input_mask(self, **inputs):
        mask = self._objects.task.features(inputs[TEXT_KEY], inputs[QUESTION_KEY], inputs[CHOICES_KEY])["input_mask"]
        shape = tf.shape(mask)
        rows = tf.repeat(tf.range(shape[0]), shape[1])
        return tf.reshape(mask, [-1, shape[2]]), rows

    def _token_outputs(self, features):
        return self._objects.task.scores(features)

    def _text_function(self):
        return serving_function(
            lambda text, question, choices: self._objects.task(text, question, choices),
            input_signature=[string_spec(TEXT_KEY), string_spec(QUESTION_KEY),
                             tf.TensorSpec([None, None], tf.string, name=CHOICES_KEY)],
        )

    def _token_input_signature(self):
        # One row of token ids per choice: [batch, choices, sequence].
        return [tf.TensorSpec([None, None, self.static_length], tf.int32, name=k) for k in TOKEN_KEYS]
