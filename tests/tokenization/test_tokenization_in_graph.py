"""Tests of albert_tf.tokenization.in_graph: the in-graph tokenizer layer against the Python path.

Parity: token ids equal the Python tokenizers (themselves equal to official's, see
test_tokenization_tokenizers.py) on State of the Union text and on the Chinese corpora; packing
equals `packing.pack_inputs` on random lengths; the layer works in tf.data, in a reloaded
SavedModel and through Keras serialization.
"""

import random
import re
import time
from pathlib import Path

import keras
import numpy as np
import pytest
import sentencepiece as spm
import tensorflow as tf
import tensorflow_text as tf_text

from albert_tf.tokenization import unicode_classes, sentencepiece_vocab, wordpiece_vocab
from albert_tf.tokenization.in_graph import AlbertTokenizerLayer, lower_utf8, sanitize_utf8, truncated_lengths
from albert_tf.tokenization.packing import pack_inputs, truncate_seq_pair
from albert_tf.tokenization.text import preprocess_text, split_digit_comma_pieces
from albert_tf.tokenization.tokenizers import SentencePieceTokenizer, WordPieceTokenizer

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"

EDGE_CASES = [
    "",
    "   \t\n ",
    "😀👍🏽 👨‍👩‍👧 \u200d",
    "Héllo, WORLD! In 1971, $5,000,000, x12,34, ,5,",
    "a\x00B\x00 \ufffd\u200b \x00",
    "ΣΑΣ ΟΔΟΣ. İstanbul ǅ ﬁ ① \u00a8a",
    "``quoted'' \u2028 \u3000 x\xa0y",
    "中文，標點。 한국어",
    "word " * 3000,
]
INVALID_UTF8 = [b"the \xff nation", b"a\xe4\xb8b", b"\xed\xa0\x80 1990,", b"\xf0\x9f\x98", b"\xc0\xaf"]


def _lines(pattern):
    files = sorted(DATA.glob(pattern))
    if not files:
        pytest.skip(f"shared data {DATA / pattern} not found")
    lines = []
    for path in files:
        with open(path, encoding="utf-8") as f:
            lines.extend(f)
    return lines


def _zh_sample(every):
    lines = []
    for name in ("sentiment_pos.txt", "sentiment_neg.txt", "peoples_daily_199801_pos_tagged.txt"):
        part = _lines(f"zh/{name}")
        if "tagged" in name:
            part = [re.sub(r"/[A-Za-z]+", "", line) for line in part]
        lines.extend(part[::every])
    return lines


def _batched_ids(layer, texts, batch_size=64):
    ids = []
    for start in range(0, len(texts), batch_size):
        ids.extend(layer.tokenize(tf.constant(texts[start : start + batch_size])).to_list())
    return ids


@pytest.fixture(scope="module")
def tiny_model(numbers_spm_model):
    """The committed 90-piece model of number-laden lines, with digit-comma pieces (tests/fixtures/make_test_models.py)."""
    return numbers_spm_model


@pytest.fixture(scope="module")
def tiny_vocab(tmp_path_factory):
    path = tmp_path_factory.mktemp("tinywp") / "vocab.txt"
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tokens += ["un", "##aff", "##able", "a", "##a", ",", "中", "文", "x", "##x"]
    path.write_text("\n".join(tokens) + "\n", encoding="utf-8")
    return str(path)


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


@pytest.fixture(scope="module")
def zh_vocab(tmp_path_factory):
    lines = _zh_sample(every=20)
    path = tmp_path_factory.mktemp("zh") / "sample.txt"
    path.write_text("".join(line if line.endswith("\n") else line + "\n" for line in lines), encoding="utf-8")
    return wordpiece_vocab.build_wordpiece_vocab([path], path.parent / "vocab.txt", vocab_size=6000).vocab_file


