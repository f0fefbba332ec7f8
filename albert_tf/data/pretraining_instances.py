"""ALBERT pretraining instances: SOP segment pairs and n-gram masked-LM predictions, in pure Python.

This follows google-research/albert ``create_pretraining_data.py`` step by step, on token ids
instead of token strings:

* per document, a target length of ``max_seq_length - 3`` (with probability ``short_seq_prob``
  a random one in ``[2, max_seq_length - 3]``); sentences accumulate into a chunk until it
  reaches the target or the document ends; a random split point ``a_end`` divides the chunk
  into segments A and B;
* sentence-order prediction: with probability 0.5 A and B are swapped (label 1), else kept in
  order (label 0); a chunk of a single sentence takes B from a random other document (label 1)
  and puts its unused sentences back (``i -= num_unused_segments``), exactly as the original;
  ``random_next_sentence=True`` gives the original's BERT-style alternative instead;
* ``truncate_seq_pair`` trims the longer segment from the front or the back at random;
  ``[CLS] A [SEP] B [SEP]`` with segment ids 0/1 and the ``token_boundary`` feature (1 at
  ``[CLS]``/``[SEP]`` and at word-start pieces);
* n-gram masking (``ngram=3``, ``do_whole_word_mask``, ``favor_shorter_ngram``): whole-word
  candidates in random order, each with an n-gram size drawn with p(n) proportional to 1/n,
  shrunk until it fits the budget ``min(max_predictions_per_seq, max(1, round(len * prob)))``,
  skipped when it overlaps an earlier one; 80% ``[MASK]``, 10% a random vocabulary id, 10% kept.

Where the original is not reproducible (it draws the n-gram size from NumPy's global generator
and shares one ``random.Random`` across the whole corpus), this module draws everything from
explicit ``random.Random`` generators whose seeds are derived from the run seed, the document's
index and the dupe number (:func:`derive_seed`). Results therefore do not depend on the order in
which documents are processed, which is what lets the Beam pipeline shard freely:

* ``derive_seed(seed, PAIRING, document_index, dupe)`` seeds the pairing of one document copy
  (target length, split points, swaps, the random document and its start);
* ``derive_seed(seed, FINISHING, document_index, dupe, k)`` seeds truncation and masking of the
  k-th instance of that copy.

The original shuffles its documents and its instances; here the documents keep their input order
(the index is their position over the sorted input files) and shuffling is left to the reader.
Visiting the candidates in a uniformly random order is done lazily (each next candidate uniform over
those not yet visited), which draws the same permutation distribution as a full shuffle at a
fraction of the cost.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import random
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from albert_tf.data.documents import Document
from albert_tf.data.training_instance import TrainingInstance  # noqa: F401  (part of this module's API)

# Stream labels for derive_seed; part of the documented seed derivation, never renumber.
PAIRING = 0
FINISHING = 1

SENTENCEPIECE_UNDERLINE = "\u2581"

# The original's `special_pieces` in `_is_start_piece_sp` (note: no apostrophe, `<`, `=`, `>`).
_SP_SPECIAL_PIECES = frozenset('!"#$%&"()*+,-./:;?@[\\]^_`{|}~')
_SP_WORD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz") | _SP_SPECIAL_PIECES


def is_start_piece_sentencepiece(piece: str) -> bool:
    """The original ALBERT rule for a SentencePiece piece that starts a word.

    A piece starts a word if it begins with ``▁`` or ``<``, is one punctuation character, or has
    any character outside a-z and that punctuation (digits, apostrophes, non-Latin script) --
    "for foreign characters, we always treat them as a whole piece".
    """
    if piece.startswith(SENTENCEPIECE_UNDERLINE) or piece.startswith("<") or piece in _SP_SPECIAL_PIECES:
        return True
    return not all(char.lower() in _SP_WORD_CHARS for char in piece)


def is_start_piece_wordpiece(piece: str) -> bool:
    """The BERT rule: every WordPiece except a ``##`` continuation starts a word."""
    return not piece.startswith("##")


def derive_seed(seed: int, *parts: int) -> int:
    """A 64-bit seed for one random stream, from the run seed and integer coordinates.

    Stable across Python processes and versions (unlike ``hash``), so Beam workers agree.
    """
    digest = hashlib.blake2b(",".join(map(str, map(int, (seed, *parts)))).encode("ascii"), digest_size=8)
    return int.from_bytes(digest.digest(), "little")


