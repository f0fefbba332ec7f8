"""Tests of albert_tf.tokenization.tokenizers: interface, edge cases, parity with official's tokenizers.

The parity tests train a SentencePiece model on the State of the Union corpus and build a WordPiece
vocabulary from the Chinese corpora (../shared/data), then compare every line (English) or a fixed
sample of lines (Chinese) with `official.nlp.tools.tokenization`.
"""

import re
import time
from pathlib import Path

import pytest

from albert_tf.tokenization import sentencepiece_vocab, wordpiece_vocab
from albert_tf.tokenization.packing import pack_inputs
from albert_tf.tokenization.tokenizers import (
    SentencePieceTokenizer,
    WordPieceTokenizer,
    create_tokenizer,
    load_vocab,
    wordpiece_split,
)

off = pytest.importorskip("official.nlp.tools.tokenization")

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"

EDGE_CASES = [
    "",
    "   \t\n ",
    "😀👍🏽 👨‍👩‍👧",
    "Héllo, WORLD! In 1990, $1,000,000, x12,34, ,5,",
    "a\x00B \ufffd\u200b",
    "中文，標點。",
    "word " * 3000,
]


def _special_ids(tokenizer):
    return tokenizer.pad_id, tokenizer.unk_id, tokenizer.cls_id, tokenizer.sep_id, tokenizer.mask_id


def _lines(pattern):
    files = sorted(DATA.glob(pattern))
    if not files:
        pytest.skip(f"shared data {DATA / pattern} not found")
    lines = []
    for path in files:
        with open(path, encoding="utf-8") as f:
            lines.extend(f)
    return lines


@pytest.fixture(scope="module")
def tiny_model(numbers_spm_model):
    """The committed 90-piece model of number-laden lines, with digit-comma pieces (tests/fixtures/make_test_models.py)."""
    return numbers_spm_model


@pytest.fixture(scope="module")
def sotu_model(tmp_path_factory):
    files = sorted(DATA.glob("en/sotu/*.txt"))
    if not files:
        pytest.skip(f"shared data {DATA / 'en/sotu'} not found")
    start = time.monotonic()
    result = sentencepiece_vocab.train_sentencepiece(
        files, tmp_path_factory.mktemp("sotu") / "sotu", vocab_size=8000, input_sentence_size=400, seed=0
    )
    print(f"\nSentencePiece (8000 pieces, 400 of {result.num_sentences} sentences): {time.monotonic() - start:.1f}s")
    return result.model_file


def _zh_sample(every=10):
    lines = []
    for name in ("sentiment_pos.txt", "sentiment_neg.txt", "peoples_daily_199801_pos_tagged.txt"):
        part = _lines(f"zh/{name}")
        if "tagged" in name:
            part = [re.sub(r"/[A-Za-z]+", "", line) for line in part]
        lines.extend(part[::every])
    return lines


@pytest.fixture(scope="module")
def zh_vocab(tmp_path_factory):
    lines = _zh_sample()
    path = tmp_path_factory.mktemp("zh") / "sample.txt"
    path.write_text("".join(line if line.endswith("\n") else line + "\n" for line in lines), encoding="utf-8")
    start = time.monotonic()
    result = wordpiece_vocab.build_wordpiece_vocab([path], path.parent / "vocab.txt", vocab_size=8000)
    print(f"\nWordPiece vocab ({result.vocab_size} tokens, {len(lines)} lines): {time.monotonic() - start:.1f}s")
    return result.vocab_file


@pytest.mark.slow
def test_sentencepiece_ids_equal_official_on_every_sotu_line(sotu_model):
    ours = SentencePieceTokenizer(sotu_model, lower_case=True)
    reference = off.FullSentencePieceTokenizer(sotu_model)
    lines = _lines("en/sotu/*.txt")
    agree = 0
    for line in lines:
        expected = reference.convert_tokens_to_ids(reference.tokenize(off.preprocess_text(line, lower=True)))
        agree += ours.encode(line) == expected
    print(f"\nSentencePiece Python vs official: {agree}/{len(lines)} lines ({100 * agree / len(lines):.2f}%)")
    assert agree == len(lines)


def test_sentencepiece_pieces_equal_official_on_edge_cases(tiny_model):
    ours = SentencePieceTokenizer(tiny_model)
    reference = off.FullSentencePieceTokenizer(tiny_model)
    for text in EDGE_CASES:
        expected = reference.tokenize(off.preprocess_text(text, lower=True))
        assert ours.tokenize(text) == expected, repr(text[:40])
        assert ours.encode(text) == reference.convert_tokens_to_ids(expected)
    assert ours.tokenize("") == [] and ours.tokenize(" \n ") == []


def test_sentencepiece_digit_comma_rule(tiny_model):
    ours = SentencePieceTokenizer(tiny_model)
    text = "In 1971, the $5,000,000, and $48,000,000, nation"
    raw = ours.sp_model.EncodeAsPieces(ours.preprocess(text))
    digit_comma = [p for p in raw if len(p) > 1 and p[-1] == "," and p[-2].isdigit()]
    assert len(digit_comma) >= 3  # the model learned such pieces: the rule has work to do
    pieces = ours.tokenize(text)
    assert not any(len(p) > 1 and p[-1] == "," and p[-2].isdigit() for p in pieces)
    assert pieces == off.encode_pieces(ours.sp_model, ours.preprocess(text))
    assert "".join(pieces) == "".join(raw)


