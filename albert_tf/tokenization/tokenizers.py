"""Python tokenizers for ALBERT: SentencePiece (English models) and WordPiece (Chinese models).

Both expose the interface of the original `FullTokenizer` (google-research/albert) and of
`official.nlp.tools.tokenization.FullSentencePieceTokenizer` / `FullTokenizer`: `tokenize`,
`convert_tokens_to_ids`, `convert_ids_to_tokens`, `vocab` / `inv_vocab`, plus `vocab_size`,
`encode` (text to ids), `encode_inputs` (packed model inputs) and the special token ids.

`check_vocab_size` compares a tokenizer with the model it feeds (the CLI's `finetune` and
`export --init` call it before building anything).

One difference from the original SentencePiece tokenizer: `tokenize` applies `preprocess_text`
itself (with this tokenizer's `lower_case` etc.), where the original left it to every caller. The
preprocessing is idempotent, so text already preprocessed the original way tokenizes the same.
"""

from __future__ import annotations

import abc
import os
from typing import Dict, Iterable, List, Optional, Sequence, Union

from albert_tf.tokenization import corpus_files, packing
from albert_tf.tokenization.text import (
    TextLike,
    bert_basic_tokenize,
    preprocess_text,
    split_digit_comma_pieces,
    to_unicode,
)

PathLike = Union[str, "os.PathLike[str]"]

# The original ALBERT WordpieceTokenizer limit (official's fork uses 400).
DEFAULT_MAX_INPUT_CHARS_PER_WORD = 200


class _Tokenizer(abc.ABC):
    """Shared behaviour; subclasses set `vocab`, `inv_vocab` and the special tokens."""

    vocab: Dict[str, int]
    inv_vocab: Dict[int, str]
    pad_token: str
    unk_token: str
    cls_token = "[CLS]"
    sep_token = "[SEP]"
    mask_token = "[MASK]"

    @abc.abstractmethod
    def tokenize(self, text: TextLike) -> List[str]:
        """Splits `text` into tokens."""

    @abc.abstractmethod
    def convert_tokens_to_ids(self, tokens: Iterable[str]) -> List[int]:
        """Maps tokens to ids."""

    @property
    def vocab_size(self) -> int:
        """Number of tokens in the vocabulary (ids are 0 .. vocab_size - 1)."""
        return len(self.inv_vocab)

    def convert_ids_to_tokens(self, ids: Iterable[int]) -> List[str]:
        """Maps ids to tokens.

        Raises:
          ValueError: for an id outside [0, vocab_size).
        """
        tokens = []
        for i in ids:
            token = self.inv_vocab.get(int(i))
            if token is None:
                raise ValueError(f"token id {i} is outside the vocabulary [0, {self.vocab_size})")
            tokens.append(token)
        return tokens

    def encode(self, text: TextLike) -> List[int]:
        """`convert_tokens_to_ids(tokenize(text))`."""
        return self.convert_tokens_to_ids(self.tokenize(text))

    def encode_inputs(
        self, text_a: TextLike, text_b: Optional[TextLike] = None, *, seq_length: int
    ) -> Dict[str, List[int]]:
        """Tokenizes and packs one example the original fine-tuning way (see `packing`).

        Returns:
          `input_ids`, `input_mask`, `segment_ids`, each a list of `seq_length` ints.
        """
        ids_b = self.encode(text_b) if text_b is not None else None
        return packing.pack_inputs(
            self.encode(text_a),
            ids_b,
            seq_length=seq_length,
            cls_id=self.cls_id,
            sep_id=self.sep_id,
            pad_id=self.pad_id,
        )

    def _special_id(self, token: str) -> int:
        return self.vocab[token]

    @property
    def pad_id(self) -> int:
        return self._special_id(self.pad_token)

    @property
    def unk_id(self) -> int:
        return self._special_id(self.unk_token)

    @property
    def cls_id(self) -> int:
        return self._special_id(self.cls_token)

    @property
    def sep_id(self) -> int:
        return self._special_id(self.sep_token)

    @property
    def mask_id(self) -> int:
        return self._special_id(self.mask_token)

    def _check_special_tokens(self, source: str) -> None:
        missing = [
            t
            for t in (self.pad_token, self.unk_token, self.cls_token, self.sep_token, self.mask_token)
            if t not in self.vocab
        ]
        if missing:
            raise ValueError(f"{source} lacks the special tokens {missing}")


