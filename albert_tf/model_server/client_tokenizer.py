"""Client-side tokenization, for served models that take token ids instead of text.

A `model.tflite` served with `--prefer_tflite_model` has no tokenizer in its graph (TFLite's
builtin ops have none): its signature takes `input_ids`, `input_mask`, `segment_ids`. The client
then tokenizes with the export's own preprocessing, the `AlbertTokenizerLayer` built from

* the export's version directory (or its `assets/`): the vocabulary file and `export.json`'s
  casing, accent and quote settings and sequence length — exactly the server-side tokenizer; or
* a vocabulary file, `spiece.model` (SentencePiece) or `vocab.txt` (WordPiece), lower-cased,
  with `sequence_length` (default 128).

`encode` pads each batch only to its longest row rounded up to `length_bucket` (16) tokens.
"""

from __future__ import annotations

import json
import os
from typing import Dict, Optional, Sequence

import numpy as np

from albert_tf.tokenization.packing import bucketed_width

DEFAULT_SEQUENCE_LENGTH = 128
LENGTH_BUCKET = 16


class VocabularyError(ValueError):
    """A `--vocab` path that gives no tokenizer."""


def _assets_dir(path: str) -> Optional[str]:
    for candidate in (os.path.join(path, "assets"), path):
        if os.path.isfile(os.path.join(candidate, "export.json")):
            return candidate
    return None


def tokenizer_layer(vocab: str, sequence_length: Optional[int] = None):
    """The `AlbertTokenizerLayer` for `vocab` (an export's version or assets directory, or a
    `spiece.model` / `vocab.txt` file); `sequence_length` overrides the export's (or 128).

    Raises:
      VocabularyError: the path is neither, or the vocabulary does not load.
    """
    from albert_tf.tokenization.resolve import SENTENCEPIECE, kind_of_file, tokenizer_layer

    if os.path.isdir(vocab):
        assets = _assets_dir(vocab)
        if assets is None:
            raise VocabularyError(f"{vocab} is not an export version directory (no assets/export.json)")
        with open(os.path.join(assets, "export.json"), encoding="utf-8") as f:
            info = json.load(f)
        settings = info["tokenizer"]
        kwargs = dict(
            sequence_length=int(sequence_length or info["sequence_length"]), lower_case=settings["lower_case"],
        )
        path, kind = os.path.join(assets, settings["file"]), settings["type"]
        if kind == SENTENCEPIECE:
            kwargs.update(keep_accents=settings["keep_accents"], normalize_quotes=settings["normalize_quotes"])
    elif os.path.isfile(vocab):
        path, kind = vocab, kind_of_file(vocab)
        kwargs = dict(sequence_length=int(sequence_length or DEFAULT_SEQUENCE_LENGTH))
    else:
        raise VocabularyError(f"vocabulary not found: {vocab}")
    try:
        return tokenizer_layer(kind, path, **kwargs)
    except (ValueError, OSError) as e:
        raise VocabularyError(f"cannot build a tokenizer from {path}: {str(e).splitlines()[0]}") from None


def encode(layer, texts: Sequence[bytes], text_b: Optional[Sequence[bytes]] = None,
           length_bucket: int = LENGTH_BUCKET) -> Dict[str, np.ndarray]:
    """int32 `input_ids`, `input_mask`, `segment_ids` of the texts (pairs with `text_b`), cut to the
    batch's longest row rounded up to `length_bucket` (at most the layer's sequence length)."""
    import tensorflow as tf

    text = tf.constant(list(texts), tf.string)
    features = layer((text, tf.constant(list(text_b), tf.string)) if text_b is not None else text)
    arrays = {k: v.numpy().astype(np.int32) for k, v in features.items()}
    longest = int(arrays["input_mask"].sum(axis=1).max()) if arrays["input_mask"].size else 0
    length = bucketed_width(longest, layer.sequence_length, length_bucket)
    return {k: np.ascontiguousarray(v[:, :length]) for k, v in arrays.items()}
