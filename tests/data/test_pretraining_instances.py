"""Tests for albert_tf.data.pretraining_instances: SOP pairing, truncation and n-gram masking statistics."""

import collections
import random
from pathlib import Path

import numpy as np
import pytest

from albert_tf.data import pretraining_instances as P
from albert_tf.data.documents import read_documents

SOTU = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "en" / "sotu"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """A tiny SentencePiece model trained on a sotu slice, and that slice tokenized."""
    files = sorted(SOTU.glob("199*.txt"))[:4]
    if not files:
        pytest.skip(f"shared data not found at {SOTU}")
    import sentencepiece as spm
    from official.nlp.tools.tokenization import FullSentencePieceTokenizer

    documents = [d for f in files for d in read_documents(str(f), "paragraphs")]
    prefix = tmp_path_factory.mktemp("spm") / "sp"
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter([s for d in documents for s in d.sentences]),
        model_prefix=str(prefix),
        vocab_size=2000,
        model_type="unigram",
        pad_id=0,
        unk_id=1,
        bos_id=-1,
        eos_id=-1,
        control_symbols=["[CLS]", "[SEP]", "[MASK]"],
        minloglevel=2,
        num_threads=1,
    )
    tokenizer = FullSentencePieceTokenizer(f"{prefix}.model")
    tokenized = [P.DocumentTokenizer(tokenizer)(d) for d in documents]
    return tokenizer, tokenized, P.VocabInfo.from_tokenizer(tokenizer)


CONFIG = P.InstanceConfig(max_seq_length=128, max_predictions_per_seq=20)


@pytest.fixture(scope="module")
def instances(corpus):
    _, docs, vocab = corpus
    return list(P.create_training_instances(docs, CONFIG, vocab, seed=7, dupe_factor=4))


@pytest.fixture(scope="module")
def unmasked(corpus):
    _, docs, vocab = corpus
    config = P.InstanceConfig(max_seq_length=128, max_predictions_per_seq=20, masked_lm_prob=0.0)
    return list(P.create_training_instances(docs, config, vocab, seed=7, dupe_factor=4))


def test_start_piece_rules():
    sp = P.is_start_piece_sentencepiece
    assert sp("\u2581the") and sp(",") and sp("'s") and sp("9") and sp("<unk>") and sp("\u00e9t\u00e9")
    assert not sp("ing") and not sp("ed") and not sp("a.b")
    assert P.is_start_piece_wordpiece("play") and not P.is_start_piece_wordpiece("##ing")


def test_vocab_info(corpus):
    tokenizer, _, vocab = corpus
    assert (vocab.vocab_size, vocab.cls_id, vocab.sep_id, vocab.mask_id) == (2000, 2, 3, 4)
    pieces = tokenizer.convert_ids_to_tokens(range(2000))
    assert [vocab.start_table[i] for i in range(2000)] == [int(P.is_start_piece_sentencepiece(p)) for p in pieces]
    with pytest.raises(ValueError, match=r"no \[MASK\]"):
        P.VocabInfo.from_pieces(["[CLS]", "[SEP]", "a"])
    wordpiece = P.VocabInfo.from_pieces(["[PAD]", "[CLS]", "[SEP]", "[MASK]", "play", "##ing"])
    assert wordpiece.start_table == bytes([1, 1, 1, 1, 1, 0])


def test_document_tokenizer_matches_the_tokenizer(corpus):
    tokenizer, docs, _ = corpus
    document = next(read_documents(str(sorted(SOTU.glob("199*.txt"))[0]), "paragraphs"))
    first = docs[0]
    assert len(first) == len(document.sentences)
    for i in (0, 5, len(first) - 1):
        expected = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(document.sentences[i]))
        assert first.span(i, i + 1) == expected
    empty = P.TokenizedDocument.from_sentences([[5, 6], [], [7]])
    assert len(empty) == 2 and empty.span(0, 2) == [5, 6, 7]