def test_re2_classes_equal_python_classes_on_every_code_point():
    scanned = [cp for block in unicode_classes._SCANNED for cp in block if not 0xD800 <= cp < 0xE000]
    chars = tf.constant([chr(cp).encode("utf-8") for cp in scanned])
    for name in unicode_classes.CLASS_NAMES:
        expected = np.zeros(len(scanned), dtype=bool)
        index = {cp: i for i, cp in enumerate(scanned)} if name == unicode_classes.CLASS_NAMES[0] else index
        for lo, hi in unicode_classes.code_point_ranges(name):
            for cp in range(lo, hi + 1):
                expected[index[cp]] = True
        got = tf.strings.regex_full_match(chars, unicode_classes.re2_class(name)).numpy()
        assert (got == expected).all(), (name, [hex(scanned[i]) for i in np.nonzero(got != expected)[0][:10]])


def test_lower_utf8_equals_str_lower_and_keeps_nul():
    texts = ["a\x00B c", "X\x00", "\x00\x00Y\x00", "", "ΣΑΣ ΟΔΟΣ. Σ", "ÀÉÎ ǅ Straße", "İ"]
    got = [t.decode("utf-8") for t in lower_utf8(tf.constant(texts)).numpy()]
    assert got == [t.lower() for t in texts]
    # What the helper works around:
    assert tf.strings.lower("a\x00B", encoding="utf-8").numpy() == b"a"


def test_sanitize_utf8_equals_python_replacement():
    samples = INVALID_UTF8 + [b"valid \xc3\xa9", b""]
    got = sanitize_utf8(tf.constant(samples)).numpy().tolist()
    assert got == [s.decode("utf-8", errors="replace").encode("utf-8") for s in samples]


def _kernel_reference(model_file, texts):
    """Python preprocessing and digit-comma rule around tensorflow-text's SentencePiece kernel."""
    sp = spm.SentencePieceProcessor(model_file=model_file)
    kernel = tf_text.FastSentencepieceTokenizer(open(model_file, "rb").read())

    def encode(text):
        return [sp.IdToPiece(i) for i in kernel.tokenize(tf.constant([text]))[0].numpy().tolist()]

    return [[sp.PieceToId(p) for p in split_digit_comma_pieces(encode(preprocess_text(t)), encode)] for t in texts]


@pytest.mark.slow
def test_sentencepiece_ids_equal_python_on_sotu(sotu_model):
    python = SentencePieceTokenizer(sotu_model)
    layer = AlbertTokenizerLayer.from_sentencepiece(sotu_model)
    lines = _lines("en/sotu/*.txt")[::12]
    sentences = [s for line in lines for s in re.split(r"(?<=[.!?]) ", line.strip())]
    got = _batched_ids(layer, sentences, batch_size=512)
    agree = sum(g == python.encode(s) for g, s in zip(got, sentences))
    print(f"\nSentencePiece graph vs Python: {agree}/{len(sentences)} sentences")
    assert agree == len(sentences)

    # Whole documents (one line is one address, ~8000 words): the layer's pipeline is exact ...
    got = _batched_ids(layer, lines, batch_size=8)
    assert got == _kernel_reference(sotu_model, lines)
    # ... and any difference from the `sentencepiece` package is one between the two SentencePiece
    # implementations themselves (float32 Viterbi scores summed over ~10^4 pieces), never ours.
    sp = spm.SentencePieceProcessor(model_file=sotu_model)
    kernel = tf_text.FastSentencepieceTokenizer(open(sotu_model, "rb").read())
    mismatches = [i for i, line in enumerate(lines) if got[i] != python.encode(line)]
    print(f"SentencePiece graph vs Python: {len(lines) - len(mismatches)}/{len(lines)} whole documents")
    for i in mismatches:
        text = preprocess_text(lines[i])
        assert sp.EncodeAsIds(text) != kernel.tokenize(tf.constant([text]))[0].numpy().tolist()
    assert len(mismatches) <= len(lines) // 10


