"""Tests for albert_tf.data.documents: document reading, the sentence splitter, malformed input."""

import logging
import pickle
from pathlib import Path

import pytest

from albert_tf.data.documents import (
    Document,
    MalformedInputError,
    check_readable,
    iter_documents,
    read_documents,
    split_sentences,
)
from albert_tf.tokenization.corpus_files import CleaningStats

SOTU = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "en" / "sotu"


def _lines(text: bytes):
    return text.splitlines(keepends=True)


def test_split_sentences_rules():
    assert split_sentences("It works. It really works! Does it? Yes.") == [
        "It works.",
        "It really works!",
        "Does it?",
        "Yes.",
    ]
    # Abbreviations, initials and initialisms do not end sentences.
    assert split_sentences("Mr. Speaker, Dr. Smith and Harry S. Truman met in the U.S. Capitol. Then they left.") == [
        "Mr. Speaker, Dr. Smith and Harry S. Truman met in the U.S. Capitol.",
        "Then they left.",
    ]
    # A lower-case continuation and decimals never split; closing quotes and brackets stay attached.
    text = 'He said "stop." Then, e.g. the rest. Costs rose 1.5 percent (in 1990.) [Laughter] Now.'
    assert split_sentences(text) == [
        'He said "stop."',
        "Then, e.g. the rest.",
        "Costs rose 1.5 percent (in 1990.)",
        "[Laughter] Now.",
    ]
    assert split_sentences("See No. 5 and Jan. 3 for details. Done") == ["See No. 5 and Jan. 3 for details.", "Done"]
    assert split_sentences("Wait... What?! Numbers: 1990 was good. 1991 was better.") == [
        "Wait...",
        "What?!",
        "Numbers: 1990 was good.",
        "1991 was better.",
    ]
    assert split_sentences("   ") == []
    assert split_sentences("no terminator at all") == ["no terminator at all"]


def test_split_sentences_on_a_state_of_the_union_address():
    path = SOTU / "2001_george_w_bush_r.txt"
    if not path.exists():
        pytest.skip(f"shared data not found at {SOTU}")
    text = path.read_text(encoding="utf-8")
    sentences = split_sentences(text)
    assert 200 < len(sentences) < 400
    assert "".join(s.replace(" ", "") for s in sentences) == text.replace(" ", "").strip()
    assert sentences[0].startswith("Mr. Speaker, Mr. Vice President, Members of Congress:")
    assert "I thank you for your invitation to speak here tonight." in sentences
    ends = sum(s[-1] in ".!?\"')]" for s in sentences) / len(sentences)
    assert ends > 0.98
    assert all(not s[0].islower() for s in sentences)


def test_sentence_per_line_documents():
    text = b"\xef\xbb\xbfFirst sentence.\r\nSecond sentence.\n\n\n  \nThird, alone.\n\nFourth.\nFifth.\n"
    docs = list(iter_documents(_lines(text), "corpus.txt"))
    assert [d.sentences for d in docs] == [
        ("First sentence.", "Second sentence."),
        ("Third, alone.",),
        ("Fourth.", "Fifth."),
    ]
    assert [d.line for d in docs] == [1, 6, 8]
    assert all(d.source == "corpus.txt" for d in docs)


def test_paragraph_documents(tmp_path):
    path = tmp_path / "speech.txt"
    path.write_text("One. Two! Three?\nFour is here. Five.\n\nSix. Seven.", encoding="utf-8")
    docs = list(read_documents(str(path), "paragraphs"))
    assert docs == [
        Document(("One.", "Two!", "Three?", "Four is here.", "Five."), str(path), 1),
        Document(("Six.", "Seven."), str(path), 4),
    ]