def test_instance_structure(instances, corpus):
    _, _, vocab = corpus
    assert len(instances) > 500
    for inst in instances:
        # Random replacements may be any id, [SEP] included (as the original); check the originals.
        ids = list(inst.input_ids)
        for p, original in zip(inst.masked_lm_positions, inst.masked_lm_ids):
            ids[p] = original
        seg = inst.segment_ids
        assert 5 <= len(ids) <= 128 and len(seg) == len(ids) == len(inst.token_boundary)
        assert ids[0] == vocab.cls_id and ids[-1] == vocab.sep_id
        seps = [i for i, t in enumerate(ids) if t == vocab.sep_id]
        assert len(seps) == 2
        assert seg == [0] * (seps[0] + 1) + [1] * (len(ids) - seps[0] - 1)
        assert seps[0] >= 2 and seps[1] - seps[0] >= 2  # both segments non-empty
        positions = inst.masked_lm_positions
        assert positions == sorted(set(positions))
        assert all(ids[p] != vocab.cls_id and ids[p] != vocab.sep_id for p in positions)
        assert inst.token_boundary[0] == 1 and inst.token_boundary[seps[0]] == 1


def test_masked_ids_are_the_original_tokens(instances, unmasked, corpus):
    # Truncation draws come before the masking draws, so the same seed gives the same pairs.
    _, _, vocab = corpus
    assert len(instances) == len(unmasked)
    for masked, plain in zip(instances, unmasked):
        assert plain.masked_lm_positions == [] and masked.segment_ids == plain.segment_ids
        assert [plain.input_ids[p] for p in masked.masked_lm_positions] == masked.masked_lm_ids
        restored = list(masked.input_ids)
        for p, original in zip(masked.masked_lm_positions, masked.masked_lm_ids):
            restored[p] = original
        assert restored == plain.input_ids
        expected_boundary = [
            1 if t in (vocab.cls_id, vocab.sep_id) else vocab.start_table[t] for t in plain.input_ids
        ]
        assert masked.token_boundary == expected_boundary


def test_masking_rate_and_budget(instances):
    at_budget = 0
    for inst in instances:
        budget = CONFIG.num_to_predict(len(inst.input_ids))
        assert budget == min(20, max(1, int(round(len(inst.input_ids) * 0.15))))
        assert len(inst.masked_lm_positions) <= budget
        at_budget += len(inst.masked_lm_positions) == budget
    assert at_budget / len(instances) > 0.97
    rate = sum(len(i.masked_lm_positions) for i in instances) / sum(len(i.input_ids) for i in instances)
    assert 0.14 < rate < 0.155, rate


def test_replacement_rates(instances, corpus):
    _, _, vocab = corpus
    counts = collections.Counter()
    for inst in instances:
        for p, original in zip(inst.masked_lm_positions, inst.masked_lm_ids):
            token = inst.input_ids[p]
            counts["mask" if token == vocab.mask_id else "kept" if token == original else "random"] += 1
    total = sum(counts.values())
    assert total > 10000
    # A random replacement equals the original 1 time in 2000: negligible against the tolerance.
    assert abs(counts["mask"] / total - 0.8) < 0.015
    assert abs(counts["kept"] / total - 0.1) < 0.012
    assert abs(counts["random"] / total - 0.1) < 0.012


def test_ngram_lengths(instances, unmasked, corpus):
    """The first n-gram of each instance follows p(n) = 6/11, 3/11, 2/11 (nothing can overlap or
    shrink it yet); all chosen n-grams lean shorter, because long ones overlap and shrink more."""
    _, _, vocab = corpus
    rng = random.Random(0)
    first = collections.Counter()
    chosen = collections.Counter()
    for inst in unmasked * 3:
        words = P.word_candidates(inst.input_ids, vocab)
        spans = P.select_ngram_spans(words.sizes, CONFIG.num_to_predict(len(inst.input_ids)), CONFIG, rng)
        first[spans[0][1]] += 1
        chosen.update(m for _, m in spans)
        covered = [w for start, m in spans for w in range(start, start + m)]
        assert len(covered) == len(set(covered))  # no overlaps
    n = sum(first.values())
    for size, p in ((1, 6 / 11), (2, 3 / 11), (3, 2 / 11)):
        assert abs(first[size] / n - p) < 0.03, (size, first)
    total = sum(chosen.values())
    assert chosen[1] / total > 6 / 11 - 0.01 and chosen[3] / total < 2 / 11 + 0.01
    assert abs(chosen[2] / total - 3 / 11) < 0.04 and abs(chosen[3] / total - 2 / 11) < 0.06
    assert CONFIG.ngram_probabilities() == pytest.approx([6 / 11, 3 / 11, 2 / 11])
    longer = P.InstanceConfig(favor_shorter_ngram=False).ngram_probabilities()
    assert longer == pytest.approx([2 / 11, 3 / 11, 6 / 11])


