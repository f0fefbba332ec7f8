"""`OpenVinoServable`: a version's OpenVINO IR served in place of its SavedModel.

`albert-tf serve --prefer-openvino-model` serves a version `<base>/<model>/<version>` from the IR
that `albert-tf export --openvino ...` wrote beside it (`<base>/openvino/<model>/<version>/model.xml`,
`albert_tf.export.openvino`), as `--prefer-tflite-model` serves a `model.tflite`. The IR takes raw
text, so its one signature is the SavedModel's `serving_default`: input `text` (string `[-1]`),
the same output names (`probabilities`, `logits`, `label_id`, `label` / `score`). GetModelMetadata
shows that signature; `tokens`, `classify` and `regress` have no IR (answered as an unknown
signature), and the version's warmup replays only its `serving_default` requests. The compiled
model runs with the inference precision hint of its export mode; `num_threads` sets the CPU
plugin's `INFERENCE_NUM_THREADS`.
"""

from __future__ import annotations

import os
import threading
from typing import Dict, Iterable, Optional

import numpy as np

from albert_tf.model_server.servable import (
    FAILED_PRECONDITION,
    INVALID_ARGUMENT,
    ServingError,
    SessionServable,
)

SIGNATURE_KEY = "serving_default"
_TF_DTYPES = {"string": "string", "f32": "float32", "i32": "int32", "i64": "int64", "boolean": "bool"}


def ir_path(path: str) -> str:
    """The `model.xml` of `path`: an IR version directory itself, or the SavedModel version
    directory it was exported beside."""
    from albert_tf.export.openvino import MODEL_XML, beside

    own = os.path.join(path, MODEL_XML)
    return own if os.path.isfile(own) else os.path.join(beside(path), MODEL_XML)


def has_openvino_model(path: str) -> bool:
    return os.path.isfile(ir_path(path))


def _signature_def(compiled) -> "meta_graph_pb2.SignatureDef":  # noqa: F821
    import tensorflow as tf
    from tensorflow.core.protobuf import meta_graph_pb2

    from albert_tf.export.signatures import PREDICT_METHOD

    definition = meta_graph_pb2.SignatureDef(method_name=PREDICT_METHOD)
    for target, ports in ((definition.inputs, compiled.inputs), (definition.outputs, compiled.outputs)):
        for port in ports:
            name = port.get_any_name()
            info = target[name]
            info.name = f"{name}:0"
            info.dtype = tf.as_dtype(_TF_DTYPES[port.get_element_type().get_type_name()]).as_datatype_enum
            for dim in port.get_partial_shape():
                info.tensor_shape.dim.add(size=dim.get_length() if dim.is_static else -1)
    return definition


class OpenVinoServable(SessionServable):
    """A compiled OpenVINO text model with `SessionServable`'s interface (signatures, checks, `run`).

    Args:
      path: a SavedModel version directory with an IR beside it, or the IR version directory.
      num_threads: CPU inference threads (default: OpenVINO's, all cores).

    Raises:
      ServingError: OpenVINO is not installed or the IR does not load (`FAILED_PRECONDITION`).
    """

    # The warmup of the SavedModel version also holds `tokens` / `classify` requests: only the
    # signatures this servable has are replayed.
    replays_own_signatures_only = True

    def __init__(self, path: str, num_threads: Optional[int] = None):
        from albert_tf.export.openvino import OpenVinoExportError, compile_model

        if num_threads is not None and (isinstance(num_threads, bool) or int(num_threads) < 1):
            raise ServingError(FAILED_PRECONDITION, f"num_threads must be a positive integer, got {num_threads!r}")
        self.path = path
        self.model_path = ir_path(path)
        try:
            self.compiled = compile_model(self.model_path, num_threads=num_threads)
        except OpenVinoExportError as e:
            raise ServingError(FAILED_PRECONDITION, str(e)) from None
        except RuntimeError as e:  # OpenVINO's read/compile errors
            first = next((line for line in str(e).splitlines() if line.strip()), type(e).__name__)
            raise ServingError(FAILED_PRECONDITION, f"Failed to load OpenVINO model at {self.model_path}: {first}") from None
        self.signature_defs = {SIGNATURE_KEY: _signature_def(self.compiled)}
        self._requests = threading.local()
        self._closed = False

    def _request(self):
        # One infer request per thread: a request is not thread-safe, the compiled model is.
        request = getattr(self._requests, "request", None)
        if request is None:
            request = self._requests.request = self.compiled.create_infer_request()
        return request

    def run(self, signature_name: Optional[str], inputs: Dict[str, np.ndarray], output_filter: Iterable[str] = ()) -> Dict[str, np.ndarray]:
        """Runs the IR on numpy inputs; returns `{output_name: array}` (ServingError on failure)."""
        _, wanted = self.checked_request(signature_name, inputs, output_filter)
        feeds = {}
        for name, value in inputs.items():
            if value.dtype.kind in "OSU":
                # Bytes as the SavedModel reads them: UTF-8, invalid sequences replaced.
                value = np.array([v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v) for v in value.ravel()],
                                 dtype=str).reshape(value.shape)
            feeds[name] = value
        try:
            result = self._request().infer(feeds)
        except RuntimeError as e:
            first = next((line for line in str(e).splitlines() if line.strip()), type(e).__name__)
            raise ServingError(INVALID_ARGUMENT, f"the OpenVINO model failed: {first}") from None
        outputs = {}
        for port in self.compiled.outputs:
            name = port.get_any_name()
            if name in wanted:
                array = np.array(result[port], copy=True)
                if array.dtype.kind == "U":  # strings leave as bytes, as from a SavedModel
                    array = np.array([s.encode("utf-8") for s in array.ravel()], dtype=object).reshape(array.shape)
                outputs[name] = array
        return outputs

    def close(self) -> None:
        self._closed = True
