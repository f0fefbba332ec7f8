"""Tests of `albert_tf.tasks.tagging.data`: CoNLL files, the People's Daily corpus, splitting, tag lists."""

from pathlib import Path

import pytest

from albert_tf.tasks.tagging import data as tagging
from albert_tf.data.tables import DataFormatError

SHARED_DATA = Path(__file__).resolve().parents[3].parent / "shared" / "data"
PEOPLES_DAILY = SHARED_DATA / "zh" / "peoples_daily_199801_pos_tagged.txt"

CONLL = """-DOCSTART- -X- -X- O

EU NNP B-NP B-ORG
rejects VBZ B-VP O
German JJ B-NP B-MISC
call NN I-NP O

Peter NNP B-NP B-PER
Blackburn NNP I-NP I-PER

"""


def test_read_conll(tmp_path):
    path = tmp_path / "train.txt"
    path.write_text(CONLL, encoding="utf-8")
    sentences = tagging.read_conll(path)
    assert [s.tokens for s in sentences] == [("EU", "rejects", "German", "call"), ("Peter", "Blackburn")]
    assert sentences[0].tags == ("B-ORG", "O", "B-MISC", "O")
    assert (sentences[1].line, sentences[1].where) == (8, f"{path}:8")
    # Two columns (token, tag) and tabs work too; no final blank line is needed.
    path.write_text("Paris\tB-LOC\nis\tO", encoding="utf-8")
    assert tagging.read_conll(path)[0].tags == ("B-LOC", "O")
    # Text to tag: tokens only (a tag column, if present, is ignored).
    path.write_text("Paris\nis B-LOC\n\nbig\n", encoding="utf-8")
    untagged = tagging.read_conll(path, with_tags=False)
    assert [s.tokens for s in untagged] == [("Paris", "is"), ("big",)] and untagged[0].tags == ("O", "O")


def test_conll_errors_name_the_line(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_text("EU B-ORG\nrejects\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"bad\.txt:2: expected a token and a tag"):
        tagging.read_conll(path)
    path.write_text("EU B-ORG\nrejects X-VERB\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"bad\.txt:2: tag 'X-VERB' is not 'O' or B-/I-TYPE"):
        tagging.read_conll(path)
    path.write_text("-DOCSTART- O\n\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match="no sentences"):
        tagging.read_conll(path)
    path.write_bytes(b"EU B-ORG\n\xc3( O\n")
    with pytest.raises(DataFormatError, match=r"bad\.txt:2: not valid UTF-8"):
        tagging.read_conll(path)


def test_peoples_daily_entities_brackets_and_names():
    line = "19980101-01-001-002/m  在/p  [中央/n  人民/n  广播/vn  电台/n]nt  江/nr  泽民/nr  、/w  [香港/ns  特别/a  行政区/n]ns  [国务院/nt  侨办/j]nz  北京/ns"
    sentence = tagging.parse_peoples_daily_line(line, "pd.txt", 3)
    assert "".join(sentence.tokens) == "在中央人民广播电台江泽民、香港特别行政区国务院侨办北京"
    tags = dict(enumerate(sentence.tags))
    assert sentence.tags[:9] == ("O", "B-ORG") + ("I-ORG",) * 7  # the whole bracketed organisation
    assert sentence.tags[9:12] == ("B-PER", "I-PER", "I-PER")  # surname + given name: one person
    assert sentence.tags[12] == "O"
    assert sentence.tags[13:20] == ("B-LOC",) + ("I-LOC",) * 6
    # A compound with a non-entity tag keeps its inner words' entities.
    assert sentence.tags[20:25] == ("B-ORG", "I-ORG", "I-ORG", "O", "O")
    assert sentence.tags[25:] == ("B-LOC", "I-LOC")
    assert len(tags) == len(sentence.tokens)
    assert tagging.parse_peoples_daily_line("   ") is None


def test_peoples_daily_errors():
    with pytest.raises(DataFormatError, match=r"pd\.txt:4: token '中央' is not word/tag"):
        tagging.parse_peoples_daily_line("中央  人民/n", "pd.txt", 4)
    with pytest.raises(DataFormatError, match="not closed"):
        tagging.parse_peoples_daily_line("[中央/n  人民/n", "pd.txt", 4)
    with pytest.raises(DataFormatError, match="without"):
        tagging.parse_peoples_daily_line("中央/n  人民/n]nt", "pd.txt", 4)
    with pytest.raises(DataFormatError, match="nested"):
        tagging.parse_peoples_daily_line("[中央/n  [人民/n]nt", "pd.txt", 4)


def test_split_long_sentences_cuts_after_punctuation_and_outside_entities():
    sentence = tagging.TaggedSentence(tuple("ab。cdefgh"), ("O",) * 7 + ("B-LOC", "I-LOC"), "f", 1)
    parts = tagging.split_long_sentences([sentence], 5)
    # First after "。"; then not between "g" and "h", which form one entity.
    assert ["".join(p.tokens) for p in parts] == ["ab。", "cdef", "gh"]
    assert all(len(p.tokens) <= 5 for p in parts)
    assert parts[2].tags == ("B-LOC", "I-LOC")
    # An entity longer than the limit is cut, and its continuation starts with B-.
    long_entity = tagging.TaggedSentence(tuple("abcd"), ("B-ORG", "I-ORG", "I-ORG", "I-ORG"), "f", 1)
    parts = tagging.split_long_sentences([long_entity], 3)
    assert [p.tags for p in parts] == [("B-ORG", "I-ORG", "I-ORG"), ("B-ORG",)]


def test_tag_vocab():
    sentences = [tagging.TaggedSentence(("a", "b"), ("I-PER", "B-LOC"), "f", 1), tagging.TaggedSentence(("c",), ("B-PER",), "f", 3)]
    vocab = tagging.TagVocab.from_sentences(sentences)
    assert vocab.tags == ("O", "B-LOC", "B-PER", "I-PER")
    assert vocab.id_of("I-PER", sentences[0]) == 3 and vocab.tag_of(1) == "B-LOC"
    with pytest.raises(DataFormatError, match=r"f:3: unknown tag 'B-ORG'"):
        vocab.id_of("B-ORG", sentences[1])


def test_real_peoples_daily_slice():
    if not PEOPLES_DAILY.exists():
        pytest.skip(f"shared data not available: {PEOPLES_DAILY}")
    sentences = tagging.read_peoples_daily(PEOPLES_DAILY, max_sentences=200)
    assert len(sentences) == 200
    # Line 2: 中共中央/nt  总书记/n  、/w  国家/n  主席/n  江/nr  泽民/nr
    second = sentences[1]
    assert "".join(second.tokens) == "中共中央总书记、国家主席江泽民"
    assert second.tags[:4] == ("B-ORG", "I-ORG", "I-ORG", "I-ORG")
    assert second.tags[-3:] == ("B-PER", "I-PER", "I-PER")
    counts = {}
    for s in sentences:
        assert len(s.tokens) == len(s.tags)
        for tag in s.tags:
            counts[tag] = counts.get(tag, 0) + 1
    assert {"B-PER", "B-LOC", "B-ORG", "I-PER", "I-LOC", "I-ORG", "O"} <= set(counts)