def test_sop_labels_balanced(corpus):
    _, docs, _ = corpus
    labels, swapped = [], []
    for dupe in range(6):
        for index, doc in enumerate(docs):
            for pair in P.document_pairs(doc, index, dupe, len(docs), CONFIG, seed=3):
                labels.append(int(pair.is_random_next))
                if pair.random_next is None:
                    swapped.append(int(pair.is_random_next))
    assert abs(np.mean(swapped) - 0.5) < 0.035, np.mean(swapped)
    assert 0.45 < np.mean(labels) < 0.6
    assert len(labels) - len(swapped) > 0  # some single-sentence chunks took a random B


def test_determinism_and_order_independence(corpus, instances):
    _, docs, vocab = corpus
    again = list(P.create_training_instances(docs, CONFIG, vocab, seed=7, dupe_factor=4))
    assert again == instances
    other = list(P.create_training_instances(docs, CONFIG, vocab, seed=8, dupe_factor=4))
    assert other != instances
    # Processing documents in another order (as Beam may) gives the same instances per document.
    for index in reversed(range(len(docs))):
        pairs = P.document_pairs(docs[index], index, 2, len(docs), CONFIG, seed=7)
        assert pairs == P.document_pairs(docs[index], index, 2, len(docs), CONFIG, seed=7)
    assert P.derive_seed(7, P.PAIRING, 0, 0) != P.derive_seed(7, P.PAIRING, 0, 1)
    assert P.derive_seed(7, P.PAIRING, 1, 0) == P.derive_seed(7, P.PAIRING, 1, 0)


def _doc(lengths, start=100):
    sentences, next_id = [], start
    for n in lengths:
        sentences.append(list(range(next_id, next_id + n)))
        next_id += n
    return P.TokenizedDocument.from_sentences(sentences)


def test_pairing_consumes_every_sentence_and_puts_back_unused_ones():
    config = P.InstanceConfig(max_seq_length=13, short_seq_prob=0.0)  # target: 10 tokens
    doc = _doc([12, 3, 3, 3, 3])
    for seed in range(20):
        pairs = P.pair_segments(doc, 0, 5, config, random.Random(seed))
        # [12] alone takes a random B; [3, 3, 3, 3] (12 >= 10 at the 4th) is split at a_end.
        assert pairs[0].random_next is not None and pairs[0].tokens_a == doc.span(0, 1)
        assert pairs[0].random_next.target_b_length == 10 - 12
        assert pairs[0].random_next.document_index != 0
        rest = pairs[1]
        assert rest.random_next is None and len(pairs) == 2
        text = rest.tokens_b + rest.tokens_a if rest.is_random_next else rest.tokens_a + rest.tokens_b
        assert text == doc.span(1, 5)

    # With the original's random_next_sentence objective, a random B puts back the chunk's unused
    # sentences: the next chunk starts right after segment A.
    config = P.InstanceConfig(max_seq_length=13, short_seq_prob=0.0, random_next_sentence=True)
    seen_put_back = False
    for seed in range(40):
        pairs = P.pair_segments(doc, 0, 5, config, random.Random(seed))
        used_a = [t for p in pairs for t in p.tokens_a]
        if pairs[1].random_next is not None and len(pairs) > 2:
            seen_put_back = True
            assert used_a[: len(pairs[0].tokens_a) + len(pairs[1].tokens_a)] == doc.span(0, 1) + pairs[1].tokens_a
            # Sentences after A of the second chunk come back as the next chunk.
            after_a = pairs[1].tokens_a[-1] + 1
            assert pairs[2].tokens_a[0] == after_a or pairs[2].tokens_b[0] == after_a
    assert seen_put_back


def test_resolve_random_next():
    doc = _doc([4, 4, 4, 4])
    take = P.resolve_random_next
    assert take(doc, P.RandomNextRequest(0, 0.0, 5)) == doc.span(0, 2)
    assert take(doc, P.RandomNextRequest(0, 0.5, 4)) == doc.span(2, 3)
    assert take(doc, P.RandomNextRequest(0, 0.99, 100)) == doc.span(3, 4)
    assert take(doc, P.RandomNextRequest(0, 0.3, -2)) == doc.span(1, 2)  # at least one sentence


def _truncate_reference(a, b, max_num_tokens, rng):
    # The original's algorithm, deleting from lists.
    a, b = list(a), list(b)
    while len(a) + len(b) > max_num_tokens:
        trunc = a if len(a) > len(b) else b
        if rng.random() < 0.5:
            del trunc[0]
        else:
            trunc.pop()
    return a, b