class SentencePieceTokenizer(_Tokenizer):
    """The ALBERT SentencePiece tokenizer: `preprocess_text`, SentencePiece, the digit-comma split.

    Token ids are those of `official.nlp.tools.tokenization.FullSentencePieceTokenizer` applied to
    `preprocess_text(text, lower=lower_case)`.

    Args:
      model_file: path of a `.model` file (local or `gs://...`); or None with `model_proto`.
      lower_case: lower-case the text (True for the uncased English ALBERT models).
      model_proto: the serialized model instead of a file.
      keep_accents, normalize_quotes: the non-original `preprocess_text` options (off).

    Raises:
      ValueError: when the file is not a SentencePiece model, or the model lacks `<pad>`,
        `<unk>`, `[CLS]`, `[SEP]` or `[MASK]`.

    Example:

    >>> tokenizer = SentencePieceTokenizer("30k-clean.model")  # doctest: +SKIP
    >>> tokenizer.tokenize("Hello, World 1990, ok")  # doctest: +SKIP
    ['▁hello', ',', '▁world', '▁1990', ',', '▁ok']
    """

    def __init__(
        self,
        model_file: Optional[PathLike] = None,
        lower_case: bool = True,
        *,
        model_proto: Optional[bytes] = None,
        keep_accents: bool = False,
        normalize_quotes: bool = False,
    ):
        import sentencepiece as spm  # noqa: PLC0415 - keeps the package import light

        if (model_file is None) == (model_proto is None):
            raise ValueError("pass exactly one of model_file and model_proto")
        source = "the SentencePiece model proto" if model_file is None else os.fspath(model_file)
        if model_proto is None:
            model_proto = corpus_files.read_bytes(model_file)
        self.model_proto = bytes(model_proto)
        self.sp_model = spm.SentencePieceProcessor()
        try:
            self.sp_model.LoadFromSerializedProto(self.model_proto)
        except (RuntimeError, OSError, TypeError) as e:
            raise ValueError(f"{source} is not a SentencePiece model: {e}") from None
        self.lower_case = lower_case
        self.keep_accents = keep_accents
        self.normalize_quotes = normalize_quotes
        size = self.sp_model.GetPieceSize()
        self.inv_vocab = {i: self.sp_model.IdToPiece(i) for i in range(size)}
        self.vocab = {piece: i for i, piece in self.inv_vocab.items()}
        if self.sp_model.pad_id() < 0 or self.sp_model.unk_id() < 0:
            raise ValueError(f"{source} has no <pad> or no <unk> piece")
        self.pad_token = self.sp_model.IdToPiece(self.sp_model.pad_id())
        self.unk_token = self.sp_model.IdToPiece(self.sp_model.unk_id())
        self._check_special_tokens(source)

    def preprocess(self, text: TextLike) -> str:
        """`preprocess_text` with this tokenizer's options."""
        return preprocess_text(
            text,
            lower_case=self.lower_case,
            keep_accents=self.keep_accents,
            normalize_quotes=self.normalize_quotes,
        )

    def tokenize(self, text: TextLike) -> List[str]:
        """Preprocesses `text` and splits it into SentencePiece pieces (strings)."""
        encode = self.sp_model.EncodeAsPieces
        return split_digit_comma_pieces(encode(self.preprocess(text)), encode)

    def convert_tokens_to_ids(self, tokens: Iterable[str]) -> List[int]:
        """Piece ids; a piece not in the vocabulary is `<unk>` (as SentencePiece's `PieceToId`)."""
        return [self.sp_model.PieceToId(to_unicode(t)) for t in tokens]


