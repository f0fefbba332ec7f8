"""`RequestLengths`: the length bucket of a request, known on the host before it is batched.

A length-aware export (`export.json`'s `length_bucket`) pads each batch to its longest row
rounded up to `length_bucket` pieces; the bucket of a request is that padded width for the
request alone (`albert_tf.tokenization.packing.bucketed_width`). It is

* for a variable-length `tokens` request (`[-1, -1]` token inputs): the ids' length;
* for a raw-text request (inputs `text`, or `text` and `text_b`, string `[-1]`): the piece count
  of its longest row, `[CLS]`/`[SEP]` included, from the export's own vocabulary asset and
  casing settings with the Python tokenizer (`albert_tf.tokenization.python_tokenizer`, tens of
  microseconds a text);
* unknown (None) for every other signature, and for text the tokenizer cannot read: such
  requests are batched in arrival order.

A bucket only decides which requests share a batch, never an answer: a piece count a little
off from the graph's own tokenization costs some padding, not correctness.
"""

from __future__ import annotations

import logging
import os
from typing import Dict, Optional

import numpy as np

from albert_tf.model_server.batching import variable_length_signature
from albert_tf.tokenization.packing import bucketed_width

logger = logging.getLogger(__name__)

_TEXT_INPUTS = ({"text"}, {"text", "text_b"})
_DT_STRING = 7  # tensorflow DataType DT_STRING, as a SignatureDef's TensorInfo records it


class RequestLengths:
    """The length buckets of one export's requests.

    Args:
      length_bucket: the export's packing granularity (pieces).
      sequence_length: the export's longest packed row.
      tokenizer: a Python tokenizer with `tokenize(text) -> pieces`, or None (text requests then
        have no known length).
    """

    def __init__(self, length_bucket: int, sequence_length: int, tokenizer=None):
        self.length_bucket = int(length_bucket)
        self.sequence_length = int(sequence_length)
        self.tokenizer = tokenizer

    @classmethod
    def of_version(cls, path: str) -> Optional["RequestLengths"]:
        """The lengths of the export at `path`, or None when it is not length-aware (no
        `export.json`, or a fixed-length export): every batch there is padded to the same width."""
        from albert_tf.tokenization.resolve import python_tokenizer
        from albert_tf.weight_index import read_export_info

        try:
            info = read_export_info(path)
        except (OSError, ValueError):
            return None
        if not isinstance(info, dict) or not info.get("length_bucket") or not info.get("sequence_length"):
            return None
        settings = info.get("tokenizer") or {}
        tokenizer = None
        try:
            options = {"lower_case": settings["lower_case"]}
            if settings["type"] == "sentencepiece":
                options.update(keep_accents=settings["keep_accents"], normalize_quotes=settings["normalize_quotes"])
            tokenizer = python_tokenizer(settings["type"], os.path.join(path, "assets", settings["file"]), **options)
        except (KeyError, TypeError, ValueError, OSError) as e:
            logger.warning("%s: text requests are batched in arrival order: no tokenizer to count pieces (%s)",
                           path, str(e).splitlines()[0] if str(e) else type(e).__name__)
        return cls(info["length_bucket"], info["sequence_length"], tokenizer)

    def length(self, definition, inputs: Dict[str, np.ndarray]) -> Optional[int]:
        """The packed length of a request's longest row (at most the sequence length), or None
        when it cannot be known."""
        if variable_length_signature(definition):
            widths = {np.shape(value)[1] for value in inputs.values() if np.ndim(value) == 2}
            return widths.pop() if len(widths) == 1 else None
        names = set(definition.inputs)
        if self.tokenizer is None or names not in _TEXT_INPUTS:
            return None
        if any(definition.inputs[n].dtype != _DT_STRING or np.ndim(inputs[n]) != 1 for n in names):
            return None
        try:
            rows = [len(self.tokenizer.tokenize(t)) + 2 for t in inputs["text"]]
            if "text_b" in names:
                rows = [n + len(self.tokenizer.tokenize(t)) + 1 for n, t in zip(rows, inputs["text_b"])]
        except (ValueError, TypeError, UnicodeError):
            return None  # the graph refuses such text itself; the batcher only needs to place it
        return min(max(rows), self.sequence_length) if rows else None  # longer texts are truncated

    def bucket(self, definition, inputs: Dict[str, np.ndarray]) -> Optional[int]:
        """The width a batch of this request alone is padded to (its bucket), or None."""
        length = self.length(definition, inputs)
        if length is None:
            return None
        return bucketed_width(length, self.sequence_length, self.length_bucket)

    def next_bucket(self, bucket: int) -> Optional[int]:
        """The next longer bucket, or None above the longest."""
        if bucket >= self.sequence_length:
            return None
        return bucketed_width(bucket + 1, self.sequence_length, self.length_bucket)
