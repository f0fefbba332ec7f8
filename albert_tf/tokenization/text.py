"""The original ALBERT/BERT text preprocessing, in pure Python.

Two families live here, each exactly as the released code does it:

* SentencePiece models (English ALBERT): `preprocess_text` (google-research/albert
  `tokenization.preprocess_text`, identical to `official.nlp.tools.tokenization.preprocess_text`)
  and `split_digit_comma_pieces`, the piece post-processing of the original `encode_pieces`.
* WordPiece models (Chinese ALBERT): `bert_basic_tokenize`, the original `BasicTokenizer`
  (clean text, split CJK characters, lower-case and strip accents, split punctuation).

Invalid UTF-8: `bytes` input is decoded with every invalid sequence replaced by U+FFFD (one per
maximal invalid subsequence, the Unicode recommendation that both Python's `errors="replace"` and
TensorFlow's `unicode_transcode(errors="replace")` follow), so the Python and the in-graph
tokenizers agree. (The original decoded with `errors="ignore"`; for `str` input nothing differs.)
`preprocess_text` keeps U+FFFD; the SentencePiece models' `nmt_nfkc` normalization (the default of
`train_sentencepiece` and of the released ALBERT models) then deletes it, and the WordPiece path
drops it in `bert_clean_text` like the original `_clean_text`: either way, invalid bytes produce no
token.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from typing import Callable, List, Sequence, Union

from albert_tf.tokenization import unicode_classes

SPIECE_UNDERLINE = "\u2581"

TextLike = Union[str, bytes, bytearray]


def to_unicode(text: TextLike) -> str:
    """Returns `text` as `str`, decoding bytes as UTF-8 with U+FFFD for invalid sequences.

    Args:
      text: a `str`, or UTF-8 `bytes`/`bytearray` (numpy `str_`/`bytes_` are subclasses and work).

    Raises:
      TypeError: for any other type (None, numbers, lists ...).
    """
    if isinstance(text, str):
        return text
    if isinstance(text, (bytes, bytearray)):
        return bytes(text).decode("utf-8", errors="replace")
    raise TypeError(f"text must be str or UTF-8 bytes, got {type(text).__name__}")


def preprocess_text(
    text: TextLike,
    *,
    lower_case: bool = True,
    remove_space: bool = True,
    keep_accents: bool = False,
    normalize_quotes: bool = False,
) -> str:
    """The original ALBERT `preprocess_text`, applied before SentencePiece.

    With the defaults except `lower_case` it is character for character
    `official.nlp.tools.tokenization.preprocess_text(text, lower=lower_case)`:

    1. `remove_space`: strip, and collapse every run of `str.isspace()` characters to one space.
    2. NFKD, then drop every character with a non-zero canonical combining class
       (`unicodedata.combining`), which removes accents.
    3. `lower_case`: `str.lower()`.

    Two options are not in the original ALBERT code and are off by default: `normalize_quotes`
    replaces the LaTeX-style quotes ``` `` ``` and `''` with `"` after step 1, and `keep_accents`
    skips step 2. Together they give the XLNet / Hugging Face `AlbertTokenizer` preprocessing.

    Args:
      text: the raw text (`str`, or UTF-8 bytes; see the module docstring on invalid UTF-8).
      lower_case: lower-case the text (True for the uncased English ALBERT models).
      remove_space: collapse whitespace.
      keep_accents: keep combining marks (and skip NFKD).
      normalize_quotes: map ``` `` ``` and `''` to `"`.

    Returns:
      The preprocessed text.
    """
    outputs = to_unicode(text)
    if remove_space:
        outputs = " ".join(outputs.strip().split())
    if normalize_quotes:
        outputs = outputs.replace("``", '"').replace("''", '"')
    if not keep_accents:
        outputs = unicodedata.normalize("NFKD", outputs)
        outputs = outputs.translate(unicode_classes.deletion_table("combining"))
    if lower_case:
        outputs = outputs.lower()
    return outputs


def is_digit_comma_piece(piece: str) -> bool:
    return len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit()


def split_digit_comma_pieces(
    pieces: Sequence[str], encode_as_pieces: Callable[[str], List[str]]
) -> List[str]:
    """The original `encode_pieces` post-processing: splits the comma off pieces like "▁1990,".

    SentencePiece learns pieces such as "▁1990," from number lists; the original re-encodes the
    part before the comma on its own (without "▁"), drops the word-start "▁" that re-encoding
    adds when the piece did not start a word, and appends "," as its own piece.

    Args:
      pieces: SentencePiece pieces of one text (`EncodeAsPieces` output).
      encode_as_pieces: the same model's `EncodeAsPieces` (str -> list of pieces).

    Returns:
      The new list of pieces.
    """
    new_pieces: List[str] = []
    for piece in pieces:
        if not is_digit_comma_piece(piece):
            new_pieces.append(piece)
            continue
        cur_pieces = list(encode_as_pieces(piece[:-1].replace(SPIECE_UNDERLINE, "")))
        if piece[0] != SPIECE_UNDERLINE and cur_pieces and cur_pieces[0][0] == SPIECE_UNDERLINE:
            if len(cur_pieces[0]) == 1:
                cur_pieces = cur_pieces[1:]
            else:
                cur_pieces[0] = cur_pieces[0][1:]
        cur_pieces.append(piece[-1])
        new_pieces.extend(cur_pieces)
    return new_pieces


@functools.lru_cache(maxsize=None)
def _bert_clean_table() -> dict:
    table = dict(unicode_classes.deletion_table("bert_removed"))
    for lo, hi in unicode_classes.code_point_ranges("bert_whitespace"):
        for cp in range(lo, hi + 1):
            table[cp] = " "
    return table


@functools.lru_cache(maxsize=None)
def _cjk_regex() -> "re.Pattern[str]":
    return re.compile("(" + unicode_classes.python_class("cjk") + ")")


@functools.lru_cache(maxsize=None)
def _word_regex() -> "re.Pattern[str]":
    punct = unicode_classes.python_class("bert_punctuation")
    # A punctuation character alone, or a maximal run of anything but punctuation and space.
    return re.compile(f"{punct}|[^ {punct[1:-1]}]+")


def bert_clean_text(text: str) -> str:
    """BERT `_clean_text`: drops NUL, U+FFFD and control characters; whitespace becomes " "."""
    return text.translate(_bert_clean_table())


def bert_strip_accents(text: str) -> str:
    """BERT `_run_strip_accents`: NFD, then drop category Mn."""
    return unicodedata.normalize("NFD", text).translate(unicode_classes.deletion_table("mn"))


def bert_basic_tokenize(text: TextLike, lower_case: bool = True) -> List[str]:
    """The original BERT `BasicTokenizer.tokenize`: the words WordPiece then splits.

    Cleans the text (`bert_clean_text`), puts spaces around CJK ideographs, splits on whitespace,
    lower-cases and strips accents (`lower_case`), and splits every punctuation character
    (ASCII symbols and Unicode category P*) into its own word.

    Args:
      text: the raw text (`str`, or UTF-8 bytes; see the module docstring on invalid UTF-8).
      lower_case: lower-case and strip accents.

    Returns:
      The list of words (possibly empty).
    """
    text = _cjk_regex().sub(r" \1 ", bert_clean_text(to_unicode(text)))
    if lower_case:
        # The original lower-cases and strips accents word by word; on the whole text it is the
        # same (words are separated by spaces, which neither step touches nor crosses, and
        # `str.lower`'s final-sigma rule sees a space like a string end) and much faster.
        text = bert_strip_accents(text.lower())
    # After cleaning, a space is the only whitespace left.
    return _word_regex().findall(text)