def load_vocab(vocab_file: PathLike) -> Dict[str, int]:
    """Reads a WordPiece `vocab.txt` (one token per line, id = line number, from 0).

    Raises:
      ValueError: for invalid UTF-8, an empty line, a token containing whitespace, or a
        duplicate token (naming the file and line); the original silently mis-numbered those.
    """
    path = os.fspath(vocab_file)
    vocab: Dict[str, int] = {}
    for _, number, line in corpus_files.iter_lines([path]):
        token = line.strip()
        if not token:
            raise ValueError(f"{path}:{number}: empty token")
        if any(c.isspace() for c in token):
            raise ValueError(f"{path}:{number}: token {token!r} contains whitespace")
        if token in vocab:
            raise ValueError(f"{path}:{number}: duplicate token {token!r} (first on line {vocab[token] + 1})")
        vocab[token] = len(vocab)
    if not vocab:
        raise ValueError(f"{path}: empty vocabulary")
    return vocab


def wordpiece_split(
    word: str,
    vocab: Dict[str, int],
    unk_token: str = "[UNK]",
    max_input_chars_per_word: int = DEFAULT_MAX_INPUT_CHARS_PER_WORD,
) -> List[str]:
    """The original greedy longest-match-first WordPiece split of one word.

    Continuation pieces carry the "##" prefix; a word that cannot be covered by vocabulary pieces,
    or is longer than `max_input_chars_per_word` characters, becomes `[unk_token]`.
    """
    if len(word) > max_input_chars_per_word:
        return [unk_token]
    pieces: List[str] = []
    start = 0
    while start < len(word):
        end = len(word)
        piece = None
        while start < end:
            candidate = word[start:end] if start == 0 else "##" + word[start:end]
            if candidate in vocab:
                piece = candidate
                break
            end -= 1
        if piece is None:
            return [unk_token]
        pieces.append(piece)
        start = end
    return pieces


class WordPieceTokenizer(_Tokenizer):
    """The BERT/ALBERT WordPiece tokenizer (Chinese ALBERT models): basic tokenization + WordPiece.

    Token ids are those of `official.nlp.tools.tokenization.FullTokenizer(vocab_file,
    do_lower_case=lower_case)` (with its `max_input_chars_per_word` set alike).

    Args:
      vocab_file: a `vocab.txt` with `[PAD]`, `[UNK]`, `[CLS]`, `[SEP]` and `[MASK]`.
      lower_case: lower-case and strip accents.
      max_input_chars_per_word: longer words become `[UNK]` (200 in the original ALBERT code,
        400 in official's fork).
      vocab: a token -> id mapping instead of a file.

    Raises:
      ValueError: for a malformed vocabulary file or missing special tokens.
    """

    pad_token = "[PAD]"
    unk_token = "[UNK]"

    def __init__(
        self,
        vocab_file: Optional[PathLike] = None,
        lower_case: bool = True,
        *,
        max_input_chars_per_word: int = DEFAULT_MAX_INPUT_CHARS_PER_WORD,
        vocab: Optional[Dict[str, int]] = None,
    ):
        if (vocab_file is None) == (vocab is None):
            raise ValueError("pass exactly one of vocab_file and vocab")
        if max_input_chars_per_word < 1:
            raise ValueError(f"max_input_chars_per_word must be >= 1, got {max_input_chars_per_word}")
        source = "the vocabulary" if vocab_file is None else os.fspath(vocab_file)
        self.vocab = dict(vocab) if vocab is not None else load_vocab(vocab_file)
        self.inv_vocab = {i: t for t, i in self.vocab.items()}
        if sorted(self.inv_vocab) != list(range(len(self.vocab))):
            raise ValueError(f"{source}: ids must be exactly 0 .. {len(self.vocab) - 1}")
        self.lower_case = lower_case
        self.max_input_chars_per_word = max_input_chars_per_word
        self._check_special_tokens(source)

    @property
    def tokens(self) -> List[str]:
        """The vocabulary in id order (the lines of `vocab.txt`)."""
        return [self.inv_vocab[i] for i in range(self.vocab_size)]

    def tokenize(self, text: TextLike) -> List[str]:
        """Basic tokenization (`bert_basic_tokenize`), then WordPiece on every word."""
        out: List[str] = []
        for word in bert_basic_tokenize(text, lower_case=self.lower_case):
            out.extend(wordpiece_split(word, self.vocab, self.unk_token, self.max_input_chars_per_word))
        return out

    def convert_tokens_to_ids(self, tokens: Iterable[str]) -> List[int]:
        """Token ids.

        Raises:
          KeyError: for a token not in the vocabulary (as the original).
        """
        ids = []
        for t in tokens:
            try:
                ids.append(self.vocab[t])
            except KeyError:
                raise KeyError(f"token {t!r} is not in the vocabulary") from None
        return ids


