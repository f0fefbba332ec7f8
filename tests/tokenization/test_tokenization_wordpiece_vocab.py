"""Tests of albert_tf.tokenization.wordpiece_vocab: building a BERT vocab.txt."""

import os
import random

import pytest

from albert_tf.tokenization.tokenizers import WordPieceTokenizer, load_vocab
from albert_tf.tokenization.wordpiece_vocab import RESERVED_TOKENS, build_wordpiece_vocab

SENTENCES = [
    "我正在写这本书的心得，勘误和疑点，有兴趣的朋友可以访问我的网站。",
    "本人是一名大一学生，大一的生活一直处于浑浑噩噩的状态。",
    "The Quick brown fox jumps over the lazy dog; running, jumped, jumping!",
    "Café résumé naïve — 1998年1月，北京。",
]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    rng = random.Random(0)
    path = tmp_path_factory.mktemp("zh") / "corpus.txt"
    path.write_text("\n".join(rng.choice(SENTENCES) for _ in range(400)) + "\n", encoding="utf-8")
    return path


def test_vocab_layout(corpus, tmp_path):
    out = tmp_path / "sub" / "vocab.txt"
    result = build_wordpiece_vocab([corpus], out, vocab_size=400, lower_thresh=2)
    assert result.vocab_file == str(out) and result.num_lines == 400
    assert os.listdir(out.parent) == ["vocab.txt"]
    tokens = out.read_text(encoding="utf-8").splitlines()
    assert len(tokens) == result.vocab_size <= 400
    assert tuple(tokens[:5]) == RESERVED_TOKENS
    assert len(set(tokens)) == len(tokens)
    # Every character of the corpus words is a token, alone and as a continuation.
    for char in "我书，。qfe":
        assert char in tokens and "##" + char in tokens
    # Lower-cased and accent-stripped words: no capitals or accents; whole words learned.
    assert not any(c.isupper() or c == "é" for t in tokens[5:] for c in t)
    assert "the" in tokens and "jumping" in tokens and "cafe" in tokens
    vocab = load_vocab(out)
    assert vocab["[PAD]"] == 0 and vocab["[MASK]"] == 4


def test_vocab_tokenizes_the_corpus_without_unknowns(corpus, tmp_path):
    result = build_wordpiece_vocab([corpus], tmp_path / "vocab.txt", vocab_size=400, lower_thresh=2)
    tokenizer = WordPieceTokenizer(result.vocab_file)
    for sentence in SENTENCES:
        tokens = tokenizer.tokenize(sentence)
        assert "[UNK]" not in tokens and tokens
    assert tokenizer.tokenize("jumping") in (["jumping"], ["jump", "##ing"])


def test_cased_vocab(corpus, tmp_path):
    result = build_wordpiece_vocab([corpus], tmp_path / "vocab.txt", vocab_size=400, lower_case=False, lower_thresh=2)
    tokens = load_vocab(result.vocab_file)
    assert "T" in tokens and "é" in tokens


def test_max_unique_chars_limits_the_alphabet(corpus, tmp_path):
    full = load_vocab(build_wordpiece_vocab([corpus], tmp_path / "full.txt", vocab_size=400).vocab_file)
    limited = load_vocab(build_wordpiece_vocab([corpus], tmp_path / "limited.txt", 400, max_unique_chars=10).vocab_file)
    singles = [t for t in limited if len(t) == 1]
    # Words with a character outside the 10 most frequent are not learned from at all.
    assert 0 < len(singles) <= 10 < len([t for t in full if len(t) == 1])
    assert "的" in singles and "q" not in limited


def test_errors(corpus, tmp_path):
    with pytest.raises(ValueError, match=r"reserved_tokens must include .*missing \['\[MASK\]'\]"):
        build_wordpiece_vocab([corpus], tmp_path / "v.txt", 100, reserved_tokens=RESERVED_TOKENS[:4])
    with pytest.raises(ValueError, match="larger than the 5 reserved"):
        build_wordpiece_vocab([corpus], tmp_path / "v.txt", 5)
    with pytest.raises(ValueError, match="vocab_size=20 is too small"):
        build_wordpiece_vocab([corpus], tmp_path / "v.txt", 20, max_unique_chars=500)
    with pytest.raises(FileNotFoundError):
        build_wordpiece_vocab([tmp_path / "none*.txt"], tmp_path / "v.txt", 100)
    empty = tmp_path / "empty.txt"
    empty.write_text("\n \n", encoding="utf-8")
    with pytest.raises(ValueError, match="no words to learn from"):
        build_wordpiece_vocab([empty], tmp_path / "v.txt", 100)
    bad = tmp_path / "gbk.txt"
    bad.write_bytes("中文".encode("gbk"))
    with pytest.raises(ValueError, match="gbk.txt:1: not valid UTF-8"):
        build_wordpiece_vocab([bad], tmp_path / "v.txt", 100)
    assert not (tmp_path / "v.txt").exists()
