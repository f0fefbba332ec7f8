"""The tokenizer of a checkpoint: where each layout keeps it, and the tokenizer of each kind.

`find_tokenizer(path)` is the one search for the tokenizer stored with a checkpoint, in every
layout this package reads or writes (see `EVERY_LAYOUT`); it returns a `StoredTokenizer`: the
kind ("sentencepiece" or "wordpiece"), the file, and the casing the layout records (None where
it records none: each caller has its default). A `TokenizerSearch` says which layouts are tried
in what order: `EVERY_LAYOUT` for `from_pretrained` and `albert-tf finetune --init` alike,
`RUN_SEARCH` for a pretraining run's own `tokenizer.json`.

`python_tokenizer(kind, file, ...)` and `tokenizer_layer(kind, file, ...)` are the one place that
maps a kind to its class: `SentencePieceTokenizer` / `WordPieceTokenizer` in Python,
`AlbertTokenizerLayer.from_sentencepiece` / `from_wordpiece` in the graph (imported on first
use: it loads tensorflow-text).

Local paths use the standard library; paths with a scheme (`gs://...`) go through
`tf.io.gfile`, imported only then.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from typing import Any, List, Optional, Sequence, Tuple, Union

from albert_tf import file_io
from albert_tf.tokenization.tokenizers import SentencePieceTokenizer, WordPieceTokenizer

logger = logging.getLogger(__name__)

PathLike = Union[str, "os.PathLike[str]"]

SENTENCEPIECE = "sentencepiece"
WORDPIECE = "wordpiece"
KINDS = (SENTENCEPIECE, WORDPIECE)

# The layouts, each read in one directory by `tokenizer_in`.
TASK_JSON = "task.json"  # `albert-tf finetune`: task.json's "tokenizer" entry
KERAS_HUB = "keras-hub"  # a keras-hub preset: assets/tokenizer/vocabulary.spm (or .txt)
TOKENIZER_JSON = "tokenizer.json"  # `albert-tf pretrain`: tokenizer.json {"type", "file", "lower_case"}
EXPORT_JSON = "export.json"  # `albert-tf export`: assets/export.json's "tokenizer" entry
NAMED_FILES = "files"  # spiece.model, 30k-clean.model, spm.model, any *.model, vocab.txt, vocab_chinese.txt
ASSETS_FILES = "assets"  # the same names in assets/ (a TF-Hub module)
LAYOUTS = (TASK_JSON, KERAS_HUB, TOKENIZER_JSON, EXPORT_JSON, NAMED_FILES, ASSETS_FILES)

_KERAS_HUB_VOCABULARIES = (
    (os.path.join("assets", "tokenizer", "vocabulary.spm"), SENTENCEPIECE),
    (os.path.join("assets", "tokenizer", "vocabulary.txt"), WORDPIECE),
)
_PREFERRED_MODELS = (
    "spiece.model",  # Hugging Face
    "30k-clean.model",  # the original releases
    "spm.model",  # albert-tf pretrain / train-tokenizer
)
_VOCABULARIES = (
    "vocab.txt",  # Chinese releases, albert-tf pretrain
    "vocab_chinese.txt",  # the original Chinese releases
)
_DESCRIPTIONS = {TASK_JSON: (TASK_JSON, "tokenizer"), TOKENIZER_JSON: (TOKENIZER_JSON, None),
                 EXPORT_JSON: (os.path.join("assets", "export.json"), "tokenizer")}


@dataclasses.dataclass(frozen=True)
class StoredTokenizer:
    """A tokenizer stored with a checkpoint.

    Attributes:
        kind: "sentencepiece" (a SentencePiece ``.model``) or "wordpiece" (a WordPiece ``vocab.txt``).
        file: The file.
        lower_case: The casing the layout records; None where it records none.
        layout: The layout it was found by (one of `LAYOUTS`).
    """

    kind: str
    file: str
    lower_case: Optional[bool]
    layout: str


@dataclasses.dataclass(frozen=True)
class TokenizerSearch:
    """Which layouts `find_tokenizer` tries, in what order.

    Attributes:
        steps: `(layout, in_parent)` pairs, tried in order: the layout in the directory of the
            path (the path itself when it is one) or, with `in_parent`, in that directory's
            parent when the directory is one of `nested` (skipped otherwise).
        nested: Sub-directory names of a layout whose tokenizer may sit one level up.
    """

    steps: Tuple[Tuple[str, bool], ...]
    nested: Tuple[str, ...]

    def __post_init__(self):
        unknown = [layout for layout, _ in self.steps if layout not in LAYOUTS]
        if unknown:
            raise ValueError(f"unknown tokenizer layouts {unknown}; expected some of {', '.join(LAYOUTS)}")


_EVERY = (TASK_JSON, KERAS_HUB, TOKENIZER_JSON, EXPORT_JSON, NAMED_FILES, ASSETS_FILES)
# Every layout `from_pretrained` reads, in the directory and then in the parent of a `tf1/`,
# `checkpoints/` or `variables/` sub-directory.
EVERY_LAYOUT = TokenizerSearch(
    steps=tuple((layout, False) for layout in _EVERY) + tuple((layout, True) for layout in _EVERY),
    nested=("tf1", "checkpoints", "variables"),
)
# A pretraining run's tokenizer.json, from the run directory, its `tf1/` or `checkpoints/`.
RUN_SEARCH = TokenizerSearch(steps=((TOKENIZER_JSON, False), (TOKENIZER_JSON, True)), nested=("tf1", "checkpoints"))


# --- files, local or remote ------------------------------------------------------------------------


def _gfile():
    import tensorflow as tf  # noqa: PLC0415 - only for paths with a scheme

    return tf.io.gfile


def _isfile(path: str) -> bool:
    if file_io.is_remote(path):
        gfile = _gfile()
        return gfile.exists(path) and not gfile.isdir(path)
    return os.path.isfile(path)


def _isdir(path: str) -> bool:
    return _gfile().isdir(path) if file_io.is_remote(path) else os.path.isdir(path)


def _listdir(path: str) -> List[str]:
    if not _isdir(path):
        return []
    if file_io.is_remote(path):
        return [name.rstrip("/") for name in _gfile().listdir(path)]
    return os.listdir(path)


def _read_json(path: str) -> Tuple[bool, Any]:
    """`(exists, value)`; value None where the file is not readable JSON (a warning names it)."""
    if not _isfile(path):
        return False, None
    try:
        if file_io.is_remote(path):
            with _gfile().GFile(path, "r") as f:
                return True, json.load(f)
        with open(path, encoding="utf-8") as f:
            return True, json.load(f)
    except (OSError, ValueError) as e:  # json.JSONDecodeError and UnicodeDecodeError are ValueErrors
        logger.warning("%s is unreadable (%s: %s); ignoring it", path, type(e).__name__, e)
        return True, None


# --- the search ----------------------------------------------------------------------------------


def kind_of_file(path: PathLike) -> str:
    """The kind of a tokenizer file named by itself: "wordpiece" for a ``.txt``, else "sentencepiece"."""
    return WORDPIECE if os.fspath(path).endswith(".txt") else SENTENCEPIECE


def search_directories(path: PathLike, search: TokenizerSearch = EVERY_LAYOUT) -> List[str]:
    """The directories `find_tokenizer` looks in for `path`: its directory (the path itself when
    it is one) and, when that is one of `search.nested`, its parent."""
    path = os.fspath(path).rstrip("/\\") or os.sep
    if _isdir(path):
        directory = path
    else:
        directory = os.path.dirname(path if file_io.is_remote(path) else os.path.abspath(path)) or "."
    directories = [directory]
    if os.path.basename(directory) in search.nested:
        directories.append(os.path.dirname(directory) or ".")
    return directories


def _described(directory: str, layout: str) -> Optional[StoredTokenizer]:
    relative, key = _DESCRIPTIONS[layout]
    path = os.path.join(directory, relative)
    exists, values = _read_json(path)
    if not exists:
        return None
    entry = values.get(key, values) if key and isinstance(values, dict) else values
    if not isinstance(entry, dict) or "type" not in entry or "file" not in entry:
        if values is not None:
            logger.warning("%s describes no tokenizer (no \"type\" and \"file\"); ignoring it", path)
        return None
    if entry["type"] not in KINDS or not entry["file"]:
        return None
    # The description's own directory: `assets/` for an export.
    file = os.path.join(os.path.dirname(path), os.path.basename(str(entry["file"])))
    if not _isfile(file):
        return None
    lower_case = entry.get("lower_case")
    return StoredTokenizer(entry["type"], file, bool(lower_case) if lower_case is not None else None, layout)


def _files_in(directory: str, layout: str, preferred: Sequence[str]) -> Optional[StoredTokenizer]:
    for name in preferred:
        if _isfile(os.path.join(directory, name)):
            return StoredTokenizer(SENTENCEPIECE, os.path.join(directory, name), None, layout)
    models = sorted(n for n in _listdir(directory) if n.endswith(".model"))
    if models:
        return StoredTokenizer(SENTENCEPIECE, os.path.join(directory, models[0]), None, layout)
    for name in _VOCABULARIES:
        if _isfile(os.path.join(directory, name)):
            return StoredTokenizer(WORDPIECE, os.path.join(directory, name), None, layout)
    return None


def tokenizer_in(directory: PathLike, layout: str) -> Optional[StoredTokenizer]:
    """The tokenizer that `layout` (one of `LAYOUTS`) keeps in `directory`, or None."""
    directory = os.fspath(directory)
    if layout in _DESCRIPTIONS:
        return _described(directory, layout)
    if layout == KERAS_HUB:
        for relative, kind in _KERAS_HUB_VOCABULARIES:
            if _isfile(os.path.join(directory, relative)):
                return StoredTokenizer(kind, os.path.join(directory, relative), None, layout)
        return None
    if layout == NAMED_FILES:
        return _files_in(directory, layout, _PREFERRED_MODELS)
    if layout == ASSETS_FILES:
        return _files_in(os.path.join(directory, "assets"), layout, _PREFERRED_MODELS)
    raise ValueError(f"unknown tokenizer layout {layout!r}; expected one of {', '.join(LAYOUTS)}")


def find_tokenizer(path: PathLike, search: TokenizerSearch = EVERY_LAYOUT) -> Optional[StoredTokenizer]:
    """The tokenizer stored with the checkpoint at `path`, or None.

    Args:
        path: A checkpoint file, prefix or directory of any layout (local or `gs://`).
        search: The layouts tried, in order (`EVERY_LAYOUT`: a fine-tuning output's `task.json`
            entry; a keras-hub preset's `assets/tokenizer/vocabulary.spm` (or `.txt`); a
            pretraining output's `tokenizer.json`; an export's `assets/export.json` entry;
            `spiece.model` (Hugging Face), `30k-clean.model` (the original releases), `spm.model`,
            any other `*.model`, `vocab.txt`, `vocab_chinese.txt`; a TF-Hub module's
            `assets/*.model` or `assets/vocab.txt`; each in the directory of `path`, then in the
            parent of a `tf1/`, `checkpoints/` or `variables/` sub-directory).

    Returns:
        The first `StoredTokenizer` found, or None.
    """
    directories = search_directories(path, search)
    for layout, in_parent in search.steps:
        if in_parent and len(directories) < 2:
            continue
        found = tokenizer_in(directories[1] if in_parent else directories[0], layout)
        if found is not None:
            return found
    return None


# --- the tokenizer of each kind --------------------------------------------------------------------


def check_kind(kind: str) -> None:
    """Raises ValueError for a kind that is neither "sentencepiece" nor "wordpiece"."""
    if kind not in KINDS:
        raise ValueError(f"unknown tokenizer type {kind!r}")


def python_tokenizer(kind: str, file: Optional[PathLike] = None, *, lower_case: bool = True,
                     **options: Any) -> Union[SentencePieceTokenizer, WordPieceTokenizer]:
    """The Python tokenizer of `kind`: `SentencePieceTokenizer(file, lower_case, **options)` for
    "sentencepiece", `WordPieceTokenizer(file, lower_case, **options)` for "wordpiece".

    Args:
        kind: "sentencepiece" or "wordpiece".
        file: The SentencePiece ``.model`` or the WordPiece ``vocab.txt``; None with `options`
            `model_proto=` / `vocab=`.
        lower_case: Lower-case the text first.
        options: The class's other keyword arguments (`keep_accents`, `normalize_quotes`;
            `max_input_chars_per_word`).

    Raises:
        ValueError: an unknown kind, or a file the class refuses.
    """
    check_kind(kind)
    cls = SentencePieceTokenizer if kind == SENTENCEPIECE else WordPieceTokenizer
    return cls(file, lower_case=lower_case, **options)


def tokenizer_layer(kind: str, file: PathLike, **kwargs: Any):
    """The in-graph `AlbertTokenizerLayer` of `kind`: `AlbertTokenizerLayer.from_sentencepiece(file,
    **kwargs)` for "sentencepiece", `from_wordpiece(file, **kwargs)` for "wordpiece" (`kwargs`:
    `sequence_length`, `lower_case`, `name`, ...).

    Raises:
        ValueError: an unknown kind, or a file the layer refuses.
    """
    check_kind(kind)
    from albert_tf.tokenization.in_graph import AlbertTokenizerLayer  # noqa: PLC0415 - loads tensorflow-text

    if kind == SENTENCEPIECE:
        return AlbertTokenizerLayer.from_sentencepiece(file, **kwargs)
    return AlbertTokenizerLayer.from_wordpiece(file, **kwargs)


__all__: Sequence[str] = (
    "EVERY_LAYOUT",
    "KINDS",
    "LAYOUTS",
    "RUN_SEARCH",
    "SENTENCEPIECE",
    "StoredTokenizer",
    "TokenizerSearch",
    "WORDPIECE",
    "check_kind",
    "find_tokenizer",
    "kind_of_file",
    "python_tokenizer",
    "search_directories",
    "tokenizer_in",
    "tokenizer_layer",
)
