"""Character classes of the original tokenizers, as code-point ranges, Python tables and RE2 patterns.

The original ALBERT/BERT preprocessing decides per character with Python's `unicodedata`
(`category`, `combining`) and `str` methods (`isspace`, `isdigit`). The in-graph tokenizer has to
make the same decisions with RE2 regular expressions, whose own Unicode tables (`\\p{Mn}`, `\\s`,
`\\d`) are of a different version or define the classes differently (RE2's `\\s` is ASCII only).
So every class is computed once from the Python predicate and rendered both as a Python
`str.translate` table / `re` pattern and as an RE2 character class: both paths then agree on every
code point Python's `unicodedata` knows (Unicode 14.0 for Python 3.11).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from typing import Dict, Tuple

import numpy as np

_SURROGATES = range(0xD800, 0xE000)

Ranges = Tuple[Tuple[int, int], ...]


def is_bert_whitespace(char: str) -> bool:
    """The original BERT `_is_whitespace`: space, tab, newline, carriage return, or category Zs."""
    if char in (" ", "\t", "\n", "\r"):
        return True
    return unicodedata.category(char) == "Zs"


def is_bert_control(char: str) -> bool:
    """The original BERT `_is_control`: category Cc or Cf, except tab, newline and carriage return."""
    if char in ("\t", "\n", "\r"):
        return False
    return unicodedata.category(char) in ("Cc", "Cf")


def is_bert_punctuation(char: str) -> bool:
    """The original BERT `_is_punctuation`: every non-alphanumeric ASCII symbol, or category P*."""
    cp = ord(char)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(char).startswith("P")


# The original `_is_chinese_char` blocks (CJK Unified Ideographs and their extensions and
# compatibility blocks); Hangul, Hiragana and Katakana are deliberately not in it.
CJK_RANGES: Ranges = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)


def is_cjk_char(char: str) -> bool:
    """The original BERT `_is_chinese_char`, on a character instead of a code point."""
    cp = ord(char)
    return any(lo <= cp <= hi for lo, hi in CJK_RANGES)


# Planes 4-13 are unassigned and planes 15-16 are private use: no character there is in any
# class below, so the scan skips them.
_SCANNED = (range(0, 0x40000), range(0xE0000, 0xF0000))

CLASS_NAMES = (
    "isspace",  # `str.isspace()`: what `" ".join(text.split())` collapses.
    "isdigit",  # `str.isdigit()`: the digit before the comma in the original `encode_pieces`.
    "combining",  # `unicodedata.combining(c) != 0`: what `preprocess_text` drops after NFKD.
    "mn",  # Category Mn: what BERT's `_run_strip_accents` drops after NFD.
    "bert_removed",  # BERT `_clean_text` drops NUL, U+FFFD and `_is_control` characters ...
    "bert_whitespace",  # ... and maps these to a space.
    "bert_punctuation",  # BERT `_is_punctuation`.
    "cjk",  # BERT `_is_chinese_char`.
)


def _mask_to_ranges(cps: np.ndarray, mask: np.ndarray) -> Ranges:
    selected = cps[mask]
    if selected.size == 0:
        return ()
    breaks = np.nonzero(np.diff(selected) != 1)[0]
    starts = np.concatenate([selected[:1], selected[breaks + 1]])
    ends = np.concatenate([selected[breaks], selected[-1:]])
    return tuple((int(a), int(b)) for a, b in zip(starts, ends))


@functools.lru_cache(maxsize=None)
def _all_ranges() -> Dict[str, Ranges]:
    # Per-character predicates called 330k times each cost seconds; the C-level `map`s and numpy
    # comparisons below compute every class in a fraction of that, with the same functions.
    cps = np.array([cp for block in _SCANNED for cp in block if cp not in _SURROGATES])
    chars = [chr(cp) for cp in cps.tolist()]
    category = np.array(list(map(unicodedata.category, chars)))
    combining = np.fromiter(map(unicodedata.combining, chars), dtype=np.int32, count=len(chars))
    isspace = np.fromiter(map(str.isspace, chars), dtype=bool, count=len(chars))
    isdigit = np.fromiter(map(str.isdigit, chars), dtype=bool, count=len(chars))
    tab_nl_cr = np.isin(cps, [0x09, 0x0A, 0x0D])
    control = np.isin(category, ["Cc", "Cf"]) & ~tab_nl_cr
    bert_whitespace = (category == "Zs") | tab_nl_cr | (cps == 0x20)
    ascii_symbol = (
        ((cps >= 33) & (cps <= 47))
        | ((cps >= 58) & (cps <= 64))
        | ((cps >= 91) & (cps <= 96))
        | ((cps >= 123) & (cps <= 126))
    )
    cjk = np.zeros(cps.shape, dtype=bool)
    for lo, hi in CJK_RANGES:
        cjk |= (cps >= lo) & (cps <= hi)
    masks = {
        "isspace": isspace,
        "isdigit": isdigit,
        "combining": combining != 0,
        "mn": category == "Mn",
        "bert_removed": control | (cps == 0) | (cps == 0xFFFD),
        # The original keeps a separator that is neither control nor Zs (U+2028, U+2029) until
        # `str.split()` splits on it; mapping it to a space up front is equivalent.
        "bert_whitespace": bert_whitespace | (isspace & ~control),
        "bert_punctuation": ascii_symbol | np.char.startswith(category, "P"),
        "cjk": cjk,
    }
    return {name: _mask_to_ranges(cps, masks[name]) for name in CLASS_NAMES}


def code_point_ranges(name: str) -> Ranges:
    """Returns the class `name` as sorted, merged, inclusive code-point ranges.

    Args:
      name: one of `CLASS_NAMES`.

    Raises:
      KeyError: for an unknown class name.
    """
    return _all_ranges()[name]


@functools.lru_cache(maxsize=None)
def re2_class(name: str) -> str:
    """The class `name` as an RE2 bracket expression such as `[\\x{300}-\\x{36f}...]`."""
    parts = []
    for lo, hi in code_point_ranges(name):
        parts.append(f"\\x{{{lo:x}}}" if lo == hi else f"\\x{{{lo:x}}}-\\x{{{hi:x}}}")
    return "[" + "".join(parts) + "]"


@functools.lru_cache(maxsize=None)
def python_class(name: str) -> str:
    """The class `name` as a Python `re` bracket expression."""
    parts = []
    for lo, hi in code_point_ranges(name):
        lo_s = re.escape(chr(lo))
        parts.append(lo_s if lo == hi else f"{lo_s}-{re.escape(chr(hi))}")
    return "[" + "".join(parts) + "]"


@functools.lru_cache(maxsize=None)
def deletion_table(name: str) -> Dict[int, None]:
    """A `str.translate` table deleting every character of the class `name`."""
    return {cp: None for lo, hi in code_point_ranges(name) for cp in range(lo, hi + 1)}
