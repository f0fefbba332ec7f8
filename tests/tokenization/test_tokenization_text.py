"""Tests of albert_tf.tokenization.text (and its character classes) against the original code."""

import itertools
import re
import unicodedata
from pathlib import Path

import pytest

from albert_tf.tokenization import unicode_classes
from albert_tf.tokenization.text import (
    SPIECE_UNDERLINE,
    bert_basic_tokenize,
    preprocess_text,
    split_digit_comma_pieces,
    to_unicode,
)

off = pytest.importorskip("official.nlp.tools.tokenization")

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"

TRICKY = [
    "",
    "   ",
    "\t\n\r\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0\u1680\u2000\u2028\u2029\u202f\u205f\u3000",
    "  Hello,   World!  ",
    "Héllo Wörld ÀÉÎÕÜ çñ",
    "ﬁ ① ² ½ ℌ ㍱ Ⅻ",  # compatibility characters NFKD rewrites
    "\u00a8a \u00b4b \u02dc",  # spacing diacritics: NFKD makes a space + combining mark
    "e\u0301 a\u0308 \u0301alone",
    "ΣΑΣ ΟΔΟΣ. Σ",  # final sigma
    "İstanbul ǅ ẞ",
    "``quoted'' and ''x'' ``",
    "a\x00b\x00\x00C",
    "😀👍🏽 👨‍👩‍👧 \u200b\u200d\ufeff",
    "中文，標點。 日本語 한국어 ไทย العربية ١٢٣, ٣,",
    "1990, $1,000,000, 12,34,x",
    "\ufffd\ufffd bad",
]


def _corpus_sample(pattern, every):
    files = sorted(DATA.glob(pattern))
    if not files:
        pytest.skip(f"shared data {DATA / pattern} not found")
    lines = []
    for path in files:
        with open(path, encoding="utf-8") as f:
            lines.extend(f)
    return lines[::every]


@pytest.mark.parametrize("lower", [True, False])
def test_preprocess_text_equals_official_on_tricky_strings(lower):
    for text in TRICKY:
        assert preprocess_text(text, lower_case=lower) == off.preprocess_text(text, lower=lower), repr(text)


def test_preprocess_text_equals_official_on_corpora():
    lines = _corpus_sample("en/sotu/*.txt", 7) + _corpus_sample("zh/sentiment_*.txt", 50)
    assert len(lines) > 500
    for line in lines:
        assert preprocess_text(line) == off.preprocess_text(line, lower=True)


def test_preprocess_text_values():
    assert preprocess_text("  Héllo \t\u3000 WORLD  ") == "hello world"
    assert preprocess_text("Héllo", lower_case=False) == "Hello"
    assert preprocess_text("Héllo", keep_accents=True) == "héllo"
    assert preprocess_text("``a'' b", normalize_quotes=True) == '"a" b'
    assert preprocess_text("``a'' b") == "``a'' b"
    assert preprocess_text("ﬁ ①") == "fi 1"
    # Whitespace is collapsed before NFKD, so a space NFKD creates survives, as in the original.
    assert preprocess_text("a \u00a8b") == "a  b"


def test_to_unicode_replaces_invalid_utf8_per_maximal_subpart():
    assert to_unicode("ok") == "ok"
    assert to_unicode(b"caf\xc3\xa9") == "café"
    assert to_unicode(bytearray(b"a\xffb")) == "a\ufffdb"
    assert to_unicode(b"a\xe4\xb8b") == "a\ufffdb"  # truncated 3-byte sequence: one U+FFFD
    assert to_unicode(b"\xed\xa0\x80") == "\ufffd" * 3  # encoded surrogate: three
    assert preprocess_text(b"A\xff B") == "a\ufffd b"
    for bad in (None, 3, ["a"]):
        with pytest.raises(TypeError, match="str or UTF-8 bytes"):
            to_unicode(bad)


def _fake_encoder(mapping):
    def encode(text):
        return mapping[text]

    return encode


