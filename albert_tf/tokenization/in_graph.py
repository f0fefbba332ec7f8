"""`AlbertTokenizerLayer`: ALBERT tokenization and input packing inside the TensorFlow graph.

Raw strings in, model inputs out: the layer maps a `[batch]` string tensor (or a pair of them) to
dense int32 `input_ids`, `input_mask` and `segment_ids` of shape `[batch, sequence_length]`, with
the exact token ids of the Python tokenizers (`albert_tf.tokenization.tokenizers`) and the exact
packing of the original fine-tuning code (`albert_tf.tokenization.packing`). Because it is all TF
ops (tensorflow-text's SentencePiece / WordPiece kernels, `tf.strings` and RE2 regexes), it runs in
`tf.data` pipelines and inside an exported SavedModel, where the vocabulary travels as a constant.
All token ids of the layer are int32.

How each original Python step is reproduced:

* SentencePiece (`preprocess_text` + `encode_pieces`): whitespace runs (`str.isspace`) collapsed
  and stripped by regex; optional ``` `` ```/`''` -> `"`; `normalize_utf8(NFKD)` then a regex
  deleting the `unicodedata.combining` characters; lower-casing; tensorflow-text's
  `FastSentencepieceTokenizer` (it breaks ties between equally scored segmentations as the
  `sentencepiece` package does, `SentencepieceTokenizer` does not); and the digit-comma rule,
  vectorized: matching pieces are re-encoded in one batched call and scattered back.
* WordPiece (`BasicTokenizer` + `WordpieceTokenizer`): control characters deleted and whitespace
  mapped to spaces by regex, spaces around CJK ideographs, lower-casing, NFD and deletion of Mn,
  one split on spaces and punctuation, the WordPiece kernel, and words longer than
  `max_input_chars_per_word` characters replaced by `[UNK]` (the kernel only limits bytes).

The character classes are generated from the very predicates the Python path uses
(`albert_tf.tokenization.unicode_classes`), not taken from RE2's own Unicode tables. What remains is the
normalization itself: ICU's NFKD/NFD and lower-case tables in TensorFlow are of a newer Unicode
version than Python 3.11's `unicodedata` (14.0), so characters assigned after Unicode 14 can be
normalized differently. And on very long strings (thousands of pieces in one text) the two
SentencePiece implementations sum float32 scores in different orders and may pick different
segmentations of nearly equal score: on the State of the Union corpus 5 of 233 whole addresses
(~8000 words each) differ by a few pieces, none of its 63,559 sentences.

Invalid UTF-8 is replaced, one U+FFFD per maximal invalid subsequence, exactly as the Python
tokenizers decode bytes (see `albert_tf.tokenization.text`); the layer never fails on bad text.
"""

from __future__ import annotations

import base64
import binascii
import os
from typing import Any, Dict, Optional, Sequence, Tuple, Union

import keras
import tensorflow as tf
import tensorflow_text as tf_text

from albert_tf.tokenization import corpus_files, unicode_classes
from albert_tf.tokenization.text import SPIECE_UNDERLINE
from albert_tf.tokenization.tokenizers import DEFAULT_MAX_INPUT_CHARS_PER_WORD, load_vocab

_NUL = "\x00"
_UNDERLINE_BYTES = SPIECE_UNDERLINE.encode("utf-8")
_SPECIAL_WORDPIECE_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
OUTPUT_KEYS = ("input_ids", "input_mask", "segment_ids")
# The vocabulary file of the layer's assets in a `.keras` archive (`save_assets` / `load_assets`).
SENTENCEPIECE_ASSET_FILE = "spiece.model"
WORDPIECE_ASSET_FILE = "vocab.txt"
VOCABULARY_ASSET_FILES = (SENTENCEPIECE_ASSET_FILE, WORDPIECE_ASSET_FILE)
# What exports and text models pack to by default: the longest row rounded up to 16 positions.
DEFAULT_LENGTH_BUCKET = 16
# `pack(length_bucket=...)` default: the layer's own `length_bucket`.
_OWN_BUCKET = object()


def _serializing_keras_archive() -> bool:
    """Whether Keras is serializing a model for a `.keras` archive (then `save_assets` follows)."""
    from albert_tf.keras_internals import serializing_keras_archive

    return serializing_keras_archive()


def sanitize_utf8(texts: tf.Tensor) -> tf.Tensor:
    """Replaces every maximal invalid UTF-8 subsequence with U+FFFD (like `errors="replace"`)."""
    return tf.strings.unicode_transcode(
        texts, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD
    )


def lower_utf8(texts: tf.Tensor) -> tf.Tensor:
    """`str.lower()` on a rank-1 string tensor of valid UTF-8.

    `tf.strings.lower(encoding="utf-8")` drops everything from the first NUL byte on, so the
    NUL-separated parts are lowered separately and joined back with NUL. Dense ops only (the
    split's sparse form, not a `RaggedTensor`): every text model's graph traces this, and the
    ragged form made it ten times the ops.
    """
    parts = tf.raw_ops.StringSplitV2(input=texts, sep=_NUL)
    # A separator attribute loses a NUL as well: each part gets one as data, the last is cut off.
    lowered = tf.strings.join([tf.strings.lower(parts.values, encoding="utf-8"), _NUL])
    joined = tf.strings.unsorted_segment_join(lowered, parts.indices[:, 0], tf.size(texts, out_type=tf.int64))
    length = tf.strings.length(joined) - 1
    return tf.strings.substr(joined, tf.zeros_like(length), length)


