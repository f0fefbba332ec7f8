"""Encoded task features as a `tf.data.Dataset`: `examples_dataset` of the feature arrays the
task readers encode (`input_ids`, `input_mask`, `segment_ids`, the labels), through a TFRecord
file (`write_features_tfrecord` / `features_tfrecord_dataset`) when they are too large to embed
in the graph.
"""

from __future__ import annotations

import logging
import os
import uuid
from typing import Any, Dict, Optional

import numpy as np

logger = logging.getLogger(__name__)

FEATURE_NAMES = ("input_ids", "input_mask", "segment_ids")

DEFAULT_MAX_IN_MEMORY_BYTES = 512 * 1024 * 1024


def write_features_tfrecord(features: Dict[str, np.ndarray], path: str) -> Dict[str, Dict[str, Any]]:
    """Writes encoded features (one tf.Example per row) to the TFRecord file `path`.

    Returns:
        The layout `{name: {"shape": [...], "dtype": "int32"|"float32"}}` that
        `features_tfrecord_dataset` needs to read the file back with the same shapes and dtypes.
    """
    import tensorflow as tf

    names = sorted(features)
    count = len(features[names[0]])
    with tf.io.TFRecordWriter(path) as writer:
        for i in range(count):
            feature = {}
            for name in names:
                value = features[name][i].reshape(-1)
                if np.issubdtype(value.dtype, np.floating):
                    feature[name] = tf.train.Feature(float_list=tf.train.FloatList(value=value))
                else:
                    feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=value))
            writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    return {name: {"shape": list(features[name].shape[1:]), "dtype": np.dtype(features[name].dtype).name} for name in names}


def features_tfrecord_dataset(paths, layout: Dict[str, Dict[str, Any]], count: Optional[int] = None):
    """An unbatched dataset of the feature dicts `write_features_tfrecord` wrote (in file order)."""
    import tensorflow as tf

    spec = {
        name: tf.io.FixedLenFeature(entry["shape"], tf.float32 if entry["dtype"].startswith("float") else tf.int64)
        for name, entry in layout.items()
    }
    dtypes = {name: tf.as_dtype(entry["dtype"]) for name, entry in layout.items()}

    def parse(record):
        parsed = tf.io.parse_single_example(record, spec)
        return {name: tf.cast(parsed[name], dtypes[name]) for name in layout}

    dataset = tf.data.TFRecordDataset(paths).map(parse, num_parallel_calls=tf.data.AUTOTUNE)
    return dataset if count is None else dataset.apply(tf.data.experimental.assert_cardinality(count))


def _spill_to_tfrecord(features: Dict[str, np.ndarray], directory: Optional[str]):
    import atexit
    import shutil
    import tempfile

    if directory is None:
        directory = tempfile.mkdtemp(prefix="albert_features_")
        atexit.register(shutil.rmtree, directory, True)
    path = os.path.join(directory, f"features-{uuid.uuid4().hex}.tfrecord")
    layout = write_features_tfrecord(features, path)
    return features_tfrecord_dataset(path, layout, count=len(next(iter(features.values()))))


def examples_dataset(
    features: Dict[str, np.ndarray],
    *,
    max_in_memory_bytes: int = DEFAULT_MAX_IN_MEMORY_BYTES,
    spill_dir: Optional[str] = None,
):
    """An unbatched `tf.data.Dataset` of feature dicts (in file order, with a known length).

    Small feature sets are sliced from memory; larger ones (over `max_in_memory_bytes`) are
    written once to a TFRecord file in `spill_dir` (default: a temporary directory removed at
    exit) and read from there, which works under every distribution strategy.
    """
    import tensorflow as tf

    lengths = {len(v) for v in features.values()}
    if len(lengths) != 1 or not lengths.pop():
        raise ValueError("features must be non-empty arrays of one common length")
    if sum(np.asarray(v).nbytes for v in features.values()) <= max_in_memory_bytes:
        return tf.data.Dataset.from_tensor_slices(dict(features))
    return _spill_to_tfrecord({k: np.asarray(v) for k, v in features.items()}, spill_dir)