def test_sentencepiece_edge_cases_equal_python(tiny_model):
    python = SentencePieceTokenizer(tiny_model)
    layer = AlbertTokenizerLayer.from_sentencepiece(tiny_model, sequence_length=16)
    texts = EDGE_CASES + ["In 1971, the $5,000,000, and $48,000,000, nation", "x1990,y 12,34,"]
    assert layer.tokenize(tf.constant(texts)).to_list() == [python.encode(t) for t in texts]
    assert layer.tokenize(tf.constant(INVALID_UTF8)).to_list() == [python.encode(t) for t in INVALID_UTF8]
    preprocessed = [t.decode("utf-8") for t in layer.preprocess(tf.constant(texts)).numpy()]
    assert preprocessed == [preprocess_text(t) for t in texts]
    for options in ({"lower_case": False}, {"keep_accents": True}, {"normalize_quotes": True}):
        variant = AlbertTokenizerLayer.from_sentencepiece(tiny_model, **options)
        reference = SentencePieceTokenizer(tiny_model, **options)
        assert variant.tokenize(tf.constant(texts)).to_list() == [reference.encode(t) for t in texts], options


@pytest.mark.slow
def test_wordpiece_ids_equal_official_on_chinese_corpus(zh_vocab):
    official = pytest.importorskip("official.nlp.tools.tokenization")
    reference = official.FullTokenizer(zh_vocab, do_lower_case=True)
    layer = AlbertTokenizerLayer.from_wordpiece(zh_vocab, max_input_chars_per_word=400)
    lines = _zh_sample(every=25) + EDGE_CASES + ["x" * 401, "Ǆ ＦＵＬＬ　ｗｉｄｔｈ"]
    got = _batched_ids(layer, lines, batch_size=256)
    agree = sum(g == reference.convert_tokens_to_ids(reference.tokenize(t)) for g, t in zip(got, lines))
    print(f"\nWordPiece graph vs official: {agree}/{len(lines)} lines")
    assert agree == len(lines)


def test_wordpiece_edge_cases_equal_python(tiny_vocab):
    layer = AlbertTokenizerLayer.from_wordpiece(tiny_vocab, sequence_length=8)
    python = WordPieceTokenizer(tiny_vocab)
    texts = EDGE_CASES + ["UNAFFABLE a, Ä aaa" + " a" * 10, "a" * 201, "a" * 200, "unaffablex 中文x"]
    assert layer.tokenize(tf.constant(texts)).to_list() == [python.encode(t) for t in texts]
    assert layer.tokenize(tf.constant(INVALID_UTF8)).to_list() == [python.encode(t) for t in INVALID_UTF8]
    cased = AlbertTokenizerLayer.from_wordpiece(tiny_vocab, lower_case=False)
    cased_python = WordPieceTokenizer(tiny_vocab, lower_case=False)
    assert cased.tokenize(tf.constant(["UN un"])).to_list() == [cased_python.encode("UN un")]


def test_truncated_lengths_equal_truncate_seq_pair():
    grid = np.array([(a, b, m) for a in range(13) for b in range(13) for m in range(27)], dtype=np.int64)
    new_a, new_b = truncated_lengths(grid[:, 0], grid[:, 1], grid[:, 2])
    for (la, lb, m), got_a, got_b in zip(grid.tolist(), new_a.numpy(), new_b.numpy()):
        a, b = list(range(la)), list(range(lb))
        truncate_seq_pair(a, b, m)
        assert (got_a, got_b) == (len(a), len(b)), (la, lb, m)