@dataclasses.dataclass(frozen=True)
class InstanceConfig:
    """How instances are cut and masked; the defaults are the original ALBERT flags.

    Attributes:
        max_seq_length: tokens per instance, ``[CLS]`` and both ``[SEP]`` included.
        max_predictions_per_seq: the cap on masked positions per instance.
        masked_lm_prob: the fraction of tokens to mask (0 writes no predictions, for masking
            on the fly later).
        short_seq_prob: the probability of a random shorter target length.
        ngram: the longest n-gram (in words) masked as one unit.
        favor_shorter_ngram: p(n) proportional to 1/n when true, to 1/(ngram + 1 - n) when false.
        do_whole_word_mask: mask all pieces of a word together.
        random_next_sentence: the original's alternative objective: B from a random document with
            probability 0.5 instead of swapping A and B.
    """

    max_seq_length: int = 512
    max_predictions_per_seq: int = 20
    masked_lm_prob: float = 0.15
    short_seq_prob: float = 0.1
    ngram: int = 3
    favor_shorter_ngram: bool = True
    do_whole_word_mask: bool = True
    random_next_sentence: bool = False

    def __post_init__(self):
        if self.max_seq_length < 5:
            raise ValueError(f"max_seq_length must be at least 5 ([CLS] A [SEP] B [SEP]), got {self.max_seq_length}")
        if self.max_predictions_per_seq < 1:
            raise ValueError(f"max_predictions_per_seq must be positive, got {self.max_predictions_per_seq}")
        if not 0.0 <= self.masked_lm_prob <= 1.0:
            raise ValueError(f"masked_lm_prob must be in [0, 1], got {self.masked_lm_prob}")
        if not 0.0 <= self.short_seq_prob <= 1.0:
            raise ValueError(f"short_seq_prob must be in [0, 1], got {self.short_seq_prob}")
        if self.ngram < 1:
            raise ValueError(f"ngram must be at least 1, got {self.ngram}")

    def ngram_probabilities(self) -> List[float]:
        """p(n) for n = 1..ngram, as the original computes ``pvals``."""
        weights = [1.0 / n for n in range(1, self.ngram + 1)]
        if not self.favor_shorter_ngram:
            weights = weights[::-1]
        total = sum(weights)
        return [w / total for w in weights]

    def num_to_predict(self, num_tokens: int) -> int:
        """The masking budget of an instance of `num_tokens` tokens (Python's round, as the original)."""
        return min(self.max_predictions_per_seq, max(1, int(round(num_tokens * self.masked_lm_prob))))


@dataclasses.dataclass(frozen=True)
class VocabInfo:
    """What instance creation needs to know about the vocabulary; small and picklable.

    Attributes:
        vocab_size: the number of ids; random replacements are uniform over all of them, as the
            original draws from ``list(tokenizer.vocab.keys())``.
        cls_id, sep_id, mask_id: the ids of ``[CLS]``, ``[SEP]`` and ``[MASK]``.
        start_table: ``start_table[id]`` is 1 when that piece starts a word.
    """

    vocab_size: int
    cls_id: int
    sep_id: int
    mask_id: int
    start_table: bytes

    @classmethod
    def from_pieces(cls, pieces: Sequence[str], piece_style: Optional[str] = None) -> "VocabInfo":
        """Builds the info from the pieces listed by id.

        Args:
            pieces: ``pieces[i]`` is the piece of id ``i``; must contain ``[CLS]``, ``[SEP]``, ``[MASK]``.
            piece_style: ``"sentencepiece"`` or ``"wordpiece"`` (word-start rule); guessed from the
                pieces when None (any ``▁`` piece means SentencePiece).
        """
        if piece_style is None:
            piece_style = (
                "sentencepiece" if any(p.startswith(SENTENCEPIECE_UNDERLINE) for p in pieces) else "wordpiece"
            )
        if piece_style == "sentencepiece":
            rule = is_start_piece_sentencepiece
        elif piece_style == "wordpiece":
            rule = is_start_piece_wordpiece
        else:
            raise ValueError(f"piece_style must be 'sentencepiece' or 'wordpiece', got {piece_style!r}")
        index = {p: i for i, p in enumerate(pieces)}
        missing = [t for t in ("[CLS]", "[SEP]", "[MASK]") if t not in index]
        if missing:
            raise ValueError(f"the vocabulary has no {', '.join(missing)} piece(s); ALBERT pretraining needs them")
        return cls(
            vocab_size=len(pieces),
            cls_id=index["[CLS]"],
            sep_id=index["[SEP]"],
            mask_id=index["[MASK]"],
            start_table=bytes(int(rule(p)) for p in pieces),
        )

    @classmethod
    def from_tokenizer(cls, tokenizer, piece_style: Optional[str] = None) -> "VocabInfo":
        """Builds the info from a tokenizer whose ``vocab`` is a list of pieces or a piece->id dict."""
        return cls.from_pieces(vocab_pieces(tokenizer), piece_style)


def vocab_pieces(tokenizer) -> List[str]:
    """The tokenizer's pieces listed by id, from a ``vocab`` list or piece->id dict."""
    vocab = tokenizer.vocab
    if isinstance(vocab, dict):
        pieces = [""] * len(vocab)
        for piece, i in vocab.items():
            if not 0 <= int(i) < len(vocab):
                raise ValueError(f"vocabulary id {i} of {piece!r} is outside [0, {len(vocab)})")
            pieces[int(i)] = piece
        return pieces
    return list(vocab)


@dataclasses.dataclass(frozen=True)
class TokenizedDocument:
    """A document's sentences as token ids, stored compactly for shipping between Beam workers.

    Attributes:
        ids: every sentence's ids, concatenated (int32).
        offsets: sentence ``i`` is ``ids[offsets[i]:offsets[i + 1]]``; ``len(offsets) == num sentences + 1``.
        source: the file it came from, for messages.
        line: its first line in that file.
    """

    ids: np.ndarray
    offsets: np.ndarray
    source: str = ""
    line: int = 0

    @classmethod
    def from_sentences(cls, sentences: Sequence[Sequence[int]], source: str = "", line: int = 0) -> "TokenizedDocument":
        """Builds a document from per-sentence id lists; empty sentences are dropped, as the original."""
        kept = [s for s in sentences if len(s)]
        offsets = np.zeros(len(kept) + 1, dtype=np.int64)
        if kept:
            np.cumsum([len(s) for s in kept], out=offsets[1:])
            # One pass over the ids, not an array per sentence: documents have thousands of sentences.
            ids = np.fromiter(itertools.chain.from_iterable(kept), dtype=np.int32, count=int(offsets[-1]))
        else:
            ids = np.zeros(0, dtype=np.int32)
        return cls(ids, offsets, source, line)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def span(self, first: int, end: int) -> List[int]:
        """The ids of sentences ``first .. end - 1``, concatenated."""
        return self.ids[self.offsets[first] : self.offsets[end]].tolist()


