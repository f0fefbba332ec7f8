"""RACE (multiple-choice reading comprehension) for ALBERT: reading the JSON files, choice features.

The layout and the conversion are those of google-research/albert `race_utils.py`:

* RACE is a folder per split with `middle/` and `high/` subfolders of `*.txt` files, each holding
  one JSON object: `article`, `questions` (a list), `options` (one list of 4 options per
  question), `answers` (one letter "A".."D" per question) and `id`;
* each question becomes one example with one text per option: the question with every "_"
  replaced by the option when it has one (cloze questions), else question + " " + option; the
  question and options are preprocessed (the tokenizer's `preprocess`, for SentencePiece models)
  before they are combined, as the original does;
* each choice is `[CLS] article [SEP] question+option [SEP]`: the question+option side keeps its
  *last* `max_qa_length` tokens (128), and the article is cut to what is left of
  `max_seq_length` (512); segment ids are 0 for `[CLS] article [SEP]`, 1 for the rest.

Malformed files (invalid JSON or UTF-8, missing or mistyped fields, options lists of the wrong
size, answers that are not a choice letter, an empty article) raise `RaceDataError` naming the
file (and the question).
"""

from __future__ import annotations

import dataclasses
import glob
import json
import os
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

PathLike = Union[str, "os.PathLike[str]"]

DEFAULT_MAX_SEQ_LENGTH = 512
DEFAULT_MAX_QA_LENGTH = 128
DEFAULT_NUM_CHOICES = 4
LEVELS = ("middle", "high")
CHOICE_INPUTS = ("input_ids", "input_mask", "segment_ids")


class RaceDataError(ValueError):
    """A RACE file, or a conversion argument, that cannot be used."""


@dataclasses.dataclass(frozen=True)
class RaceExample:
    """One question about one article, with its options (raw text, as in the file).

    Attributes:
        example_id: The file's `id` (the file name when it has none).
        question_index: Index of the question in its file.
        article: The article.
        question: The question ("_" marks the blank of a cloze question).
        options: The candidate answers.
        label: Index of the right option, or None when the file has no answers.
        source: The file it was read from.
    """

    example_id: str
    question_index: int
    article: str
    question: str
    options: Tuple[str, ...]
    label: Optional[int]
    source: str = ""


@dataclasses.dataclass
class RaceFeature:
    """The model inputs of one example: one `max_seq_length` row per choice."""

    example_id: str
    question_index: int
    input_ids: List[List[int]]
    input_mask: List[List[int]]
    segment_ids: List[List[int]]
    label: Optional[int]


# --- reading ------------------------------------------------------------------------------------


def _decode_objects(raw: bytes, path: str) -> List[object]:
    """The JSON object of a file; files with one object per line are accepted too."""
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise RaceDataError(f"{path}: not valid UTF-8 (byte {e.start})") from None
    if not text.strip():
        raise RaceDataError(f"{path}: the file is empty")
    try:
        return [json.loads(text)]
    except json.JSONDecodeError as whole_error:
        lines = [(n, line) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]
        if len(lines) < 2:
            raise RaceDataError(f"{path}: not valid JSON: {whole_error}") from None
        objects = []
        for number, line in lines:
            try:
                objects.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise RaceDataError(f"{path}:{number}: not valid JSON: {e}") from None
        return objects