@pytest.mark.parametrize("sequence_length", [3, 5, 16])
def test_packing_equals_python_reference_on_random_lengths(tiny_model, sequence_length):
    layer = AlbertTokenizerLayer.from_sentencepiece(tiny_model, sequence_length=sequence_length)
    rng = random.Random(sequence_length)
    a = [[rng.randrange(5, 90) for _ in range(rng.randrange(0, 25))] for _ in range(300)]
    b = [[rng.randrange(5, 90) for _ in range(rng.choice([0, rng.randrange(0, 25)]))] for _ in range(300)]
    for ids_b in (None, b):
        ragged_b = None if ids_b is None else tf.ragged.constant(ids_b, dtype=tf.int32)
        got = layer.pack(tf.ragged.constant(a, dtype=tf.int32), ragged_b)
        for i in range(len(a)):
            b_i = None if ids_b is None else ids_b[i]
            expected = pack_inputs(a[i], b_i, seq_length=sequence_length, cls_id=2, sep_id=3)
            for key, values in expected.items():
                assert got[key][i].numpy().tolist() == values, (key, i)


def test_call_pairs_scalars_and_long_text(tiny_model):
    layer = AlbertTokenizerLayer.from_sentencepiece(tiny_model, sequence_length=12)
    python = SentencePieceTokenizer(tiny_model)
    text_a = ["the nation", "word " * 3000, "", "in 1971, the people"]
    text_b = ["of people", "", "the year", "congress " * 50]
    out = layer((tf.constant(text_a), tf.constant(text_b)))
    assert set(out) == {"input_ids", "input_mask", "segment_ids"}
    for key, value in out.items():
        assert value.dtype == tf.int32 and value.shape == (4, 12)
    for i, (a, b) in enumerate(zip(text_a, text_b)):
        expected = python.encode_inputs(a, b, seq_length=12)
        for key in expected:
            assert out[key][i].numpy().tolist() == expected[key]
    single = layer(text_a)
    for i, a in enumerate(text_a):
        assert single["input_ids"][i].numpy().tolist() == python.encode_inputs(a, seq_length=12)["input_ids"]
    scalar = layer("the nation")
    assert scalar["input_ids"].shape == (12,)
    assert scalar["input_ids"].numpy().tolist() == single["input_ids"][0].numpy().tolist()


def test_bad_calls_and_constructor_arguments(tiny_model, tiny_vocab):
    layer = AlbertTokenizerLayer.from_sentencepiece(tiny_model, sequence_length=8)
    with pytest.raises(TypeError, match="string tensor"):
        layer(tf.constant([1, 2]))
    with pytest.raises(ValueError, match=r"scalar or a \[batch\] vector"):
        layer(tf.constant([["a"]]))
    with pytest.raises(ValueError, match="pair"):
        layer((tf.constant(["a"]), tf.constant(["b"]), tf.constant(["c"])))
    with pytest.raises(tf.errors.InvalidArgumentError, match="same batch size"):
        layer((tf.constant(["a", "b"]), tf.constant(["c"])))
    proto = open(tiny_model, "rb").read()
    with pytest.raises(ValueError, match="exactly one"):
        AlbertTokenizerLayer()
    with pytest.raises(ValueError, match="exactly one"):
        AlbertTokenizerLayer(sentencepiece_model=proto, wordpiece_vocab=["[PAD]"])
    with pytest.raises(ValueError, match="base64"):
        AlbertTokenizerLayer(sentencepiece_model=tiny_model)  # a path is not the model
    with pytest.raises(ValueError, match="not a SentencePiece model"):
        AlbertTokenizerLayer(sentencepiece_model=b"garbage")
    with pytest.raises(ValueError, match="sequence_length must be an int >= 3"):
        AlbertTokenizerLayer(sentencepiece_model=proto, sequence_length=2)
    with pytest.raises(ValueError, match=r"lacks the special tokens \['\[MASK\]'\]"):
        AlbertTokenizerLayer(wordpiece_vocab=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a"])
    with pytest.raises(ValueError, match="duplicate"):
        AlbertTokenizerLayer(wordpiece_vocab=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "a"])
    wordpiece = AlbertTokenizerLayer.from_wordpiece(tiny_vocab)
    assert wordpiece.special_token_ids == {"pad_id": 0, "unk_id": 1, "cls_id": 2, "sep_id": 3, "mask_id": 4}
    assert layer.vocab_size == 90 and wordpiece.vocab_size == 15 and not wordpiece.is_sentencepiece