class DocumentTokenizer:
    """Turns `Document`s into `TokenizedDocument`s with a duck-typed tokenizer.

    The tokenizer needs ``tokenize(text) -> list[str]``, ``convert_tokens_to_ids`` and ``vocab``
    (list of pieces or piece->id dict), as ``official.nlp.tools.tokenization`` tokenizers and
    ``albert_tf.tokenization.SentencePieceTokenizer`` have. Pieces are mapped through a dict built
    once from the vocabulary (much faster than per-token ``convert_tokens_to_ids``); a piece not in
    it falls back to the tokenizer's own conversion.

    An `albert_tf.tokenization.SentencePieceTokenizer` is driven through SentencePiece's batch API
    instead (:meth:`tokenize_documents`): all sentences of a batch are encoded to ids in one call;
    only the rare sentence with a digit-comma piece such as ``▁1990,`` goes through ``tokenize``,
    whose split of that piece the ids alone do not give. The ids are the same either way (tests
    compare them on the whole SOTU corpus).
    """

    def __init__(self, tokenizer):
        self._tokenizer = tokenizer
        pieces = vocab_pieces(tokenizer)
        self._piece_to_id: Dict[str, int] = {p: i for i, p in enumerate(pieces)}
        self._sentencepiece = _plain_sentencepiece(tokenizer)
        if self._sentencepiece is not None:
            from albert_tf.tokenization.text import is_digit_comma_piece

            self._digit_comma_ids = frozenset(i for i, p in enumerate(pieces) if is_digit_comma_piece(p))

    def __call__(self, document: Document) -> TokenizedDocument:
        return self.tokenize_documents([document])[0]

    def tokenize_documents(self, documents: Sequence[Document]) -> List[TokenizedDocument]:
        """Tokenizes documents together (one SentencePiece batch call for all their sentences)."""
        sentences = [s for d in documents for s in d.sentences]
        if self._sentencepiece is not None:
            ids = self._encode_sentencepiece(sentences)
        else:
            ids = [self._encode_one(s) for s in sentences]
        out, start = [], 0
        for document in documents:
            end = start + len(document.sentences)
            out.append(TokenizedDocument.from_sentences(ids[start:end], document.source, document.line))
            start = end
        return out

    def _encode_one(self, sentence: str) -> List[int]:
        pieces = self._tokenizer.tokenize(sentence)
        try:
            lookup = self._piece_to_id
            return [lookup[p] for p in pieces]
        except KeyError:
            return [int(i) for i in self._tokenizer.convert_tokens_to_ids(pieces)]

    def _encode_sentencepiece(self, sentences: List[str]) -> List[List[int]]:
        tokenizer = self._sentencepiece
        texts = [tokenizer.preprocess(s) for s in sentences]
        # One thread: parallelism comes from the pipeline's workers, not from inside one of them.
        encoded = tokenizer.sp_model.encode(texts, out_type=int, num_threads=1)
        digit_comma = self._digit_comma_ids
        if digit_comma:
            for i, ids in enumerate(encoded):
                if not digit_comma.isdisjoint(ids):
                    encoded[i] = self._encode_one(sentences[i])
        return encoded


def _plain_sentencepiece(tokenizer):
    """`tokenizer` when it is an `albert_tf` SentencePieceTokenizer whose tokenization is not overridden."""
    from albert_tf.tokenization.tokenizers import SentencePieceTokenizer

    if not isinstance(tokenizer, SentencePieceTokenizer):
        return None
    kind = type(tokenizer)
    for name in ("tokenize", "preprocess", "convert_tokens_to_ids"):
        if getattr(kind, name) is not getattr(SentencePieceTokenizer, name):
            return None
    return tokenizer


@dataclasses.dataclass(frozen=True)
class RandomNextRequest:
    """Segment B still to be taken from another document (a single-sentence chunk, label 1).

    Attributes:
        document_index: the random other document.
        start_fraction: uniform in [0, 1); the start sentence is ``floor(start_fraction * len)``,
            the original's ``rng.randint(0, len(random_document) - 1)`` once that length is known.
        target_b_length: take sentences until B has at least this many tokens.
    """

    document_index: int
    start_fraction: float
    target_b_length: int


@dataclasses.dataclass(frozen=True)
class SegmentPair:
    """Segments A and B of one instance before truncation and masking.

    ``tokens_b`` is None exactly when ``random_next`` says where B is to come from.
    """

    tokens_a: List[int]
    tokens_b: Optional[List[int]]
    is_random_next: bool
    random_next: Optional[RandomNextRequest] = None


def pair_segments(
    document: TokenizedDocument,
    document_index: int,
    num_documents: int,
    config: InstanceConfig,
    rng: random.Random,
) -> List[SegmentPair]:
    """Cuts one document into A/B segment pairs, as the original ``create_instances_from_document``.

    Args:
        document: the document.
        document_index: its index among all `num_documents` (a random other document is never it
            unless, after 10 draws, there is no other).
        num_documents: how many documents a random B may come from.
        config: lengths and probabilities.
        rng: the pairing stream of this document copy.

    Returns:
        The pairs in document order; single-sentence chunks carry a `RandomNextRequest`.
    """
    ids = document.ids
    pairs = []
    for a_lo, a_hi, b_lo, b_hi, is_random_next, request in pair_spans(
        document.offsets.tolist(), document_index, num_documents, config, rng
    ):
        tokens_b = None if request is not None else ids[b_lo:b_hi].tolist()
        pairs.append(SegmentPair(ids[a_lo:a_hi].tolist(), tokens_b, is_random_next, request))
    return pairs


