"""`SessionServable`: one SavedModel version loaded the way TF Serving's C++ server loads it.

TF Serving does not use `tf.saved_model.load`: it imports the MetaGraphDef tagged `serve` into a
graph, restores the variables with the graph's `saver_def`, runs the init op
(`__saved_model_init_op`, which initializes the lookup tables), and then runs signatures with
`Session::Run` on the tensor names of the SignatureDef. `tf.compat.v1.saved_model.loader.load`
does exactly those steps, so a model that works here works there (given the same ops).

`run(signature_name, inputs)` validates the inputs against the SignatureDef the way TF Serving's
`predict_util` does (missing or extra inputs, dtypes) and raises `ServingError` with TF Serving's
status code and message. It also refuses negative token ids (`INDEX_INPUTS`), which the graph
would not.
"""

from __future__ import annotations

import logging
from typing import Dict, Iterable, Optional

import numpy as np

OK = "OK"
INVALID_ARGUMENT = "INVALID_ARGUMENT"
NOT_FOUND = "NOT_FOUND"
FAILED_PRECONDITION = "FAILED_PRECONDITION"
UNAVAILABLE = "UNAVAILABLE"
INTERNAL = "INTERNAL"
RESOURCE_EXHAUSTED = "RESOURCE_EXHAUSTED"


class ServingError(Exception):
    """A request failure with a TF Serving (gRPC) status code name and message."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


class _RestoreLogFilter(logging.Filter):
    """Drops the TF1 saver's "Restoring parameters from ..." record: the manager logs each load
    once, with the model and version ("loaded model M version N"), and TensorFlow's logger both
    prints the record itself and passes it on to the root logger's handlers (twice on screen)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Restoring parameters from")


_RESTORE_LOG_FILTER = _RestoreLogFilter()


def _quiet_restore_log() -> None:
    tf_logger = logging.getLogger("tensorflow")
    if _RESTORE_LOG_FILTER not in tf_logger.filters:
        tf_logger.addFilter(_RESTORE_LOG_FILTER)


def _import_custom_ops() -> None:
    # The tokenizer kernels live in tensorflow-text's op libraries, loaded by importing it; TF
    # Serving needs the same libraries (see serving/README.md).
    import tensorflow_text  # noqa: F401


# Integer inputs that index embedding tables. The exported graphs look them up with Keras
# `ops.take`, which wraps a negative index around to the end of the table as numpy does, where an
# id >= the table size fails in the gather ("indices[0,0] = 99999 is not in [0, 48)"): a negative
# id would silently read another token's row. TF Serving runs the same graph, so there the check
# belongs in the graph; the stand-in refuses negative ids as the gather refuses large ones.
INDEX_INPUTS = ("input_ids", "segment_ids")

# TensorFlow's C++ `DataTypeString` names, which TF Serving's messages use, where Python's differ.
_CPP_DTYPE_NAMES = {"float32": "float", "float64": "double", "float16": "half"}


def _dtype_name(dtype) -> str:
    return _CPP_DTYPE_NAMES.get(dtype.name, dtype.name)


def _format_names(names: Iterable[str]) -> str:
    return "{" + ", ".join(sorted(names)) + "}"