class VocabSizeMismatch(ValueError):
    """A tokenizer whose vocabulary size differs from the model's `vocab_size`."""


def check_vocab_size(
    tokenizer_vocab_size: int,
    model_vocab_size: int,
    *,
    tokenizer_source: str = "the tokenizer",
    model_source: str = "the model",
    allow_smaller: bool = False,
    allow_hint: Optional[str] = None,
) -> Optional[str]:
    """Checks that a tokenizer fits the model's embedding table.

    A larger tokenizer is always an error: its top ids index past the embedding table. A smaller
    one only wastes embedding rows, but it usually means the wrong file was picked (another
    run's vocabulary), so it is refused unless `allow_smaller`.

    Args:
      tokenizer_vocab_size: Tokens in the tokenizer (`vocab_size` of a tokenizer here).
      model_vocab_size: The model config's `vocab_size`.
      tokenizer_source: Names the tokenizer in messages ("the tokenizer spm.model").
      model_source: Names the model in messages ("the model config albert_config.json").
      allow_smaller: Accept a smaller tokenizer (the mismatch is returned as a warning).
      allow_hint: How a caller allows a smaller tokenizer, appended to its error
        ("pass --allow-vocab-mismatch to use it anyway").

    Returns:
      None when the sizes agree, else (a smaller tokenizer, allowed) a one-line warning.

    Raises:
      VocabSizeMismatch: A larger tokenizer, or a smaller one without `allow_smaller`.
    """
    tokens, rows = int(tokenizer_vocab_size), int(model_vocab_size)
    if tokens == rows:
        return None
    sizes = f"{tokenizer_source} has {tokens} tokens but {model_source} has vocab_size {rows}"
    if tokens > rows:
        raise VocabSizeMismatch(
            f"{sizes}: token ids {rows} and up would index past the embedding table; use the model's own "
            f"tokenizer or a model with vocab_size {tokens}"
        )
    if not allow_smaller:
        hint = f"; {allow_hint}" if allow_hint else ""
        raise VocabSizeMismatch(
            f"{sizes}: {rows - tokens} embedding rows would never be used, which usually means the wrong "
            f"tokenizer file{hint}"
        )
    return f"{sizes}: {rows - tokens} embedding rows stay unused"


def create_tokenizer(
    *,
    spm_model_file: Optional[PathLike] = None,
    vocab_file: Optional[PathLike] = None,
    lower_case: bool = True,
) -> Union[SentencePieceTokenizer, WordPieceTokenizer]:
    """The original `FullTokenizer(vocab_file, do_lower_case, spm_model_file)` choice.

    A SentencePiece model wins when given (the original ignored `vocab_file` then).

    Raises:
      ValueError: when neither file is given.
    """
    if spm_model_file:
        return SentencePieceTokenizer(spm_model_file, lower_case=lower_case)
    if vocab_file:
        return WordPieceTokenizer(vocab_file, lower_case=lower_case)
    raise ValueError("pass spm_model_file (SentencePiece) or vocab_file (WordPiece)")


__all__: Sequence[str] = (
    "SentencePieceTokenizer",
    "VocabSizeMismatch",
    "WordPieceTokenizer",
    "check_vocab_size",
    "create_tokenizer",
    "load_vocab",
    "wordpiece_split",
)
