"""Serving extractive question answering (SQuAD v1 / v2 models) from raw text, all in the graph.

`SquadV1Serving` and `SquadV2Serving` are the exports of an `AlbertForSquadV1` / `AlbertForSquadV2`
(export kinds `squad_v1` / `squad_v2`, registered with
`albert_tf.export.signatures.register_serving`): `serving_default` takes `question` and
`context` and answers through `QaGraph`; `tokens` returns the head's outputs for token ids.

`QaGraph` turns `question` and `context` string tensors `[batch]` into answers with TF and
tensorflow-text ops only, reproducing the fine-tuning pipeline of `albert_tf.tasks.squad.data`
(the original `squad_lib_sp` conversion), then answering through `albert_tf.tasks.squad.spans`,
the one implementation of the post-processing, which the Python evaluation
(`albert_tf.tasks.squad.postprocessing`) calls too:

1. the question: the tokenizer layer's preprocessing and ids (`preprocess_text`,
   SentencePiece, the digit-comma rule), cut to `max_query_length` pieces;
2. the context is preprocessed *character by character* (whitespace runs collapsed and
   stripped, NFKD, combining marks deleted, lower-cased: per character this is the same
   string as the layer's whole-string preprocessing, because the only cross-character step of
   NFKD, the reordering of combining marks, is undone by their deletion), which gives for every
   byte of the normalized text the index of the original character it came from. The
   normalized text is tokenized with tensorflow-text's `FastSentencepieceTokenizer` (the ids of
   training) and with `SentencepieceTokenizer.tokenize_with_offsets` (byte offsets, used when
   both kernels segment the row alike; they break ties between equally scored segmentations
   differently, e.g. "0" "00" vs "00" "0", and for such a row the ids stay the training ones and
   the offsets are the pieces' texts laid end to end, exact unless the row also has `<unk>`
   pieces or text that SentencePiece's own normalizer changes), then the digit-comma rule is
   applied with the offsets carried along. Every context piece thus gets the original
   character index of its first and last character;
3. doc-stride windows exactly as training: `max_seq_length - len(question) - 3` context pieces
   per window, a new window every `doc_stride` pieces until the context is covered, laid out
   `[CLS] question [SEP] window [SEP]` (segment 1 from the window on), `p_mask` 1 except on
   `[CLS]` and the window; the model runs on all windows of the batch at once;
4. the best legal span of each question and its answer, `spans.select_answers` on the windows
   (`QaGraph.windows`: each window's pieces and their character offsets) and the head's
   candidates (`QaGraph.candidates`): v1 the `n_best_size` best starts times the `n_best_size`
   best ends of each window, v2 the model's `start_n_top x end_n_top` beam; the answer is the
   original context between the first character of the start piece and the last character of
   the end piece, stripped of surrounding whitespace; for v2 it is "" when the null score (the
   lowest answerability logit over the windows) is greater than the threshold.

Length-aware (`QaGraph(..., length_bucket=N)`): the windows of a batch are padded to the longest
window rounded up to a multiple of N (at most `max_seq_length`, at least the v2 beam size)
instead of to `max_seq_length`. The model sees the same real positions (padding is masked out
of attention), so the logits of every real position are those of the fixed-length windows. For
v1 the `n_best_size` candidates are then taken among the real positions only: the fixed-length
search also ranks the padding positions, which can never be a legal span but can push a legal
candidate out of the top `n_best_size`; where that happens the length-aware answer is the better
legal span (a trained model scores padding low, so in practice both agree).

Offsets are code points of the context as decoded from UTF-8 with invalid bytes replaced by
U+FFFD (Python's `bytes.decode("utf-8", "replace")`), so for valid UTF-8 `context[start_char:
end_char] == answer_text` in Python. With no legal span, a span of whitespace only, or a v2
no-answer, the answer is "", the offsets are -1 and `has_answer` is 0 (int32, 1 otherwise).
"""

from __future__ import annotations

from typing import Any, Dict, Optional

import tensorflow as tf
import tensorflow_text as tf_text

from albert_tf.export.signatures import TOKEN_KEYS, ServingModule, find_resources, register_serving, serving_function, string_spec
from albert_tf.tasks.squad import SQUAD_V1, SQUAD_V2, spans
from albert_tf.tokenization import unicode_classes
from albert_tf.tokenization.in_graph import (
    check_length_bucket, lower_utf8, masked, packed_width, pad_columns, positions_in_rows, sanitize_utf8, value_rowids,
)
from albert_tf.tokenization.text import SPIECE_UNDERLINE