def test_tf_data_map(tiny_model):
    layer = AlbertTokenizerLayer.from_sentencepiece(tiny_model, sequence_length=10)
    texts = ["the nation of people", "in 1971, the year", ""]
    eager = layer(tf.constant(texts))
    batched = next(iter(tf.data.Dataset.from_tensor_slices(texts).batch(3).map(layer)))
    pairs = tf.data.Dataset.from_tensor_slices((texts, texts[::-1])).batch(3).map(lambda a, b: layer((a, b)))
    pair_out = next(iter(pairs))
    for key in eager:
        assert (batched[key].numpy() == eager[key].numpy()).all()
    # Row 1 pairs two non-empty texts: its second segment is there.
    assert pair_out["segment_ids"].numpy()[1].tolist().count(1) > 1
    assert pair_out["input_ids"].numpy()[1].tolist().count(3) == 2


def _serving_module(layer):
    class Serving(tf.Module):
        def __init__(self, tokenizer):
            super().__init__()
            self.tokenizer = tokenizer

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string), tf.TensorSpec([None], tf.string)])
        def pairs(self, text_a, text_b):
            return self.tokenizer((text_a, text_b))

    return Serving(layer)


@pytest.mark.slow
def test_saved_model_round_trip_without_the_vocabulary_files(tiny_model, tiny_vocab, tmp_path):
    model_copy, vocab_copy = tmp_path / "m.model", tmp_path / "vocab.txt"
    model_copy.write_bytes(open(tiny_model, "rb").read())
    vocab_copy.write_text(open(tiny_vocab, encoding="utf-8").read(), encoding="utf-8")
    text_a = tf.constant(["In 1971, the Nation", "unaffable 中文", ""])
    text_b = tf.constant(["of people", "", "x"])
    for name, layer in (
        ("sentencepiece", AlbertTokenizerLayer.from_sentencepiece(model_copy, sequence_length=12)),
        ("wordpiece", AlbertTokenizerLayer.from_wordpiece(vocab_copy, sequence_length=12)),
    ):
        module = _serving_module(layer)
        expected = module.pairs(text_a, text_b)
        tf.saved_model.save(module, str(tmp_path / name))
        model_copy.unlink(missing_ok=True)
        vocab_copy.unlink(missing_ok=True)
        loaded = tf.saved_model.load(str(tmp_path / name))
        got = loaded.pairs(text_a, text_b)
        for key in expected:
            assert got[key].numpy().tolist() == expected[key].numpy().tolist(), (name, key)
        assert expected["input_mask"].numpy().sum() > 6


def test_keras_serialization(tiny_model, tiny_vocab, tmp_path):
    texts = tf.constant(["In 1971, the Nation", "unaffable 中文"])
    for layer in (
        AlbertTokenizerLayer.from_sentencepiece(tiny_model, sequence_length=9, lower_case=True, name="tok"),
        AlbertTokenizerLayer.from_wordpiece(tiny_vocab, sequence_length=9, max_input_chars_per_word=50),
    ):
        clone = AlbertTokenizerLayer.from_config(layer.get_config())
        assert clone.get_config() == layer.get_config()
        assert clone(texts)["input_ids"].numpy().tolist() == layer(texts)["input_ids"].numpy().tolist()
        inputs = keras.Input(shape=(), dtype="string")
        outputs = layer(inputs)
        assert outputs["input_ids"].shape == (None, 9)
        model = keras.Model(inputs, outputs)
        path = tmp_path / f"{layer.name}.keras"
        model.save(path)
        reloaded = keras.models.load_model(path)
        assert reloaded(texts)["segment_ids"].shape == (2, 9)
        assert reloaded(texts)["input_ids"].numpy().tolist() == layer(texts)["input_ids"].numpy().tolist()