def pair_spans(
    offsets: Sequence[int],
    document_index: int,
    num_documents: int,
    config: InstanceConfig,
    rng: random.Random,
) -> List[Tuple[int, int, int, int, bool, Optional[RandomNextRequest]]]:
    """`pair_segments` on token offsets: ``(a_lo, a_hi, b_lo, b_hi, is_random_next, request)`` per pair.

    Segment A is ``ids[a_lo:a_hi]``, B ``ids[b_lo:b_hi]`` (both -1 for a random-next request).

    Args:
        offsets: the document's sentence offsets (``TokenizedDocument.offsets`` as a list).
        document_index, num_documents, config, rng: as for `pair_segments`.
    """
    max_num_tokens = config.max_seq_length - 3
    target_seq_length = max_num_tokens
    if rng.random() < config.short_seq_prob:
        target_seq_length = rng.randint(2, max_num_tokens)

    num_sentences = len(offsets) - 1
    pairs = []
    chunk_start = 0
    i = 0
    while i < num_sentences:
        current_length = offsets[i + 1] - offsets[chunk_start]
        if i == num_sentences - 1 or current_length >= target_seq_length:
            chunk_size = i - chunk_start + 1
            a_end = 1
            if chunk_size >= 2:
                a_end = rng.randint(1, chunk_size - 1)
            a_lo, a_hi = offsets[chunk_start], offsets[chunk_start + a_end]
            if chunk_size == 1 or (config.random_next_sentence and rng.random() < 0.5):
                target_b_length = target_seq_length - (a_hi - a_lo)
                for _ in range(10):
                    random_index = rng.randint(0, num_documents - 1)
                    if random_index != document_index:
                        break
                request = RandomNextRequest(random_index, rng.random(), int(target_b_length))
                pairs.append((a_lo, a_hi, -1, -1, True, request))
                # The B sentences of this chunk were not used: put them back.
                i -= chunk_size - a_end
            elif not config.random_next_sentence and rng.random() < 0.5:
                pairs.append((a_hi, offsets[i + 1], a_lo, a_hi, True, None))
            else:
                pairs.append((a_lo, a_hi, a_hi, offsets[i + 1], False, None))
            chunk_start = i + 1
        i += 1
    return pairs


def resolve_random_next(random_document: TokenizedDocument, request: RandomNextRequest) -> List[int]:
    """Segment B of a random-next pair: sentences from the random start until long enough."""
    lo, hi = random_next_span(random_document.offsets, request)
    return random_document.ids[lo:hi].tolist()


def random_next_span(offsets: np.ndarray, request: RandomNextRequest) -> Tuple[int, int]:
    """`resolve_random_next` as token bounds ``(lo, hi)`` in the random document."""
    num_sentences = len(offsets) - 1
    if num_sentences == 0:
        raise ValueError("a random-next segment cannot come from an empty document")
    start = min(int(request.start_fraction * num_sentences), num_sentences - 1)
    # The first sentence end at or past the target, but always at least one sentence.
    end = int(np.searchsorted(offsets, offsets[start] + request.target_b_length, side="left"))
    end = min(max(end, start + 1), num_sentences)
    return int(offsets[start]), int(offsets[end])


def truncate_seq_pair(tokens_a: List[int], tokens_b: List[int], max_num_tokens: int, rng: random.Random):
    """Trims the longer of A and B, one token at a time from the front or the back at random.

    Same draws as the original's ``truncate_seq_pair``, computed on index bounds instead of
    ``del tokens[0]`` (quadratic for long segments).

    Returns:
        The truncated ``(tokens_a, tokens_b)``.
    """
    a0, a1, b0, b1 = 0, len(tokens_a), 0, len(tokens_b)
    while (a1 - a0) + (b1 - b0) > max_num_tokens:
        if (a1 - a0) > (b1 - b0):
            if rng.random() < 0.5:
                a0 += 1
            else:
                a1 -= 1
        else:
            if rng.random() < 0.5:
                b0 += 1
            else:
                b1 -= 1
    return tokens_a[a0:a1], tokens_b[b0:b1]


def _visit_order(num_words: int, rng: random.Random) -> Iterator[int]:
    """A uniformly random permutation of ``range(num_words)``, drawn lazily.

    Each next word is uniform over the words not yet visited: drawn by rejection while fewer than
    half are visited (about one draw each), then the rest is shuffled. The walk usually stops after
    a dozen or two words, so this costs a fraction of shuffling all of them.
    """
    seen = set()
    half = num_words // 2
    randrange = rng.randrange
    while len(seen) < half:
        w = randrange(num_words)
        if w not in seen:
            seen.add(w)
            yield w
    rest = [w for w in range(num_words) if w not in seen]
    rng.shuffle(rest)
    yield from rest


@dataclasses.dataclass(frozen=True)
class WordCandidates:
    """The whole-word masking candidates of one instance.

    Every non-special piece belongs to one word: a word-start piece opens one, a continuation piece
    joins the one before it (so right after ``[SEP]`` it joins the last word of A, as in the
    original); the first non-special piece opens a word whatever it is. Word ``w`` holds the
    non-special pieces from ``starts[w]`` up to the next start.

    Attributes:
        starts: the first position of each word.
        sizes: pieces per word.
        token_boundary: 1 at ``[CLS]``, ``[SEP]`` and word-start pieces, 0 elsewhere.
        special_positions: where ``[CLS]`` and ``[SEP]`` are.
        length: the number of tokens.
    """

    starts: List[int]
    sizes: List[int]
    token_boundary: List[int]
    special_positions: frozenset
    length: int

    def positions(self, word: int) -> List[int]:
        """The piece positions of word `word`, ascending."""
        end = self.starts[word + 1] if word + 1 < len(self.starts) else self.length
        special = self.special_positions
        return [p for p in range(self.starts[word], end) if p not in special]


