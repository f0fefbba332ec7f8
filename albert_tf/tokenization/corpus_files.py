"""File helpers of the tokenization package: input globs, UTF-8 corpus lines, atomic writes.

Local paths use the standard library; paths with a scheme (`gs://...`) go through
`tf.io.gfile`, imported only then so the pure-Python tokenizers do not load TensorFlow.

Corpus text is read the same way by `albert-tf train-tokenizer` and, through
`albert_tf.data.documents`, by `albert-tf make-pretraining-data` (`decode_text_line`,
`clean_line`, `iter_corpus_lines`): a directory stands for the `*.txt` files directly in it;
a line that is not UTF-8, or holds a NUL (binary data), makes its file unreadable; every other
line goes through the original BERT `_clean_text` (`text.bert_clean_text`), which drops U+0000,
U+FFFD and control characters (categories Cc and Cf except tab, newline and carriage return) and
maps whitespace to a space, and the characters dropped are counted.
"""

from __future__ import annotations

import dataclasses
import functools
import glob
import logging
import os
import re
from typing import BinaryIO, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

from albert_tf import file_io
from albert_tf.tokenization import unicode_classes
from albert_tf.tokenization.text import bert_clean_text

logger = logging.getLogger(__name__)

PathLike = Union[str, "os.PathLike[str]"]

# What a directory given as input stands for: the files directly in it, not in subdirectories,
# so that an output or a vocabulary written into a subdirectory is never read back as text.
DIRECTORY_PATTERN = "*.txt"

# What to do with an unreadable corpus file: fail the run, or leave the file out and report it.
ON_ERROR = ("raise", "skip")


_is_remote = file_io.is_remote


def _gfile():
    import tensorflow as tf  # noqa: PLC0415 - only for remote file systems

    return tf.io.gfile


def no_text_files_message(directory: str) -> str:
    """The error for a directory input without `*.txt` files (shared with the Beam pipeline)."""
    return (
        f"no {DIRECTORY_PATTERN} file in directory {directory!r} (a directory stands for the "
        f"{DIRECTORY_PATTERN} files directly in it; give a glob pattern for other files)"
    )


def expand_inputs(patterns: Union[PathLike, Sequence[PathLike]]) -> List[str]:
    """Expands file names, directories and glob patterns, keeping the given order and dropping duplicates.

    Args:
      patterns: one path, directory or pattern, or a sequence of them. A directory stands for the
        `*.txt` files directly in it (sorted), not those in its subdirectories.

    Raises:
      FileNotFoundError: when a plain name does not exist, a directory has no `*.txt` file or a
        pattern matches no file.
    """
    if isinstance(patterns, (str, os.PathLike)):
        patterns = [patterns]
    files: List[str] = []
    for pattern in patterns:
        pattern = os.fspath(pattern)
        if _is_remote(pattern):
            gfile = _gfile()
            if not glob.has_magic(pattern) and gfile.isdir(pattern):
                matches = sorted(gfile.glob(pattern.rstrip("/") + "/" + DIRECTORY_PATTERN))
                if not matches:
                    raise FileNotFoundError(no_text_files_message(pattern))
            else:
                matches = sorted(gfile.glob(pattern))
        elif glob.has_magic(pattern):
            matches = sorted(glob.glob(pattern))
        elif os.path.isdir(pattern):
            matches = sorted(p for p in glob.glob(os.path.join(pattern, DIRECTORY_PATTERN)) if os.path.isfile(p))
            if not matches:
                raise FileNotFoundError(no_text_files_message(pattern))
        else:
            matches = [pattern] if os.path.isfile(pattern) else []
        if not matches:
            raise FileNotFoundError(f"no input file matches {pattern!r}")
        files.extend(m for m in matches if m not in files)
    return files


def read_bytes(path: PathLike) -> bytes:
    """The whole content of `path` (local or remote)."""
    path = os.fspath(path)
    if _is_remote(path):
        with _gfile().GFile(path, "rb") as f:
            return f.read()
    with open(path, "rb") as f:
        return f.read()


def iter_lines(paths: Iterable[str]) -> Iterator[Tuple[str, int, str]]:
    """Yields `(path, line_number, line)` for every line of every file, decoded as strict UTF-8.

    Raises:
      ValueError: naming the file and line of the first invalid UTF-8 sequence. A training
        corpus in another encoding is a mistake to report, not text to repair.
    """
    for path in paths:
        handle = _gfile().GFile(path, "rb") if _is_remote(path) else open(path, "rb")
        with handle as f:
            for number, raw in enumerate(f, start=1):
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as e:
                    raise ValueError(f"{path}:{number}: {_invalid_utf8(raw, e)}") from None
                yield path, number, line


def _invalid_utf8(raw: bytes, error: UnicodeDecodeError) -> str:
    # 1-based, as the columns of the other messages.
    return f"not valid UTF-8 (byte {error.start + 1} of the line: {raw[error.start:error.end]!r})"


class UnreadableTextError(ValueError):
    """A corpus line that is not UTF-8 text: invalid UTF-8, or binary data (a NUL).

    Attributes:
      source: the file name.
      line: the 1-based line number.
      reason: what is wrong, without the location.
    """

    def __init__(self, source: str, line: int, reason: str):
        self.source = source
        self.line = line
        self.reason = reason
        super().__init__(f"{source}:{line}: {reason}")

    def __reduce__(self):
        return (type(self), (self.source, self.line, self.reason))