def test_truncate_seq_pair_matches_the_original_draws():
    for seed in range(30):
        a, b = list(range(40 + seed)), list(range(100, 100 + 3 * seed + 1))
        got = P.truncate_seq_pair(a, b, 25, random.Random(seed))
        assert got == _truncate_reference(a, b, 25, random.Random(seed))
        assert len(got[0]) + len(got[1]) <= 25


def test_config_validation():
    with pytest.raises(ValueError, match="max_seq_length"):
        P.InstanceConfig(max_seq_length=4)
    with pytest.raises(ValueError, match="masked_lm_prob"):
        P.InstanceConfig(masked_lm_prob=1.5)
    with pytest.raises(ValueError, match="ngram"):
        P.InstanceConfig(ngram=0)
    with pytest.raises(ValueError, match="empty"):
        list(P.create_training_instances([], CONFIG, None, seed=0))


# --- the fast path (InstanceEncoder, batched SentencePiece) gives the reference's bytes -------------


def _fast_records(docs, config, vocab, seed, dupe_factor):
    """Every record of the corpus by `InstanceEncoder`, random-next pairs finished as the pipeline does."""
    encoder = P.InstanceEncoder(config, vocab)
    prepared = [encoder.prepare(d) for d in docs]
    records = []
    for dupe in range(dupe_factor):
        for index, document in enumerate(prepared):
            requests = []
            records += encoder.document_records(document, index, dupe, len(docs), seed, requests)
            for k, a_lo, a_hi, request in requests:
                lo, hi = P.random_next_span(docs[request.document_index].offsets, request)
                segment_b = encoder.segment(docs[request.document_index].ids[lo:hi])
                rng = P.finishing_rng(seed, index, dupe, k)
                records.append(encoder.encode(document, a_lo, a_hi, segment_b, 0, hi - lo, True, rng))
    return sorted(records)


def _reference_records(docs, config, vocab, seed, dupe_factor):
    from albert_tf.data.tfrecords import serialize_instance

    instances = P.create_training_instances(docs, config, vocab, seed=seed, dupe_factor=dupe_factor)
    return sorted(serialize_instance(i, config.max_seq_length, config.max_predictions_per_seq) for i in instances)


@pytest.mark.parametrize(
    "config",
    [
        CONFIG,
        P.InstanceConfig(max_seq_length=512, max_predictions_per_seq=20),
        P.InstanceConfig(max_seq_length=64, max_predictions_per_seq=8, do_whole_word_mask=False, ngram=2),
        P.InstanceConfig(max_seq_length=128, masked_lm_prob=0.0),
        P.InstanceConfig(max_seq_length=96, random_next_sentence=True, favor_shorter_ngram=False, short_seq_prob=0.5),
        P.InstanceConfig(max_seq_length=5, max_predictions_per_seq=1),
    ],
    ids=["128", "512", "no-whole-word", "unmasked", "random-next", "tiny"],
)
def test_instance_encoder_writes_the_reference_records(corpus, config):
    _, docs, vocab = corpus
    expected = _reference_records(docs, config, vocab, seed=5, dupe_factor=2)
    assert _fast_records(docs, config, vocab, seed=5, dupe_factor=2) == expected
    assert len(expected) > 40


def test_instance_encoder_takes_the_reference_path_for_special_ids_inside_segments(corpus):
    # A tokenizer may give [CLS]/[SEP] ids inside the text; the word rules then differ, and the
    # encoder hands such instances to the reference functions.
    _, docs, vocab = corpus
    rng = random.Random(0)
    odd = []
    for document in docs:
        ids = document.ids.copy()
        ids[rng.sample(range(len(ids)), 30)] = vocab.sep_id
        ids[rng.sample(range(len(ids)), 30)] = vocab.cls_id
        odd.append(P.TokenizedDocument(ids, document.offsets))
    assert _fast_records(odd, CONFIG, vocab, 2, 2) == _reference_records(odd, CONFIG, vocab, 2, 2)


def _letters(i):
    out = ""
    while True:
        i, r = divmod(i, 26)
        out += chr(97 + r)
        if not i:
            return out