def test_split_digit_comma_pieces_rules():
    encode = _fake_encoder(
        {"1990": ["\u25811990"], "90": ["\u2581", "90"], "19": ["\u258119"], "\u0663": ["\u2581\u0663"]}
    )
    u = SPIECE_UNDERLINE
    # A word-initial piece keeps its "▁"; the comma becomes its own piece.
    assert split_digit_comma_pieces([u + "1990,"], encode) == [u + "1990", ","]
    # Inside a word, the "▁" re-encoding adds is dropped: a lone "▁" piece ...
    assert split_digit_comma_pieces(["90,"], encode) == ["90", ","]
    # ... or the prefix of the first piece.
    assert split_digit_comma_pieces(["19,"], encode) == ["19", ","]
    # Any `str.isdigit` digit counts (ARABIC-INDIC DIGIT THREE).
    assert split_digit_comma_pieces(["\u0663,"], encode) == ["\u0663", ","]
    untouched = [",", u + ",", "a,", u + "1990", "1,a", ",1"]
    assert split_digit_comma_pieces(untouched, encode) == untouched


@pytest.mark.parametrize("lower", [True, False])
def test_bert_basic_tokenize_equals_official(lower):
    reference = off.BasicTokenizer(do_lower_case=lower)
    extra = ["a\u0301\u0301 \u0301", "x\u1fefy \u037e", "[CLS] hello [unused1]", "a" * 500]
    lines = TRICKY + extra + _corpus_sample("zh/sentiment_*.txt", 40) + _corpus_sample("en/sotu/*.txt", 23)
    for text in lines:
        assert bert_basic_tokenize(text, lower_case=lower) == reference.tokenize(text), repr(text[:60])


def test_bert_basic_tokenize_values():
    assert bert_basic_tokenize("Héllo, 中文!") == ["hello", ",", "中", "文", "!"]
    assert bert_basic_tokenize("Héllo", lower_case=False) == ["Héllo"]
    assert bert_basic_tokenize("a\u200bb\x00c\ufffdd") == ["abcd"]
    assert bert_basic_tokenize("a\u2028b") == ["a", "b"]
    assert bert_basic_tokenize("") == []
    assert bert_basic_tokenize(" \t\n") == []


def _predicate(name):
    return {
        "isspace": str.isspace,
        "isdigit": str.isdigit,
        "combining": lambda c: unicodedata.combining(c) != 0,
        "mn": lambda c: unicodedata.category(c) == "Mn",
        "bert_removed": lambda c: c in ("\x00", "\ufffd") or unicode_classes.is_bert_control(c),
        "bert_whitespace": lambda c: (
            unicode_classes.is_bert_whitespace(c) or (c.isspace() and not unicode_classes.is_bert_control(c))
        ),
        "bert_punctuation": unicode_classes.is_bert_punctuation,
        "cjk": unicode_classes.is_cjk_char,
    }[name]


def test_character_classes_equal_the_python_predicates_on_every_code_point():
    scanned = [cp for block in unicode_classes._SCANNED for cp in block if not 0xD800 <= cp < 0xE000]
    chars = [chr(cp) for cp in scanned]
    for name in unicode_classes.CLASS_NAMES:
        members = set()
        for lo, hi in unicode_classes.code_point_ranges(name):
            members.update(range(lo, hi + 1))
        predicate = _predicate(name)
        expected = {cp for cp, char in zip(scanned, chars) if predicate(char)}
        assert members == expected, (name, sorted(members ^ expected)[:10])
    # The planes the scan skips hold only unassigned and private-use code points.
    skipped = itertools.chain(range(0x40000, 0xE0000), range(0xF0000, 0x110000))
    assert {unicodedata.category(chr(cp)) for cp in skipped} <= {"Cn", "Co"}


def test_character_class_patterns():
    assert re.fullmatch(unicode_classes.python_class("bert_punctuation"), "，")
    assert not re.fullmatch(unicode_classes.python_class("bert_punctuation"), "a")
    assert unicode_classes.re2_class("cjk").startswith("[\\x{3400}-\\x{4dbf}")
    assert "a\u0301".translate(unicode_classes.deletion_table("combining")) == "a"
    with pytest.raises(KeyError):
        unicode_classes.code_point_ranges("nonsense")