def truncated_lengths(
    len_a: tf.Tensor, len_b: tf.Tensor, max_num_tokens: tf.Tensor
) -> Tuple[tf.Tensor, tf.Tensor]:
    """Segment lengths after the original `truncate_seq_pair`, in closed form, vectorized.

    Popping from the longer segment (from `b` on ties) until the pair fits ends in one of three
    states: nothing cut; only the longer one cut, down to `max - shorter`; or both cut to halves
    (`a` keeps the odd token, since ties cut `b` first). All three are
    `a' = min(a, max(ceil(max/2), max - b))`, `b' = min(b, max - a')`.

    Args:
      len_a, len_b: int tensors of the same shape, segment lengths.
      max_num_tokens: int tensor broadcastable to them, >= 0.

    Returns:
      `(new_len_a, new_len_b)`.
    """
    half_up = (max_num_tokens + 1) // 2
    new_a = tf.minimum(len_a, tf.maximum(half_up, max_num_tokens - len_b))
    new_b = tf.minimum(len_b, max_num_tokens - new_a)
    return new_a, new_b


def check_length_bucket(length_bucket: Any) -> Optional[int]:
    """`length_bucket` checked: None (fixed length) or an int >= 1."""
    if length_bucket is None:
        return None
    if isinstance(length_bucket, bool) or not isinstance(length_bucket, int) or length_bucket < 1:
        raise ValueError(f"length_bucket must be None or an int >= 1, got {length_bucket!r}")
    return length_bucket


def packed_width(lengths: tf.Tensor, sequence_length: int, length_bucket: Optional[int]):
    """The padded width of a batch whose rows have the real lengths `lengths` (any shape).

    None: `sequence_length` (a Python int, static). An int N: the longest length rounded up
    to a multiple of N, at least N, at most `sequence_length` (an int32 scalar tensor; in Python,
    `albert_tf.tokenization.packing.bucketed_width`).
    """
    if length_bucket is None:
        return sequence_length
    longest = tf.reduce_max(tf.concat([tf.reshape(tf.cast(lengths, tf.int32), [-1]), [1]], axis=0))
    rounded = (longest + length_bucket - 1) // length_bucket * length_bucket
    return tf.minimum(rounded, sequence_length)


def pad_columns(dense: tf.Tensor, width, value) -> tf.Tensor:
    """Pads `dense` [rows, w] on the right with `value` to at least `width` columns (the dense
    outputs of the serving pipelines built on the layer: units, choices)."""
    missing = tf.maximum(width - tf.shape(dense)[1], 0)
    return tf.pad(dense, [[0, 0], [0, missing]], constant_values=value)


def _is_pair(inputs: Any) -> bool:
    # A tuple is a pair of segments; so is a list of tensors. A list of Python strings is a batch.
    if isinstance(inputs, tuple):
        return True
    return isinstance(inputs, list) and bool(inputs) and not isinstance(inputs[0], (str, bytes))


def _decode_model_proto(model: Union[bytes, str]) -> bytes:
    if isinstance(model, (bytes, bytearray)):
        return bytes(model)
    if isinstance(model, str):
        try:
            return base64.b64decode(model, validate=True)
        except binascii.Error:
            raise ValueError(
                "sentencepiece_model must be the model's bytes or their base64 text (as written by "
                "get_config); to read a file use AlbertTokenizerLayer.from_sentencepiece(path)"
            ) from None
    raise TypeError(f"sentencepiece_model must be bytes or a base64 str, got {type(model).__name__}")


def value_rowids(row_splits: tf.Tensor) -> tf.Tensor:
    """`RaggedTensor.value_rowids()` (int32) from the row splits: a binary search, a few graph ops
    where the ragged method builds seventy (each traced graph pays for them)."""
    row_splits = tf.cast(row_splits, tf.int32)
    # The row of value i is the number of rows that end at or before it (`tf.searchsorted`'s
    # reshaping for any rank costs twenty ops more).
    ends = row_splits[1:][None]
    return tf.raw_ops.UpperBound(sorted_inputs=ends, values=tf.range(row_splits[-1])[None], out_type=tf.int32)[0]


def positions_in_rows(row_splits: tf.Tensor, rows: tf.Tensor) -> tf.Tensor:
    """`tf.ragged.range(row_lengths).flat_values` (int32): each value's position in its row, given
    the row splits and `value_rowids(row_splits)`."""
    row_splits = tf.cast(row_splits, tf.int32)
    return tf.range(row_splits[-1]) - tf.gather(row_splits, rows)