def test_instance_encoder_with_ids_beyond_the_varint_table():
    # Every third piece continues a word (letters only, no "\u2581").
    pieces = ["[CLS]", "[SEP]", "[MASK]"] + [f"\u2581{_letters(i)}" if i % 3 else _letters(i) for i in range(70000)]
    vocab = P.VocabInfo.from_pieces(pieces, "sentencepiece")
    config = P.InstanceConfig(max_seq_length=64, max_predictions_per_seq=10)
    rng = np.random.default_rng(0)
    docs = [P.TokenizedDocument.from_sentences([rng.integers(3, 70003, size=n).tolist() for n in (9, 14, 30, 5, 22)])]
    docs.append(P.TokenizedDocument.from_sentences([rng.integers(65000, 70003, size=n).tolist() for n in (40, 3, 17)]))
    expected = _reference_records(docs, config, vocab, seed=1, dupe_factor=5)
    assert _fast_records(docs, config, vocab, seed=1, dupe_factor=5) == expected
    assert 0 < sum(vocab.start_table) < len(pieces)


def test_truncation_bounds_take_the_draws_of_truncate_seq_pair():
    draws = random.Random(0)
    for _ in range(3000):
        len_a, len_b, limit = draws.randint(0, 40), draws.randint(0, 40), draws.randint(2, 60)
        seed = draws.randint(0, 10**9)
        rng_a, rng_b = random.Random(seed), random.Random(seed)
        a, b = list(range(len_a)), list(range(100, 100 + len_b))
        a0, a1, b0, b1 = P.truncation_bounds(len_a, len_b, limit, rng_b)
        assert P.truncate_seq_pair(a, b, limit, rng_a) == (a[a0:a1], b[b0:b1])
        assert rng_a.random() == rng_b.random()  # the same number of draws


def test_randbelow_draws_what_randrange_draws():
    a, b = random.Random(3), random.Random(3)
    below = P._randbelow(b)
    assert [a.randrange(n) for n in (1, 2, 7, 30000, 2**40)] == [below(n) for n in (1, 2, 7, 30000, 2**40)]


@pytest.fixture(scope="module")
def sentencepiece_model(tmp_path_factory):
    files = sorted(SOTU.glob("199*.txt"))[:4]
    if not files:
        pytest.skip(f"shared data not found at {SOTU}")
    import sentencepiece as spm

    sentences = [s for f in files for d in read_documents(str(f), "paragraphs") for s in d.sentences]
    prefix = tmp_path_factory.mktemp("spm-batch") / "sp"
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences),
        model_prefix=str(prefix),
        vocab_size=1500,
        model_type="unigram",
        pad_id=0,
        unk_id=1,
        bos_id=-1,
        eos_id=-1,
        control_symbols=["[CLS]", "[SEP]", "[MASK]"],
        minloglevel=2,
        num_threads=1,
    )
    return f"{prefix}.model", files


def test_sentencepiece_batches_give_the_ids_of_tokenize(sentencepiece_model):
    from albert_tf.data.documents import Document
    from albert_tf.tokenization.tokenizers import SentencePieceTokenizer

    model, files = sentencepiece_model
    tokenizer = SentencePieceTokenizer(model)
    batched = P.DocumentTokenizer(tokenizer)
    assert batched._sentencepiece is tokenizer  # the batch path is taken
    documents = [d for f in files for d in read_documents(str(f), "paragraphs")]
    documents.append(
        Document(
            (
                "In 1990, 1,000,000 people; 12,34, 5, 6,7,8,",  # digit-comma pieces, split as the original
                "na\u00efve caf\u00e9 \u2603 \ufb01ne \u00c5 \u201cquoted\u201d \u2026 \u4e2d\u6587 \u0627\u0644",
                "\u0301\u0302",  # nothing left after preprocessing: no ids
                "[CLS] [SEP] [MASK] <unk> <pad>",
            ),
            "extra",
            1,
        )
    )

    def one_by_one(document):
        lookup = {p: i for i, p in tokenizer.inv_vocab.items()}
        return [[lookup.get(p, tokenizer.unk_id) for p in tokenizer.tokenize(s)] for s in document.sentences]

    for document, tokenized in zip(documents, batched.tokenize_documents(documents)):
        expected = P.TokenizedDocument.from_sentences(one_by_one(document))
        assert tokenized.ids.tolist() == expected.ids.tolist()
        assert tokenized.offsets.tolist() == expected.offsets.tolist()
    assert P.DocumentTokenizer(tokenizer)(documents[-1]).ids.tolist() == expected.ids.tolist()

    class Custom(SentencePieceTokenizer):
        def tokenize(self, text):
            return super().tokenize(text.upper())

    assert P.DocumentTokenizer(Custom(model))._sentencepiece is None  # an override keeps its own path