def word_candidates(input_ids: Sequence[int], vocab: VocabInfo, whole_word: bool = True) -> WordCandidates:
    """Whole-word candidates and ``token_boundary`` flags, as the original builds them (vectorized).

    Args:
        input_ids: the instance's ids.
        vocab: special ids and word-start table.
        whole_word: group continuation pieces with their word; otherwise every piece is a word.
    """
    ids = np.asarray(input_ids, dtype=np.int64)
    special = (ids == vocab.cls_id) | (ids == vocab.sep_id)
    start_flag = np.frombuffer(vocab.start_table, dtype=np.uint8)[ids].astype(bool)
    candidate = ~special
    if whole_word:
        opens = candidate & start_flag
        if candidate.any():
            opens[int(np.argmax(candidate))] = True
    else:
        opens = candidate
    starts = np.flatnonzero(opens)
    word_of_piece = np.cumsum(opens) - 1
    sizes = np.bincount(word_of_piece[candidate], minlength=len(starts)) if len(starts) else np.zeros(0, np.int64)
    return WordCandidates(
        starts=starts.tolist(),
        sizes=sizes.tolist(),
        token_boundary=(start_flag | special).astype(np.int64).tolist(),
        special_positions=frozenset(np.flatnonzero(special).tolist()),
        length=len(ids),
    )


def select_ngram_spans(
    word_sizes: Sequence[int], budget: int, config: InstanceConfig, rng: random.Random
) -> List[Tuple[int, int]]:
    """Chooses the n-grams to mask: the original's walk over randomly ordered word candidates.

    Each visited word draws n with `config.ngram_probabilities()`; the n-gram (clipped at the last
    word) shrinks one word at a time until its pieces fit the remaining budget, and is skipped if
    even one word does not fit or if it overlaps an n-gram already chosen. The walk stops when the
    budget is reached.

    Args:
        word_sizes: pieces per word candidate, in order.
        budget: the most pieces to mask.
        config: n-gram settings.
        rng: the instance's finishing stream.

    Returns:
        The chosen ``(first_word, num_words)`` spans, in the order chosen.
    """
    num_words = len(word_sizes)
    pieces_before = [0, *itertools.accumulate(word_sizes)]
    cumulative = []
    acc = 0.0
    for p in config.ngram_probabilities():
        acc += p
        cumulative.append(acc)
    max_n = config.ngram

    covered = bytearray(num_words)
    spans: List[Tuple[int, int]] = []
    count = 0
    for w in _visit_order(num_words, rng):
        if count >= budget:
            break
        u = rng.random()
        n = 1
        while n < max_n and u >= cumulative[n - 1]:
            n += 1
        m = min(n, num_words - w)
        room = budget - count
        while m > 0 and pieces_before[w + m] - pieces_before[w] > room:
            m -= 1
        if m == 0 or any(covered[w : w + m]):
            continue
        covered[w : w + m] = b"\x01" * m
        spans.append((w, m))
        count += pieces_before[w + m] - pieces_before[w]
    return spans


def create_masked_lm_predictions(
    input_ids: List[int], config: InstanceConfig, vocab: VocabInfo, rng: random.Random
) -> Tuple[List[int], List[int], List[int], List[int]]:
    """N-gram whole-word masking, as the original ``create_masked_lm_predictions``.

    Args:
        input_ids: ``[CLS] A [SEP] B [SEP]`` ids.
        config: masking probability, budget cap and n-gram settings.
        vocab: special ids, word-start table and vocabulary size.
        rng: the finishing stream of this instance.

    Returns:
        ``(output_ids, masked_lm_positions, masked_lm_ids, token_boundary)``: the masked ids, the
        ascending masked positions, the original ids there, and the word-boundary flags.
    """
    words = word_candidates(input_ids, vocab, config.do_whole_word_mask)
    token_boundary = words.token_boundary
    output_ids = list(input_ids)
    if config.masked_lm_prob == 0 or not words.starts:
        return output_ids, [], [], token_boundary
    budget = config.num_to_predict(len(input_ids))
    spans = select_ngram_spans(words.sizes, budget, config, rng)
    mask_id, vocab_size = vocab.mask_id, vocab.vocab_size
    masked_positions: List[int] = []
    for first, num_words in spans:
        for x in range(first, first + num_words):
            for index in words.positions(x):
                if rng.random() < 0.8:
                    output_ids[index] = mask_id
                elif rng.random() < 0.5:
                    pass  # 10%: keep the original token
                else:
                    output_ids[index] = rng.randrange(vocab_size)
                masked_positions.append(index)
    masked_positions.sort()
    masked_ids = [input_ids[p] for p in masked_positions]
    return output_ids, masked_positions, masked_ids, token_boundary