def masked(values: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
    """`tf.boolean_mask` of a vector by a vector, in a quarter of its graph ops."""
    return tf.gather(values, tf.where(mask)[:, 0])


class _DigitCommaPlan:
    """The digit-comma rule's output layout for a batch (see `AlbertTokenizerLayer.digit_comma_plan`).

    Attributes:
        match_index: flat positions of the matched pieces; `num_matched` of them.
        sub_ids, sub_rows, keep: the re-encoded body pieces, their matched piece, kept or dropped.
        unmatched_index: flat positions of the pieces that stay as they are.
        positions: output slot of every unmatched piece, kept body piece and comma, in that order.
        out_length, total: output slots per input piece, and in all.
    """

    def __init__(self, **tensors):
        self.__dict__.update(tensors)

    def row_splits(self, ids: tf.RaggedTensor) -> tf.Tensor:
        """The output's row splits for the input ragged `ids`."""
        ends = tf.concat([[0], tf.cumsum(self.out_length)], axis=0)
        return tf.cast(tf.gather(ends, tf.cast(ids.row_splits, tf.int32)), tf.int64)


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertTokenizerLayer(keras.layers.Layer):
    """Tokenizes raw text and packs `[CLS] a [SEP] (b [SEP])` model inputs, all in the graph.

    Construct with exactly one vocabulary: `sentencepiece_model` (English ALBERT) or
    `wordpiece_vocab` (Chinese ALBERT); or from files with `from_sentencepiece(model_file)` /
    `from_wordpiece(vocab_file)`.

    Call it on a string tensor of shape `[batch]` (one segment) or on a tuple `(a, b)` of two
    such tensors (pairs; a row whose `b` has no tokens is packed as a single segment, as the
    original does). A scalar string gives outputs of shape `[sequence_length]`. Returns a dict of
    int32 tensors `input_ids`, `input_mask`, `segment_ids` of shape `[batch, sequence_length]`;
    with `length_bucket=N`, of shape `[batch, width]`: `width` is the longest row of the batch
    (with `[CLS]`/`[SEP]`) rounded up to a multiple of N, at most `sequence_length`. The columns
    are then exactly the first `width` of the fixed-length outputs: only padding is left out.

    Truncation is the original one, not round robin: single segments keep their first
    `sequence_length - 2` tokens; pairs lose tokens from the end of the longer segment (of `b` on a
    tie) until they fit `sequence_length - 3` (`truncated_lengths`).

    Args:
      sentencepiece_model: the serialized SentencePiece model, as bytes or base64 text.
      wordpiece_vocab: the WordPiece tokens in id order (the lines of `vocab.txt`).
      sequence_length: length of the packed outputs (>= 3).
      lower_case: lower-case the text (and, for WordPiece, strip accents).
      keep_accents, normalize_quotes: the non-original SentencePiece preprocessing options.
      max_input_chars_per_word: WordPiece words longer than this become `[UNK]`.
      length_bucket: None pads every batch to `sequence_length`; an int N pads it to its
        longest row rounded up to a multiple of N (see above), so short texts cost less.
      vocabulary_asset: only in the config of a layer saved in a `.keras` archive: the file of
        its assets that holds the vocabulary (`spiece.model` or `vocab.txt`), which
        `load_assets` reads. The layer is built without a vocabulary and cannot run before that.
      **kwargs: `keras.layers.Layer` arguments (`name`, ...).

    In a `.keras` archive the vocabulary is an asset (`save_assets` writes `spiece.model` or
    `vocab.txt` into the layer's assets directory, `load_assets` reads it back), not base64 text
    in `config.json`; archives written before, with the vocabulary in the config, still load.
    `get_config()` outside archive saving keeps the vocabulary, so `from_config(get_config())`
    gives a working copy.

    Raises:
      ValueError: for no or two vocabularies, a model that is not SentencePiece, a vocabulary
        without `[PAD]`/`[UNK]`/`[CLS]`/`[SEP]`/`[MASK]`, or `sequence_length < 3`.

    Example:

    >>> layer = AlbertTokenizerLayer.from_sentencepiece("30k-clean.model", sequence_length=8)  # doctest: +SKIP
    >>> layer(tf.constant(["Hello world!"]))["input_ids"]  # doctest: +SKIP
    <tf.Tensor: shape=(1, 8), dtype=int32, numpy=array([[2, 10975, 126, 187, 3, 0, 0, 0]], dtype=int32)>
    """

    def __init__(
        self,
        sentencepiece_model: Optional[Union[bytes, str]] = None,
        wordpiece_vocab: Optional[Sequence[str]] = None,
        sequence_length: int = 512,
        lower_case: bool = True,
        keep_accents: bool = False,
        normalize_quotes: bool = False,
        max_input_chars_per_word: int = DEFAULT_MAX_INPUT_CHARS_PER_WORD,
        vocabulary_asset: Optional[str] = None,
        length_bucket: Optional[int] = None,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        # Strings stay TF tensors (Keras would try to convert them to backend floats), and plain
        # Python strings are accepted as call arguments.
        self._convert_input_args = False
        self._allow_non_tensor_positional_args = True
        if vocabulary_asset is not None:
            # Restored from a `.keras` archive: the vocabulary comes from `load_assets`.
            if sentencepiece_model is not None or wordpiece_vocab is not None:
                raise ValueError("vocabulary_asset is for a config without a vocabulary; pass one or the other")
            if vocabulary_asset not in VOCABULARY_ASSET_FILES:
                raise ValueError(
                    f"vocabulary_asset must be one of {', '.join(VOCABULARY_ASSET_FILES)}, got {vocabulary_asset!r}"
                )
        elif (sentencepiece_model is None) == (wordpiece_vocab is None):
            raise ValueError("pass exactly one of sentencepiece_model and wordpiece_vocab")
        if not isinstance(sequence_length, int) or sequence_length < 3:
            raise ValueError(f"sequence_length must be an int >= 3, got {sequence_length!r}")
        if max_input_chars_per_word < 1:
            raise ValueError(f"max_input_chars_per_word must be >= 1, got {max_input_chars_per_word}")
        self.sequence_length = sequence_length
        self.lower_case = bool(lower_case)
        self.keep_accents = bool(keep_accents)
        self.normalize_quotes = bool(normalize_quotes)
        self.max_input_chars_per_word = int(max_input_chars_per_word)
        self.length_bucket = check_length_bucket(length_bucket)
        self._model_proto: Optional[bytes] = None
        self._wordpiece_tokens: Optional[Tuple[str, ...]] = None
        self._pending_vocabulary_asset = vocabulary_asset
        if sentencepiece_model is not None:
            self._init_sentencepiece(_decode_model_proto(sentencepiece_model))
        elif wordpiece_vocab is not None:
            self._init_wordpiece(tuple(wordpiece_vocab))
        self.built = True

    # Construction ---------------------------------------------------------------------------

    @classmethod
    def from_sentencepiece(cls, model_file: Union[str, os.PathLike], **kwargs: Any) -> "AlbertTokenizerLayer":
        """A layer for the SentencePiece `.model` file `model_file` (local or `gs://`)."""
        return cls(sentencepiece_model=corpus_files.read_bytes(model_file), **kwargs)

    @classmethod
    def from_wordpiece(cls, vocab_file: Union[str, os.PathLike], **kwargs: Any) -> "AlbertTokenizerLayer":
        """A layer for the WordPiece `vocab.txt` file `vocab_file` (validated by `load_vocab`)."""
        vocab = load_vocab(vocab_file)
        return cls(wordpiece_vocab=sorted(vocab, key=vocab.get), **kwargs)

    def _init_sentencepiece(self, proto: bytes) -> None:
        import sentencepiece as spm  # noqa: PLC0415

        processor = spm.SentencePieceProcessor()
        try:
            processor.LoadFromSerializedProto(proto)
        except (RuntimeError, OSError) as e:
            raise ValueError(f"sentencepiece_model is not a SentencePiece model: {e}") from None
        ids = {
            "pad_id": processor.pad_id(),
            "unk_id": processor.unk_id(),
            "cls_id": processor.PieceToId("[CLS]"),
            "sep_id": processor.PieceToId("[SEP]"),
            "mask_id": processor.PieceToId("[MASK]"),
        }
        missing = [k for k, v in ids.items() if v < 0 or (k not in ("pad_id", "unk_id") and v == ids["unk_id"])]
        if missing:
            raise ValueError(f"the SentencePiece model has no {', '.join(m[:-3] for m in missing)} piece")
        self._model_proto = proto
        self._special_ids = ids
        self._vocab_size = processor.GetPieceSize()
        self._comma_id = processor.PieceToId(",")
        # The fast kernel breaks ties between equally scored segmentations as the `sentencepiece`
        # package does; `tf_text.SentencepieceTokenizer` does not (e.g. ",000" ",000,000" swapped).
        self._sentencepiece = tf_text.FastSentencepieceTokenizer(proto)
        pieces = [processor.IdToPiece(i) for i in range(self._vocab_size)]
        self._pieces = tf.constant(pieces, tf.string)
        self._piece_ids = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(self._pieces, tf.range(self._vocab_size, dtype=tf.int32)),
            default_value=ids["unk_id"],
        )

    def _init_wordpiece(self, tokens: Tuple[str, ...]) -> None:
        if not tokens or not all(isinstance(t, str) and t and not any(c.isspace() for c in t) for t in tokens):
            raise ValueError("wordpiece_vocab must be a non-empty sequence of non-empty tokens without whitespace")
        index = {t: i for i, t in enumerate(tokens)}
        if len(index) != len(tokens):
            raise ValueError("wordpiece_vocab has duplicate tokens")
        missing = [t for t in _SPECIAL_WORDPIECE_TOKENS if t not in index]
        if missing:
            raise ValueError(f"wordpiece_vocab lacks the special tokens {missing}")
        self._wordpiece_tokens = tokens
        self._special_ids = {
            "pad_id": index["[PAD]"],
            "unk_id": index["[UNK]"],
            "cls_id": index["[CLS]"],
            "sep_id": index["[SEP]"],
            "mask_id": index["[MASK]"],
        }
        self._vocab_size = len(tokens)
        table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(tokens, tf.string), tf.range(len(tokens), dtype=tf.int64)
            ),
            default_value=-1,
        )
        longest = max(len((t[2:] if t.startswith("##") else t).encode("utf-8")) for t in tokens)
        self._wordpiece = tf_text.WordpieceTokenizer(
            table,
            suffix_indicator="##",
            # Any word of at most `max_input_chars_per_word` characters fits in 4 bytes per
            # character; longer words are replaced by [UNK] after the kernel (see `tokenize`).
            max_bytes_per_word=4 * self.max_input_chars_per_word,
            # Only a speed hint: no vocabulary piece is longer (in bytes, an upper bound on chars).
            max_chars_per_token=longest,
            token_out_type=tf.int64,
            unknown_token="[UNK]",
            split_unknown_characters=False,
        )

    # Properties -----------------------------------------------------------------------------

    @property
    def is_sentencepiece(self) -> bool:
        """True for a SentencePiece vocabulary, False for WordPiece."""
        return self._model_proto is not None

    @property
    def model_proto(self) -> Optional[bytes]:
        """The serialized SentencePiece model (None for WordPiece): what exports write as their asset."""
        return self._model_proto

    @property
    def wordpiece_tokens(self) -> Optional[Tuple[str, ...]]:
        """The WordPiece vocabulary in id order (None for SentencePiece)."""
        return self._wordpiece_tokens

    @property
    def vocabulary_loaded(self) -> bool:
        """False for a layer from a `.keras` config whose vocabulary asset Keras has not loaded yet."""
        return self._pending_vocabulary_asset is None

    # The SentencePiece parts the QA export re-runs to keep byte offsets (None for WordPiece).

    @property
    def sentencepiece(self):
        """The `tf_text.FastSentencepieceTokenizer` of the model."""
        return getattr(self, "_sentencepiece", None)

    @property
    def pieces(self) -> Optional[tf.Tensor]:
        """Every piece's text, by id (a string tensor)."""
        return getattr(self, "_pieces", None)

    @property
    def comma_id(self) -> Optional[int]:
        """The id of the piece "," (the digit-comma rule emits it)."""
        return getattr(self, "_comma_id", None)

    @property
    def vocab_size(self) -> int:
        """Number of token ids."""
        return self._vocab_size

    @property
    def special_token_ids(self) -> Dict[str, int]:
        """`pad_id`, `unk_id`, `cls_id`, `sep_id`, `mask_id`."""
        return dict(self._special_ids)

    @property
    def pad_id(self) -> int:
        return self._special_ids["pad_id"]

    @property
    def unk_id(self) -> int:
        return self._special_ids["unk_id"]

    @property
    def cls_id(self) -> int:
        return self._special_ids["cls_id"]

    @property
    def sep_id(self) -> int:
        return self._special_ids["sep_id"]

    @property
    def mask_id(self) -> int:
        return self._special_ids["mask_id"]

    # Text -> ids ----------------------------------------------------------------------------

    @staticmethod
    def _as_strings(texts: Any, what: str = "inputs") -> tf.Tensor:
        texts = tf.convert_to_tensor(texts)
        if texts.dtype != tf.string:
            raise TypeError(f"{what} must be a string tensor, got dtype {texts.dtype.name}")
        if texts.shape.rank not in (0, 1):
            raise ValueError(f"{what} must be a scalar or a [batch] vector of strings, got shape {texts.shape}")
        return texts

    def preprocess(self, texts: Any) -> tf.Tensor:
        """The normalized text the tokenizer kernel sees, for a `[batch]` string tensor.

        SentencePiece: `preprocess_text`. WordPiece: the cleaned, CJK-spaced, lower-cased and
        accent-stripped text that is then split on spaces and punctuation.
        """
        texts = self._as_strings(texts)
        if texts.shape.rank == 0:
            return self.preprocess(tf.expand_dims(texts, 0))[0]
        texts = sanitize_utf8(texts)
        if self.is_sentencepiece:
            return self._sentencepiece_preprocess(texts)
        return self._wordpiece_preprocess(texts)

    def tokenize(self, texts: Any) -> tf.RaggedTensor:
        """Token ids of each text: an int32 `RaggedTensor` `[batch, (tokens)]`.

        Args:
          texts: a `[batch]` string tensor (or anything `tf.convert_to_tensor` makes one of).
        """
        texts = self._as_strings(texts)
        if texts.shape.rank == 0:
            return self.tokenize(tf.expand_dims(texts, 0))[0]
        normalized = self.preprocess(texts)
        if self.is_sentencepiece:
            return self._sentencepiece_ids(normalized)
        return self._wordpiece_ids(normalized)

    def _sentencepiece_preprocess(self, texts: tf.Tensor) -> tf.Tensor:
        # `" ".join(text.strip().split())`: runs of `str.isspace` characters become one space,
        # and the (at most one) leading and trailing space goes.
        texts = tf.strings.regex_replace(texts, unicode_classes.re2_class("isspace") + "+", " ")
        texts = tf.strings.regex_replace(texts, "^ | $", "")
        if self.normalize_quotes:
            texts = tf.strings.regex_replace(texts, "``", '"')
            texts = tf.strings.regex_replace(texts, "''", '"')
        if not self.keep_accents:
            texts = tf_text.normalize_utf8(texts, "NFKD")
            texts = tf.strings.regex_replace(texts, unicode_classes.re2_class("combining"), "")
        if self.lower_case:
            texts = lower_utf8(texts)
        return texts

    def _sentencepiece_ids(self, texts: tf.Tensor) -> tf.RaggedTensor:
        return self._split_digit_comma(self._sentencepiece.tokenize(texts))

    def _split_digit_comma(self, ids: tf.RaggedTensor) -> tf.RaggedTensor:
        """The original `encode_pieces` rule (see `text.split_digit_comma_pieces`), vectorized.

        All matching pieces of the batch are re-encoded in one kernel call, fixed up, and
        scattered back in place of the pieces they replace. Only flat (dense) ops: ragged ops
        would make the traced graph several times larger and slower to build.
        """
        flat = ids.flat_values
        plan = self.digit_comma_plan(flat)
        values = tf.concat(
            [
                tf.gather(flat, plan.unmatched_index),
                masked(plan.sub_ids, plan.keep),
                tf.fill([plan.num_matched], tf.constant(self._comma_id, flat.dtype)),
            ],
            axis=0,
        )
        out_values = tf.scatter_nd(plan.positions[:, None], values, plan.total[None])
        return tf.RaggedTensor.from_row_splits(out_values, plan.row_splits(ids), validate=False)

    def digit_comma_plan(self, flat: tf.Tensor) -> "_DigitCommaPlan":
        """Where the digit-comma rule puts what, for the flat piece ids of a batch.

        Output layout: one slot per unmatched piece; for each matched piece `...d,`, its body's
        kept re-encoded pieces, then ",". Shared by `_split_digit_comma` and the QA export,
        which lays byte offsets out the same way.
        """
        pieces = tf.gather(self._pieces, flat)
        match = tf.strings.regex_full_match(pieces, "(?s).*" + unicode_classes.re2_class("isdigit") + ",")
        match_index = tf.cast(tf.where(match)[:, 0], tf.int32)
        matched = tf.gather(pieces, match_index)
        num_matched = tf.size(match_index)
        # Everything before the final comma, without "▁", re-encoded.
        body_length = tf.strings.length(matched) - 1
        body = tf.strings.substr(matched, tf.zeros_like(body_length), body_length)
        body = tf.strings.regex_replace(body, SPIECE_UNDERLINE, "")
        sub = self._sentencepiece.tokenize(body)
        sub_ids = sub.flat_values
        sub_splits = tf.cast(sub.row_splits, tf.int32)
        sub_rows = value_rowids(sub_splits)
        sub_starts = sub_splits[:-1]
        sub_lengths = sub_splits[1:] - sub_starts
        # First piece of each re-encoding ("" for none, which the kernel never returns).
        sub_pieces = tf.concat([tf.gather(self._pieces, sub_ids), [""]], axis=0)
        first = tf.gather(sub_pieces, tf.where(sub_lengths > 0, sub_starts, tf.size(sub_ids)))
        # A piece inside a word (no leading "▁") must not gain the word start that re-encoding
        # adds: drop a lone "▁" piece, or the "▁" of the first piece.
        fix = tf.logical_and(
            tf.not_equal(tf.strings.substr(matched, 0, 3), _UNDERLINE_BYTES),
            tf.equal(tf.strings.substr(first, 0, 3), _UNDERLINE_BYTES),
        )
        drop = tf.logical_and(fix, tf.equal(first, _UNDERLINE_BYTES))
        strip = tf.logical_and(fix, tf.logical_not(drop))
        first_length = tf.strings.length(first)
        stripped_first = tf.strings.substr(
            first, tf.where(strip, 3, 0), tf.where(strip, first_length - 3, first_length)
        )
        # A stripped piece may be out of the vocabulary: `<unk>`, as `PieceToId` gives.
        stripped_id = tf.cast(self._piece_ids.lookup(stripped_first), sub_ids.dtype)
        is_first = tf.equal(tf.range(tf.size(sub_ids)), tf.gather(sub_starts, sub_rows))
        sub_ids = tf.where(
            tf.logical_and(is_first, tf.gather(strip, sub_rows)), tf.gather(stripped_id, sub_rows), sub_ids
        )
        keep = tf.logical_not(tf.logical_and(is_first, tf.gather(drop, sub_rows)))
        keep_int = tf.cast(keep, tf.int32)
        kept = tf.math.unsorted_segment_sum(keep_int, sub_rows, num_matched)
        rank = tf.cumsum(keep_int, exclusive=True) - tf.gather(tf.cumsum(kept, exclusive=True), sub_rows)
        out_length = tf.tensor_scatter_nd_update(tf.ones_like(flat, tf.int32), match_index[:, None], kept + 1)
        out_start = tf.cumsum(out_length, exclusive=True)
        unmatched_index = tf.cast(tf.where(tf.logical_not(match))[:, 0], tf.int32)
        kept_rows = masked(sub_rows, keep)
        positions = tf.concat(
            [
                tf.gather(out_start, unmatched_index),
                tf.gather(out_start, tf.gather(match_index, kept_rows)) + masked(rank, keep),
                tf.gather(out_start, match_index) + kept,
            ],
            axis=0,
        )
        return _DigitCommaPlan(
            match_index=match_index, num_matched=num_matched, sub_ids=sub_ids, sub_rows=sub_rows, keep=keep,
            unmatched_index=unmatched_index, positions=positions, out_length=out_length,
            total=tf.reduce_sum(out_length),
        )

    def _wordpiece_preprocess(self, texts: tf.Tensor) -> tf.Tensor:
        texts = tf.strings.regex_replace(texts, unicode_classes.re2_class("bert_removed"), "")
        texts = tf.strings.regex_replace(texts, unicode_classes.re2_class("bert_whitespace"), " ")
        texts = tf.strings.regex_replace(texts, "(" + unicode_classes.re2_class("cjk") + ")", r" \1 ")
        if self.lower_case:
            texts = lower_utf8(texts)
            texts = tf_text.normalize_utf8(texts, "NFD")
            texts = tf.strings.regex_replace(texts, unicode_classes.re2_class("mn"), "")
        return texts

    def _wordpiece_ids(self, texts: tf.Tensor) -> tf.RaggedTensor:
        punctuation = unicode_classes.re2_class("bert_punctuation")
        words = tf_text.regex_split(
            texts, delim_regex_pattern=" +|" + punctuation, keep_delim_regex_pattern=punctuation
        ).with_row_splits_dtype(tf.int64)
        flat_words = words.flat_values
        num_words = tf.size(flat_words, out_type=tf.int64)
        pieces = self._wordpiece.tokenize(flat_words).with_row_splits_dtype(tf.int64)
        too_long = tf.strings.length(flat_words, unit="UTF8_CHAR") > self.max_input_chars_per_word
        unk_row = tf.RaggedTensor.from_tensor(
            tf.constant([[self.unk_id]], tf.int64), row_splits_dtype=tf.int64
        )
        candidates = tf.concat([pieces, unk_row], axis=0)
        selector = tf.where(too_long, num_words, tf.range(num_words, dtype=tf.int64))
        per_word = tf.gather(candidates, selector)
        ids = tf.RaggedTensor.from_row_splits(per_word, words.row_splits).merge_dims(1, 2)
        return tf.cast(ids, tf.int32)

    # ids -> model inputs --------------------------------------------------------------------

    def pack(self, ids_a: tf.RaggedTensor, ids_b: Optional[tf.RaggedTensor] = None, *,
             length_bucket: Any = _OWN_BUCKET) -> Dict[str, tf.Tensor]:
        """Truncates and packs token ids into the three dense model inputs.

        Args:
          ids_a: int `RaggedTensor` `[batch, (tokens)]` of the first segments.
          ids_b: the same for the second segments, or None.
          length_bucket: overrides the layer's `length_bucket` (None: fixed length).

        Returns:
          `input_ids`, `input_mask`, `segment_ids`: int32 `[batch, sequence_length]`, or
          `[batch, width]` when length-aware (see the class).
        """
        bucket = self.length_bucket if length_bucket is _OWN_BUCKET else check_length_bucket(length_bucket)
        length = self.sequence_length
        ids_a = tf.cast(ids_a, tf.int32)
        len_a = tf.cast(ids_a.row_lengths(), tf.int32)
        if ids_b is not None:
            ids_b = tf.cast(ids_b, tf.int32)
            len_b = tf.cast(ids_b.row_lengths(), tf.int32)
        else:  # no second segment: its positions are never read (and an empty ragged one costs many ops)
            len_b = tf.zeros_like(len_a)
        # As the original: the pair budget applies when b has tokens before truncation, and b
        # gets its [SEP] only when tokens are left after it.
        budget = tf.where(len_b > 0, length - 3, length - 2)
        keep_a, keep_b = truncated_lengths(len_a, len_b, budget)
        keep_a, keep_b = keep_a[:, None], keep_b[:, None]
        total = 2 + keep_a + keep_b + tf.cast(keep_b > 0, tf.int32)
        # Dense ops only: each output position reads its token from a, from b, or is special.
        dense_a = ids_a.to_tensor(default_value=0, shape=[None, length])
        dense_b = ids_b.to_tensor(default_value=0, shape=[None, length]) if ids_b is not None else tf.zeros_like(dense_a)
        width = packed_width(total, length, bucket)
        position = tf.range(width, dtype=tf.int32)[None, :]
        index_a = tf.broadcast_to(tf.clip_by_value(position - 1, 0, length - 1), tf.shape(position + keep_a))
        from_a = tf.gather(dense_a, index_a, batch_dims=1)
        from_b = tf.gather(dense_b, tf.clip_by_value(position - 2 - keep_a, 0, length - 1), batch_dims=1)
        b_start = keep_a + 2
        input_ids = tf.where(
            position == 0,
            self.cls_id,
            tf.where(
                position <= keep_a,
                from_a,
                tf.where(
                    position == keep_a + 1,
                    self.sep_id,
                    tf.where(position < b_start + keep_b, from_b, tf.where(position < total, self.sep_id, self.pad_id)),
                ),
            ),
        )
        input_mask = tf.cast(position < total, tf.int32)
        segment_ids = tf.cast(tf.logical_and(position >= b_start, position < total), tf.int32)
        static = length if bucket is None else None
        return {
            "input_ids": tf.ensure_shape(input_ids, [None, static]),
            "input_mask": tf.ensure_shape(input_mask, [None, static]),
            "segment_ids": tf.ensure_shape(segment_ids, [None, static]),
        }

    def call(self, inputs: Any) -> Dict[str, tf.Tensor]:
        """Tokenizes and packs; `inputs` is a `[batch]` string tensor or a pair `(a, b)` of them."""
        return self.tokenize_and_pack(inputs)

    def tokenize_and_pack(self, inputs: Any, *, length_bucket: Any = _OWN_BUCKET) -> Dict[str, tf.Tensor]:
        """What calling the layer does, with `length_bucket` overriding the layer's (None: fixed length)."""
        self.check_vocabulary_loaded()
        if _is_pair(inputs):
            if len(inputs) != 2:
                raise ValueError(f"a tuple input must be a pair (text_a, text_b), got {len(inputs)} items")
            text_a, text_b = self._as_strings(inputs[0], "text_a"), self._as_strings(inputs[1], "text_b")
            if text_a.shape.rank != text_b.shape.rank:
                raise ValueError(f"text_a and text_b shapes differ: {text_a.shape} vs {text_b.shape}")
        else:
            text_a, text_b = self._as_strings(inputs), None
        scalar = text_a.shape.rank == 0
        if scalar:
            text_a = tf.expand_dims(text_a, 0)
            text_b = None if text_b is None else tf.expand_dims(text_b, 0)
        ids_a = self.tokenize(text_a)
        ids_b = None
        if text_b is not None:
            check = tf.debugging.assert_equal(
                tf.shape(text_a), tf.shape(text_b), message="text_a and text_b must have the same batch size"
            )
            # Before the packing, whose own shape errors would otherwise be what a caller reads.
            with tf.control_dependencies([check] if check is not None else []):
                text_b = tf.identity(text_b)
            ids_b = self.tokenize(text_b)
        outputs = self.pack(ids_a, ids_b, length_bucket=length_bucket)
        if scalar:
            outputs = {k: v[0] for k, v in outputs.items()}
        return outputs

    def compute_output_spec(self, inputs: Any) -> Dict[str, keras.KerasTensor]:
        first = inputs[0] if _is_pair(inputs) else inputs
        shape = tuple(first.shape) + (self.sequence_length if self.length_bucket is None else None,)
        return {k: keras.KerasTensor(shape, dtype="int32") for k in OUTPUT_KEYS}

    def get_config(self) -> Dict[str, Any]:
        config = super().get_config()
        config.update(
            {
                # Keras configs are JSON: the model travels as base64 text.
                "sentencepiece_model": (
                    base64.b64encode(self._model_proto).decode("ascii") if self._model_proto else None
                ),
                "wordpiece_vocab": list(self._wordpiece_tokens) if self._wordpiece_tokens else None,
                "sequence_length": self.sequence_length,
                "lower_case": self.lower_case,
                "keep_accents": self.keep_accents,
                "normalize_quotes": self.normalize_quotes,
                "max_input_chars_per_word": self.max_input_chars_per_word,
                "length_bucket": self.length_bucket,
            }
        )
        if self._pending_vocabulary_asset is not None:
            config["vocabulary_asset"] = self._pending_vocabulary_asset
        elif _serializing_keras_archive():
            # The archive gets the vocabulary as an asset (`save_assets`), not as config text.
            config.update(sentencepiece_model=None, wordpiece_vocab=None, vocabulary_asset=self._vocabulary_file_name())
        return config

    # `.keras` assets --------------------------------------------------------------------------

    def _vocabulary_file_name(self) -> str:
        return SENTENCEPIECE_ASSET_FILE if self.is_sentencepiece else WORDPIECE_ASSET_FILE

    def check_vocabulary_loaded(self) -> None:
        if self._pending_vocabulary_asset is not None:
            raise ValueError(
                f"{self.name} has no vocabulary yet: its config says the vocabulary is the asset "
                f"{self._pending_vocabulary_asset} of a .keras archive; load the archive with "
                "keras.saving.load_model (which calls load_assets)"
            )

    def save_assets(self, dir_path: str) -> None:
        """Writes the vocabulary into `dir_path` (Keras calls this when saving a `.keras` archive).

        SentencePiece: the model's bytes as `spiece.model`; WordPiece: `vocab.txt`, one token a line.
        """
        self.check_vocabulary_loaded()
        path = os.path.join(dir_path, self._vocabulary_file_name())
        if self.is_sentencepiece:
            with open(path, "wb") as f:
                f.write(self._model_proto)
        else:
            with open(path, "w", encoding="utf-8", newline="\n") as f:
                f.write("".join(token + "\n" for token in self._wordpiece_tokens))

    def load_assets(self, dir_path: str) -> None:
        """Reads the vocabulary that `save_assets` wrote (Keras calls this when loading an archive).

        A layer whose config carried the vocabulary (archives written before the vocabulary was an
        asset) already has it and reads nothing.

        Raises:
          ValueError: the vocabulary file is not in `dir_path`, or is not a valid vocabulary.
        """
        name = self._pending_vocabulary_asset
        if name is None:
            return
        path = os.path.join(dir_path, name)
        if not os.path.isfile(path):
            raise ValueError(f"the .keras archive has no vocabulary asset {name} for the layer {self.name}")
        if name == SENTENCEPIECE_ASSET_FILE:
            with open(path, "rb") as f:
                self._init_sentencepiece(f.read())
        else:
            with open(path, encoding="utf-8") as f:
                tokens = f.read().split("\n")
            if tokens and tokens[-1] == "":
                tokens.pop()
            self._init_wordpiece(tuple(tokens))
        self._pending_vocabulary_asset = None