class SessionServable:
    """A loaded SavedModel version: a graph, a session, the SignatureDefs.

    Args:
      path: the version directory (`.../<model>/<version>`).
      tags: MetaGraphDef tags (TF Serving's default `serve`).

    Raises:
      ServingError: the SavedModel cannot be loaded (`FAILED_PRECONDITION`, TF's message).
    """

    def __init__(self, path: str, tags=("serve",)):
        import tensorflow as tf

        _import_custom_ops()
        _quiet_restore_log()
        self.path = path
        self.graph = tf.Graph()
        config = tf.compat.v1.ConfigProto(allow_soft_placement=True)
        self.session = tf.compat.v1.Session(graph=self.graph, config=config)
        try:
            # TF Serving's own loader, on purpose; its deprecation notice is not the user's to act on.
            from tensorflow.python.util import deprecation

            with self.graph.as_default(), deprecation.silence():
                self.meta_graph = tf.compat.v1.saved_model.loader.load(self.session, list(tags), path)
        except (tf.errors.OpError, OSError, RuntimeError, ValueError, KeyError) as e:
            self.session.close()
            raise ServingError(FAILED_PRECONDITION, f"Failed to load SavedModel at {path}: {e}") from None
        self.signature_defs = dict(self.meta_graph.signature_def)
        self.signature_defs.pop("__saved_model_init_op", None)
        self._closed = False

    def signature(self, name: Optional[str]):
        """The SignatureDef `name` ("" or None: `serving_default`), else ServingError."""
        key = name or "serving_default"
        if key not in self.signature_defs:
            raise ServingError(INVALID_ARGUMENT, f'Serving signature key "{key}" not found.')
        return self.signature_defs[key]

    def validate_inputs(self, signature_name: Optional[str], inputs: Dict[str, np.ndarray]) -> None:
        """TF Serving's input checks: exact input names, then each input's dtype and rank."""
        import tensorflow as tf

        signature = self.signature(signature_name)
        expected, sent = set(signature.inputs), set(inputs)
        if expected != sent:
            raise ServingError(
                INVALID_ARGUMENT,
                f"input size does not match signature: {len(sent)}!={len(expected)} "
                f"len({_format_names(sent)}) != len({_format_names(expected)}). "
                f"Sent extra: {_format_names(sent - expected)}. "
                f"Missing but required: {_format_names(expected - sent)}.",
            )
        for index, name in enumerate(sorted(expected)):
            info = signature.inputs[name]
            want = tf.dtypes.as_dtype(info.dtype)
            value = inputs[name]
            got = tf.dtypes.as_dtype(value.dtype) if value.dtype != object else tf.string
            if got != want:
                raise ServingError(
                    INVALID_ARGUMENT, f"Expects arg[{index}] to be {_dtype_name(want)} but {_dtype_name(got)} is provided"
                )
            if not info.tensor_shape.unknown_rank:
                dims = [d.size for d in info.tensor_shape.dim]
                if value.ndim != len(dims) or any(d >= 0 and d != s for d, s in zip(dims, value.shape)):
                    shape = "[" + ",".join(str(d) for d in dims) + "]"
                    raise ServingError(
                        INVALID_ARGUMENT,
                        f"input {name} has shape [{','.join(str(s) for s in value.shape)}], "
                        f"the signature expects {shape}",
                    )
            if name in INDEX_INPUTS and want.is_integer and value.size and value.min() < 0:
                where = np.argwhere(value < 0)[0]
                raise ServingError(
                    INVALID_ARGUMENT,
                    f"input {name}: indices[{','.join(str(i) for i in where)}] = {value[tuple(where)]} is negative; "
                    "ids index the embedding table and must be >= 0",
                )

    def checked_request(self, signature_name: Optional[str], inputs: Dict[str, np.ndarray], output_filter: Iterable[str]):
        """`(signature, the output names to return)` of a request, after the checks every runtime
        makes (the signature, the inputs, the outputs asked for, a servable still loaded)."""
        signature = self.signature(signature_name)
        self.validate_inputs(signature_name, inputs)
        wanted = list(output_filter) or sorted(signature.outputs)
        for name in wanted:
            if name not in signature.outputs:
                raise ServingError(INVALID_ARGUMENT, f"output tensor alias not found in signature: {name}")
        if self._closed:
            raise ServingError(UNAVAILABLE, f"the servable at {self.path} was unloaded")
        return signature, wanted

    def run(self, signature_name: Optional[str], inputs: Dict[str, np.ndarray], output_filter: Iterable[str] = ()) -> Dict[str, np.ndarray]:
        """Runs a signature on numpy inputs; returns `{output_name: array}`.

        Raises:
          ServingError: unknown signature, bad inputs, an unknown output in `output_filter`, or
            an op failure (TF's status code and message).
        """
        import tensorflow as tf

        signature, wanted = self.checked_request(signature_name, inputs, output_filter)
        fetches = {name: signature.outputs[name].name for name in wanted}
        feeds = {signature.inputs[name].name: value for name, value in inputs.items()}
        try:
            return self.session.run(fetches, feeds)
        except tf.errors.OpError as e:
            from tensorflow.core.protobuf import error_codes_pb2

            # The Python session prefixes what the C++ server returns as the status message.
            message = e.message.removeprefix("Graph execution error:").lstrip("\n")
            raise ServingError(error_codes_pb2.Code.Name(e.error_code), message) from None

    def close(self) -> None:
        self._closed = True
        self.session.close()
