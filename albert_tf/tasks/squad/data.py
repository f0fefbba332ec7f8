"""SQuAD v1.1 / v2.0 for ALBERT: reading the JSON, SentencePiece features, TFRecords and tf.data.

The feature conversion is that of google-research/albert `squad_utils.convert_examples_to_features`
(forked as `official.nlp.data.squad_lib_sp`, which this module calls for every example):

* the question is `preprocess_text`-ed and SentencePiece-encoded, then cut to `max_query_length`;
* the context is preprocessed (collapsed whitespace, NFKD without accents, lower-cased) and encoded,
  and the pieces are aligned with the *original* context characters by a banded longest common
  subsequence between the raw characters (each preprocessed alone) and the concatenated pieces
  ("▁" read as a space). Every piece gets the original character offsets of its first and last
  character (`tok_start_to_orig_index`, `tok_end_to_orig_index`), so an answer span predicted in
  pieces maps back to the exact original text. An example whose alignment covers less than 80% of
  its characters is skipped (the original's "MISMATCH DETECTED");
* long contexts become several features, windows of at most
  `max_seq_length - len(question) - 3` pieces every `doc_stride` pieces, laid out as
  `[CLS] question [SEP] context window [SEP]` (segment 0, then 1) and padded with 0;
* `p_mask` is 1 where an answer cannot start or end (question, `[SEP]`, padding) and 0 on `[CLS]`
  and the context, as the original v2 model expects;
* for training, `start_positions`/`end_positions` index the answer's first/last piece in the
  feature; a window that does not contain the whole answer, and an unanswerable question, point
  at `[CLS]` (0) and set `is_impossible`.

Reading is strict about the file's structure (malformed JSON, missing fields, empty contexts or
questions, duplicate ids raise `SquadDataError` naming the file and the question id). Training
answers whose `answer_start` does not locate their `text` in the context are skipped with a
warning and counted, like the original's "Could not find answer" (BERT `run_squad.py`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

import numpy as np

from albert_tf import file_io

logger = logging.getLogger(__name__)

PathLike = Union[str, "os.PathLike[str]"]

DEFAULT_MAX_SEQ_LENGTH = 384
DEFAULT_DOC_STRIDE = 128
DEFAULT_MAX_QUERY_LENGTH = 64
# The original numbering of features, kept so that prediction files line up with the original's.
FIRST_UNIQUE_ID = 1_000_000_000

MODEL_INPUTS = ("input_ids", "input_mask", "segment_ids", "p_mask")
TRAINING_LABELS = ("start_positions", "end_positions", "is_impossible")


class SquadDataError(ValueError):
    """A SQuAD file, or an argument of the conversion, that cannot be used."""


@dataclasses.dataclass(frozen=True)
class SquadExample:
    """One question about one context (field names as the original `SquadExample`).

    Attributes:
        qas_id: The question id.
        question_text: The question.
        paragraph_text: The context, exactly as in the file.
        orig_answer_text: Training: the answer text ("" when unanswerable); None when not training.
        start_position: Training: the answer's character offset in the context (-1 when
            unanswerable); None when not training.
        is_impossible: Training (SQuAD v2.0): the question has no answer in the context.
        answers: The texts of all gold answers in the file (empty when unanswerable or unknown).
    """

    qas_id: str
    question_text: str
    paragraph_text: str
    orig_answer_text: Optional[str] = None
    start_position: Optional[int] = None
    is_impossible: bool = False
    answers: Tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class SkippedQuestion:
    """A question left out, and why."""

    qas_id: str
    reason: str


@dataclasses.dataclass
class SquadFeature:
    """One window of one example, as the model sees it, with what maps it back to the text.

    Attributes (names as the original `InputFeatures`):
        unique_id: Number of the feature (from `FIRST_UNIQUE_ID`), the key of its model outputs.
        example_index: Index of its example in the list given to the conversion.
        doc_span_index: Index of the window within the example.
        tokens: The pieces of `input_ids` (without padding).
        tok_start_to_orig_index, tok_end_to_orig_index: For each context piece of the window,
            the original character offset of its first / last character.
        token_is_max_context: For each context position in `input_ids`: whether this window
            gives the piece the most context (only there may an answer start).
        input_ids, input_mask, segment_ids, p_mask: The model inputs (`max_seq_length` each).
        paragraph_len: Number of tokens up to and including the closing `[SEP]`.
        start_position, end_position: Training labels (piece positions in `input_ids`).
        is_impossible: Training label: the window holds no answer.
    """

    unique_id: int
    example_index: int
    doc_span_index: int
    tokens: List[str]
    tok_start_to_orig_index: List[int]
    tok_end_to_orig_index: List[int]
    token_is_max_context: Dict[int, bool]
    input_ids: List[int]
    input_mask: List[int]
    segment_ids: List[int]
    p_mask: List[int]
    paragraph_len: int
    start_position: Optional[int] = None
    end_position: Optional[int] = None
    is_impossible: Optional[bool] = None


# --- reading the JSON ---------------------------------------------------------------------------


def _read_json(path: str) -> Any:
    from albert_tf.tokenization import corpus_files

    try:
        raw = corpus_files.read_bytes(path)
    except FileNotFoundError:
        raise FileNotFoundError(f"SQuAD file {path} does not exist") from None
    except Exception as e:  # tf.io.gfile raises its own NotFoundError for remote paths
        if type(e).__name__ == "NotFoundError":
            raise FileNotFoundError(f"SQuAD file {path} does not exist") from None
        raise
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise SquadDataError(f"{path}: not valid UTF-8 (byte {e.start})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise SquadDataError(f"{path}: not valid JSON: {e}") from None


def _where(path: str, article: int, paragraph: int, qas_id: Optional[str] = None) -> str:
    place = f"{path}: data[{article}].paragraphs[{paragraph}]"
    return f"{place}, question {qas_id!r}" if qas_id is not None else place


def load_squad_json(path: PathLike) -> List[Dict[str, Any]]:
    """The `data` list of a SQuAD file, with its structure checked (what the evaluation reads).

    Every article must be an object with a `paragraphs` list; every paragraph an object with a
    non-empty string `context` and a `qas` list; every question an object with a unique string
    `id`, a non-empty string `question` and (when present) an `answers` list of objects with a
    string `text`.

    Raises:
        FileNotFoundError: the file does not exist.
        SquadDataError: invalid UTF-8 or JSON, or a structural problem (named with its place and
            the question id).
    """
    path = os.fspath(path)
    root = _read_json(path)
    if not isinstance(root, dict) or not isinstance(root.get("data"), list):
        raise SquadDataError(f"{path}: a SQuAD file is a JSON object with a 'data' list")
    seen: Dict[str, str] = {}
    for a, article in enumerate(root["data"]):
        if not isinstance(article, dict) or not isinstance(article.get("paragraphs"), list):
            raise SquadDataError(f"{path}: data[{a}] must be an object with a 'paragraphs' list")
        for p, paragraph in enumerate(article["paragraphs"]):
            if not isinstance(paragraph, dict):
                raise SquadDataError(f"{_where(path, a, p)} must be an object")
            qas = paragraph.get("qas")
            if not isinstance(qas, list):
                raise SquadDataError(f"{_where(path, a, p)} has no 'qas' list")
            first_id = next((q.get("id") for q in qas if isinstance(q, dict)), None)
            context = paragraph.get("context")
            if not isinstance(context, str):
                raise SquadDataError(f"{_where(path, a, p, first_id)}: 'context' is missing or not a string")
            if not context.strip():
                raise SquadDataError(f"{_where(path, a, p, first_id)}: the context is empty")
            for q, qa in enumerate(qas):
                if not isinstance(qa, dict):
                    raise SquadDataError(f"{_where(path, a, p)}.qas[{q}] must be an object")
                qas_id = qa.get("id")
                if not isinstance(qas_id, str) or not qas_id:
                    raise SquadDataError(f"{_where(path, a, p)}.qas[{q}]: 'id' is missing or not a non-empty string")
                if qas_id in seen:
                    raise SquadDataError(f"{path}: question id {qas_id!r} appears twice ({seen[qas_id]} and data[{a}])")
                seen[qas_id] = f"data[{a}]"
                question = qa.get("question")
                if not isinstance(question, str):
                    raise SquadDataError(f"{_where(path, a, p, qas_id)}: 'question' is missing or not a string")
                if not question.strip():
                    raise SquadDataError(f"{_where(path, a, p, qas_id)}: the question is empty")
                answers = qa.get("answers", [])
                if not isinstance(answers, list):
                    raise SquadDataError(f"{_where(path, a, p, qas_id)}: 'answers' must be a list")
                for answer in answers:
                    if not isinstance(answer, dict) or not isinstance(answer.get("text"), str):
                        raise SquadDataError(
                            f"{_where(path, a, p, qas_id)}: every answer must be an object with a string 'text'"
                        )
                impossible = qa.get("is_impossible", False)
                if not isinstance(impossible, bool):
                    raise SquadDataError(f"{_where(path, a, p, qas_id)}: 'is_impossible' must be true or false")
    return root["data"]


def _normalized_space(text: str) -> str:
    return " ".join(text.split())


def _locate_answer(context: str, start: int, text: str) -> Optional[str]:
    """The context's own text of the answer at `start`, or None when it is not there.

    The answer's text and the context may differ in whitespace (runs, line breaks); the
    context's span is returned so that the answer's end offset is right.
    """
    if context.startswith(text, start):
        return text
    target = _normalized_space(text)
    # Grows the span to the shortest one that reads the same once whitespace is collapsed.
    limit = min(len(context), start + 2 * len(text) + 1)
    for end in range(start + 1, limit + 1):
        if _normalized_space(context[start:end]) == target:
            return context[start:end]
    return None


def read_squad_examples(
    path: PathLike, *, is_training: bool, version_2_with_negative: bool = False
) -> Tuple[List[SquadExample], List[SkippedQuestion]]:
    """Reads a SQuAD v1.1 or v2.0 file into `SquadExample`s.

    For training, each answerable question must have exactly one answer (as the original
    requires), with an integer `answer_start`; an answer whose text is not at `answer_start` in
    the context (compared with whitespace runs collapsed) is skipped with a warning. The training
    answer text is the context's own span (which can differ from the file's in whitespace). Unanswerable
    questions (`is_impossible`) are allowed only with `version_2_with_negative`.

    Args:
        path: The JSON file.
        is_training: Read the training answers (else only the gold texts, for reference).
        version_2_with_negative: The file is SQuAD v2.0 (questions may be unanswerable).

    Returns:
        `(examples, skipped)`: the examples in file order, and the questions left out.

    Raises:
        FileNotFoundError, SquadDataError: see `load_squad_json`; also a training question with
            no or several answers, a non-integer `answer_start`, or an unanswerable question in
            a v1.1 run.
    """
    path = os.fspath(path)
    data = load_squad_json(path)
    examples: List[SquadExample] = []
    skipped: List[SkippedQuestion] = []
    for a, article in enumerate(data):
        for p, paragraph in enumerate(article["paragraphs"]):
            context = paragraph["context"]
            for qa in paragraph["qas"]:
                qas_id = qa["id"]
                answers = qa.get("answers", [])
                gold = tuple(answer["text"] for answer in answers)
                impossible = bool(qa.get("is_impossible", False))
                if impossible and not version_2_with_negative:
                    raise SquadDataError(
                        f"{_where(path, a, p, qas_id)} is unanswerable (is_impossible), "
                        f"which only SQuAD v2.0 allows; read the file as version 2"
                    )
                if not is_training:
                    examples.append(SquadExample(qas_id, qa["question"], context, answers=gold))
                    continue
                if impossible:
                    examples.append(SquadExample(qas_id, qa["question"], context, "", -1, True, gold))
                    continue
                if len(answers) != 1:
                    raise SquadDataError(
                        f"{_where(path, a, p, qas_id)}: for training, each answerable question needs "
                        f"exactly 1 answer, found {len(answers)}"
                    )
                answer = answers[0]
                start = answer.get("answer_start")
                if isinstance(start, bool) or not isinstance(start, int):
                    raise SquadDataError(f"{_where(path, a, p, qas_id)}: 'answer_start' must be an integer")
                text = answer["text"]
                reason = None
                if not text.strip():
                    reason = "the answer text is empty"
                elif not 0 <= start < len(context):
                    reason = f"answer_start {start} is outside the context (length {len(context)})"
                else:
                    located = _locate_answer(context, start, text)
                    if located is None:
                        found = context[start : start + len(text)]
                        reason = f"could not find answer {text!r} at offset {start} (the context has {found!r})"
                    else:
                        text = located
                if reason is not None:
                    logger.warning("%s: skipping question %r: %s", path, qas_id, reason)
                    skipped.append(SkippedQuestion(qas_id, reason))
                    continue
                examples.append(SquadExample(qas_id, qa["question"], context, text, start, False, gold))
    if skipped:
        logger.warning("%s: skipped %d of %d questions whose answers were not found", path, len(skipped),
                       len(skipped) + len(examples))
    return examples, skipped


# --- features -----------------------------------------------------------------------------------


def _check_tokenizer(tokenizer) -> None:
    if getattr(tokenizer, "sp_model", None) is None:
        raise TypeError(
            f"SQuAD features need a SentencePiece tokenizer (with .sp_model), got {type(tokenizer).__name__}"
        )
    for option in ("keep_accents", "normalize_quotes"):
        if getattr(tokenizer, option, False):
            raise ValueError(
                f"the SQuAD character alignment follows the original preprocessing; a tokenizer with "
                f"{option}=True is not supported"
            )
    for piece in ("[CLS]", "[SEP]"):
        if tokenizer.sp_model.PieceToId(piece) == tokenizer.sp_model.unk_id():
            raise ValueError(f"the SentencePiece model has no {piece} piece")


def _check_lengths(max_seq_length: int, doc_stride: int, max_query_length: int) -> None:
    for name, value in (("max_seq_length", max_seq_length), ("doc_stride", doc_stride),
                        ("max_query_length", max_query_length)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise SquadDataError(f"{name} must be a positive integer, got {value!r}")
    if max_query_length + 3 >= max_seq_length:
        raise SquadDataError(
            f"max_seq_length ({max_seq_length}) must exceed max_query_length + 3 ({max_query_length + 3}) "
            f"to leave room for the context"
        )


def convert_examples_to_features(
    examples: Sequence[SquadExample],
    tokenizer,
    *,
    is_training: bool,
    max_seq_length: int = DEFAULT_MAX_SEQ_LENGTH,
    doc_stride: int = DEFAULT_DOC_STRIDE,
    max_query_length: int = DEFAULT_MAX_QUERY_LENGTH,
    do_lower_case: Optional[bool] = None,
) -> Tuple[List[SquadFeature], List[SkippedQuestion]]:
    """Turns examples into model features (several per long context), the original way.

    Args:
        examples: From `read_squad_examples` (read with the same `is_training`).
        tokenizer: A SentencePiece tokenizer with `.sp_model` (`albert_tf.tokenization.
            SentencePieceTokenizer`, or official's `FullSentencePieceTokenizer`).
        is_training: Compute the answer labels.
        max_seq_length: Tokens per feature (384 in the original).
        doc_stride: Context pieces between the starts of consecutive windows (128).
        max_query_length: Question pieces kept (64).
        do_lower_case: Lower-case the text; default the tokenizer's `lower_case` (else True).

    Returns:
        `(features, skipped)`: the features with consecutive `unique_id`s from `FIRST_UNIQUE_ID`,
        and the examples that gave none because the pieces could not be aligned with the text.

    Raises:
        TypeError: the tokenizer is not a SentencePiece tokenizer.
        ValueError: the tokenizer's preprocessing options are not the original ones, or it has
            no `[CLS]`/`[SEP]`.
        SquadDataError: impossible lengths; a training example without its answer fields.
    """
    from absl import logging as absl_logging
    from official.nlp.data import squad_lib_sp

    _check_tokenizer(tokenizer)
    _check_lengths(max_seq_length, doc_stride, max_query_length)
    if do_lower_case is None:
        do_lower_case = bool(getattr(tokenizer, "lower_case", True))

    features: List[SquadFeature] = []
    skipped: List[SkippedQuestion] = []
    unique_id = FIRST_UNIQUE_ID
    # The official converter logs every example it writes at INFO; that is per-example noise here.
    verbosity = absl_logging.get_verbosity()
    absl_logging.set_verbosity(absl_logging.WARNING)
    try:
        for example_index, example in enumerate(examples):
            if is_training and (example.orig_answer_text is None or example.start_position is None):
                raise SquadDataError(
                    f"question {example.qas_id!r} has no training answer; read the file with is_training=True"
                )
            official = squad_lib_sp.SquadExample(
                qas_id=example.qas_id,
                question_text=example.question_text,
                paragraph_text=example.paragraph_text,
                orig_answer_text=example.orig_answer_text,
                start_position=example.start_position,
                is_impossible=example.is_impossible,
            )
            produced: list = []

            def output_fn(feature, is_padding=False, produced=produced):
                if not is_padding:
                    produced.append(feature)

            # One example per call, so that an example the converter drops (it only logs
            # "MISMATCH DETECTED") is known and reported, and the example index is kept.
            reason = "the SentencePiece pieces could not be aligned with the context characters"
            try:
                squad_lib_sp.convert_examples_to_features(
                    examples=[official],
                    tokenizer=tokenizer,
                    max_seq_length=max_seq_length,
                    doc_stride=doc_stride,
                    max_query_length=max_query_length,
                    is_training=is_training,
                    output_fn=output_fn,
                    do_lower_case=do_lower_case,
                    batch_size=1,
                )
            except UnboundLocalError:
                # The converter's end-of-run padding step reads the last feature, which does not
                # exist when it dropped the only example.
                if produced:
                    raise
            except AssertionError:
                produced.clear()
                reason = "the answer's character span could not be mapped onto the pieces"
            if not produced:
                logger.warning("skipping question %r: %s", example.qas_id, reason)
                skipped.append(SkippedQuestion(example.qas_id, reason))
                continue
            for f in produced:
                features.append(
                    SquadFeature(
                        unique_id=unique_id,
                        example_index=example_index,
                        doc_span_index=f.doc_span_index,
                        tokens=list(f.tokens),
                        tok_start_to_orig_index=list(f.tok_start_to_orig_index),
                        tok_end_to_orig_index=list(f.tok_end_to_orig_index),
                        token_is_max_context=dict(f.token_is_max_context),
                        input_ids=list(f.input_ids),
                        input_mask=list(f.input_mask),
                        segment_ids=list(f.segment_ids),
                        # official's paragraph_mask marks where answers may be; the original p_mask
                        # marks where they may not.
                        p_mask=[1 - m for m in f.paragraph_mask],
                        paragraph_len=f.paragraph_len,
                        start_position=f.start_position,
                        end_position=f.end_position,
                        is_impossible=bool(f.is_impossible) if is_training else None,
                    )
                )
                unique_id += 1
    finally:
        absl_logging.set_verbosity(verbosity)
    if skipped:
        logger.warning("skipped %d of %d examples whose text could not be aligned", len(skipped), len(examples))
    return features, skipped


def answer_text_of_feature(feature: SquadFeature, example: SquadExample, start: int, end: int) -> str:
    """The original context text of the piece span `[start, end]` (positions in `input_ids`).

    This is how a predicted span becomes an answer: through the character offsets of its first
    and last context piece.

    Raises:
        ValueError: the span is not inside the feature's context window.
    """
    offset = feature.tokens.index("[SEP]") + 1
    first, last = start - offset, end - offset
    if not (0 <= first <= last < len(feature.tok_start_to_orig_index)):
        raise ValueError(f"span [{start}, {end}] is not inside the context window of feature {feature.unique_id}")
    begin = feature.tok_start_to_orig_index[first]
    finish = feature.tok_end_to_orig_index[last]
    return example.paragraph_text[begin : finish + 1].strip()


# --- arrays, tf.data and TFRecords --------------------------------------------------------------


def features_to_arrays(features: Sequence[SquadFeature], *, is_training: bool) -> Dict[str, np.ndarray]:
    """The model inputs (and training labels) of `features` as int32 arrays, plus `unique_ids`.

    Raises:
        SquadDataError: no features, or training features without labels.
    """
    if not features:
        raise SquadDataError("there are no SQuAD features (every question was skipped, or the file is empty)")
    arrays = {name: np.asarray([getattr(f, name) for f in features], dtype=np.int32) for name in MODEL_INPUTS}
    arrays["unique_ids"] = np.asarray([f.unique_id for f in features], dtype=np.int64)
    if is_training:
        if any(f.start_position is None or f.end_position is None for f in features):
            raise SquadDataError("training needs features converted with is_training=True")
        arrays["start_positions"] = np.asarray([f.start_position for f in features], dtype=np.int32)
        arrays["end_positions"] = np.asarray([f.end_position for f in features], dtype=np.int32)
        arrays["is_impossible"] = np.asarray([int(bool(f.is_impossible)) for f in features], dtype=np.int32)
    return arrays


def make_squad_dataset(features: Sequence[SquadFeature], *, is_training: bool):
    """An unbatched `tf.data.Dataset` of feature dicts, in feature order.

    Training elements carry `start_positions`, `end_positions` and `is_impossible` (the labels
    travel in the input dict); prediction elements carry `unique_ids` instead, which the SQuAD
    models pass through to their outputs so that predictions can be matched to features.
    """
    import tensorflow as tf

    arrays = features_to_arrays(features, is_training=is_training)
    if is_training:
        arrays.pop("unique_ids")
    return tf.data.Dataset.from_tensor_slices(arrays)


def _int64_feature(values: Iterable[int]):
    import tensorflow as tf

    return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))


def write_squad_tfrecord(features: Sequence[SquadFeature], path: PathLike, *, is_training: bool) -> int:
    """Writes features in the original `train.tf_record` / `eval.tf_record` format, atomically.

    Features: `unique_ids`, `input_ids`, `input_mask`, `segment_ids`, `p_mask`, and for training
    `start_positions`, `end_positions`, `is_impossible`, all int64.

    Returns:
        The number of records written.
    """
    import tensorflow as tf

    arrays = features_to_arrays(features, is_training=is_training)
    path = os.fspath(path)
    directory = os.path.dirname(path)
    if directory:
        tf.io.gfile.makedirs(directory)
    names = ("unique_ids",) + MODEL_INPUTS + (TRAINING_LABELS if is_training else ())
    with file_io.atomic_output(path) as tmp:
        with tf.io.TFRecordWriter(tmp) as writer:
            for i in range(len(features)):
                example = tf.train.Example(
                    features=tf.train.Features(
                        feature={name: _int64_feature(np.atleast_1d(arrays[name][i]).tolist()) for name in names}
                    )
                )
                writer.write(example.SerializeToString())
    return len(features)


def read_squad_tfrecord(file_pattern: Union[str, Sequence[str]], *, seq_length: int, is_training: bool):
    """An unbatched dataset of the records written by `write_squad_tfrecord` (or the original).

    Ids and masks are int32 as the models take them; training elements drop `unique_ids`.

    Raises:
        FileNotFoundError: no file matches.
    """
    import tensorflow as tf

    patterns = [file_pattern] if isinstance(file_pattern, (str, os.PathLike)) else list(file_pattern)
    files: List[str] = []
    for pattern in patterns:
        matches = sorted(tf.io.gfile.glob(os.fspath(pattern)))
        if not matches:
            raise FileNotFoundError(f"no SQuAD TFRecord file matches {os.fspath(pattern)!r}")
        files.extend(matches)
    spec = {"unique_ids": tf.io.FixedLenFeature([], tf.int64)}
    spec.update({name: tf.io.FixedLenFeature([seq_length], tf.int64) for name in MODEL_INPUTS})
    if is_training:
        spec.update({name: tf.io.FixedLenFeature([], tf.int64) for name in TRAINING_LABELS})

    def parse(record):
        parsed = tf.io.parse_single_example(record, spec)
        out = {k: (v if k == "unique_ids" else tf.cast(v, tf.int32)) for k, v in parsed.items()}
        if is_training:
            out.pop("unique_ids")
        return out

    return tf.data.TFRecordDataset(files).map(parse, num_parallel_calls=tf.data.AUTOTUNE)