def _parse_record(record: object, path: str, num_choices: int) -> List[RaceExample]:
    if not isinstance(record, dict):
        raise RaceDataError(f"{path}: a RACE file holds a JSON object, got {type(record).__name__}")
    for key in ("article", "questions", "options"):
        if key not in record:
            raise RaceDataError(f"{path}: missing field {key!r}")
    article, questions, options = record["article"], record["questions"], record["options"]
    if not isinstance(article, str):
        raise RaceDataError(f"{path}: 'article' must be a string")
    if not article.strip():
        raise RaceDataError(f"{path}: the article is empty")
    if not isinstance(questions, list) or not all(isinstance(q, str) for q in questions):
        raise RaceDataError(f"{path}: 'questions' must be a list of strings")
    if not isinstance(options, list) or len(options) != len(questions):
        raise RaceDataError(f"{path}: 'options' must be a list with one entry per question ({len(questions)})")
    answers = record.get("answers")
    if answers is not None and (not isinstance(answers, list) or len(answers) != len(questions)):
        raise RaceDataError(f"{path}: 'answers' must be a list with one letter per question ({len(questions)})")
    example_id = record.get("id", os.path.basename(path))
    if not isinstance(example_id, str):
        raise RaceDataError(f"{path}: 'id' must be a string")
    letters = [chr(ord("A") + i) for i in range(num_choices)]
    examples = []
    for i, question in enumerate(questions):
        choice_list = options[i]
        if (
            not isinstance(choice_list, list)
            or len(choice_list) != num_choices
            or not all(isinstance(o, str) for o in choice_list)
        ):
            raise RaceDataError(f"{path}: question {i}: 'options' must be a list of {num_choices} strings")
        label = None
        if answers is not None:
            if answers[i] not in letters:
                raise RaceDataError(f"{path}: question {i}: answer {answers[i]!r} is not one of {', '.join(letters)}")
            label = letters.index(answers[i])
        examples.append(RaceExample(example_id, i, article, question, tuple(choice_list), label, path))
    return examples


def _files_of(path: str, levels: Sequence[str]) -> List[str]:
    if os.path.isdir(path):
        level_dirs = [os.path.join(path, level) for level in levels if os.path.isdir(os.path.join(path, level))]
        if level_dirs:
            files = [f for d in level_dirs for f in sorted(glob.glob(os.path.join(d, "*.txt")))]
        else:
            files = sorted(glob.glob(os.path.join(path, "*.txt")) + glob.glob(os.path.join(path, "*.json")))
        if not files:
            raise FileNotFoundError(f"no RACE files (*.txt) under {path} (levels {', '.join(levels)})")
        return files
    if glob.has_magic(path):
        files = sorted(glob.glob(path))
        if not files:
            raise FileNotFoundError(f"no RACE file matches {path!r}")
        return files
    if not os.path.isfile(path):
        raise FileNotFoundError(f"RACE file or folder {path} does not exist")
    return [path]


def read_race_examples(
    paths: Union[PathLike, Sequence[PathLike]],
    *,
    levels: Sequence[str] = LEVELS,
    num_choices: int = DEFAULT_NUM_CHOICES,
) -> List[RaceExample]:
    """Reads RACE examples, one per question.

    Args:
        paths: A split folder (with `middle/` and `high/` subfolders of `*.txt` files, or the
            files directly), single files, glob patterns, or a list of them.
        levels: The subfolders read from a split folder, in order ("middle" then "high", as
            the original; pass ("high",) for RACE-H only).
        num_choices: Options per question (4 in RACE).

    Raises:
        FileNotFoundError: a path matches nothing.
        RaceDataError: a malformed file (named, with the question).
    """
    from albert_tf.tokenization import corpus_files

    if isinstance(num_choices, bool) or not isinstance(num_choices, int) or not 2 <= num_choices <= 26:
        raise RaceDataError(f"num_choices must be an integer in [2, 26], got {num_choices!r}")
    unknown = [level for level in levels if level not in LEVELS]
    if unknown:
        raise RaceDataError(f"unknown RACE level(s) {unknown}; expected a subset of {LEVELS}")
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    files: List[str] = []
    for path in paths:
        files.extend(f for f in _files_of(os.fspath(path), levels) if f not in files)
    examples: List[RaceExample] = []
    for path in files:
        for record in _decode_objects(corpus_files.read_bytes(path), path):
            examples.extend(_parse_record(record, path, num_choices))
    return examples


# --- features -----------------------------------------------------------------------------------


def choice_texts(example: RaceExample, preprocess: Callable[[str], str] = lambda s: s) -> List[str]:
    """The question combined with each option: "_" filled by the option, else "question option"."""
    question = preprocess(example.question)
    texts = []
    for option in example.options:
        option = preprocess(option)
        texts.append(question.replace("_", option) if "_" in question else " ".join([question, option]))
    return texts


