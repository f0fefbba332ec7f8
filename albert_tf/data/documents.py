"""Reading pretraining text: documents of sentences, and a rule-based sentence splitter.

Two input formats are understood, both UTF-8 text with documents separated by blank lines
(and by the end of a file):

* ``"sentences"`` -- the format of the original BERT/ALBERT ``create_pretraining_data.py``:
  one sentence per line. Sentence boundaries matter because sentence-order prediction (SOP)
  splits a chunk of text into segments A and B only at sentence boundaries.
* ``"paragraphs"`` -- one paragraph (or a whole text) per line, as in the State of the Union
  files of ``shared/data/en/sotu``; every line is cut into sentences by :func:`split_sentences`.

Every line is cleaned as the original BERT/ALBERT text cleaning (``_clean_text``) does, the same
way ``albert-tf train-tokenizer`` reads its input (:mod:`albert_tf.tokenization.corpus_files`): U+0000,
U+FFFD and control characters (categories Cc and Cf, except tab, newline and carriage return) are
dropped, and counted (:class:`~albert_tf.tokenization.corpus_files.CleaningStats`, one warning per file).
A line that held only such characters is left out; as in the original, it does not end a document.

Malformed input is reported as :class:`MalformedInputError`, whose message names the file and
line: an empty file, invalid UTF-8, or binary data (a NUL, which is what UTF-16 text, archives and
executables look like when read as UTF-8). Documents with a single sentence are valid (the
original script pairs them with a random other document) but are logged, because a file of only
such documents -- double-spaced text, say -- makes every SOP label 1.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from typing import BinaryIO, Callable, Iterable, Iterator, List, Optional, Tuple

from albert_tf.tokenization import corpus_files
from albert_tf.tokenization.corpus_files import CleaningStats

logger = logging.getLogger(__name__)

INPUT_FORMATS = ("sentences", "paragraphs")


class MalformedInputError(ValueError):
    """Input text that cannot be used, with the file (and line) it came from.

    Attributes:
        source: the file name (or other label) of the input.
        line: the 1-based line number, or None when the problem concerns the whole file.
        reason: what is wrong, without the location.
    """

    def __init__(self, source: str, line: Optional[int], reason: str):
        self.source = source
        self.line = line
        self.reason = reason
        where = source if line is None else f"{source}:{line}"
        super().__init__(f"{where}: {reason}")

    def __reduce__(self):
        # Beam workers pickle exceptions across processes; keep the three fields.
        return (type(self), (self.source, self.line, self.reason))


@dataclasses.dataclass(frozen=True)
class Document:
    """One document: its sentences, in order, and where it starts.

    Attributes:
        sentences: the sentences, stripped, never empty strings.
        source: the file it was read from.
        line: the 1-based line of its first sentence in that file.
    """

    sentences: Tuple[str, ...]
    source: str
    line: int


# Words that end with a period without ending the sentence. Lower case, without the final
# period. "etc" and "ibid" are left out: they end sentences more often than not.
_ABBREVIATIONS = frozenset(
    """
    mr mrs ms messrs mmes mme mlle dr prof rev hon gov gen sen rep pres supt atty
    capt cmdr col lt sgt maj adm brig cpl pvt gens sens reps govs esq
    sr jr st ste mt ft
    no nos vol vols art arts sec secs ch chap fig figs pp op cit
    vs viz cf al approx dept est ca
    inc co corp ltd bros assn
    jan feb mar apr jun jul aug sep sept oct nov dec
    mon tue tues wed thu thur thurs fri sat sun
    """.split()
)

# A run of terminators, optional closing quotes/brackets, then the whitespace before the next
# sentence. The character after the whitespace is checked in code (it must be able to start a
# sentence), so that a lower-case continuation ("e.g. the ...") never splits.
_CANDIDATE_END = re.compile(r"[.!?\u2026]+[\"'\u201d\u2019)\]]*\s+")
_OPENERS = "\"'\u201c\u2018([{"
# Dotted initialisms and single initials: "U.S.", "D.C.", "H." in "Harry S. Truman".
_INITIALISM = re.compile(r"^(?:[^\W\d_]\.)*[^\W\d_]$")


def _can_start_sentence(text: str, index: int) -> bool:
    while index < len(text) and text[index] in _OPENERS:
        index += 1
    if index >= len(text):
        return False
    char = text[index]
    return char.isupper() or char.isdigit()


def _is_abbreviation(text: str, terminator_start: int) -> bool:
    """Whether the word just before a single period at `terminator_start` is an abbreviation."""
    start = terminator_start
    while start > 0 and not text[start - 1].isspace():
        start -= 1
    word = text[start:terminator_start].lstrip(_OPENERS)
    if not word:
        return False
    return word.lower() in _ABBREVIATIONS or _INITIALISM.match(word) is not None


def split_sentences(text: str) -> List[str]:
    """Splits a paragraph into sentences with a small set of documented rules.

    A sentence ends after a run of ``.``, ``!``, ``?`` or ``…`` (with any closing quotes or
    brackets that follow it) when whitespace comes next and then a character that can start a
    sentence: an upper-case letter or a digit, possibly behind opening quotes or brackets.
    A single ``.`` does not end a sentence when the word before it is a known abbreviation
    (titles such as "Mr", months, "No", "Inc", ...), a single letter (an initial) or a dotted
    initialism such as "U.S". That last rule merges a sentence ending in "U.S." with the next
    one, which costs SOP a boundary; cutting "the U.S. Congress" in two would cost a sentence.

    Args:
        text: one paragraph (or any text without meaningful line breaks).

    Returns:
        The sentences, stripped, in order; empty when `text` is blank.
    """
    text = text.strip()
    if not text:
        return []
    sentences = []
    start = 0
    for match in _CANDIDATE_END.finditer(text):
        end = match.end()
        if not _can_start_sentence(text, end):
            continue
        terminators = match.group(0).rstrip()
        if terminators.rstrip("\"'\u201d\u2019)]") == "." and _is_abbreviation(text, match.start()):
            continue
        sentence = text[start:end].strip()
        if sentence:
            sentences.append(sentence)
        start = end
    last = text[start:].strip()
    if last:
        sentences.append(last)
    return sentences


def _decode_line(raw: bytes, source: str, line_number: int) -> str:
    try:
        return corpus_files.decode_text_line(raw, source, line_number)
    except corpus_files.UnreadableTextError as e:
        raise MalformedInputError(source, line_number, e.reason) from None


def iter_documents(
    lines: Iterable[bytes],
    source: str,
    input_format: str = "sentences",
    cleaning: Optional[CleaningStats] = None,
) -> Iterator[Document]:
    """Parses raw lines of one file into documents, cleaning control characters out of them.

    Args:
        lines: the file's lines as bytes (a binary file object works).
        source: the file's name, used in error messages and on each `Document`.
        input_format: ``"sentences"`` (one sentence per line) or ``"paragraphs"`` (every line is
            split with :func:`split_sentences`). Blank lines separate documents in both.
        cleaning: receives the count of characters the text cleaning removed; optional (the
            count is logged either way).

    Yields:
        Each non-empty `Document`, in file order.

    Raises:
        MalformedInputError: the file is empty or blank, is not valid UTF-8, or holds binary data.
        ValueError: `input_format` is unknown.
    """
    if input_format not in INPUT_FORMATS:
        raise ValueError(f"unknown input_format {input_format!r}; expected one of {INPUT_FORMATS}")
    split = input_format == "paragraphs"
    if cleaning is None:
        cleaning = CleaningStats()
    sentences: List[str] = []
    first_line = 0
    num_documents = 0
    single_sentence = 0
    first_single_line = 0

    def finish() -> Optional[Document]:
        nonlocal num_documents, single_sentence, first_single_line
        if not sentences:
            return None
        num_documents += 1
        if len(sentences) == 1:
            single_sentence += 1
            if single_sentence == 1:
                first_single_line = first_line
        return Document(tuple(sentences), source, first_line)

    line_number = 0
    for line_number, raw in enumerate(lines, start=1):
        line = _decode_line(raw, source, line_number)
        if line_number == 1 and line.startswith("\ufeff"):
            line = line[1:]
        line = line.strip()
        if not line:
            document = finish()
            if document is not None:
                yield document
            sentences = []
            continue
        # Blank is decided before cleaning, as the original does: a line of control characters
        # only is an empty sentence, not the end of a document.
        line = corpus_files.clean_line(line, line_number, cleaning).strip()
        if not line:
            continue
        if not sentences:
            first_line = line_number
        if split:
            sentences.extend(split_sentences(line))
        else:
            sentences.append(line)
    document = finish()
    if document is not None:
        yield document
    cleaning.log(source)
    if num_documents == 0:
        what = "is empty" if line_number == 0 else f"has no text ({line_number} blank lines)"
        raise MalformedInputError(source, None, what)
    if single_sentence:
        logger.warning(
            "%s: %d of %d documents have a single sentence (the first at line %d); their instances take "
            "segment B from another document (SOP label 1). Is the input one sentence per line with blank "
            "lines only between documents?",
            source,
            single_sentence,
            num_documents,
            first_single_line,
        )


def _open(path: str, opener: Optional[Callable[[str], BinaryIO]]) -> BinaryIO:
    return open(path, "rb") if opener is None else opener(path)


def read_documents(
    path: str,
    input_format: str = "sentences",
    opener: Optional[Callable[[str], BinaryIO]] = None,
    cleaning: Optional[CleaningStats] = None,
) -> Iterator[Document]:
    """Reads the documents of one file.

    Args:
        path: the file to read.
        input_format: see :func:`iter_documents`.
        opener: opens `path` for binary reading; defaults to the built-in ``open`` (Beam passes
            ``FileSystems.open`` so that ``gs://`` and other remote paths work).
        cleaning: see :func:`iter_documents`.

    Yields:
        Each `Document` of the file, in order.

    Raises:
        MalformedInputError: as :func:`iter_documents`.
        OSError: the file cannot be opened.
    """
    with _open(path, opener) as stream:
        yield from iter_documents(stream, path, input_format, cleaning)


def check_readable(path: str, opener: Optional[Callable[[str], BinaryIO]] = None) -> None:
    """Reads the whole file once, as :func:`read_documents` would, without parsing it.

    For leaving out unreadable files: a file that passes yields its documents without an
    invalid-UTF-8 or binary-data error, so none of them goes out before the file is known good.

    Raises:
        MalformedInputError: the first line that is not UTF-8 text.
        OSError: the file cannot be opened.
    """
    with _open(path, opener) as stream:
        try:
            corpus_files.check_text_lines(stream, path)
        except corpus_files.UnreadableTextError as e:
            raise MalformedInputError(e.source, e.line, e.reason) from None
