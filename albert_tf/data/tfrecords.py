"""The pretraining TFRecord format: feature spec, serialization and the tf.data reader.

Records are ``tf.train.Example`` protos with the feature names and types that
google-research/albert ``create_pretraining_data.py`` writes, so files made by that script and by
this package are interchangeable:

=========================  =======  =========================  ==================================
feature                    type     length                     contents
=========================  =======  =========================  ==================================
``input_ids``              int64    ``max_seq_length``         ids, masked, padded with 0
``input_mask``             int64    ``max_seq_length``         1 for real tokens, 0 for padding
``segment_ids``            int64    ``max_seq_length``         0 for ``[CLS] A [SEP]``, 1 for B
``token_boundary``         int64    ``max_seq_length``         1 at word starts and specials
``masked_lm_positions``    int64    ``max_predictions_per_seq``  masked positions, padded with 0
``masked_lm_ids``          int64    ``max_predictions_per_seq``  original ids, padded with 0
``masked_lm_weights``      float    ``max_predictions_per_seq``  1.0 real, 0.0 padding
``next_sentence_labels``   int64    1                          SOP label (1 = swapped/random)
=========================  =======  =========================  ==================================

`find_pretraining_data` resolves ``--data`` (a directory written by ``make-pretraining-data``, or
globs) to its files and the lengths, vocabulary size and record count its ``metadata.json``
states; `scan_record_files` reads every record once and names the file, record and byte offset of
a truncated or corrupted one, before anything is trained or written.

Serialization writes the protobuf wire format directly (packed varints from a lookup table), which
is several times faster than building ``tf.train.Example`` objects for 512-token instances and needs
no TensorFlow in Beam workers; the tests check that TensorFlow parses it into the same values.
TensorFlow is imported only by the tf.data readers and the scans; `read_records` reads a file's
records without it.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import struct
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from albert_tf.data.training_instance import TrainingInstance

INT_FEATURES = ("input_ids", "input_mask", "segment_ids", "token_boundary")
MASKED_LM_FEATURES = ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights")
LABEL_FEATURE = "next_sentence_labels"
FEATURE_NAMES = INT_FEATURES + MASKED_LM_FEATURES + (LABEL_FEATURE,)


@dataclasses.dataclass(frozen=True)
class FeatureShape:
    """The name, TF dtype name and per-example length of one feature."""

    name: str
    dtype: str
    length: int


def feature_shapes(max_seq_length: int, max_predictions_per_seq: int) -> List[FeatureShape]:
    """The stored features in the original order, with their dtypes and lengths."""
    return [
        FeatureShape("input_ids", "int64", max_seq_length),
        FeatureShape("input_mask", "int64", max_seq_length),
        FeatureShape("segment_ids", "int64", max_seq_length),
        FeatureShape("token_boundary", "int64", max_seq_length),
        FeatureShape("masked_lm_positions", "int64", max_predictions_per_seq),
        FeatureShape("masked_lm_ids", "int64", max_predictions_per_seq),
        FeatureShape("masked_lm_weights", "float32", max_predictions_per_seq),
        FeatureShape(LABEL_FEATURE, "int64", 1),
    ]


def varint(value: int) -> bytes:
    """One protobuf varint; negative int64 values take ten bytes (two's complement)."""
    if value < 0:
        value += 1 << 64
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


# Varints of 0..65535 (every id of vocabularies up to 64k pieces): a list lookup and one join
# beat NumPy here, whose per-call overhead dominates on 512-element arrays.
SMALL_VARINT_LIMIT = 1 << 16
SMALL_VARINTS: List[bytes] = [varint(i) for i in range(SMALL_VARINT_LIMIT)]


def _packed_varints(values: Sequence[int]) -> bytes:
    """The packed varint payload of int64 values."""
    values = [int(v) for v in values] if isinstance(values, np.ndarray) else values
    if not values:
        return b""
    if min(values) >= 0 and max(values) < SMALL_VARINT_LIMIT:
        table = SMALL_VARINTS
        return b"".join([table[v] for v in values])
    return b"".join([varint(int(v)) for v in values])


def _length_delimited(tag: int, payload: bytes) -> bytes:
    size = len(payload)
    if size < SMALL_VARINT_LIMIT and SMALL_VARINTS:
        return _TAGS[tag] + SMALL_VARINTS[size] + payload
    return _TAGS[tag] + varint(size) + payload


_TAGS = {tag: bytes((tag,)) for tag in (0x0A, 0x12, 0x1A)}


def _int64_feature_from_payload(packed: bytes) -> bytes:
    # Feature.int64_list (field 3) -> Int64List.value (field 1, packed).
    return _length_delimited(0x1A, _length_delimited(0x0A, packed) if packed else b"")


def _float_feature_from_payload(packed: bytes) -> bytes:
    # Feature.float_list (field 2) -> FloatList.value (field 1, packed fixed32 little-endian).
    return _length_delimited(0x12, _length_delimited(0x0A, packed) if packed else b"")


def _map_entry(name: str, feature: bytes) -> bytes:
    key = _KEYS.get(name) or _length_delimited(0x0A, name.encode("utf-8"))
    # Features.feature map entry: key (field 1), value (field 2).
    return _length_delimited(0x0A, key + _length_delimited(0x12, feature))


def _example(entries: List[bytes]) -> bytes:
    # Example.features (field 1) -> Features.feature (field 1, repeated map entries).
    return _length_delimited(0x0A, b"".join(entries))


_KEYS = {name: _length_delimited(0x0A, name.encode("ascii")) for name in FEATURE_NAMES}


def encode_example(features: Dict[str, Union[np.ndarray, Sequence[float]]]) -> bytes:
    """Serializes ``{name: values}`` as a ``tf.train.Example``, in the dict's order.

    Args:
        features: feature name to a 1-D array or list; integer (and bool) values are written as
            an int64 list, floating ones as a float list.

    Returns:
        The serialized Example.
    """
    entries = []
    for name, values in features.items():
        array = np.asarray(values)
        if array.ndim != 1:
            raise ValueError(f"feature {name!r} must be 1-D, got shape {array.shape}")
        if np.issubdtype(array.dtype, np.floating):
            feature = _float_feature_from_payload(array.astype("<f4").tobytes())
        elif np.issubdtype(array.dtype, np.integer) or array.dtype == np.bool_:
            feature = _int64_feature_from_payload(_packed_varints(array.astype(np.int64)))
        else:
            raise ValueError(f"feature {name!r} has dtype {array.dtype}; expected integers or floats")
        entries.append(_map_entry(name, feature))
    return _example(entries)


def _check_instance(instance: TrainingInstance, max_seq_length: int, max_predictions_per_seq: int) -> None:
    n = len(instance.input_ids)
    if n > max_seq_length:
        raise ValueError(f"instance has {n} tokens, more than max_seq_length={max_seq_length}")
    if len(instance.segment_ids) != n or len(instance.token_boundary) != n:
        raise ValueError("input_ids, segment_ids and token_boundary differ in length")
    num_masked = len(instance.masked_lm_positions)
    if num_masked > max_predictions_per_seq:
        raise ValueError(
            f"instance has {num_masked} masked positions, more than max_predictions_per_seq={max_predictions_per_seq}"
        )
    if len(instance.masked_lm_ids) != num_masked:
        raise ValueError("masked_lm_positions and masked_lm_ids differ in length")


def _zero_one_bytes(name: str, values: Sequence[int]) -> bytes:
    """0/1 values are their own varint bytes."""
    try:
        out = bytes(values)
    except (ValueError, TypeError):
        out = b"\xff"
    if out.translate(None, b"\x00\x01"):
        raise ValueError(f"{name} must hold only 0 and 1")
    return out


def instance_features(
    instance: TrainingInstance, max_seq_length: int, max_predictions_per_seq: int
) -> Dict[str, np.ndarray]:
    """The padded feature arrays of one instance, in the original order."""
    _check_instance(instance, max_seq_length, max_predictions_per_seq)
    n = len(instance.input_ids)
    num_masked = len(instance.masked_lm_positions)

    def padded(values: Sequence[int], length: int) -> np.ndarray:
        out = np.zeros(length, dtype=np.int64)
        out[: len(values)] = values
        return out

    input_mask = np.zeros(max_seq_length, dtype=np.int64)
    input_mask[:n] = 1
    weights = np.zeros(max_predictions_per_seq, dtype=np.float32)
    weights[:num_masked] = 1.0
    return {
        "input_ids": padded(instance.input_ids, max_seq_length),
        "input_mask": input_mask,
        "segment_ids": padded(instance.segment_ids, max_seq_length),
        "token_boundary": padded(instance.token_boundary, max_seq_length),
        "masked_lm_positions": padded(instance.masked_lm_positions, max_predictions_per_seq),
        "masked_lm_ids": padded(instance.masked_lm_ids, max_predictions_per_seq),
        "masked_lm_weights": weights,
        LABEL_FEATURE: np.array([instance.next_sentence_label], dtype=np.int64),
    }


_ONE_FLOAT = np.float32(1.0).astype("<f4").tobytes()


def serialize_instance(instance: TrainingInstance, max_seq_length: int, max_predictions_per_seq: int) -> bytes:
    """One instance as a serialized ``tf.train.Example`` in the original ALBERT format.

    Equal to ``encode_example(instance_features(...))``, built straight from the lists: padding
    zeros are one ``0x00`` byte each and 0/1 features are their own varint bytes.
    """
    _check_instance(instance, max_seq_length, max_predictions_per_seq)
    n = len(instance.input_ids)
    pad = bytes(max_seq_length - n)
    num_masked = len(instance.masked_lm_positions)
    mask_pad = bytes(max_predictions_per_seq - num_masked)
    label = instance.next_sentence_label
    entries = [
        _map_entry("input_ids", _int64_feature_from_payload(_packed_varints(instance.input_ids) + pad)),
        _map_entry("input_mask", _int64_feature_from_payload(b"\x01" * n + pad)),
        _map_entry(
            "segment_ids", _int64_feature_from_payload(_zero_one_bytes("segment_ids", instance.segment_ids) + pad)
        ),
        _map_entry(
            "token_boundary",
            _int64_feature_from_payload(_zero_one_bytes("token_boundary", instance.token_boundary) + pad),
        ),
        _map_entry(
            "masked_lm_positions", _int64_feature_from_payload(_packed_varints(instance.masked_lm_positions) + mask_pad)
        ),
        _map_entry("masked_lm_ids", _int64_feature_from_payload(_packed_varints(instance.masked_lm_ids) + mask_pad)),
        _map_entry(
            "masked_lm_weights",
            _float_feature_from_payload(_ONE_FLOAT * num_masked + bytes(4 * (max_predictions_per_seq - num_masked))),
        ),
        _map_entry(LABEL_FEATURE, _int64_feature_from_payload(varint(int(label)))),
    ]
    return _example(entries)


def encode_varints(ids: Sequence[int]) -> Tuple[bytes, List[int]]:
    """The packed varints of non-negative ids, and where each starts.

    Returns:
        ``(payload, starts)``: id ``i`` is ``payload[starts[i]:starts[i + 1]]``; ``len(starts) ==
        len(ids) + 1``. Slices of a document's payload are the payloads of its spans.
    """
    ids = ids.tolist() if isinstance(ids, np.ndarray) else list(ids)
    if ids and (min(ids) < 0 or max(ids) >= SMALL_VARINT_LIMIT):
        pieces = [varint(int(v)) for v in ids]
    else:
        table = SMALL_VARINTS
        pieces = [table[v] for v in ids]
    starts = [0]
    starts.extend(itertools.accumulate(map(len, pieces)))
    return b"".join(pieces), starts


class RecordEncoder:
    """`serialize_instance` for records whose features come already encoded: the fast path.

    The pipeline keeps every document's ids as packed varints (`encode_varints`) and its
    ``token_boundary`` flags as 0/1 bytes, so an instance's features are a few byte slices; this
    adds the padding and the protobuf headers, whose bytes depend only on the payload lengths and
    are cached. The records equal `serialize_instance`'s byte for byte (tests compare them).
    """

    def __init__(self, max_seq_length: int, max_predictions_per_seq: int):
        self.max_seq_length = max_seq_length
        self.max_predictions_per_seq = max_predictions_per_seq
        self._headers: Dict[Tuple[str, int], bytes] = {}
        self._label = [_map_entry(LABEL_FEATURE, _int64_feature_from_payload(varint(v))) for v in (0, 1)]
        self._fixed = [self._header(name, max_seq_length) for name in ("input_mask", "segment_ids", "token_boundary")]
        self._weights = self._header("masked_lm_weights", 4 * max_predictions_per_seq)

    def _header(self, name: str, payload_length: int) -> bytes:
        """The bytes of feature `name`'s map entry before a packed payload of that length."""
        header = self._headers.get((name, payload_length))
        if header is None:
            marker = b"\x00" * payload_length
            if name == "masked_lm_weights":
                entry = _map_entry(name, _float_feature_from_payload(marker))
            else:
                entry = _map_entry(name, _int64_feature_from_payload(marker))
            header = self._headers[(name, payload_length)] = entry[: len(entry) - payload_length]
        return header

    def encode(
        self,
        ids_payload: bytes,
        num_tokens: int,
        segment_a_length: int,
        token_boundary: bytes,
        masked_positions: Sequence[int],
        masked_ids_payload: bytes,
        label: int,
    ) -> bytes:
        """One serialized record.

        Args:
            ids_payload: the packed varints of the instance's (masked) ids, unpadded.
            num_tokens: how many ids that is.
            segment_a_length: tokens of segment 0 (``[CLS] A [SEP]``); the rest are segment 1.
            token_boundary: one 0/1 byte per token.
            masked_positions: the masked positions, ascending (below 2**16).
            masked_ids_payload: the packed varints of the original ids at those positions.
            label: the SOP label, 0 or 1.
        """
        seq, num_pred = self.max_seq_length, self.max_predictions_per_seq
        pad = bytes(seq - num_tokens)
        num_masked = len(masked_positions)
        mask_pad = bytes(num_pred - num_masked)
        table = SMALL_VARINTS
        ids = ids_payload + pad
        positions = b"".join([table[p] for p in masked_positions]) + mask_pad
        masked_ids = masked_ids_payload + mask_pad
        headers, header = self._headers, self._header
        mask_header, segment_header, boundary_header = self._fixed
        body = b"".join(
            [
                headers.get(("input_ids", len(ids))) or header("input_ids", len(ids)), ids,
                mask_header, b"\x01" * num_tokens, pad,
                segment_header, bytes(segment_a_length), b"\x01" * (num_tokens - segment_a_length), pad,
                boundary_header, token_boundary, pad,
                headers.get(("masked_lm_positions", len(positions))) or header("masked_lm_positions", len(positions)),
                positions,
                headers.get(("masked_lm_ids", len(masked_ids))) or header("masked_lm_ids", len(masked_ids)),
                masked_ids,
                self._weights, _ONE_FLOAT * num_masked, bytes(4 * (num_pred - num_masked)),
                self._label[label],
            ]
        )
        return _length_delimited(0x0A, body)


def _default_crc32c():
    try:
        import google_crc32c

        if google_crc32c.implementation == "c":
            return google_crc32c.value
    except ImportError:
        pass
    import crcmod.predefined

    return crcmod.predefined.mkPredefinedCrcFun("crc-32c")


_crc32c = None


def _masked_crc32c(data: bytes) -> bytes:
    global _crc32c
    if _crc32c is None:
        _crc32c = _default_crc32c()
    crc = _crc32c(data)
    return struct.pack("<I", (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF)


def frame_record(data: bytes) -> bytes:
    """One record in the TFRecord file framing: length, its masked CRC-32C, data, the data's.

    Records framed this way can be concatenated into a TFRecord file as they are.
    """
    length = struct.pack("<Q", len(data))
    return b"".join([length, _masked_crc32c(length), data, _masked_crc32c(data)])


def read_records(path: str) -> Iterator[bytes]:
    """The records of an uncompressed TFRecord file, read without TensorFlow (its framing and both
    checksums checked), for the steps that need no TensorFlow otherwise (its import costs seconds).

    Raises:
        ValueError: A truncated or corrupted record, naming the file, the record's index and its
            byte offset.
    """
    with open(path, "rb") as f:
        offset, index = 0, 0
        while True:
            header = f.read(12)
            if not header:
                return
            if len(header) < 12:
                raise ValueError(f"{path}: truncated record {index} at byte {offset}: the file ends inside its header")
            if _masked_crc32c(header[:8]) != header[8:]:
                raise ValueError(f"{path}: corrupted record {index} at byte {offset}: a checksum does not match")
            (length,) = struct.unpack("<Q", header[:8])
            body = f.read(length + 4)
            if len(body) < length + 4:
                raise ValueError(f"{path}: truncated record {index} at byte {offset}: the file ends inside it")
            if _masked_crc32c(body[:length]) != body[length:]:
                raise ValueError(f"{path}: corrupted record {index} at byte {offset}: a checksum does not match")
            yield body[:length]
            offset += 12 + length + 4
            index += 1


def feature_spec(max_seq_length: int, max_predictions_per_seq: int) -> Dict[str, "object"]:
    """``tf.io.FixedLenFeature``s for parsing the records (all eight features)."""
    import tensorflow as tf

    return {
        f.name: tf.io.FixedLenFeature([f.length], tf.float32 if f.dtype == "float32" else tf.int64)
        for f in feature_shapes(max_seq_length, max_predictions_per_seq)
    }


def parse_examples(serialized, max_seq_length: int, max_predictions_per_seq: int):
    """Parses a batch (or one) of serialized records into int32 features and float32 weights.

    Args:
        serialized: a string tensor of serialized Examples, rank 0 or 1.
        max_seq_length: the records' sequence length.
        max_predictions_per_seq: the records' masked-position capacity.

    Returns:
        A dict of the eight features; integer features cast from int64 to int32.
    """
    import tensorflow as tf

    spec = feature_spec(max_seq_length, max_predictions_per_seq)
    if serialized.shape.rank == 0:
        parsed = tf.io.parse_single_example(serialized, spec)
    else:
        parsed = tf.io.parse_example(serialized, spec)
    return {name: tf.cast(t, tf.int32) if t.dtype == tf.int64 else t for name, t in parsed.items()}


def list_files(file_pattern: Union[str, Sequence[str]]) -> List[str]:
    """The sorted files matching one or more glob patterns (or comma-separated ones).

    Raises:
        FileNotFoundError: a pattern matches nothing.
    """
    import tensorflow as tf

    patterns = [file_pattern] if isinstance(file_pattern, str) else list(file_pattern)
    patterns = [p for item in patterns for p in item.split(",") if p]
    if not patterns:
        raise FileNotFoundError("no file pattern given")
    files = []
    for pattern in patterns:
        matched = tf.io.gfile.glob(pattern)
        if not matched:
            raise FileNotFoundError(f"no file matches {pattern!r}")
        files.extend(matched)
    return sorted(set(files))


# --- checking the data before training ----------------------------------------------------------

METADATA_FILE = "metadata.json"  # as `albert_tf.data.pipeline_output` names it (not imported: Beam is heavy)
FORMAT_NAME = "albert-pretraining-tfrecord"


class PretrainingDataError(ValueError):
    """Pretraining data that cannot be trained on: unreadable metadata, missing, truncated or
    corrupted record files. The message names the file (and the record and byte offset)."""


@dataclasses.dataclass(frozen=True)
class PretrainingData:
    """The record files behind ``--data`` and what their ``metadata.json`` says about them.

    Attributes:
        files: The TFRecord files, sorted.
        metadata_path: The ``metadata.json`` read, or None (plain files, e.g. the original script's).
        max_seq_length: The records' sequence length, if the metadata states it.
        max_predictions_per_seq: The records' masked-position capacity, likewise.
        vocab_size: Size of the vocabulary the records were made with, likewise.
        num_records: Records in all the metadata's files, when `files` are exactly those.
        tokenizer: The tokenizer the records were made with, as the metadata's ``tokenizer``
            entry (``spm_model`` or ``vocab_file``, ``lower_case``), if it has one.
    """

    files: List[str]
    metadata_path: Optional[str] = None
    max_seq_length: Optional[int] = None
    max_predictions_per_seq: Optional[int] = None
    vocab_size: Optional[int] = None
    num_records: Optional[int] = None
    tokenizer: Optional[Dict[str, Any]] = None


def _metadata_int(metadata: Dict[str, Any], path: str, *keys: str) -> Optional[int]:
    value: Any = metadata
    for key in keys:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise PretrainingDataError(f"{path}: {'.'.join(keys)} must be a positive integer, got {value!r}")
    return value


def _read_metadata(path: str) -> Dict[str, Any]:
    import tensorflow as tf

    try:
        with tf.io.gfile.GFile(path, "r") as f:
            metadata = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise PretrainingDataError(f"{path} is not valid JSON: {e}") from None
    if not isinstance(metadata, dict):
        raise PretrainingDataError(f"{path} must hold a JSON object, got {type(metadata).__name__}")
    if metadata.get("format", FORMAT_NAME) != FORMAT_NAME:
        raise PretrainingDataError(f"{path}: format {metadata['format']!r} is not {FORMAT_NAME!r}")
    return metadata


def find_pretraining_data(data: str) -> PretrainingData:
    """The record files of `data` and the facts its ``metadata.json`` states.

    Args:
        data: A directory written by ``make-pretraining-data`` (its ``metadata.json`` lists the
            shards; without one, the ``*.tfrecord`` files directly in it), or one or more
            comma-separated globs; the metadata is read when all matches share a directory that
            has one.

    Raises:
        FileNotFoundError: Nothing matches, or a file the metadata lists is missing.
        PretrainingDataError: The metadata is unreadable or states impossible values.
    """
    import tensorflow as tf

    directory = data.rstrip("/") if "," not in data else None
    if directory and tf.io.gfile.isdir(directory):
        metadata_path = os.path.join(directory, METADATA_FILE)
        metadata = _read_metadata(metadata_path) if tf.io.gfile.exists(metadata_path) else None
        if metadata is not None and isinstance(metadata.get("files"), list):
            files = sorted(os.path.join(directory, str(name)) for name in metadata["files"])
            missing = [f for f in files if not tf.io.gfile.exists(f)]
            if missing:
                raise FileNotFoundError(f"{missing[0]} is missing: {metadata_path} lists {len(files)} file(s)")
        else:
            files = sorted(tf.io.gfile.glob(os.path.join(directory, "*.tfrecord")))
        if not files:
            raise FileNotFoundError(f"{directory} holds no *.tfrecord files")
    else:
        files = list_files(data)
        parents = {os.path.dirname(f) for f in files}
        metadata_path = os.path.join(parents.pop(), METADATA_FILE) if len(parents) == 1 else None
        if metadata_path and not tf.io.gfile.exists(metadata_path):
            metadata_path = None
        metadata = _read_metadata(metadata_path) if metadata_path else None
    if metadata is None:
        return PretrainingData(files=files)
    listed = metadata.get("files")
    # The count covers the metadata's files; a glob that matches only some of them says nothing.
    complete = isinstance(listed, list) and sorted(map(str, listed)) == sorted(os.path.basename(f) for f in files)
    tokenizer = metadata.get("tokenizer")
    return PretrainingData(
        files=files,
        metadata_path=metadata_path,
        max_seq_length=_metadata_int(metadata, metadata_path, "instance_config", "max_seq_length"),
        max_predictions_per_seq=_metadata_int(metadata, metadata_path, "instance_config", "max_predictions_per_seq"),
        vocab_size=_metadata_int(metadata, metadata_path, "vocab", "vocab_size"),
        num_records=_metadata_int(metadata, metadata_path, "counters", "instances") if complete else None,
        tokenizer=tokenizer if isinstance(tokenizer, dict) else None,
    )


@dataclasses.dataclass(frozen=True)
class RecordFileScan:
    """One record file read to its end.

    Attributes:
        path: The file.
        num_records: Its records.
        num_bytes: Its size.
        first_record: Its first record (None for an empty file).
    """

    path: str
    num_records: int
    num_bytes: int
    first_record: Optional[bytes]


def scan_record_file(path: str) -> RecordFileScan:
    """Reads every record of an uncompressed TFRecord file, checking its framing and checksums.

    A record is a length, the length's CRC-32C, the data and the data's CRC-32C; TensorFlow's
    reader checks all of it in C++ (hundreds of MB/s), without starting TensorFlow's runtime, so
    this may run before a `tf.distribute` strategy is created.

    Raises:
        PretrainingDataError: A truncated or corrupted record, naming the file, the record's
            index and its byte offset.
    """
    import tensorflow as tf
    # The random-access reader returns each record's end offset; the public `tf_record_iterator`
    # is deprecated and says only where reading stopped, `TFRecordDataset` starts the runtime.
    from tensorflow.python.lib.io import tf_record

    try:
        size = tf.io.gfile.stat(path).length
        reader = tf_record.tf_record_random_reader(path)
    except (tf.errors.OpError, OSError) as e:
        raise PretrainingDataError(f"{path} cannot be read: {getattr(e, 'message', e)}") from None
    offset, count, first = 0, 0, None
    while offset < size:
        try:
            record, offset_after = reader.read(offset)
        except tf.errors.DataLossError as e:
            if "truncated" in e.message:
                raise PretrainingDataError(
                    f"{path}: truncated record {count} at byte {offset}: the file ends ({size} bytes) inside it"
                ) from None
            raise PretrainingDataError(
                f"{path}: corrupted record {count} at byte {offset}: a checksum does not match"
            ) from None
        except IndexError:  # fewer bytes left than a record header
            raise PretrainingDataError(
                f"{path}: truncated record {count} at byte {offset}: the file ends ({size} bytes) inside its header"
            ) from None
        if first is None:
            first = bytes(record)
        offset = offset_after
        count += 1
    return RecordFileScan(path, count, size, first)


def first_record(files: Sequence[str]) -> Optional[Tuple[str, bytes]]:
    """`(path, record)`: the first record of the first non-empty file, reading no further.

    For data too large to scan; damage beyond that record shows only in training.
    """
    import tensorflow as tf
    from tensorflow.python.lib.io import tf_record  # as in `scan_record_file`

    for path in files:
        try:
            return path, bytes(tf_record.tf_record_random_reader(path).read(0)[0])
        except IndexError:  # no record in the file
            continue
        except (tf.errors.OpError, OSError):
            scan_record_file(path)  # raises, naming the damage
            raise PretrainingDataError(f"{path} cannot be read") from None
    return None


def scan_record_files(files: Sequence[str], expected_records: Optional[int] = None) -> List[RecordFileScan]:
    """`scan_record_file` for every file; `expected_records` (the metadata's count) is checked too.

    Raises:
        PretrainingDataError: A damaged file, or a total that differs from `expected_records`
            (a file cut at a record boundary reads as a valid, shorter file).
    """
    scans = [scan_record_file(path) for path in files]
    total = sum(s.num_records for s in scans)
    if expected_records is not None and total != expected_records:
        counts = ", ".join(f"{os.path.basename(s.path)}: {s.num_records}" for s in scans)
        raise PretrainingDataError(
            f"the record files hold {total} records but {METADATA_FILE} counts {expected_records} "
            f"(a file was truncated or replaced?): {counts}"
        )
    return scans


def make_pretraining_dataset(
    file_pattern: Union[str, Sequence[str]],
    max_seq_length: int,
    max_predictions_per_seq: int,
    batch_size: int,
    *,
    is_training: bool = True,
    seed: Optional[int] = None,
    shuffle_buffer_size: int = 10000,
    num_epochs: Optional[int] = None,
    drop_remainder: Optional[bool] = None,
    cycle_length: int = 8,
    input_context=None,
    compression_type: Optional[str] = None,
):
    """A batched tf.data pipeline over pretraining TFRecords, ready for ``model.fit``.

    Args:
        file_pattern: a glob (or comma-separated globs, or a list) of TFRecord files.
        max_seq_length: the records' sequence length.
        max_predictions_per_seq: the records' masked-position capacity.
        batch_size: examples per batch (per replica when `input_context` is given).
        is_training: shuffle files and records and repeat; in evaluation, read in order once.
        seed: makes the shuffles reproducible.
        shuffle_buffer_size: records held for shuffling.
        num_epochs: passes over the data; None repeats forever in training, reads once otherwise.
        drop_remainder: drop a last partial batch; defaults to `is_training` (static shapes).
        cycle_length: files read in parallel in training.
        input_context: a ``tf.distribute.InputContext``; files are sharded by input pipeline.
        compression_type: ``"GZIP"``, ``"ZLIB"`` or None.

    Returns:
        A ``tf.data.Dataset`` of dicts: ``input_ids``, ``input_mask``, ``segment_ids``,
        ``token_boundary`` ``[batch, max_seq_length]``, ``masked_lm_positions``, ``masked_lm_ids``
        ``[batch, max_predictions_per_seq]`` (int32), ``masked_lm_weights`` (float32) and
        ``next_sentence_labels`` ``[batch, 1]`` (int32).
    """
    import tensorflow as tf

    files = list_files(file_pattern)
    if drop_remainder is None:
        drop_remainder = is_training
    dataset = tf.data.Dataset.from_tensor_slices(files)
    if input_context is not None and input_context.num_input_pipelines > 1:
        if len(files) < input_context.num_input_pipelines:
            raise ValueError(
                f"{len(files)} files cannot be sharded over {input_context.num_input_pipelines} input pipelines"
            )
        dataset = dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    if is_training:
        dataset = dataset.shuffle(len(files), seed=seed, reshuffle_each_iteration=True)
        dataset = dataset.repeat(num_epochs)
    elif num_epochs is not None:
        dataset = dataset.repeat(num_epochs)
    dataset = dataset.interleave(
        lambda f: tf.data.TFRecordDataset(f, compression_type=compression_type),
        # In evaluation the files are read one after another: records come in file order.
        cycle_length=min(cycle_length, len(files)) if is_training else 1,
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=not is_training or seed is not None,
    )
    if is_training:
        dataset = dataset.shuffle(shuffle_buffer_size, seed=seed, reshuffle_each_iteration=True)
    dataset = dataset.batch(batch_size, drop_remainder=drop_remainder)
    dataset = dataset.map(
        lambda records: parse_examples(records, max_seq_length, max_predictions_per_seq),
        num_parallel_calls=tf.data.AUTOTUNE,
    )
    return dataset.prefetch(tf.data.AUTOTUNE)
