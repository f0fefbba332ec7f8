"""SQuAD answer selection, written once in TensorFlow: from a model's outputs on the windows of
each question to its n-best answers, its null score and its answer.

Every way of answering calls these functions: the served graph (`QaGraph.answers` in
`albert_tf.tasks.squad.serving`, hence the SavedModel's `serving_default` and
`AlbertQuestionAnswerer.predict`) for one answer per question, and the Python evaluation
(`postprocess_v1` / `postprocess_v2` in `albert_tf.tasks.squad.postprocessing`, hence `albert-tf
evaluate` / `predict`, the official EM/F1 and the v2 threshold tuning) for `n_best_size` answers,
eagerly, on tensors packed from the `SquadFeature`s. So they give the same answers.

The selection is the original post-processing (google-research/albert `write_predictions_v1` /
`write_predictions_v2`, `official.nlp.data.squad_lib_sp.postprocess_output`):

1. the candidate spans of every window: v1 (`v1_candidates`) the `n_best_size` best starts times
   the `n_best_size` best ends, start-major; v2 (`v2_candidates`) the head's
   `start_n_top x end_n_top` beam;
2. `legal_spans`: start and end in the window's context, `start <= end`, at most
   `max_answer_length` pieces, and the window is the start piece's max-context window;
3. `select_answers`: the legal spans of all the windows of a question ranked by start + end score,
   summed in float64 as the original's Python floats (ties keep window, then candidate order: the
   original's stable sort); each span is the original context from the first character of its
   start piece to the last character of its end piece, stripped of whitespace (`str.strip`);
   repeated texts are dropped and the first `n_best_size` kept, with the softmax of their scores;
4. v2: the null score of a question is the lowest answerability logit over its windows (1e6 when
   it has none), and the question is answered "" when the null score is *greater than* the
   threshold (compared in float64, as the Python evaluation tunes it).

The answer of a question is its best span's text; it is "" (offsets -1, `has_answer` False) when
no span is legal, when the best span is whitespace only, and for a v2 no-answer.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

import tensorflow as tf

from albert_tf.tokenization import unicode_classes

DEFAULT_N_BEST_SIZE = 20
DEFAULT_MAX_ANSWER_LENGTH = 30
NO_SPAN_SCORE = -1e6  # the original's stand-in score when a question has no legal span
NULL_SCORE_START = 1e6  # the original's "large and positive" start of the null-score minimum


class Windows(NamedTuple):
    """The windows of a batch of questions, and what maps their pieces back to the contexts.

    Attributes:
      example: int32 `[W]`, the question of each window; the windows of a question are
        consecutive and in order (their order breaks ties).
      doc_offset: int32 `[W]`, the position of the window's first context piece.
      window_length: int32 `[W]`, its number of context pieces.
      is_max_context: bool `[W, S]`, by position: the window is the piece's max-context window.
      first_char, last_char: int32 `[W, L]`, for the i-th context piece of the window, the index
        (in code points of its context) of its first and last original character.
      contexts: string `[B]`, the contexts (UTF-8), one per question.
    """

    example: tf.Tensor
    doc_offset: tf.Tensor
    window_length: tf.Tensor
    is_max_context: tf.Tensor
    first_char: tf.Tensor
    last_char: tf.Tensor
    contexts: tf.Tensor


class Candidates(NamedTuple):
    """The candidate spans of every window: positions `[W, C]`, their start and end scores
    (float64) and whether the model ranked them (False on padding)."""

    start: tf.Tensor
    end: tf.Tensor
    start_score: tf.Tensor
    end_score: tf.Tensor
    valid: tf.Tensor


class Answers(NamedTuple):
    """What `select_answers` gives for each of the B questions.

    Attributes:
      text, start_char, end_char, has_answer: The answer and its span in code points of the
        context (end exclusive); "" and -1 when there is none.
      score: float64, the best legal span's start + end score (`NO_SPAN_SCORE` without one).
      found: Whether the question has a legal span.
      null_score: float64, v2's null score (None without answerability logits).
      nbest_text, nbest_start_score, nbest_end_score, nbest_probability: ragged `[B, (n)]`,
        the n-best answers, best first.
    """

    text: tf.Tensor
    start_char: tf.Tensor
    end_char: tf.Tensor
    has_answer: tf.Tensor
    score: tf.Tensor
    found: tf.Tensor
    null_score: Optional[tf.Tensor]
    nbest_text: tf.RaggedTensor
    nbest_start_score: tf.RaggedTensor
    nbest_end_score: tf.RaggedTensor
    nbest_probability: tf.RaggedTensor


# --- candidates of each window ------------------------------------------------------------------


def v1_candidates(start_logits, end_logits, n_best_size: int, rank_mask=None) -> Candidates:
    """The v1 head's candidates: the `n_best_size` best starts times the `n_best_size` best ends.

    `rank_mask` (bool `[W, S]`) limits the ranking to the positions it marks (the length-aware
    export's real positions); without it every position is ranked, padding included, as the
    original does. Ties rank the lower position first, as the original's stable sort.
    """
    start_logits = tf.cast(start_logits, tf.float64)
    end_logits = tf.cast(end_logits, tf.float64)
    if rank_mask is not None:
        rank_mask = tf.cast(rank_mask, tf.bool)
        start_logits = tf.where(rank_mask, start_logits, float("-inf"))
        end_logits = tf.where(rank_mask, end_logits, float("-inf"))
    width = start_logits.shape[1]
    # A static k keeps the candidates' shape static in a fixed-length graph.
    k = min(n_best_size, width) if width is not None else tf.minimum(n_best_size, tf.shape(start_logits)[1])
    start_score, start_index = tf.math.top_k(start_logits, k=k)
    end_score, end_index = tf.math.top_k(end_logits, k=k)
    if rank_mask is None:
        start_ranked = end_ranked = tf.ones_like(start_index, tf.bool)
    else:
        # Fewer real positions than k: the masked ones fill the ranking but are no candidates.
        start_ranked = tf.gather(rank_mask, start_index, batch_dims=1)
        end_ranked = tf.gather(rank_mask, end_index, batch_dims=1)
    # Every start with every end, the ends of the first start first (the original's loops).
    repeat = lambda x: tf.repeat(x, k, axis=1)  # noqa: E731
    tile = lambda x: tf.tile(x, [1, k])  # noqa: E731
    return Candidates(
        repeat(start_index), tile(end_index), repeat(start_score), tile(end_score),
        tf.logical_and(repeat(start_ranked), tile(end_ranked)),
    )


def v2_candidates(start_top_index, start_top_log_probs, end_top_index, end_top_log_probs, valid=None) -> Candidates:
    """The v2 head's beam: `start_top_*` `[W, start_n_top]`, `end_top_*` `[W, start_n_top *
    end_n_top]` (the ends of start i at `i * end_n_top + j`); `valid` marks the real entries of a
    padded beam."""
    start_n_top = tf.shape(start_top_index)[1]
    end_n_top = tf.shape(end_top_index)[1] // start_n_top
    start = tf.repeat(tf.cast(start_top_index, tf.int32), end_n_top, axis=1)
    start_score = tf.repeat(tf.cast(start_top_log_probs, tf.float64), end_n_top, axis=1)
    end = tf.cast(end_top_index, tf.int32)
    valid = tf.ones_like(end, tf.bool) if valid is None else tf.cast(valid, tf.bool)
    return Candidates(start, end, start_score, tf.cast(end_top_log_probs, tf.float64), valid)


# --- legal spans, ranked over the windows of each question ---------------------------------------


def legal_spans(windows: Windows, candidates: Candidates, max_answer_length: int) -> tf.Tensor:
    """bool `[W, C]`: the candidates the original keeps (see the module docstring)."""
    start, end = candidates.start, candidates.end
    offset = windows.doc_offset[:, None]
    length = windows.window_length[:, None]
    width = tf.shape(windows.is_max_context)[1]
    # Clipped for the gather only; a start outside the window is not legal anyway.
    max_context = tf.gather(windows.is_max_context, tf.clip_by_value(start, 0, width - 1), batch_dims=1)
    conditions = (
        candidates.valid,
        start - offset >= 0,
        start - offset < length,
        end - offset < length,
        start < width,
        max_context,
        end >= start,
        end - start + 1 <= max_answer_length,
    )
    return tf.reduce_all(tf.stack(conditions), axis=0)


def _ranked(windows: Windows, candidates: Candidates, legal: tf.Tensor):
    """The legal spans of the batch, flat, by question and then best first (stable)."""
    where = tf.where(legal)  # row-major: window order, then candidate order
    window = tf.cast(where[:, 0], tf.int32)
    offset = tf.gather(windows.doc_offset, window)
    entries = dict(
        window=window,
        example=tf.gather(windows.example, window),
        first_piece=tf.gather_nd(candidates.start, where) - offset,
        last_piece=tf.gather_nd(candidates.end, where) - offset,
        start_score=tf.gather_nd(candidates.start_score, where),
        end_score=tf.gather_nd(candidates.end_score, where),
    )
    entries["score"] = entries["start_score"] + entries["end_score"]
    # Two stable sorts: by score, then by question (which keeps the score order within each).
    by_score = tf.argsort(entries["score"], direction="DESCENDING", stable=True)
    order = tf.gather(by_score, tf.argsort(tf.gather(entries["example"], by_score), stable=True))
    return {key: tf.gather(value, order) for key, value in entries.items()}


def _with_text(windows: Windows, entries):
    """`entries` with the text of each and its code-point span in the context (end exclusive)."""
    first = tf.stack([entries["window"], entries["first_piece"]], axis=1)
    last = tf.stack([entries["window"], entries["last_piece"]], axis=1)
    context = tf.gather(windows.contexts, entries["example"])
    context_length = tf.strings.length(context, unit="UTF8_CHAR")
    begin = tf.clip_by_value(tf.gather_nd(windows.first_char, first), 0, context_length)
    finish = tf.gather_nd(windows.last_char, last) + 1
    # The original `paragraph_text[begin:finish + 1].strip()`.
    raw = tf.strings.substr(context, begin, tf.maximum(finish - begin, 0), unit="UTF8_CHAR")
    space = unicode_classes.re2_class("isspace")
    lstripped = tf.strings.regex_replace(raw, "^" + space + "+", "")
    text = tf.strings.regex_replace(lstripped, space + "+$", "")
    leading = tf.strings.length(raw, unit="UTF8_CHAR") - tf.strings.length(lstripped, unit="UTF8_CHAR")
    start_char = begin + leading
    return dict(entries, text=text, start_char=start_char, end_char=start_char + tf.strings.length(text, unit="UTF8_CHAR"))


def _first_of_each_text(entries):
    """`entries` (ranked) without those whose text a better span of the question already has."""
    _, text_id = tf.unique(entries["text"])
    pair = tf.cast(entries["example"], tf.int64) * tf.cast(tf.size(entries["text"]) + 1, tf.int64) + tf.cast(text_id, tf.int64)
    pairs, pair_id = tf.unique(pair)
    position = tf.range(tf.size(pair_id))
    first = tf.math.unsorted_segment_min(position, pair_id, tf.size(pairs))
    keep = tf.equal(position, tf.gather(first, pair_id))
    return {key: tf.boolean_mask(value, keep) for key, value in entries.items()}


def _rank_in_question(example: tf.Tensor, num_examples: tf.Tensor):
    """(the rank of each entry within its question, the first entry of each question, their counts)
    for entries grouped by question."""
    count = tf.math.unsorted_segment_sum(tf.ones_like(example), example, num_examples)
    first = tf.cumsum(count, exclusive=True)
    return tf.range(tf.size(example)) - tf.gather(first, example), first, count


def _best_first(entries, num_examples, n_best_size: int):
    """The first `n_best_size` entries of each question."""
    rank, _, _ = _rank_in_question(entries["example"], num_examples)
    keep = rank < n_best_size
    return {key: tf.boolean_mask(value, keep) for key, value in entries.items()}


def _probabilities(score: tf.Tensor, example: tf.Tensor, num_examples) -> tf.Tensor:
    """The softmax of the scores of each question's entries."""
    top = tf.math.unsorted_segment_max(score, example, num_examples)
    exp = tf.exp(score - tf.gather(top, example))
    return exp / tf.gather(tf.math.unsorted_segment_sum(exp, example, num_examples), example)


def null_scores(cls_logits, example: tf.Tensor, num_examples) -> tf.Tensor:
    """float64 `[B]`: the lowest answerability logit over each question's windows, at most 1e6."""
    lowest = tf.math.unsorted_segment_min(tf.cast(cls_logits, tf.float64), example, num_examples)
    return tf.minimum(lowest, NULL_SCORE_START)


def select_answers(
    windows: Windows,
    candidates: Candidates,
    *,
    max_answer_length: int,
    n_best_size: int,
    cls_logits=None,
    null_score_diff_threshold: Optional[float] = None,
) -> Answers:
    """The n-best answers and the answer of every question (see the module docstring).

    Args:
      windows: The windows of the batch.
      candidates: From `v1_candidates` or `v2_candidates`.
      max_answer_length: Longest answer in pieces.
      n_best_size: n-best answers kept per question (the served graph keeps 1).
      cls_logits: v2: the answerability logit of every window `[W]`, for the null scores.
      null_score_diff_threshold: v2: answer "" when the null score is greater; None never does.
    """
    num_examples = tf.shape(windows.contexts)[0]
    entries = _ranked(windows, candidates, legal_spans(windows, candidates, max_answer_length))
    if n_best_size > 1:
        entries = _first_of_each_text(_with_text(windows, entries))
        entries = _best_first(entries, num_examples, n_best_size)
    else:
        # The best span is never a repeated text: only its own text is needed.
        entries = _with_text(windows, _best_first(entries, num_examples, 1))
    example = entries["example"]
    _, first, count = _rank_in_question(example, num_examples)
    found = count > 0
    # A question without spans reads one appended zero entry (index `size`), then its default.
    best = tf.where(found, first, tf.size(example))

    def best_of(key, default):
        values = tf.concat([entries[key], tf.zeros([1], entries[key].dtype)], axis=0)
        return tf.where(found, tf.gather(values, best), default)

    text = best_of("text", "")
    has_answer = tf.logical_and(found, tf.strings.length(text) > 0)  # a whitespace span answers nothing
    null_score = None
    if cls_logits is not None:
        null_score = null_scores(cls_logits, windows.example, num_examples)
        if null_score_diff_threshold is not None:
            threshold = tf.constant(float(null_score_diff_threshold), tf.float64)
            has_answer = tf.logical_and(has_answer, tf.logical_not(null_score > threshold))
    ragged = lambda values: tf.RaggedTensor.from_value_rowids(  # noqa: E731
        values, tf.cast(example, tf.int64), tf.cast(num_examples, tf.int64), validate=False)
    return Answers(
        text=tf.where(has_answer, text, ""),
        start_char=tf.where(has_answer, best_of("start_char", -1), -1),
        end_char=tf.where(has_answer, best_of("end_char", -1), -1),
        has_answer=has_answer,
        score=best_of("score", tf.constant(NO_SPAN_SCORE, tf.float64)),
        found=found,
        null_score=null_score,
        nbest_text=ragged(entries["text"]),
        nbest_start_score=ragged(entries["start_score"]),
        nbest_end_score=ragged(entries["end_score"]),
        nbest_probability=ragged(_probabilities(entries["score"], example, num_examples)),
    )