def decode_text_line(raw: bytes, source: str, line: int) -> str:
    """Decodes one raw line of a corpus as strict UTF-8 that holds no NUL.

    A NUL marks binary data, as git and grep decide: archives, executables, and UTF-16/32 text
    (whose ASCII characters come with NUL bytes) read as UTF-8. Other control characters are
    text to clean (`clean_line`), not a reason to reject the file.

    Raises:
      UnreadableTextError: naming `source` and `line`.
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UnreadableTextError(source, line, _invalid_utf8(raw, e)) from None
    nul = text.find("\x00")
    if nul >= 0:
        raise UnreadableTextError(source, line, f"binary data, not UTF-8 text (a NUL at column {nul + 1})")
    return text


@functools.lru_cache(maxsize=None)
def _removed_regex() -> "re.Pattern[str]":
    return re.compile(unicode_classes.python_class("bert_removed"))


@dataclasses.dataclass
class CleaningStats:
    """What `clean_line` removed from one file.

    Attributes:
      characters: characters dropped by the BERT text cleaning.
      first: (line, column, code point) of the first one, or None.
    """

    characters: int = 0
    first: Optional[Tuple[int, int, int]] = None

    def log(self, source: str) -> None:
        """Logs one warning for `source` when anything was removed."""
        if self.characters:
            line, column, code_point = self.first
            logger.warning(
                "%s: removed %d control character%s (the first, U+%04X, at line %d, column %d), "
                "as the original BERT/ALBERT text cleaning does",
                source,
                self.characters,
                "" if self.characters == 1 else "s",
                code_point,
                line,
                column,
            )


def clean_line(text: str, line: int, stats: Optional[CleaningStats] = None) -> str:
    """`text.bert_clean_text` of one line, counting what it removed into `stats`."""
    cleaned = bert_clean_text(text)
    removed = len(text) - len(cleaned)
    if removed and stats is not None:
        if stats.first is None:
            match = _removed_regex().search(text)
            stats.first = (line, match.start() + 1, ord(match.group(0)))
        stats.characters += removed
    return cleaned


def check_text_lines(raw_lines: Iterable[bytes], source: str) -> None:
    """Reads every line as `decode_text_line` does, before any is used.

    Raises:
      UnreadableTextError: the first line that is not UTF-8 text.
    """
    for number, raw in enumerate(raw_lines, start=1):
        decode_text_line(raw, source, number)


@dataclasses.dataclass
class CorpusReport:
    """What reading a corpus with `iter_corpus_lines` cleaned and left out.

    Attributes:
      cleaned_characters: characters the BERT text cleaning removed, over all files.
      cleaned_files: the files it removed any from.
      skipped_files: `(file, problem)` of every file left out as unreadable (`on_error="skip"`).
    """

    cleaned_characters: int = 0
    cleaned_files: List[str] = dataclasses.field(default_factory=list)
    skipped_files: List[Tuple[str, str]] = dataclasses.field(default_factory=list)


def check_on_error(on_error: str) -> None:
    """Raises ValueError unless `on_error` is one of `ON_ERROR`."""
    if on_error not in ON_ERROR:
        raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")


def _open(path: str) -> BinaryIO:
    return _gfile().GFile(path, "rb") if _is_remote(path) else open(path, "rb")


def iter_corpus_lines(
    paths: Iterable[str], *, on_error: str = "raise", report: Optional[CorpusReport] = None
) -> Iterator[Tuple[str, int, str]]:
    """Yields `(path, line_number, cleaned line)` for every line of every corpus file.

    Lines are read as `decode_text_line` and cleaned by `clean_line` (a UTF-8 byte-order mark
    at the start of a file is dropped first, and not counted); each file with removed characters
    gets one logged warning.

    Args:
      paths: the files, in order.
      on_error: "raise" stops at the first unreadable line; "skip" leaves its whole file out (each
        file is then read twice, once to check it) and records it in `report.skipped_files`.
      report: receives the counts; optional.

    Raises:
      UnreadableTextError: with `on_error="raise"`, naming the file and line.
      ValueError: an unknown `on_error`.
    """
    check_on_error(on_error)
    for path in paths:
        if on_error == "skip":
            try:
                with _open(path) as f:
                    check_text_lines(f, path)
            except UnreadableTextError as e:
                logger.info("skipping %s", e)
                if report is not None:
                    report.skipped_files.append((path, str(e)))
                continue
        stats = CleaningStats()
        with _open(path) as f:
            for number, raw in enumerate(f, start=1):
                line = decode_text_line(raw, path, number)
                if number == 1 and line.startswith("\ufeff"):
                    line = line[1:]
                yield path, number, clean_line(line, number, stats)
        stats.log(path)
        if stats.characters and report is not None:
            report.cleaned_characters += stats.characters
            report.cleaned_files.append(path)


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _listing(items: Sequence[str], limit: int = 5) -> str:
    shown = "; ".join(items[:limit])
    return shown if len(items) <= limit else f"{shown}; and {len(items) - limit} more"


def describe_cleaning(characters: int, files: Sequence[str]) -> str:
    """The summary line of what the text cleaning removed, as both command-line tools print it."""
    return (
        f"cleaned: removed {_plural(characters, 'control character')} (U+0000, U+FFFD, categories Cc/Cf, "
        f"as the original BERT/ALBERT text cleaning) from {_plural(len(files), 'file')}: "
        + _listing([os.path.basename(f) for f in sorted(files)])
    )


def describe_skipped(skipped: Sequence[Tuple[str, str]]) -> str:
    """The summary line of the files left out as unreadable, as both command-line tools print it."""
    return f"skipped {_plural(len(skipped), 'unreadable file')}: " + _listing([p for _, p in sorted(skipped)])


def atomic_write_bytes(path: PathLike, data: bytes) -> None:
    """Writes `data` to `path` atomically and durably (`albert_tf.file_io`), creating a local
    `path`'s directory if needed."""
    path = os.fspath(path)
    file_io.atomic_write_bytes(path, data, makedirs=not _is_remote(path))