def _check_lengths(max_seq_length: int, max_qa_length: int) -> None:
    for name, value in (("max_seq_length", max_seq_length), ("max_qa_length", max_qa_length)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise RaceDataError(f"{name} must be a positive integer, got {value!r}")
    if max_qa_length > max_seq_length - 3:
        raise RaceDataError(
            f"max_qa_length ({max_qa_length}) must be at most max_seq_length - 3 ({max_seq_length - 3})"
        )


def convert_race_example(
    example: RaceExample,
    tokenizer,
    *,
    max_seq_length: int = DEFAULT_MAX_SEQ_LENGTH,
    max_qa_length: int = DEFAULT_MAX_QA_LENGTH,
) -> RaceFeature:
    """The `[CLS] article [SEP] question+option [SEP]` rows of one example (see the module doc).

    Args:
        example: From `read_race_examples`.
        tokenizer: An `albert_tf.tokenization` tokenizer (`tokenize`, `convert_tokens_to_ids`,
            and `preprocess` for SentencePiece models).
        max_seq_length: Tokens per row (512 in the original).
        max_qa_length: Question+option tokens kept, from the end (128).
    """
    _check_lengths(max_seq_length, max_qa_length)
    preprocess = getattr(tokenizer, "preprocess", None) or (lambda s: s)
    context_tokens = tokenizer.tokenize(preprocess(example.article))
    rows: Dict[str, List[List[int]]] = {name: [] for name in CHOICE_INPUTS}
    for text in choice_texts(example, preprocess):
        ending = tokenizer.tokenize(text)[-max_qa_length:]
        context = context_tokens[: max_seq_length - 3 - len(ending)]
        tokens = ["[CLS]"] + context + ["[SEP]"] + ending + ["[SEP]"]
        ids = tokenizer.convert_tokens_to_ids(tokens)
        padding = max_seq_length - len(ids)
        rows["input_ids"].append(ids + [0] * padding)
        rows["input_mask"].append([1] * len(ids) + [0] * padding)
        rows["segment_ids"].append([0] * (len(context) + 2) + [1] * (len(ending) + 1) + [0] * padding)
    return RaceFeature(example.example_id, example.question_index, label=example.label, **rows)


def convert_race_examples(
    examples: Sequence[RaceExample],
    tokenizer,
    *,
    max_seq_length: int = DEFAULT_MAX_SEQ_LENGTH,
    max_qa_length: int = DEFAULT_MAX_QA_LENGTH,
) -> List[RaceFeature]:
    """`convert_race_example` for every example."""
    _check_lengths(max_seq_length, max_qa_length)
    return [
        convert_race_example(e, tokenizer, max_seq_length=max_seq_length, max_qa_length=max_qa_length)
        for e in examples
    ]


def race_features_to_arrays(features: Sequence[RaceFeature]) -> Dict[str, np.ndarray]:
    """int32 arrays `input_ids`, `input_mask`, `segment_ids` [n, choices, seq], and `labels` [n]
    when every feature has a label.

    Raises:
        RaceDataError: no features, or rows of different shapes.
    """
    if not features:
        raise RaceDataError("there are no RACE examples")
    shapes = {np.shape(f.input_ids) for f in features}
    if len(shapes) != 1:
        raise RaceDataError(f"RACE features of different shapes {sorted(shapes)}; convert them with one setting")
    arrays = {name: np.asarray([getattr(f, name) for f in features], dtype=np.int32) for name in CHOICE_INPUTS}
    if all(f.label is not None for f in features):
        arrays["labels"] = np.asarray([f.label for f in features], dtype=np.int32)
    return arrays


def make_race_dataset(features: Sequence[RaceFeature], *, require_labels: bool = True):
    """An unbatched `tf.data.Dataset` of `{input_ids, input_mask, segment_ids[, labels]}`.

    Raises:
        RaceDataError: `require_labels` and some example has no answer.
    """
    import tensorflow as tf

    arrays = race_features_to_arrays(features)
    if require_labels and "labels" not in arrays:
        missing = next(f for f in features if f.label is None)
        raise RaceDataError(f"example {missing.example_id!r} (question {missing.question_index}) has no answer")
    return tf.data.Dataset.from_tensor_slices(arrays)
