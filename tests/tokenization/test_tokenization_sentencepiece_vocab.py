"""Tests of albert_tf.tokenization.sentencepiece_vocab: the ALBERT SentencePiece recipe."""

import os
import random

import pytest
import sentencepiece as spm

from albert_tf.tokenization.sentencepiece_vocab import (
    ORIGINAL_USER_DEFINED_SYMBOLS,
    _split_long,
    iter_training_sentences,
    train_sentencepiece,
)

WORDS = (
    "the of and to in a is that for it as was with be by on not he this are or his from at which but have an "
    "they you were her she there been one all we their has would when if so no will more can who its said "
    "Nation Congress Government State People Année Über"
).split()


def _write_corpus(path, num_lines=300, seed=0):
    rng = random.Random(seed)
    lines = []
    for i in range(num_lines):
        words = [rng.choice(WORDS) for _ in range(rng.randrange(3, 15))]
        lines.append(" ".join(words) + f" (in {1900 + i % 100}, £{i}) - ok.")
    path.write_text("\n".join(lines) + "\n\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return _write_corpus(tmp_path_factory.mktemp("corpus") / "corpus.txt")


@pytest.fixture(scope="module")
def trained(corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("spm")
    return train_sentencepiece([corpus], out / "albert", vocab_size=120, seed=1), out


def test_files_and_special_ids(trained):
    result, out = trained
    assert result.model_file == str(out / "albert.model") and result.vocab_size == 120
    assert result.num_sentences == 300
    # Only the two outputs: no temporary file is left behind.
    assert sorted(os.listdir(out)) == ["albert.model", "albert.vocab"]
    sp = spm.SentencePieceProcessor(model_file=result.model_file)
    pieces = [sp.IdToPiece(i) for i in range(sp.GetPieceSize())]
    assert pieces[:5] == ["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"]
    assert pieces[5:13] == list(ORIGINAL_USER_DEFINED_SYMBOLS)
    assert (sp.pad_id(), sp.unk_id(), sp.bos_id(), sp.eos_id()) == (0, 1, -1, -1)
    assert [sp.IsControl(i) for i in range(2, 5)] == [True, True, True]
    vocab_lines = (out / "albert.vocab").read_text(encoding="utf-8").splitlines()
    assert [line.split("\t")[0] for line in vocab_lines] == pieces


def test_model_trained_on_preprocessed_text(trained):
    result, _ = trained
    sp = spm.SentencePieceProcessor(model_file=result.model_file)
    pieces = [sp.IdToPiece(i) for i in range(sp.GetPieceSize())]
    # Lower-cased and accent-stripped before training: no capitals, no é/ü.
    assert not any(c.isupper() or c in "éüÉÜ" for p in pieces[13:] for c in p)
    # User-defined symbols are split out even inside words.
    assert "-" in sp.EncodeAsPieces("the-of")
    assert "£" in sp.EncodeAsPieces("the£5")


def test_cased_training_keeps_capitals(corpus, tmp_path):
    result = train_sentencepiece([corpus], tmp_path / "cased", vocab_size=150, lower_case=False, seed=1)
    sp = spm.SentencePieceProcessor(model_file=result.model_file)
    assert any(any(c.isupper() for c in sp.IdToPiece(i)) for i in range(sp.GetPieceSize()))


def test_bpe_and_glob(corpus, tmp_path):
    result = train_sentencepiece([str(corpus.parent / "*.txt")], tmp_path / "bpe", vocab_size=150, model_type="bpe")
    proto = spm.SentencePieceProcessor(model_file=result.model_file)
    assert proto.GetPieceSize() == 150


def test_input_sentence_size_samples(corpus, tmp_path):
    # The reader still sees every sentence; SentencePiece trains on the sample.
    def train(name, **kwargs):
        return train_sentencepiece([corpus], tmp_path / name, vocab_size=80, **kwargs)

    result = train("a", input_sentence_size=120, seed=3)
    assert (result.num_sentences, result.num_training_sentences, result.vocab_size) == (300, 120, 80)
    # The sample is reproducible for a seed, and differs between seeds.
    train("b", input_sentence_size=120, seed=3)
    assert (tmp_path / "a.vocab").read_bytes() == (tmp_path / "b.vocab").read_bytes()
    train("c", input_sentence_size=120, seed=4)
    assert (tmp_path / "a.vocab").read_bytes() != (tmp_path / "c.vocab").read_bytes()
    first = train("first", input_sentence_size=150, shuffle_input_sentence=False)
    assert (first.num_sentences, first.num_training_sentences) == (150, 150)
    with pytest.raises(ValueError, match="input_sentence_size must be an int >= 0"):
        train("x", input_sentence_size=-1)


def test_vocab_too_large_is_a_clear_error(corpus, tmp_path):
    with pytest.raises(ValueError, match=r"vocab_size=5000 is too large for this corpus.*hard_vocab_limit=False"):
        train_sentencepiece([corpus], tmp_path / "big", vocab_size=5000)
    assert not list(tmp_path.iterdir())
    result = train_sentencepiece([corpus], tmp_path / "soft", vocab_size=5000, hard_vocab_limit=False)
    assert 13 < result.vocab_size < 5000


def test_vocab_too_small_is_a_clear_error(corpus, tmp_path):
    with pytest.raises(ValueError, match="vocab_size=13 leaves no room"):
        train_sentencepiece([corpus], tmp_path / "x", vocab_size=13)
    with pytest.raises(ValueError, match="too small: the corpus's characters"):
        train_sentencepiece([corpus], tmp_path / "x", vocab_size=20)


def test_bad_inputs(tmp_path):
    with pytest.raises(FileNotFoundError, match="no input file matches"):
        train_sentencepiece([tmp_path / "missing.txt"], tmp_path / "x", vocab_size=100)
    empty = tmp_path / "empty.txt"
    empty.write_text("\n   \n\t\n", encoding="utf-8")
    with pytest.raises(ValueError, match="no text to train on"):
        train_sentencepiece([empty], tmp_path / "x", vocab_size=100)
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("fine\ncaf\xe9\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"latin1.txt:2: not valid UTF-8"):
        train_sentencepiece([latin1], tmp_path / "x", vocab_size=100)
    with pytest.raises(ValueError, match="model_type"):
        train_sentencepiece([empty], tmp_path / "x", vocab_size=100, model_type="wordpiece")
    with pytest.raises(ValueError, match="non-empty strings without commas"):
        train_sentencepiece([empty], tmp_path / "x", vocab_size=100, user_defined_symbols=["a,b"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.txt", "latin1.txt"]


def test_split_long_cuts_at_spaces_within_the_byte_limit():
    rng = random.Random(0)
    words = ["a", "bb", "ccc", "中文", "é" * 3, "x" * 25]
    for _ in range(200):
        text = " ".join(rng.choice(words) for _ in range(rng.randrange(1, 60)))
        chunks = list(_split_long(text, 24))
        assert all(len(c.encode("utf-8")) <= 24 for c in chunks)
        assert "".join(chunks).replace(" ", "") == text.replace(" ", "")
        if "x" * 25 not in text:
            assert " ".join(chunks) == text
    assert list(_split_long("short", 100)) == ["short"]


def test_document_per_line_corpus_is_not_skipped(tmp_path):
    # One 40 kB line: SentencePiece alone would drop it (max_sentence_length is 4192 bytes).
    rng = random.Random(1)
    doc = tmp_path / "doc.txt"
    doc.write_text(" ".join(rng.choice(WORDS) for _ in range(8000)) + "\n", encoding="utf-8")
    sentences = list(iter_training_sentences([str(doc)]))
    assert len(sentences) >= 8 and all(len(s.encode()) <= 4192 for s in sentences)
    result = train_sentencepiece([doc], tmp_path / "doc", vocab_size=60)
    assert result.vocab_size == 60 and result.num_sentences == len(sentences)