def finish_instance(
    pair: SegmentPair,
    config: InstanceConfig,
    vocab: VocabInfo,
    rng: random.Random,
    tokens_b: Optional[List[int]] = None,
) -> TrainingInstance:
    """Truncates, assembles and masks one segment pair.

    Args:
        pair: the pair; its B is `tokens_b` when the pair is a random-next request.
        config: lengths and masking settings.
        vocab: special ids and word-start table.
        rng: the finishing stream of this instance.
        tokens_b: segment B resolved from the random document (random-next pairs only).
    """
    if pair.tokens_b is None:
        if tokens_b is None:
            raise ValueError("a random-next pair needs its segment B (see resolve_random_next)")
    else:
        tokens_b = pair.tokens_b
    tokens_a, tokens_b = truncate_seq_pair(pair.tokens_a, tokens_b, config.max_seq_length - 3, rng)
    if not tokens_a or not tokens_b:
        raise AssertionError("truncation emptied a segment; max_seq_length is too small")
    input_ids = [vocab.cls_id] + tokens_a + [vocab.sep_id] + tokens_b + [vocab.sep_id]
    len_a = len(tokens_a) + 2
    segment_ids = [0] * len_a + [1] * (len(tokens_b) + 1)
    output_ids, positions, masked_ids, token_boundary = create_masked_lm_predictions(input_ids, config, vocab, rng)
    return TrainingInstance(
        input_ids=output_ids,
        segment_ids=segment_ids,
        token_boundary=token_boundary,
        masked_lm_positions=positions,
        masked_lm_ids=masked_ids,
        next_sentence_label=int(pair.is_random_next),
    )


def document_pairs(
    document: TokenizedDocument, document_index: int, dupe: int, num_documents: int, config: InstanceConfig, seed: int
) -> List[SegmentPair]:
    """The segment pairs of copy `dupe` of a document, on its derived pairing stream."""
    rng = pairing_rng(seed, document_index, dupe)
    return pair_segments(document, document_index, num_documents, config, rng)


def pairing_rng(seed: int, document_index: int, dupe: int) -> random.Random:
    """The derived stream that pairs copy `dupe` of a document."""
    return random.Random(derive_seed(seed, PAIRING, document_index, dupe))


def finishing_rng(seed: int, document_index: int, dupe: int, k: int) -> random.Random:
    """The derived stream that truncates and masks instance `k` of copy `dupe` of a document."""
    return random.Random(derive_seed(seed, FINISHING, document_index, dupe, k))


def create_training_instances(
    documents: Sequence[TokenizedDocument],
    config: InstanceConfig,
    vocab: VocabInfo,
    seed: int,
    dupe_factor: int = 1,
) -> Iterator[TrainingInstance]:
    """All instances of an in-memory corpus; the Beam pipeline yields the same set for the same seed.

    Args:
        documents: the corpus; empty documents must already be dropped.
        config: lengths, probabilities and masking settings.
        vocab: special ids and word-start table.
        seed: the run seed.
        dupe_factor: how many copies of every document, each paired and masked anew.

    Yields:
        Instances by dupe, then document, then position in the document.
    """
    if not documents:
        raise ValueError("no documents: the corpus is empty")
    for dupe in range(dupe_factor):
        for index, document in enumerate(documents):
            for k, pair in enumerate(document_pairs(document, index, dupe, len(documents), config, seed)):
                tokens_b = None
                if pair.random_next is not None:
                    tokens_b = resolve_random_next(documents[pair.random_next.document_index], pair.random_next)
                yield finish_instance(pair, config, vocab, finishing_rng(seed, index, dupe, k), tokens_b)


# --- the fast path: the same records, straight from token spans -----------------------------------


def truncation_bounds(len_a: int, len_b: int, max_num_tokens: int, rng: random.Random) -> Tuple[int, int, int, int]:
    """`truncate_seq_pair` on lengths: the kept ``(a0, a1, b0, b1)``, with the same draws.

    Which segment loses a token at each step depends only on the lengths (the longer one, B on a
    tie), never on the draws: first the longer one down to the other's length, then B and A in
    turn. So all draws are taken at once and only their front/back votes are counted per segment.
    """
    excess = len_a + len_b - max_num_tokens
    if excess <= 0:
        return 0, len_a, 0, len_b
    draw = rng.random
    draws = [draw() for _ in range(excess)]
    if len_a > len_b:
        first = min(len_a - len_b, excess)
        a_draws = draws[:first] + draws[first + 1 :: 2]
        b_draws = draws[first::2]
    else:
        first = min(len_b - len_a, excess)
        b_draws = draws[:first] + draws[first::2]
        a_draws = draws[first + 1 :: 2]
    a_front = len([x for x in a_draws if x < 0.5])
    b_front = len([x for x in b_draws if x < 0.5])
    return a_front, len_a - (len(a_draws) - a_front), b_front, len_b - (len(b_draws) - b_front)


def _randbelow(rng: random.Random):
    """``rng.randrange`` for one positive bound, without its argument checks.

    ``randrange(n)`` is ``_randbelow(n)`` for ``n > 0`` on every CPython this package supports
    (3.11); tests check that both draw the same numbers.
    """
    return getattr(rng, "_randbelow", rng.randrange)


class PreparedDocument:
    """A document as `InstanceEncoder` reads it: per token its id, word-start flag and varint bytes.

    Attributes:
        ids: the ids (int32 array); ``id_list`` the same as a list.
        offsets: sentence offsets, a list.
        flags: one byte per token, 1 where the piece starts a word (``VocabInfo.start_table``).
        varints: the ids as packed varints; ``starts[i]`` is where token ``i``'s bytes begin.
        plain: no ``[CLS]``/``[SEP]`` id inside (else instances take the reference path).
    """

    __slots__ = ("ids", "id_list", "offsets", "flags", "varints", "starts", "plain")

    def __init__(self, ids, id_list, offsets, flags, varints, starts, plain):
        self.ids = ids
        self.id_list = id_list
        self.offsets = offsets
        self.flags = flags
        self.varints = varints
        self.starts = starts
        self.plain = plain