def test_single_sentence_documents_are_kept_and_logged(caplog):
    text = b"Alone.\n\nTwo here. Really.\n\nAlso alone.\n"
    with caplog.at_level(logging.WARNING, logger="albert_tf.data.documents"):
        docs = list(iter_documents(_lines(text), "double.txt", "sentences"))
    assert [len(d.sentences) for d in docs] == [1, 1, 1]
    assert "double.txt: 3 of 3 documents have a single sentence (the first at line 1)" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="albert_tf.data.documents"):
        docs = list(iter_documents(_lines(text), "double.txt", "paragraphs"))
    assert [len(d.sentences) for d in docs] == [1, 2, 1]
    assert "2 of 3 documents" in caplog.text and "line 1" in caplog.text


@pytest.mark.parametrize(
    "content, expected",
    [
        (b"", "empty.txt: is empty"),
        (b"\n  \n\t\n", "empty.txt: has no text (3 blank lines)"),
        (b"Good line.\nbad \xff\xfe bytes\n", "empty.txt:2: not valid UTF-8 (byte 5 of the line: b'\\xff')"),
        (b"Good line.\n\nnul\x00here\n", "empty.txt:3: binary data, not UTF-8 text (a NUL at column 4)"),
        ("UTF-16 text".encode("utf-16"), "empty.txt:1: "),
        (b"PK\x03\x04\x14\x00\x00\x00", "empty.txt:1: binary data"),
    ],
)
def test_malformed_input_names_file_and_line(tmp_path, content, expected):
    path = tmp_path / "empty.txt"
    path.write_bytes(content)
    with pytest.raises(MalformedInputError) as info:
        list(read_documents(str(path)))
    message = str(info.value)
    assert message.startswith(str(tmp_path / expected.split(":")[0])), message
    assert expected.split("empty.txt")[1] in message


def test_control_characters_are_cleaned_as_bert_does(caplog):
    # A stray U+0002 (as in the 1890 address), a zero-width space (Cf), U+FFFD and a tab; a line of
    # control characters only is dropped without ending the document, as in the original.
    text = "Four and 4 1\x02 per cent.\nA zero\u200bwidth\ufffd\tspace.\n\x07\x1b\nLast one.\n\nNext.\n".encode()
    cleaning = CleaningStats()
    with caplog.at_level(logging.WARNING):
        docs = list(iter_documents(_lines(text), "ctrl.txt", cleaning=cleaning))
    assert [d.sentences for d in docs] == [
        ("Four and 4 1 per cent.", "A zerowidth space.", "Last one."),
        ("Next.",),
    ]
    assert (cleaning.characters, cleaning.first) == (5, (1, 13, 0x02))
    assert "ctrl.txt: removed 5 control characters (the first, U+0002, at line 1, column 13)" in caplog.text


def test_the_1890_address_reads_with_its_control_character_removed():
    path = SOTU / "1890_benjamin_harrison_r.txt"
    if not path.exists():
        pytest.skip(f"shared data not found at {SOTU}")
    cleaning = CleaningStats()
    docs = list(read_documents(str(path), "paragraphs", cleaning=cleaning))
    assert len(docs) == 1 and cleaning.characters == 1 and cleaning.first[2] == 0x02
    assert any("4 and 4 1 per cent bonds" in s for s in docs[0].sentences)


def test_check_readable(tmp_path):
    good = tmp_path / "good.txt"
    good.write_bytes(b"Fine.\x02\n\n")
    check_readable(str(good))
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"Fine.\n" * 3 + b"caf\xe9\n")
    with pytest.raises(MalformedInputError, match=r"bad.txt:4: not valid UTF-8 \(byte 4 of the line"):
        check_readable(str(bad))


def test_malformed_input_error_pickles():
    error = MalformedInputError("a.txt", 3, "invalid UTF-8")
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.source, copy.line, copy.reason, str(copy)) == ("a.txt", 3, "invalid UTF-8", "a.txt:3: invalid UTF-8")
    assert str(MalformedInputError("a.txt", None, "is empty")) == "a.txt: is empty"


def test_unknown_format():
    with pytest.raises(ValueError, match="unknown input_format 'xml'"):
        list(iter_documents([b"a\n"], "x", "xml"))