QUESTION_KEY = "question"
CONTEXT_KEY = "context"
_NEG = -3.0e38

DEFAULT_QA_SETTINGS = dict(
    version="v1", doc_stride=128, max_query_length=64, n_best_size=spans.DEFAULT_N_BEST_SIZE,
    max_answer_length=spans.DEFAULT_MAX_ANSWER_LENGTH,
    null_score_diff_threshold=0.0,
)


def qa_settings(settings: Optional[Dict[str, Any]], version: str) -> Dict[str, Any]:
    """The complete QA settings: `settings` (e.g. task.json's) over `DEFAULT_QA_SETTINGS`."""
    result = dict(DEFAULT_QA_SETTINGS)
    result.update({k: v for k, v in (settings or {}).items() if k in DEFAULT_QA_SETTINGS and v is not None})
    result["version"] = version
    for key in ("doc_stride", "max_query_length", "n_best_size", "max_answer_length"):
        value = result[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{key} must be a positive integer, got {value!r}")
    result["null_score_diff_threshold"] = float(result["null_score_diff_threshold"])
    return result


class QaGraph:
    """The in-graph QA pipeline for one SQuAD model and its `AlbertTokenizerLayer`.

    Args:
      model: an `AlbertForSquadV1` or `AlbertForSquadV2`.
      tokenizer: the `AlbertTokenizerLayer` of training (SentencePiece; its `sequence_length` is
        the feature length).
      settings: from `qa_settings`.
      length_bucket: None pads every window to `sequence_length`; an int pads a batch's windows
        to the longest rounded up to a multiple of it (see the module docstring).
    """

    def __init__(self, model, tokenizer, settings: Dict[str, Any], length_bucket: Optional[int] = None):
        if not tokenizer.is_sentencepiece:
            raise ValueError("the QA export needs a SentencePiece tokenizer (the SQuAD conversion is SentencePiece's)")
        if tokenizer.normalize_quotes:
            raise ValueError("the QA export does not support normalize_quotes=True (it maps pieces back to characters)")
        self.model = model
        self.tokenizer = tokenizer
        self.settings = settings
        self.version = settings["version"]
        self.seq = int(tokenizer.sequence_length)
        self.length_bucket = check_length_bucket(length_bucket)
        if settings["max_query_length"] + 3 >= self.seq:
            raise ValueError(
                f"sequence length {self.seq} must exceed max_query_length + 3 ({settings['max_query_length'] + 3})"
            )
        # The offsets tokenizer: same model, tensorflow-text's kernel with offsets.
        self._sp_offsets = tf_text.SentencepieceTokenizer(tokenizer.model_proto, out_type=tf.int32)

    # --- context: characters, normalized bytes, pieces with character offsets ---------------------

    def _normalize_chars(self, context: tf.Tensor):
        """(normalized text [B], byte -> original char index ragged [B, (bytes)])."""
        chars = tf.strings.unicode_split(context, "UTF-8")  # [B, (chars)]
        flat = chars.flat_values
        rows = value_rowids(chars.row_splits)
        position = positions_in_rows(chars.row_splits, rows)
        is_space = tf.strings.regex_full_match(flat, unicode_classes.re2_class("isspace"))
        num_rows = tf.shape(context)[0]
        big = tf.int32.max
        first_text = tf.math.unsorted_segment_min(tf.where(is_space, big, position), rows, num_rows)
        last_text = tf.math.unsorted_segment_max(tf.where(is_space, -1, position), rows, num_rows)
        previous_space = tf.concat([[False], is_space[:-1]], axis=0)
        previous_space = tf.logical_and(previous_space, position > 0)
        keep_space = tf.logical_and(
            tf.logical_and(is_space, tf.logical_not(previous_space)),
            tf.logical_and(position > tf.gather(first_text, rows), position < tf.gather(last_text, rows)),
        )
        text = flat
        if not self.tokenizer.keep_accents:
            text = tf_text.normalize_utf8(text, "NFKD")
            text = tf.strings.regex_replace(text, unicode_classes.re2_class("combining"), "")
        if self.tokenizer.lower_case:
            text = lower_utf8(text)
        normalized_chars = tf.where(is_space, tf.where(keep_space, " ", ""), text)
        byte_lengths = tf.strings.length(normalized_chars)
        normalized = tf.strings.reduce_join(chars.with_flat_values(normalized_chars), axis=-1)
        byte_to_char = tf.RaggedTensor.from_row_lengths(
            tf.repeat(position, byte_lengths),
            tf.math.unsorted_segment_sum(byte_lengths, rows, num_rows),
        )
        return normalized, byte_to_char

    def _context_pieces(self, normalized: tf.Tensor):
        """(ids, start byte, end byte) ragged [B, (pieces)] of the normalized context."""
        fast = tf.cast(self.tokenizer.sentencepiece.tokenize(normalized), tf.int32).with_row_splits_dtype(tf.int64)
        slow, starts, ends = self._sp_offsets.tokenize_with_offsets(normalized)
        slow = tf.cast(slow, tf.int32).with_row_splits_dtype(tf.int64)
        starts, ends = starts.with_row_splits_dtype(tf.int64), ends.with_row_splits_dtype(tf.int64)
        width = tf.cast(tf.maximum(tf.reduce_max(fast.row_lengths()), tf.reduce_max(slow.row_lengths())), tf.int32)
        width = tf.maximum(width, 1)
        dense_fast = pad_columns(fast.to_tensor(-1), width, -1)
        dense_slow = pad_columns(slow.to_tensor(-1), width, -1)
        same = tf.reduce_all(tf.equal(dense_fast, dense_slow), axis=1)
        # Where the kernels segment a row differently (ties), the ids stay those of training and
        # the offsets come from the pieces' texts laid end to end ("▁" one space byte; the first
        # one is SentencePiece's dummy prefix and covers no byte).
        piece_text = tf.strings.regex_replace(tf.gather(self.tokenizer.pieces, fast.flat_values), SPIECE_UNDERLINE, " ")
        piece_bytes = tf.strings.length(piece_text)
        row_starts = tf.cast(fast.row_splits[:-1], tf.int32)
        rows = value_rowids(fast.row_splits)
        cum = tf.cumsum(piece_bytes) - tf.gather(tf.cumsum(piece_bytes, exclusive=True), tf.gather(row_starts, rows))
        text_bytes = tf.gather(tf.strings.length(normalized), rows)
        laid_end = tf.clip_by_value(cum - 1, 0, text_bytes)
        laid_start = tf.clip_by_value(cum - piece_bytes - 1, 0, text_bytes)
        batch = tf.shape(normalized)[0]
        choice = tf.where(same, tf.range(batch), batch + tf.range(batch))
        starts = tf.gather(tf.concat([tf.cast(starts, tf.int32), fast.with_flat_values(laid_start)], axis=0), choice)
        ends = tf.gather(tf.concat([tf.cast(ends, tf.int32), fast.with_flat_values(laid_end)], axis=0), choice)
        return self._split_digit_comma(fast, starts, ends)

    def _split_digit_comma(self, ids: tf.RaggedTensor, starts: tf.RaggedTensor, ends: tf.RaggedTensor):
        """The layer's digit-comma rule (`AlbertTokenizerLayer._split_digit_comma`) with byte offsets.

        A matched piece `...d,` at bytes `[s, e)` becomes its body's re-encoded pieces and ",";
        the comma gets `[e - 1, e)`, the body pieces consecutive byte ranges ending at `e - 1`
        (their texts without "▁"; digits and commas, which SentencePiece does not normalize).
        """
        layer = self.tokenizer
        flat = ids.flat_values
        flat_starts, flat_ends = starts.flat_values, ends.flat_values
        plan = layer.digit_comma_plan(flat)
        sub_ids = tf.cast(plan.sub_ids, tf.int32)
        sub_rows, keep, match_index = plan.sub_rows, plan.keep, plan.match_index
        # Byte ranges of the body pieces: their texts without "▁", laid end to end before the comma.
        sub_text_length = tf.strings.length(tf.strings.regex_replace(tf.gather(layer.pieces, sub_ids), SPIECE_UNDERLINE, ""))
        sub_text_length = tf.where(keep, sub_text_length, 0)
        body_bytes = tf.math.unsorted_segment_sum(sub_text_length, sub_rows, plan.num_matched)
        matched_end = tf.gather(flat_ends, match_index)
        matched_start = tf.gather(flat_starts, match_index)
        body_start = tf.maximum(matched_end - 1 - body_bytes, matched_start)
        within = tf.cumsum(sub_text_length, exclusive=True) - tf.gather(tf.cumsum(body_bytes, exclusive=True), sub_rows)
        sub_byte_start = tf.gather(body_start, sub_rows) + within
        sub_byte_end = sub_byte_start + sub_text_length

        def scatter(unmatched, body_values, comma):
            values = tf.concat([tf.gather(unmatched, plan.unmatched_index), masked(body_values, keep), comma], axis=0)
            return tf.scatter_nd(plan.positions[:, None], values, plan.total[None])

        out_ids = scatter(flat, sub_ids, tf.fill([plan.num_matched], tf.constant(layer.comma_id, tf.int32)))
        out_starts = scatter(flat_starts, sub_byte_start, matched_end - 1)
        out_ends = scatter(flat_ends, sub_byte_end, matched_end)
        row_splits = plan.row_splits(ids)
        make = lambda v: tf.RaggedTensor.from_row_splits(v, row_splits, validate=False)  # noqa: E731
        return make(out_ids), make(out_starts), make(out_ends)

    def _piece_chars(self, normalized, byte_to_char, starts, ends):
        """Original character index of the first and last character of every piece."""
        # First byte that is not the space of a "▁" (a lone "▁" keeps its space), last byte.
        first_byte = starts.flat_values
        last_byte = ends.flat_values - 1
        rows = value_rowids(starts.row_splits)
        row_text = tf.gather(normalized, rows)
        leading_space = tf.logical_and(
            tf.equal(tf.strings.substr(row_text, tf.maximum(first_byte, 0), tf.ones_like(first_byte)), " "), last_byte > first_byte
        )
        first_byte = tf.where(leading_space, first_byte + 1, first_byte)
        lengths = tf.cast(byte_to_char.row_lengths(), tf.int32)
        row_start = tf.cast(byte_to_char.row_splits[:-1], tf.int32)
        values = tf.concat([byte_to_char.flat_values, [0]], axis=0)
        num_bytes = tf.gather(lengths, rows)

        def char_at(byte):
            byte = tf.clip_by_value(byte, 0, tf.maximum(num_bytes - 1, 0))
            index = tf.where(num_bytes > 0, tf.gather(row_start, rows) + byte, tf.size(values) - 1)
            return tf.gather(values, index)

        return starts.with_flat_values(char_at(first_byte)), starts.with_flat_values(char_at(tf.maximum(last_byte, first_byte)))

    # --- windows --------------------------------------------------------------------------------

    def features(self, question: tf.Tensor, context: tf.Tensor) -> Dict[str, tf.Tensor]:
        """Tokenizes and windows a batch: the model inputs of every window and what maps them back."""
        settings, seq = self.settings, self.seq
        question = tf.reshape(question, [-1])
        context = sanitize_utf8(tf.reshape(context, [-1]))
        batch = tf.shape(context)[0]
        q_ids = tf.cast(self.tokenizer.tokenize(question), tf.int32)
        q_len = tf.minimum(tf.cast(q_ids.row_lengths(), tf.int32), settings["max_query_length"])
        q_dense = pad_columns(q_ids.to_tensor(0), settings["max_query_length"], 0)[:, : settings["max_query_length"]]

        normalized, byte_to_char = self._normalize_chars(context)
        c_ids, c_start, c_end = self._context_pieces(normalized)
        first_char, last_char = self._piece_chars(normalized, byte_to_char, c_start, c_end)
        n = tf.cast(c_ids.row_lengths(), tf.int32)
        max_doc = tf.maximum(seq - q_len - 3, 1)
        step = tf.minimum(max_doc, settings["doc_stride"])
        num_windows = 1 + tf.maximum(0, (n - max_doc + step - 1) // step)
        example = tf.repeat(tf.range(batch), num_windows)  # [W]
        first_window = tf.cumsum(num_windows, exclusive=True)
        k = tf.range(tf.size(example)) - tf.gather(first_window, example)
        w_step, w_max, w_n, w_q = (tf.gather(x, example) for x in (step, max_doc, n, q_len))
        w_start = k * w_step
        w_len = tf.maximum(tf.minimum(w_max, w_n - w_start), 0)

        width = packed_width(w_q + 3 + w_len, seq, self.length_bucket)
        if self.length_bucket is not None:
            # The v2 head takes its top-k beam over the positions: at least that many.
            width = tf.minimum(tf.maximum(width, self._beam_size()), seq)
        position = tf.range(width)[None, :]
        doc_offset = (w_q + 2)[:, None]
        q_rows = tf.gather(q_dense, example)
        q_index = tf.clip_by_value(position - 1, 0, settings["max_query_length"] - 1)
        from_q = tf.gather(q_rows, tf.broadcast_to(q_index, tf.shape(position + doc_offset)), batch_dims=1)
        c_dense = c_ids.to_tensor(0)
        c_width = tf.maximum(tf.shape(c_dense)[1], 1)
        c_dense = pad_columns(c_dense, c_width, 0)
        doc_index = w_start[:, None] + position - doc_offset  # piece index in the context
        doc_index_c = tf.clip_by_value(doc_index, 0, c_width - 1)
        from_c = tf.gather(tf.gather(c_dense, example), doc_index_c, batch_dims=1)
        in_doc = tf.logical_and(position >= doc_offset, position < doc_offset + w_len[:, None])
        end_sep = tf.equal(position, doc_offset + w_len[:, None])
        layer = self.tokenizer
        input_ids = tf.where(
            tf.equal(position, 0), layer.cls_id,
            tf.where(position <= w_q[:, None], from_q,
                     tf.where(tf.equal(position, w_q[:, None] + 1), layer.sep_id,
                              tf.where(in_doc, from_c, tf.where(end_sep, layer.sep_id, layer.pad_id)))),
        )
        input_mask = tf.cast(position <= doc_offset + w_len[:, None], tf.int32)
        segment_ids = tf.cast(tf.logical_and(position >= doc_offset, position <= doc_offset + w_len[:, None]), tf.int32)
        p_mask = tf.cast(tf.logical_not(tf.logical_or(tf.equal(position, 0), in_doc)), tf.int32)

        # Max context (the original `_check_is_max_context`): is this window the first of the
        # question's windows with the highest min(left, right) + 0.01 * length for the piece?
        kmax = tf.maximum(tf.reduce_max(num_windows), 1)
        other = tf.gather(first_window, example)[:, None] + tf.range(kmax)[None, :]  # [W, K]
        other_valid = tf.range(kmax)[None, :] < tf.gather(num_windows, example)[:, None]
        other_c = tf.clip_by_value(other, 0, tf.size(example) - 1)
        o_start = tf.cast(tf.gather(w_start, other_c), tf.float32)[:, None, :]
        o_len = tf.cast(tf.gather(w_len, other_c), tf.float32)[:, None, :]
        t = tf.cast(doc_index, tf.float32)[:, :, None]  # [W, S, 1]
        o_contains = tf.logical_and(tf.logical_and(t >= o_start, t <= o_start + o_len - 1), other_valid[:, None, :])
        o_score = tf.minimum(t - o_start, o_start + o_len - 1 - t) + 0.01 * o_len
        o_score = tf.where(o_contains, o_score, _NEG)
        best_window = tf.argmax(o_score, axis=-1, output_type=tf.int32)  # first max
        is_max_context = tf.logical_and(in_doc, tf.equal(best_window, k[:, None]))

        static = seq if self.length_bucket is None else None
        return {
            "input_ids": tf.ensure_shape(input_ids, [None, static]),
            "input_mask": tf.ensure_shape(input_mask, [None, static]),
            "segment_ids": tf.ensure_shape(segment_ids, [None, static]),
            "p_mask": tf.ensure_shape(p_mask, [None, static]),
            "is_max_context": is_max_context,
            "example": example, "num_windows": num_windows, "first_window": first_window,
            "doc_offset": w_q + 2, "window_start": w_start, "window_length": w_len,
            "first_char": first_char, "last_char": last_char, "context": context, "batch": batch,
        }

    # --- answers --------------------------------------------------------------------------------

    def _beam_size(self) -> int:
        """The v2 head's largest top-k over positions (1 for v1)."""
        head = getattr(self.model, "start_n_top", None)
        return max(int(head or 1), int(getattr(self.model, "end_n_top", None) or 1))

    def model_outputs(self, features: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
        inputs = {k: features[k] for k in ("input_ids", "input_mask", "segment_ids")}
        if self.version == "v2":
            inputs["p_mask"] = features["p_mask"]
        outputs = self.model(inputs, training=False)
        return {k: v for k, v in outputs.items() if k != "unique_ids"}

    def candidates(self, features, outputs) -> spans.Candidates:
        """The candidate spans of every window (`albert_tf.tasks.squad.spans`)."""
        if self.version == "v1":
            # How much padding a length-aware window has depends on the batch: rank real positions only.
            rank_mask = None if self.length_bucket is None else features["input_mask"]
            return spans.v1_candidates(outputs["start_logits"], outputs["end_logits"], self.settings["n_best_size"], rank_mask)
        return spans.v2_candidates(
            outputs["start_top_index"], outputs["start_top_log_probs"], outputs["end_top_index"], outputs["end_top_log_probs"]
        )

    def windows(self, features) -> spans.Windows:
        """The windows of `features` as `albert_tf.tasks.squad.spans` takes them: the character
        offsets of each window's pieces gathered from those of its context."""
        example, window_start = features["example"], features["window_start"]
        pieces = tf.range(tf.maximum(tf.reduce_max(features["window_length"]), 1))[None, :]
        first_char = pad_columns(features["first_char"].to_tensor(0), 1, 0)
        last_char = pad_columns(features["last_char"].to_tensor(0), 1, 0)
        index = tf.clip_by_value(window_start[:, None] + pieces, 0, tf.shape(first_char)[1] - 1)
        per_window = lambda chars: tf.gather(tf.gather(chars, example), index, batch_dims=1)  # noqa: E731
        return spans.Windows(
            example=example, doc_offset=features["doc_offset"], window_length=features["window_length"],
            is_max_context=features["is_max_context"], first_char=per_window(first_char), last_char=per_window(last_char),
            contexts=features["context"],
        )

    def answers(self, features, outputs) -> Dict[str, tf.Tensor]:
        """The served outputs: the best answer of each question (`spans.select_answers`)."""
        v2 = self.version == "v2"
        found = spans.select_answers(
            self.windows(features), self.candidates(features, outputs),
            max_answer_length=self.settings["max_answer_length"], n_best_size=1,
            cls_logits=outputs["cls_logits"] if v2 else None,
            null_score_diff_threshold=self.settings["null_score_diff_threshold"] if v2 else None,
        )
        result: Dict[str, tf.Tensor] = {"null_score": tf.cast(found.null_score, tf.float32)} if v2 else {}
        result.update(
            answer_text=found.text,
            start_char=found.start_char,
            end_char=found.end_char,
            score=tf.cast(found.score, tf.float32),
            has_answer=tf.cast(found.has_answer, tf.int32),
            num_windows=features["num_windows"],
        )
        return result

    def __call__(self, question: tf.Tensor, context: tf.Tensor) -> Dict[str, tf.Tensor]:
        features = self.features(question, context)
        return self.answers(features, self.model_outputs(features))


class SquadServing(ServingModule):
    """A SQuAD model: `question` + `context` to answers in the graph (`QaGraph`).

    `SquadV1Serving` and `SquadV2Serving` differ in `qa_version` (the post-processing) and in
    v2's extra `p_mask` token input.
    """

    qa_version = "v1"

    def _check_qa_settings(self, settings):
        if self.pair:
            raise ValueError("a SQuAD model takes question and context, not pair=True")
        settings = qa_settings(settings, self.qa_version)
        self._objects.qa = QaGraph(self.model, self.tokenizer, settings, length_bucket=self.length_bucket)
        return settings

    def text_input_mask(self, **inputs):
        features = self._objects.qa.features(inputs[QUESTION_KEY], inputs[CONTEXT_KEY])
        return features["input_mask"], features["example"]

    def _extra_resources(self):
        # The offsets tokenizer of the QA graph holds its own SentencePiece model resource.
        return find_resources(self._objects.qa._sp_offsets)

    def _token_outputs(self, features):
        outputs = self.model(features, training=False)
        return {k: (tf.cast(v, tf.float32) if v.dtype.is_floating else tf.cast(v, tf.int32))
                for k, v in outputs.items() if k != "unique_ids"}

    def _text_function(self):
        return serving_function(
            lambda question, context: self._objects.qa(question, context),
            input_signature=[string_spec(QUESTION_KEY), string_spec(CONTEXT_KEY)],
        )


@register_serving
class SquadV1Serving(SquadServing):
    """An `AlbertForSquadV1`: `tokens` returns `start_logits` and `end_logits`."""

    kind = SQUAD_V1
    qa_version = "v1"


@register_serving
class SquadV2Serving(SquadServing):
    """An `AlbertForSquadV2`: `tokens` also takes `p_mask` and returns the beam and `cls_logits`."""

    kind = SQUAD_V2
    qa_version = "v2"
    token_keys = TOKEN_KEYS + ("p_mask",)
    no_tflite = "the SQuAD v2 head's beam search needs tf.Einsum and a new-axis tf.StridedSlice, no TFLite builtins"

    def _tokens_function(self):
        return serving_function(
            lambda input_ids, input_mask, segment_ids, p_mask: self._from_tokens(
                {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids, "p_mask": p_mask}
            ),
            input_signature=self._token_input_signature()
            + [tf.TensorSpec([None, self.static_length], tf.int32, name="p_mask")],
        )