class InstanceEncoder:
    """Pairs, truncates, masks and serializes instances on token spans: the pipeline's fast path.

    The records are byte for byte those of `pair_segments`, `finish_instance` and
    `tfrecords.serialize_instance` with the same seeds (every random draw is the same draw, in the
    same order; tests compare the two paths). What differs is the work per instance: a document
    is prepared once (`prepare`: word-start flags, packed varints) and every instance of it is then
    a few byte slices plus the masked positions, instead of lists of its 128-512 ids built,
    scanned and encoded again for each one.

    Args:
        config: lengths and masking settings.
        vocab: special ids, word-start table and vocabulary size.
    """

    def __init__(self, config: InstanceConfig, vocab: VocabInfo):
        from albert_tf.data import tfrecords

        self.config = config
        self.vocab = vocab
        self._records = tfrecords.RecordEncoder(config.max_seq_length, config.max_predictions_per_seq)
        self._serialize = tfrecords.serialize_instance
        self._encode_varints = tfrecords.encode_varints
        self._varint = tfrecords.varint
        # Every id's varint from a table when the vocabulary fits it (always, in practice).
        table = tfrecords.SMALL_VARINTS
        self._varint_table = table if vocab.vocab_size <= len(table) else None
        self._start_table = np.frombuffer(vocab.start_table, dtype=np.uint8)
        self._cls = self._varint_bytes(vocab.cls_id)
        self._sep = self._varint_bytes(vocab.sep_id)
        # One generator, seeded anew for every instance: the same stream as `finishing_rng`
        # without building a generator each time (a third of the seeding cost).
        self._finishing = random.Random()
        self._max_num_tokens = config.max_seq_length - 3
        # Accumulated exactly as `select_ngram_spans` does, so that the comparisons agree bit for bit.
        self._cumulative = []
        acc = 0.0
        for p in config.ngram_probabilities():
            acc += p
            self._cumulative.append(acc)

    def _varint_bytes(self, value: int) -> bytes:
        table = self._varint_table
        return table[value] if table is not None and 0 <= value < len(table) else self._varint(value)

    def prepare(self, document: TokenizedDocument) -> PreparedDocument:
        """The per-token tables of a document (once per document, for all its copies)."""
        ids = np.asarray(document.ids, dtype=np.int32)
        id_list = ids.tolist()
        vocab = self.vocab
        plain = not bool(np.any((ids == vocab.cls_id) | (ids == vocab.sep_id)))
        flags = self._start_table[ids].tobytes()
        varints, starts = self._encode_varints(id_list)
        return PreparedDocument(ids, id_list, document.offsets.tolist(), flags, varints, starts, plain)

    def finishing_rng(self, seed: int, index: int, dupe: int, k: int) -> random.Random:
        """`finishing_rng` of instance `k`, as this encoder's one generator: use it before the next call."""
        self._finishing.seed(derive_seed(seed, FINISHING, index, dupe, k))
        return self._finishing

    def segment(self, ids: np.ndarray) -> PreparedDocument:
        """A single-sentence document of `ids` (segment A of a random-next request)."""
        ids = np.asarray(ids, dtype=np.int32)
        return self.prepare(TokenizedDocument(ids, np.array([0, len(ids)], dtype=np.int64)))

    def document_records(
        self,
        document: PreparedDocument,
        index: int,
        dupe: int,
        num_documents: int,
        seed: int,
        requests: List[Tuple[int, int, int, RandomNextRequest]],
    ) -> List[bytes]:
        """The records of copy `dupe` of a document; its random-next pairs go to `requests`.

        Args:
            document: the prepared document.
            index: its index among all `num_documents`.
            dupe: the copy.
            num_documents: the corpus size (random-next draws).
            seed: the run seed.
            requests: receives ``(k, a_lo, a_hi, request)`` for instance ``k`` whose segment B
                comes from another document; finish it with `encode` and the stream
                `finishing_rng` ``(seed, index, dupe, k)`` once that document is at hand.

        Returns:
            The serialized records of the other instances.
        """
        rng = pairing_rng(seed, index, dupe)
        records = []
        for k, (a_lo, a_hi, b_lo, b_hi, is_random_next, request) in enumerate(
            pair_spans(document.offsets, index, num_documents, self.config, rng)
        ):
            if request is not None:
                requests.append((k, a_lo, a_hi, request))
            else:
                finishing = self.finishing_rng(seed, index, dupe, k)
                records.append(self.encode(document, a_lo, a_hi, document, b_lo, b_hi, is_random_next, finishing))
        return records

    def encode(
        self,
        doc_a: PreparedDocument,
        a_lo: int,
        a_hi: int,
        doc_b: PreparedDocument,
        b_lo: int,
        b_hi: int,
        is_random_next: bool,
        rng: random.Random,
    ) -> bytes:
        """`serialize_instance(finish_instance(pair, ...))` of the pair A = ``doc_a[a_lo:a_hi]``, B = ``doc_b[b_lo:b_hi]``."""
        config = self.config
        label = int(is_random_next)
        if not (doc_a.plain and doc_b.plain):
            pair = SegmentPair(doc_a.id_list[a_lo:a_hi], doc_b.id_list[b_lo:b_hi], is_random_next)
            instance = finish_instance(pair, config, self.vocab, rng)
            return self._serialize(instance, config.max_seq_length, config.max_predictions_per_seq)
        a0, a1, b0, b1 = truncation_bounds(a_hi - a_lo, b_hi - b_lo, self._max_num_tokens, rng)
        a_lo, a_hi, b_lo, b_hi = a_lo + a0, a_lo + a1, b_lo + b0, b_lo + b1
        len_a, len_b = a_hi - a_lo, b_hi - b_lo
        if not len_a or not len_b:
            raise AssertionError("truncation emptied a segment; max_seq_length is too small")
        n = len_a + len_b + 3
        flags_a, flags_b = doc_a.flags[a_lo:a_hi], doc_b.flags[b_lo:b_hi]
        boundary = b"".join((b"\x01", flags_a, b"\x01", flags_b, b"\x01"))
        va, vb = doc_a.starts, doc_b.starts
        if config.masked_lm_prob == 0:
            payload = b"".join(
                (self._cls, doc_a.varints[va[a_lo] : va[a_hi]], self._sep, doc_b.varints[vb[b_lo] : vb[b_hi]], self._sep)
            )
            return self._records.encode(payload, n, len_a + 2, boundary, [], b"", label)

        sep1, last = len_a + 1, n - 1
        if config.do_whole_word_mask:
            # A word opens at each word-start piece, and at the first piece whatever it is; [SEP]
            # opens none, so a continuation piece right after it joins A's last word.
            opens = np.frombuffer(b"".join((b"\x00\x01", flags_a[1:], b"\x00", flags_b)), dtype=np.uint8)
            starts = np.flatnonzero(opens).tolist()
        else:
            starts = list(range(1, sep1))
            starts.extend(range(sep1 + 1, last))
        num_words = len(starts)
        spans = self._select_spans(starts, num_words, sep1, n, config.num_to_predict(n), rng)

        random_draw, randbelow = rng.random, _randbelow(rng)
        mask_id, vocab_size = self.vocab.mask_id, self.vocab.vocab_size
        positions: List[int] = []
        replaced: List[Tuple[int, int]] = []
        for first, m in spans:
            for word in range(first, first + m):
                end = starts[word + 1] if word + 1 < num_words else n
                for p in range(starts[word], end):
                    if p == sep1 or p == last:
                        continue
                    if random_draw() < 0.8:
                        replaced.append((p, mask_id))
                    elif random_draw() < 0.5:
                        pass  # 10%: keep the original token
                    else:
                        replaced.append((p, randbelow(vocab_size)))
                    positions.append(p)
        positions.sort()
        replaced.sort()

        table = self._varint_table
        varint = table.__getitem__ if table is not None else self._varint_bytes
        ids_a, ids_b = doc_a.id_list, doc_b.id_list
        offset_b = b_lo - len_a - 2
        masked_ids = b"".join([varint(ids_a[a_lo + p - 1] if p < sep1 else ids_b[offset_b + p]) for p in positions])
        # The payload: the spans' varints, cut around every replaced position.
        pieces = [self._cls]
        bytes_a, bytes_b = doc_a.varints, doc_b.varints
        cursor, j, num_replaced = va[a_lo], 0, len(replaced)
        while j < num_replaced and replaced[j][0] < sep1:
            p, new_id = replaced[j]
            token = a_lo + p - 1
            pieces.append(bytes_a[cursor : va[token]])
            pieces.append(varint(new_id))
            cursor = va[token + 1]
            j += 1
        pieces.append(bytes_a[cursor : va[a_hi]])
        pieces.append(self._sep)
        cursor = vb[b_lo]
        while j < num_replaced:
            p, new_id = replaced[j]
            token = offset_b + p
            pieces.append(bytes_b[cursor : vb[token]])
            pieces.append(varint(new_id))
            cursor = vb[token + 1]
            j += 1
        pieces.append(bytes_b[cursor : vb[b_hi]])
        pieces.append(self._sep)
        return self._records.encode(b"".join(pieces), n, len_a + 2, boundary, positions, masked_ids, label)

    def _select_spans(
        self, starts: List[int], num_words: int, sep1: int, n: int, budget: int, rng: random.Random
    ) -> List[Tuple[int, int]]:
        """`select_ngram_spans` with `_visit_order` inlined, on word starts instead of sizes.

        The pieces before word ``w`` are its start minus ``[CLS]`` and, past it, the first
        ``[SEP]``; `n` - 3 before the end.
        """
        cumulative = self._cumulative
        max_n = len(cumulative)
        randrange, random_draw = _randbelow(rng), rng.random
        covered = bytearray(num_words)
        spans: List[Tuple[int, int]] = []
        count = 0
        seen = set()
        half = num_words // 2
        rest = None
        while True:
            # The next word of a uniformly random order, drawn before the budget check as the
            # original's generator does.
            if len(seen) < half:
                w = randrange(num_words)
                while w in seen:
                    w = randrange(num_words)
                seen.add(w)
            else:
                if rest is None:
                    rest = [x for x in range(num_words) if x not in seen]
                    rng.shuffle(rest)
                    rest.reverse()
                if not rest:
                    break
                w = rest.pop()
            if count >= budget:
                break
            u = random_draw()
            ngram = 1
            while ngram < max_n and u >= cumulative[ngram - 1]:
                ngram += 1
            m = min(ngram, num_words - w)
            room = budget - count
            start = starts[w]
            before = start - 1 - (start > sep1)
            while m > 0:
                end = starts[w + m] if w + m < num_words else None
                pieces = (n - 3 if end is None else end - 1 - (end > sep1)) - before
                if pieces <= room:
                    break
                m -= 1
            if m == 0 or any(covered[w : w + m]):
                continue
            covered[w : w + m] = b"\x01" * m
            spans.append((w, m))
            count += pieces
        return spans
