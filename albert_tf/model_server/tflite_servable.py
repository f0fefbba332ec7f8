"""`TfliteServable`: a version's `model.tflite` served in place of its SavedModel.

TF Serving's `--prefer_tflite_model` loads `<version>/model.tflite` when there is one and serves its
signature (TFLite builtin ops only) for Predict; `albert-tf serve --prefer-tflite-model` does the
same through `albert_tf.export.tflite.TfliteModel`. The model's one signature is served under its
key, `tokens`, as the SavedModel's: the same inputs (`input_ids`, `input_mask`, `segment_ids`,
int32, here `[-1, -1]`: any length) and output names. GetModelMetadata shows that signature, so a
client sees it takes ids, not text. Classify and Regress have no TFLite signature (TF Serving's
TFLite path serves Predict only). The version's warmup file is replayed on it, as TF Serving
does (an export with `tflite=` writes only the `tokens` request there, which both run).
"""

from __future__ import annotations

import os
from typing import Dict, Iterable, Optional

import numpy as np

from albert_tf.model_server.servable import (
    FAILED_PRECONDITION,
    INVALID_ARGUMENT,
    ServingError,
    SessionServable,
)

TFLITE_FILE = "model.tflite"


def has_tflite_model(path: str) -> bool:
    return os.path.isfile(os.path.join(path, TFLITE_FILE))


def _signature_def(model) -> "meta_graph_pb2.SignatureDef":  # noqa: F821
    import tensorflow as tf
    from tensorflow.core.protobuf import meta_graph_pb2

    from albert_tf.export.signatures import PREDICT_METHOD

    definition = meta_graph_pb2.SignatureDef(method_name=PREDICT_METHOD)
    for target, details in ((definition.inputs, model.input_details), (definition.outputs, model.output_details)):
        for name, detail in details.items():
            dtype = tf.string if np.dtype(detail["dtype"]).kind in "OSU" else tf.as_dtype(detail["dtype"])
            info = target[name]
            info.name = detail["name"]
            info.dtype = dtype.as_datatype_enum
            for size in detail["shape_signature"]:
                info.tensor_shape.dim.add(size=int(size))
    return definition


class TfliteServable(SessionServable):
    """A loaded `model.tflite` with `SessionServable`'s interface (signatures, checks, `run`).

    Args:
      path: the version directory holding `model.tflite`.
      num_threads: interpreter threads (default LiteRT's).

    Raises:
      ServingError: the file does not load (`FAILED_PRECONDITION`).
    """

    def __init__(self, path: str, num_threads: Optional[int] = None):
        from albert_tf.export.tflite import TfliteModel

        self.path = path
        try:
            self.model = TfliteModel(os.path.join(path, TFLITE_FILE), num_threads=num_threads)
        except ValueError as e:
            raise ServingError(FAILED_PRECONDITION, f"Failed to load TFLite model at {path}: {e}") from None
        self.signature_defs = {self.model.signature_key: _signature_def(self.model)}
        self._closed = False

    def run(self, signature_name: Optional[str], inputs: Dict[str, np.ndarray], output_filter: Iterable[str] = ()) -> Dict[str, np.ndarray]:
        """Runs the TFLite signature on numpy inputs; returns `{output_name: array}` (ServingError on failure)."""
        _, wanted = self.checked_request(signature_name, inputs, output_filter)
        try:
            outputs = self.model(inputs)
        except ValueError as e:
            raise ServingError(INVALID_ARGUMENT, str(e)) from None
        return {name: outputs[name] for name in wanted}

    def close(self) -> None:
        self._closed = True