def test_sentencepiece_interface(tiny_model):
    tokenizer = SentencePieceTokenizer(tiny_model)
    assert _special_ids(tokenizer) == (0, 1, 2, 3, 4)
    assert tokenizer.vocab_size == 90 == len(tokenizer.vocab)
    assert tokenizer.convert_ids_to_tokens([0, 1, 2, 3, 4]) == ["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"]
    ids = tokenizer.encode("The nation")
    assert tokenizer.convert_tokens_to_ids(tokenizer.convert_ids_to_tokens(ids)) == ids
    assert tokenizer.convert_tokens_to_ids(["no-such-piece"]) == [1]
    with pytest.raises(ValueError, match="outside the vocabulary"):
        tokenizer.convert_ids_to_tokens([90])
    packed = tokenizer.encode_inputs("the nation", "of people", seq_length=10)
    assert packed == pack_inputs(
        tokenizer.encode("the nation"), tokenizer.encode("of people"), seq_length=10, cls_id=2, sep_id=3
    )
    # Cased tokenization sees capitals the uncased model never learned.
    cased = SentencePieceTokenizer(tiny_model, lower_case=False)
    assert cased.encode("THE") != tokenizer.encode("THE") == tokenizer.encode("the")
    from_proto = SentencePieceTokenizer(model_proto=tokenizer.model_proto)
    assert from_proto.encode("the nation") == tokenizer.encode("the nation")


def test_invalid_utf8_is_replaced(tiny_model):
    tokenizer = SentencePieceTokenizer(tiny_model)
    assert tokenizer.encode(b"the \xff nation") == tokenizer.encode("the \ufffd nation")
    assert tokenizer.encode("the nation".encode()) == tokenizer.encode("the nation")
    with pytest.raises(TypeError):
        tokenizer.tokenize(None)


def test_sentencepiece_rejects_bad_models(tmp_path, tiny_model):
    bad = tmp_path / "bad.model"
    bad.write_bytes(b"not a model")
    with pytest.raises(ValueError, match="is not a SentencePiece model"):
        SentencePieceTokenizer(bad)
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(["the nation of people"] * 200), encoding="utf-8")
    plain = sentencepiece_vocab.train_sentencepiece(
        [corpus], tmp_path / "plain", vocab_size=30, control_symbols=(), user_defined_symbols=(), hard_vocab_limit=False
    )
    with pytest.raises(ValueError, match=r"lacks the special tokens \['\[CLS\]', '\[SEP\]', '\[MASK\]'\]"):
        SentencePieceTokenizer(plain.model_file)
    with pytest.raises(ValueError, match="exactly one"):
        SentencePieceTokenizer(tiny_model, model_proto=b"x")


@pytest.mark.slow
def test_wordpiece_ids_equal_official_on_chinese_corpus(zh_vocab):
    ours = WordPieceTokenizer(zh_vocab, lower_case=True, max_input_chars_per_word=400)
    reference = off.FullTokenizer(zh_vocab, do_lower_case=True)
    lines = _zh_sample() + EDGE_CASES + ["x" * 401, "Ǆ ＦＵＬＬ　ｗｉｄｔｈ ΣΑΣ"]
    agree = sum(ours.encode(line) == reference.convert_tokens_to_ids(reference.tokenize(line)) for line in lines)
    print(f"\nWordPiece Python vs official: {agree}/{len(lines)} lines ({100 * agree / len(lines):.2f}%)")
    assert agree == len(lines)


def test_wordpiece_split_and_unknowns():
    vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "un", "##aff", "##able", "a"])}
    assert wordpiece_split("unaffable", vocab) == ["un", "##aff", "##able"]
    assert wordpiece_split("unaffablex", vocab) == ["[UNK]"]
    assert wordpiece_split("a" * 201, {"a": 0, "##a": 1}) == ["[UNK]"]
    assert wordpiece_split("a" * 200, {"a": 0, "##a": 1}) == ["a"] + ["##a"] * 199
    tokenizer = WordPieceTokenizer(vocab=vocab)
    assert tokenizer.tokenize("UNAFFABLE a, Ä") == ["un", "##aff", "##able", "a", "[UNK]", "a"]
    assert _special_ids(tokenizer) == (0, 1, 2, 3, 4)
    assert tokenizer.tokens == list(vocab)
    with pytest.raises(KeyError, match="not in the vocabulary"):
        tokenizer.convert_tokens_to_ids(["##x"])
    assert WordPieceTokenizer(vocab=vocab, lower_case=False).tokenize("UN") == ["[UNK]"]


def test_load_vocab_rejects_malformed_files(tmp_path):
    cases = {
        "empty_line.txt": ("[PAD]\n\n[UNK]\n", "2: empty token"),
        "dup.txt": ("[PAD]\na\na\n", "3: duplicate token 'a' \\(first on line 2\\)"),
        "space.txt": ("[PAD]\na b\n", "2: token 'a b' contains whitespace"),
        "nothing.txt": ("", "empty vocabulary"),
    }
    for name, (content, message) in cases.items():
        path = tmp_path / name
        path.write_text(content, encoding="utf-8")
        with pytest.raises(ValueError, match=message):
            load_vocab(path)
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes(b"[PAD]\ncaf\xe9\n")
    with pytest.raises(ValueError, match="latin1.txt:2: not valid UTF-8"):
        load_vocab(latin1)
    partial = tmp_path / "partial.txt"
    partial.write_text("[PAD]\n[UNK]\na\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"lacks the special tokens \['\[CLS\]', '\[SEP\]', '\[MASK\]'\]"):
        WordPieceTokenizer(partial)


def test_create_tokenizer(tiny_model, tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a"]) + "\n", encoding="utf-8")
    assert isinstance(create_tokenizer(spm_model_file=tiny_model, vocab_file=vocab), SentencePieceTokenizer)
    assert isinstance(create_tokenizer(vocab_file=vocab), WordPieceTokenizer)
    with pytest.raises(ValueError, match="spm_model_file"):
        create_tokenizer()
