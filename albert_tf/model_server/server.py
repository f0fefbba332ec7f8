"""A local stand-in for TF Serving that speaks its gRPC and REST protocols, for development and tests.

The real server is TF Serving (`tensorflow/serving:2.20.0`, see serving/README.md); this one
exists so that exports, clients and the request/response formats can be exercised where Docker
is not available. It serves the same SavedModels the same way (`SessionServable`: TF1 loader,
init op, warmup replay; `ModelManager`: newest version, polled, batched) and answers with TF
Serving's messages and codes:

* gRPC (`tensorflow_serving.apis` stubs): `PredictionService` Predict, Classify, Regress,
  GetModelMetadata, and `ModelService.GetModelStatus`;
* REST: `GET /v1/models/NAME[/versions/N|/labels/L]` (status), `.../metadata`, and
  `POST ...:predict` (row `instances` or columnar `inputs`, `{"b64": ...}` for bytes),
  `:classify`, `:regress`; errors are `{"error": "..."}` with HTTP 400/404/503/500.

`LocalModelServer(export_base)` runs both on 127.0.0.1 (ports 0: free ones, read back from
`grpc_port`/`rest_port`); `LocalModelServer(model_config_file=FILE)` serves the models of TF
Serving's `ModelServerConfig` text file instead (`model_config`: several models, version
policies, version labels), re-read every `model_config_file_poll_wait_s` as TF Serving's
`--model_config_file_poll_wait_seconds` (a changed file that is refused is logged in one line and
the previous config stays in force). Client mistakes are client errors (400/INVALID_ARGUMENT, 408, 411, 413),
never a 500/UNKNOWN: a request larger than `max_request_bytes` is refused before it is read (413,
RESOURCE_EXHAUSTED over gRPC), a REST body must arrive within `rest_read_timeout_s`, an empty
batch is refused on every path, and a port another server holds is refused (no SO_REUSEPORT
sharing). gRPC requests beyond `grpc_max_threads` handlers get RESOURCE_EXHAUSTED, as TF Serving's
beyond `--grpc_max_threads`; the default lets every batch fill (`default_grpc_max_threads`). It is
still a development server: bind it to loopback.
"""

from __future__ import annotations

import base64
import errno
import json
import logging
import os
import re
import socket
import threading
import time
from concurrent import futures
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from albert_tf.export.serving_config import BATCHING_FILE, BatchingConfig, model_versions, read_batching_parameters
from albert_tf.export.signatures import CLASSIFY_METHOD, REGRESS_METHOD
from albert_tf.model_server.manager import ModelManager, serialized_examples
from albert_tf.model_server.model_config import ModelConfigError, read_model_config_file
from albert_tf.model_server.servable import INVALID_ARGUMENT, NOT_FOUND, ServingError

logger = logging.getLogger(__name__)

# The default request size limit is derived from the largest request a served model accepts.
# Batching refuses a request of more than `max_batch_size` rows ("Task size N is larger than
# maximum input batch size"), so no accepted request has more rows. A row is at most two texts
# (`text` + `text_b`, `question` + `context`; the `tokens` signatures' int rows are a few KB).
# 64 KiB of text per field is ten times the longest input the exports are made for (a SQuAD or
# RACE context is a few KB; classifiers keep only `sequence_length` pieces anyway), and JSON can
# triple the bytes of a text (`\uXXXX` escapes of non-ASCII characters; base64 is 4/3). Hence
# rows x 2 x 64 KiB x 3, plus 64 KiB for the envelope: 3.1 MiB for 8 rows, 12.1 MiB for the
# export default of 32 (used when batching is off, which sets no row limit). It also bounds what
# `json.loads` holds in memory for one request (roughly ten times the body).
MAX_TEXT_BYTES = 64 * 1024
TEXTS_PER_ROW = 2
JSON_EXPANSION = 3
ENVELOPE_BYTES = 64 * 1024
# TF Serving's --rest_api_timeout_in_ms default.
DEFAULT_READ_TIMEOUT_S = 30.0
# Deeper JSON cannot be a tensor: TensorFlow shapes have at most 254 dimensions.
MAX_TENSOR_RANK = 254


def default_max_request_bytes(batching: Optional[BatchingConfig]) -> int:
    """The request size limit that admits the largest batch `batching` accepts (see above)."""
    rows = (batching or BatchingConfig()).max_batch_size
    return rows * TEXTS_PER_ROW * MAX_TEXT_BYTES * JSON_EXPANSION + ENVELOPE_BYTES

# gRPC handler threads: each holds one request until its answer (a batched request waits in its
# handler), so they bound how many requests the server holds, and a batch can hold no more requests
# than there are handlers. TF Serving's `--grpc_max_threads` defaults to 4 per CPU: on a 2-core
# machine 8 threads, so no batch of single-text requests grows past 8 whatever `max_batch_size`
# says (this server's fixed 16 capped its length buckets at 44 texts/s where the model alone gives
# 58; BENCHMARKS.md). With batching the default is therefore what the batcher itself holds.
MIN_GRPC_THREADS = 16
MAX_DEFAULT_GRPC_THREADS = 4096


def default_grpc_max_threads(batching: Optional[BatchingConfig], cpus: Optional[int] = None) -> int:
    """gRPC handler threads, and the most requests held at once (more get RESOURCE_EXHAUSTED, as
    TF Serving's): 4 per CPU, at least `MIN_GRPC_THREADS`; with batching at least the requests the
    batcher holds (its queue bound, `max_enqueued_batches` batches, plus one batch per batch
    thread), so a batch can fill up and a full queue answers UNAVAILABLE, as TF Serving's
    batcher; at most `MAX_DEFAULT_GRPC_THREADS` (threads start only when that many requests wait)."""
    threads = max(MIN_GRPC_THREADS, 4 * (cpus or os.cpu_count() or 1))
    if batching is not None:
        held = (batching.max_enqueued_batches + batching.num_batch_threads) * batching.max_batch_size
        threads = max(threads, min(held, MAX_DEFAULT_GRPC_THREADS))
    return threads


HTTP_STATUS = {
    "INVALID_ARGUMENT": 400,
    "FAILED_PRECONDITION": 400,
    "OUT_OF_RANGE": 400,
    "NOT_FOUND": 404,
    "UNAVAILABLE": 503,
    "RESOURCE_EXHAUSTED": 429,
    "UNIMPLEMENTED": 501,
    "INTERNAL": 500,
}


# --- shared request logic (both protocols) -------------------------------------------------------


def _check_method(manager: ModelManager, name, version, label, signature: str, method: str, api: str) -> None:
    _, state = manager.resolve(name, version, label)
    definition = state.servable.signature(signature)
    if definition.method_name != method:
        raise ServingError(
            INVALID_ARGUMENT,
            f"Expected {api} signature method_name to be {method}. Was: {definition.method_name}",
        )


def classify(manager: ModelManager, name, version, label, signature: str, examples: np.ndarray):
    """Classify API: `(version, key, [[(label, score), ...] per example])`."""
    key = signature or "serving_default"
    _check_method(manager, name, version, label, key, CLASSIFY_METHOD, "classification")
    number, key, outputs = manager.run(name, version, label, key, {"inputs": examples})
    scores = outputs.get("scores")
    classes = outputs.get("classes")
    results = []
    for row in range(len(examples)):
        width = (scores if scores is not None else classes).shape[1]
        results.append(
            [
                (classes[row, j].decode("utf-8", "replace") if classes is not None else "", float(scores[row, j]) if scores is not None else 0.0)
                for j in range(width)
            ]
        )
    return number, key, results


def regress(manager: ModelManager, name, version, label, signature: str, examples: np.ndarray):
    """Regress API: `(version, key, [value per example])`."""
    key = signature or "serving_default"
    _check_method(manager, name, version, label, key, REGRESS_METHOD, "regression")
    number, key, outputs = manager.run(name, version, label, key, {"inputs": examples})
    values = np.asarray(outputs["outputs"]).reshape(len(examples), -1)
    if values.shape[1] != 1:
        raise ServingError(INVALID_ARGUMENT, f"Expected output Tensor shape to be [{len(examples)}] or [{len(examples)},1]")
    return number, key, [float(v) for v in values[:, 0]]


# --- gRPC -------------------------------------------------------------------------------------------


def _spec(request) -> Tuple[str, Optional[int], Optional[str]]:
    spec = request.model_spec
    version = spec.version.value if spec.HasField("version") else None
    label = spec.version_label if spec.WhichOneof("version_choice") == "version_label" else None
    return spec.name, version, label


def _grpc_tensor(proto, name: str, max_bytes: int) -> np.ndarray:
    """A request `TensorProto` as numpy, refusing what no signature input can take.

    `max_bytes` (the request limit) bounds the decoded size (a string counts one byte): TF's
    compact encoding repeats the last value to fill the shape, so a tiny message could
    otherwise ask for a tensor of any size.
    """
    import tensorflow as tf
    from tensorflow.core.framework import types_pb2

    known = proto.dtype in types_pb2.DataType.values()
    dtype_name = types_pb2.DataType.Name(proto.dtype) if known else str(proto.dtype)
    # Resource handles and variants only exist inside a running graph, and `*_REF` types are
    # graph-internal: a request cannot carry them.
    if not known or proto.dtype in (types_pb2.DT_INVALID, types_pb2.DT_RESOURCE, types_pb2.DT_VARIANT) or proto.dtype > 100:
        raise ServingError(INVALID_ARGUMENT, f"input {name}: a tensor of dtype {dtype_name} cannot be sent in a request")
    if proto.tensor_shape.unknown_rank:
        raise ServingError(INVALID_ARGUMENT, f"input {name}: the tensor shape must be known (unknown_rank is set)")
    dims = [d.size for d in proto.tensor_shape.dim]
    shape = "[" + ",".join(str(d) for d in dims) + "]"
    if any(d < 0 for d in dims):
        raise ServingError(INVALID_ARGUMENT, f"input {name}: invalid tensor shape {shape}: sizes must be >= 0")
    if len(dims) > MAX_TENSOR_RANK:
        raise ServingError(INVALID_ARGUMENT, f"input {name}: {len(dims)} dimensions, more than TensorFlow's {MAX_TENSOR_RANK}")
    dtype = tf.dtypes.as_dtype(proto.dtype)
    size = int(np.prod(dims, dtype=object)) * (1 if dtype == tf.string else dtype.size)
    if size > max_bytes:
        raise ServingError(INVALID_ARGUMENT, f"input {name}: shape {shape} decodes to more than the request limit of {max_bytes} bytes")
    try:
        return tf.make_ndarray(proto)
    except (TypeError, ValueError, KeyError, OverflowError) as e:  # e.g. int_val out of the dtype's range
        raise ServingError(INVALID_ARGUMENT, f"input {name}: invalid tensor: {e}") from None


def _make_servicers(manager: ModelManager, max_request_bytes: int):
    import grpc
    import tensorflow as tf
    from google.protobuf import any_pb2
    from tensorflow_serving.apis import (
        classification_pb2,
        get_model_metadata_pb2,
        get_model_status_pb2,
        model_service_pb2_grpc,
        predict_pb2,
        prediction_service_pb2_grpc,
        regression_pb2,
    )

    def fail(context, error: ServingError):
        context.abort(getattr(grpc.StatusCode, error.code, grpc.StatusCode.UNKNOWN), error.message)

    def guarded(method):
        def wrapper(self, request, context):
            try:
                return method(self, request, context)
            except ServingError as e:
                fail(context, e)
            except Exception as e:  # a server fault: INTERNAL with its reason (not UNKNOWN), and it keeps serving
                logger.exception("gRPC request failed")
                context.abort(grpc.StatusCode.INTERNAL, f"{type(e).__name__}: {e}")

        return wrapper

    def set_spec(response, name, version, key):
        response.model_spec.name = name
        response.model_spec.version.value = version
        response.model_spec.signature_name = key

    class PredictionServicer(prediction_service_pb2_grpc.PredictionServiceServicer):
        @guarded
        def Predict(self, request, context):  # noqa: N802 (the gRPC method name)
            name, version, label = _spec(request)
            inputs = {k: _grpc_tensor(v, k, max_request_bytes) for k, v in request.inputs.items()}
            number, key, outputs = manager.run(name, version, label, request.model_spec.signature_name, inputs, list(request.output_filter))
            response = predict_pb2.PredictResponse()
            set_spec(response, name, number, key)
            for k, v in outputs.items():
                response.outputs[k].CopyFrom(tf.make_tensor_proto(v))
            return response

        @guarded
        def Classify(self, request, context):  # noqa: N802
            name, version, label = _spec(request)
            number, key, results = classify(manager, name, version, label, request.model_spec.signature_name, serialized_examples(request.input))
            response = classification_pb2.ClassificationResponse()
            set_spec(response, name, number, key)
            for row in results:
                classification = response.result.classifications.add()
                for class_label, score in row:
                    classification.classes.add(label=class_label, score=score)
            return response

        @guarded
        def Regress(self, request, context):  # noqa: N802
            name, version, label = _spec(request)
            number, key, values = regress(manager, name, version, label, request.model_spec.signature_name, serialized_examples(request.input))
            response = regression_pb2.RegressionResponse()
            set_spec(response, name, number, key)
            for value in values:
                response.result.regressions.add(value=value)
            return response

        @guarded
        def GetModelMetadata(self, request, context):  # noqa: N802
            name, version, label = _spec(request)
            if not request.metadata_field:
                raise ServingError(INVALID_ARGUMENT, "GetModelMetadataRequest must specify at least one metadata_field")
            for field in request.metadata_field:
                if field != "signature_def":
                    raise ServingError(INVALID_ARGUMENT, f"Metadata field {field} is not supported")
            number, state = manager.resolve(name, version, label)
            signature_map = get_model_metadata_pb2.SignatureDefMap()
            for key, definition in state.servable.signature_defs.items():
                signature_map.signature_def[key].CopyFrom(definition)
            response = get_model_metadata_pb2.GetModelMetadataResponse()
            response.model_spec.name = name
            response.model_spec.version.value = number
            packed = any_pb2.Any()
            packed.Pack(signature_map)
            response.metadata["signature_def"].CopyFrom(packed)
            return response

    class ModelServicer(model_service_pb2_grpc.ModelServiceServicer):
        @guarded
        def GetModelStatus(self, request, context):  # noqa: N802
            name, version, _ = _spec(request)
            response = get_model_status_pb2.GetModelStatusResponse()
            for state in manager.status(name, version):
                entry = response.model_version_status.add()
                entry.version = state.version
                entry.state = get_model_status_pb2.ModelVersionStatus.State.Value(state.state)
                entry.status.error_code = _error_code_number(state.error_code)
                entry.status.error_message = state.error_message
            return response

    return PredictionServicer(), ModelServicer(), prediction_service_pb2_grpc, model_service_pb2_grpc


def _error_code_number(code: str) -> int:
    from tensorflow.core.protobuf import error_codes_pb2

    return error_codes_pb2.Code.Value(code) if code in error_codes_pb2.Code.keys() else error_codes_pb2.UNKNOWN


# --- REST --------------------------------------------------------------------------------------------

_PATH = re.compile(r"^/v1/models/([^/:]+)(?:/versions/(\d+)|/labels/([^/:]+))?(?:(/metadata)|:(predict|classify|regress))?$")


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "Bool"
    if isinstance(value, (int, float)):
        return "Number"
    if isinstance(value, str):
        return "String"
    if isinstance(value, list):
        return "Array"
    if value is None:
        return "Null"
    return "Object"


def _json_excerpt(value: Any, limit: int = 80) -> str:
    """`value` as JSON for an error message, cut to `limit` characters (it echoes the request)."""
    try:
        text = json.dumps(value)
    except (RecursionError, ValueError):
        text = "..."
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _type_error(value: Any, dtype_name: str, why: str = "") -> ServingError:
    return ServingError(
        INVALID_ARGUMENT,
        f"JSON Value: {_json_excerpt(value)} Type: {_json_type(value)} is not of expected type: {dtype_name}{why}",
    )


def _convert_leaf(value: Any, dtype) -> Any:
    if dtype == np.object_:
        if isinstance(value, dict) and set(value) == {"b64"} and isinstance(value["b64"], str):
            try:
                return base64.b64decode(value["b64"], validate=True)
            except ValueError:
                raise ServingError(INVALID_ARGUMENT, f"Unable to base64 decode: {value['b64'][:40]}") from None
        if isinstance(value, str):
            return value.encode("utf-8")
        raise _type_error(value, "string")
    if dtype == np.bool_:
        if isinstance(value, bool):
            return value
        raise _type_error(value, "bool")
    if np.issubdtype(dtype, np.integer):
        if isinstance(value, int) and not isinstance(value, bool):
            info = np.iinfo(dtype)
            if info.min <= value <= info.max:
                return value
            raise _type_error(value, np.dtype(dtype).name, f" (out of its range [{info.min}, {info.max}])")
        raise _type_error(value, np.dtype(dtype).name)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        # TF Serving refuses finite numbers the float type cannot hold rather than make them inf.
        if abs(value) > np.finfo(dtype).max and value not in (float("inf"), float("-inf")):
            raise ServingError(
                INVALID_ARGUMENT,
                f"Cannot convert JSON value: {_json_excerpt(value)} to {np.dtype(dtype).name} without loss of precision.",
            )
        return value
    if value in ("NaN", "Infinity", "-Infinity"):
        return float(value.replace("Infinity", "inf"))
    raise _type_error(value, np.dtype(dtype).name)


def _to_array(value: Any, dtype, what: str) -> np.ndarray:
    def convert(v, depth):
        if isinstance(v, list):
            if depth >= MAX_TENSOR_RANK:
                raise ServingError(INVALID_ARGUMENT, f"{what}: lists nested deeper than a tensor's {MAX_TENSOR_RANK} dimensions")
            return [convert(x, depth + 1) for x in v]
        return _convert_leaf(v, dtype)

    converted = convert(value, 0)
    try:
        array = np.array(converted, dtype=dtype)
    except ValueError:
        raise ServingError(INVALID_ARGUMENT, f"{what}: all items must have the same shape (a dense tensor)") from None
    except OverflowError as e:  # the leaves are range-checked; this is the last line of defence
        raise ServingError(INVALID_ARGUMENT, f"{what}: a value is out of range for {np.dtype(dtype).name}: {e}") from None
    if dtype == np.object_ and array.dtype == object and any(isinstance(x, list) for x in array.ravel()):
        raise ServingError(INVALID_ARGUMENT, f"{what}: all items must have the same shape (a dense tensor)")
    return array


def _numpy_dtype(tf_dtype_enum: int):
    import tensorflow as tf

    dtype = tf.dtypes.as_dtype(tf_dtype_enum)
    return np.object_ if dtype == tf.string else dtype.as_numpy_dtype


def _rest_inputs(body: Dict[str, Any], definition) -> Tuple[Dict[str, np.ndarray], bool]:
    """`(inputs, row_format)` of a REST predict body, checked against the SignatureDef."""
    has_instances, has_inputs = "instances" in body, "inputs" in body
    if has_instances == has_inputs:
        raise ServingError(
            INVALID_ARGUMENT,
            "Missing 'inputs' or 'instances' key" if not has_instances else "Not a valid JSON request: both 'instances' and 'inputs' specified",
        )
    names = sorted(definition.inputs)
    dtypes = {n: _numpy_dtype(definition.inputs[n].dtype) for n in names}
    if has_instances:
        instances = body["instances"]
        if not isinstance(instances, list):
            raise ServingError(INVALID_ARGUMENT, "'instances' must be a JSON array")
        if not instances:
            # TF Serving's JSON parsing refuses this; the columnar and gRPC paths refuse empty
            # batches too (`ModelManager.run`), so all three answer alike.
            raise ServingError(INVALID_ARGUMENT, "No values in 'instances' array: a request needs at least one instance")
        if all(isinstance(i, dict) and not (set(i) == {"b64"}) for i in instances):
            keys = {tuple(sorted(i)) for i in instances}
            if len(keys) != 1:
                raise ServingError(INVALID_ARGUMENT, "Failed to process element: all 'instances' must have the same named inputs")
            columns = {k: [i[k] for i in instances] for k in keys.pop()}
        elif len(names) == 1:
            columns = {names[0]: instances}
        else:
            raise ServingError(
                INVALID_ARGUMENT,
                f"Expecting object but got list at item 0 of input list: the signature has {len(names)} inputs {names}, "
                "so each instance must be an object naming them",
            )
        return {k: _to_array(v, dtypes.get(k, np.object_), f"input {k}") for k, v in columns.items()}, True
    inputs = body["inputs"]
    if isinstance(inputs, dict) and not set(inputs) == {"b64"}:
        return {k: _to_array(v, dtypes.get(k, np.object_), f"input {k}") for k, v in inputs.items()}, False
    if len(names) != 1:
        raise ServingError(INVALID_ARGUMENT, f"'inputs' must be an object naming the {len(names)} inputs {names}")
    return {names[0]: _to_array(inputs, dtypes[names[0]], f"input {names[0]}")}, False


def _json_value(value: np.ndarray, name: str) -> Any:
    if value.dtype == object or value.dtype.kind == "S":
        def encode(b):
            if name.endswith("_bytes"):
                return {"b64": base64.b64encode(b).decode("ascii")}
            try:
                return b.decode("utf-8")
            except UnicodeDecodeError:
                return {"b64": base64.b64encode(b).decode("ascii")}

        return np.vectorize(encode, otypes=[object])(value).tolist() if value.size else value.tolist()
    if value.dtype.kind == "f":
        return _float_tree(value.tolist())
    return value.tolist()


def _float(x: float):
    if x != x:
        return "NaN"
    if x in (float("inf"), float("-inf")):
        return "Infinity" if x > 0 else "-Infinity"
    return x


def _float_tree(v):
    if isinstance(v, list):
        return [_float_tree(x) for x in v]
    return _float(v)


def _example_feature(value: Any, name: str):
    import tensorflow as tf

    values = value if isinstance(value, list) else [value]
    try:
        if all(isinstance(v, str) or (isinstance(v, dict) and set(v) == {"b64"}) for v in values):
            return tf.train.Feature(bytes_list=tf.train.BytesList(value=[_convert_leaf(v, np.object_) for v in values]))
        if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            return tf.train.Feature(int64_list=tf.train.Int64List(value=values))
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            return tf.train.Feature(float_list=tf.train.FloatList(value=values))
    except (ValueError, OverflowError, TypeError) as e:  # protobuf's range checks: int64, float
        raise ServingError(INVALID_ARGUMENT, f"Feature {name}: a value is out of range: {e}") from None
    raise ServingError(INVALID_ARGUMENT, f"Feature {name}: values must be all strings, all integers or all numbers")


def _rest_examples(body: Dict[str, Any]) -> np.ndarray:
    import tensorflow as tf

    examples = body.get("examples")
    if not isinstance(examples, list):
        raise ServingError(INVALID_ARGUMENT, "'examples' must be a JSON array of objects")
    if not examples:
        raise ServingError(INVALID_ARGUMENT, "Input is empty.")
    context = body.get("context", {})
    if not isinstance(context, dict):
        raise ServingError(INVALID_ARGUMENT, "'context' must be a JSON object")
    serialized = []
    for example in examples:
        if not isinstance(example, dict):
            raise ServingError(INVALID_ARGUMENT, "each example must be a JSON object of features")
        features = {k: _example_feature(v, k) for k, v in {**context, **example}.items()}
        serialized.append(tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString())
    return np.array(serialized, dtype=object)


def _parse_json(raw: bytes) -> Dict[str, Any]:
    """The JSON object of a request body, or ServingError (TF Serving's "JSON Parse error")."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ServingError(INVALID_ARGUMENT, "JSON Parse error: Invalid encoding in string.") from None
    if not text.strip():
        raise ServingError(INVALID_ARGUMENT, "JSON Parse error: The document is empty")
    try:
        body = json.loads(text)
    except json.JSONDecodeError as e:
        raise ServingError(INVALID_ARGUMENT, f"JSON Parse error: {e.msg}. at offset: {e.pos}") from None
    except RecursionError:
        raise ServingError(INVALID_ARGUMENT, "JSON Parse error: the document is nested too deeply") from None
    except ValueError as e:  # e.g. an integer of more than 4300 digits
        raise ServingError(INVALID_ARGUMENT, f"JSON Parse error: {e}") from None
    if not isinstance(body, dict):
        raise ServingError(INVALID_ARGUMENT, "JSON Parse error: the request body must be a JSON object")
    # A `\uD800`-style escape without its pair decodes to a lone surrogate, which no tensor or
    # feature can hold; TF Serving's parser refuses it. Only escapes can make one (raw UTF-8
    # surrogates fail decoding above), so the document is searched only when they occur.
    if _SURROGATE_ESCAPE.search(text) and _has_lone_surrogate(body):
        raise ServingError(INVALID_ARGUMENT, "JSON Parse error: The surrogate pair in string is invalid.")
    return body


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def _has_lone_surrogate(value: Any) -> bool:
    # json.loads joins valid pairs into one character, so any surrogate left is a lone one.
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


class _HttpError(Exception):
    """A request the HTTP layer refuses (size, framing, timeout): a status and a message; the
    connection is closed after the answer, since the rest of its bytes cannot be trusted."""

    def __init__(self, status: int, message: str, unread: int = 0):
        super().__init__(message)
        self.status = status
        self.message = message
        self.unread = unread  # body bytes still on the wire, drained before closing


# How long a refused body is drained before the connection closes (see `_RestHandler._drain`).
_DRAIN_S = 2.0
_DIGITS = re.compile(r"[0-9]+")


class _RestHandler(BaseHTTPRequestHandler):
    # Set on the subclass made per server: the manager, the body limit, the read timeout (also
    # `timeout`, which the stdlib applies to every socket read: an idle keep-alive connection
    # or a stalled header is closed after it).
    manager: ModelManager
    max_request_bytes: int
    read_timeout_s: float
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):  # noqa: A002 (the stdlib's signature)
        logger.debug("rest: " + format, *args)

    def _send(self, status: int, payload: Dict[str, Any], close: bool = False) -> None:
        # Error messages may echo the request (lone surrogates included): ASCII-escape them.
        data = json.dumps(payload, ensure_ascii=status >= 400, allow_nan=False).encode("utf-8")
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if close:
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            self.wfile.write(data)
        except OSError:  # the client is gone: there is no one left to answer
            self.close_connection = True

    def _error(self, error: ServingError) -> None:
        self._send(HTTP_STATUS.get(error.code, 500), {"error": error.message})

    def send_error(self, code, message=None, explain=None):
        # The stdlib's own refusals (a malformed request line or headers, an oversized URI) as
        # TF Serving's JSON errors.
        self._send(code, {"error": message or HTTPStatus(code).phrase}, close=True)

    def __getattr__(self, name: str):
        # Every method but GET and POST is the client's mistake (405); the stdlib would answer
        # an unknown one with 501, a server-side status.
        if name.startswith("do_"):
            return self._method_not_allowed
        raise AttributeError(name)

    def _method_not_allowed(self) -> None:
        self._send(405, {"error": f"Method {self.command} is not allowed: the REST API takes GET and POST"}, close=True)

    def handle_expect_100(self) -> bool:
        # Refuse a body that will not be accepted before the client sends it (curl asks first
        # for bodies over 1 MiB).
        try:
            self._content_length()
        except _HttpError as e:
            self._send(e.status, {"error": e.message}, close=True)
            return False
        return super().handle_expect_100()

    def _content_length(self) -> int:
        """The declared body size, checked: a non-negative integer within the limit."""
        if self.headers.get("Transfer-Encoding"):
            raise _HttpError(411, "Transfer-Encoding is not supported: send the body with a Content-Length header")
        values = {v.strip() for v in self.headers.get_all("Content-Length") or []}
        if not values:
            return 0
        if len(values) > 1:
            raise _HttpError(400, f"Conflicting Content-Length headers: {', '.join(sorted(values))[:80]}")
        text = values.pop()
        if not _DIGITS.fullmatch(text):
            raise _HttpError(400, f"Invalid Content-Length header {text[:40]!r}: it must be a non-negative integer")
        digits = text.lstrip("0") or "0"
        # More digits than the limit has cannot fit (and int() refuses over 4300 digits).
        length = int(digits) if len(digits) <= len(str(self.max_request_bytes)) else self.max_request_bytes + 1
        if length > self.max_request_bytes:
            raise _HttpError(
                413,
                f"Request body of {digits if len(digits) <= 30 else 'over 10^30'} bytes is larger than the server's "
                f"limit of {self.max_request_bytes} bytes (max_request_bytes)",
                unread=length,
            )
        return length

    def _read_body(self, length: int) -> bytes:
        """`length` bytes of body, all of them within `read_timeout_s` (not per read: a client
        trickling bytes cannot hold the connection either)."""
        deadline = time.monotonic() + self.read_timeout_s
        body = bytearray()
        try:
            while len(body) < length:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError
                self.connection.settimeout(left)
                chunk = self.rfile.read1(min(length - len(body), 1 << 16))
                if not chunk:
                    raise _HttpError(
                        400, f"Request body truncated: the connection ended after {len(body)} of the {length} bytes of Content-Length"
                    )
                body += chunk
        except TimeoutError:
            raise _HttpError(
                408,
                f"Request body not received within {self.read_timeout_s:g} s: "
                f"{len(body)} of the {length} bytes of Content-Length arrived",
            ) from None
        finally:
            try:
                self.connection.settimeout(self.timeout)
            except OSError:
                pass
        return bytes(body)

    def _refuse(self, error: _HttpError) -> None:
        self._send(error.status, {"error": error.message}, close=True)
        if error.unread:
            self._drain(error.unread)

    def _drain(self, length: int) -> None:
        # A client usually sends its whole body before it reads the answer. Closing a socket
        # with unread bytes makes the kernel reset the connection, and the client would see
        # that instead of the 413; so read and drop what comes, for a short bounded time.
        deadline = time.monotonic() + min(self.read_timeout_s, _DRAIN_S)
        try:
            while length > 0:
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self.connection.settimeout(left)
                chunk = self.rfile.read1(min(length, 1 << 16))
                if not chunk:
                    return
                length -= len(chunk)
        except OSError:
            pass

    def _body(self) -> Optional[bytes]:
        """The request body, or None once a refusal has been answered."""
        try:
            return self._read_body(self._content_length())
        except _HttpError as e:
            self._refuse(e)
            return None

    def _route(self, method: str):
        match = _PATH.match(self.path.split("?", 1)[0])
        if not match:
            raise ServingError(NOT_FOUND, f"Malformed request: {method} {self.path}")
        name, version, label, metadata, verb = match.groups()
        if (method == "GET") != (verb is None):
            raise ServingError(NOT_FOUND, f"Malformed request: {method} {self.path}")
        return name, int(version) if version else None, label, bool(metadata), verb

    def do_GET(self):  # noqa: N802 (BaseHTTPRequestHandler's name)
        if self._body() is None:  # read (and ignored), so that the next request starts after it
            return
        try:
            name, version, label, metadata, _ = self._route("GET")
            if metadata:
                number, state = self.manager.resolve(name, version, label)
                from google.protobuf import json_format
                from tensorflow_serving.apis import get_model_metadata_pb2

                signature_map = get_model_metadata_pb2.SignatureDefMap()
                for key, definition in state.servable.signature_defs.items():
                    signature_map.signature_def[key].CopyFrom(definition)
                self._send(200, {
                    "model_spec": {"name": name, "signature_name": "", "version": str(number)},
                    "metadata": {"signature_def": json_format.MessageToDict(signature_map, preserving_proto_field_name=True)},
                })
                return
            if label:
                version, _ = self.manager.resolve(name, None, label)
            states = self.manager.status(name, version)
            self._send(200, {"model_version_status": [
                {"version": str(s.version), "state": s.state, "status": {"error_code": s.error_code, "error_message": s.error_message}}
                for s in states
            ]})
        except ServingError as e:
            self._error(e)

    def do_POST(self):  # noqa: N802
        raw = self._body()
        if raw is None:
            return
        try:
            name, version, label, _, verb = self._route("POST")
            body = _parse_json(raw)
            signature = body.get("signature_name", "")
            if not isinstance(signature, str):
                raise ServingError(INVALID_ARGUMENT, "'signature_name' must be a string")
            if verb == "predict":
                _, state = self.manager.resolve(name, version, label)
                definition = state.servable.signature(signature)
                inputs, rows = _rest_inputs(body, definition)
                _, _, outputs = self.manager.run(name, version, label, signature, inputs)
                self._send(200, _predict_json(outputs, rows))
            elif verb == "classify":
                examples = _rest_examples(body)
                _, _, results = classify(self.manager, name, version, label, signature, examples)
                self._send(200, {"result": [[[c, s] for c, s in row] for row in results]})
            else:
                examples = _rest_examples(body)
                _, _, values = regress(self.manager, name, version, label, signature, examples)
                self._send(200, {"result": values})
        except ServingError as e:
            self._error(e)
        except Exception as e:  # the server keeps serving whatever one request did
            logger.exception("REST request failed")
            self._send(500, {"error": f"{type(e).__name__}: {e}"})


def _predict_json(outputs: Dict[str, np.ndarray], rows: bool) -> Dict[str, Any]:
    if not rows:
        if len(outputs) == 1:
            name, value = next(iter(outputs.items()))
            return {"outputs": _json_value(value, name)}
        return {"outputs": {k: _json_value(v, k) for k, v in outputs.items()}}
    sizes = {np.shape(v)[0] if np.ndim(v) else None for v in outputs.values()}
    if len(sizes) != 1 or None in sizes:
        raise ServingError(INVALID_ARGUMENT, "Tensor name: outputs have different 0th dimensions; use the columnar 'inputs' format")
    if len(outputs) == 1:
        name, value = next(iter(outputs.items()))
        return {"predictions": _json_value(value, name)}
    columns = {k: _json_value(v, k) for k, v in outputs.items()}
    return {"predictions": [{k: columns[k][i] for k in columns} for i in range(sizes.pop())]}


# --- the server ---------------------------------------------------------------------------------------


class _HttpServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        # A client that vanished mid-request is not a server fault; anything else goes to the
        # log (the stdlib prints a traceback to stderr).
        import sys

        if isinstance(sys.exc_info()[1], OSError):
            logger.debug("rest: connection from %s ended: %s", client_address, sys.exc_info()[1])
        else:
            logger.exception("rest: unexpected error on the connection from %s", client_address)


def _check_port_free(protocol: str, host: str, port: int) -> None:
    """Raises OSError naming `protocol` and `port` when `host:port` cannot be listened on.

    gRPC would report a taken port only through its C-core log and an exception without the
    reason, so the port is tried with a plain socket first (SO_REUSEADDR, as servers set it,
    but not SO_REUSEPORT: a port another server listens on is refused).
    """
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host.strip("[]"), port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(address)
    except OSError as e:
        raise _port_error(protocol, host, port, e) from None


def _port_error(protocol: str, host: str, port: int, error: OSError) -> OSError:
    if error.errno == errno.EADDRINUSE:
        return OSError(f"{protocol} port {port} on {host} is already in use (another server is listening on it)")
    return OSError(f"cannot listen for {protocol} on {host}:{port}: {error.strerror or error}")


class LocalModelServer:
    """gRPC + REST front ends over a `ModelManager`, on `host` (127.0.0.1 by default).

    Args:
      export_base: the directory of `<model_name>/<version>/` SavedModels (the newest version
        of each is served).
      model_names: the models to serve (default: every model directory with a version).
      grpc_port, rest_port: ports (0: a free port, see the attributes after `start`; None: off).
        A port another server listens on is refused (OSError naming the protocol and port).
      batching: batching settings; default `batching_parameters.txt` of `export_base` if present.
      poll_interval_s: version polling interval (TF Serving's file system poll).
      version_labels: `{model_name: {label: version}}`.
      host: the address to bind; keep loopback for development.
      grpc_max_threads: gRPC handler threads, the most requests held at once (more get
        RESOURCE_EXHAUSTED; None: derived from the batching settings at `start`,
        `default_grpc_max_threads`).
      max_request_bytes: the largest request, REST body or gRPC message (None: derived from the
        batching settings at `start`, `default_max_request_bytes`); larger ones get 413 /
        RESOURCE_EXHAUSTED without being read.
      rest_read_timeout_s: the time a REST request body has to arrive in full, and an idle or
        stalled connection to send its next bytes (408, then the connection closes).
      prefer_tflite_model: serve a version's `model.tflite` (token ids in) when it has one, as
        TF Serving's `--prefer_tflite_model` (`albert_tf.model_server.tflite_servable`).
      prefer_openvino_model: serve a version's OpenVINO IR (raw text in, `albert-tf export
        --openvino`) when it has one (`albert_tf.model_server.openvino_servable`).
      openvino_threads: the OpenVINO models' inference threads (None: OpenVINO's default).
      request_logging: a TF Serving `LoggingConfig` text file: log a sample of the requests as
        `PredictionLog` TFRecords (`request_log`).
      model_config_file: instead of `export_base` (exactly one of the two), TF Serving's
        `ModelServerConfig` text file (`albert_tf.model_server.model_config`); batching follows
        a `batching_parameters.txt` beside it (as the export writes them), unless `batching`.
      model_config_file_poll_wait_s: re-read the file this often (0: read once).
      allow_version_labels_for_unavailable_models: TF Serving's flag of that name: a new label
        may name a version that is not AVAILABLE yet.

    Raises:
      ValueError: bad options, or a model config file that cannot be served (`ModelConfigError`,
        one line naming the file and the field).
    """

    def __init__(
        self,
        export_base: Optional[str] = None,
        model_names: Optional[List[str]] = None,
        grpc_port: Optional[int] = 0,
        rest_port: Optional[int] = 0,
        batching: Optional[BatchingConfig] = None,
        poll_interval_s: float = 1.0,
        version_labels: Optional[Dict[str, Dict[str, int]]] = None,
        host: str = "127.0.0.1",
        grpc_max_threads: Optional[int] = None,
        max_request_bytes: Optional[int] = None,
        rest_read_timeout_s: float = DEFAULT_READ_TIMEOUT_S,
        prefer_tflite_model: bool = False,
        request_logging: Optional[str] = None,
        model_config_file: Optional[str] = None,
        model_config_file_poll_wait_s: float = 0.0,
        allow_version_labels_for_unavailable_models: bool = False,
        prefer_openvino_model: bool = False,
        openvino_threads: Optional[int] = None,
    ):
        if grpc_max_threads is not None and (isinstance(grpc_max_threads, bool) or not isinstance(grpc_max_threads, int)
                                             or grpc_max_threads < 1):
            raise ValueError(f"grpc_max_threads must be a positive integer, got {grpc_max_threads!r}")
        bad_limit = isinstance(max_request_bytes, bool) or not isinstance(max_request_bytes, int) or max_request_bytes < 1
        if max_request_bytes is not None and bad_limit:
            raise ValueError(f"max_request_bytes must be a positive integer, got {max_request_bytes!r}")
        if not 0 < rest_read_timeout_s < float("inf"):
            raise ValueError(f"rest_read_timeout_s must be a positive number of seconds, got {rest_read_timeout_s!r}")
        if (export_base is None) == (model_config_file is None):
            raise ValueError("give export_base or model_config_file (exactly one)")
        if not 0 <= model_config_file_poll_wait_s < float("inf"):
            raise ValueError(f"model_config_file_poll_wait_s must be >= 0 seconds, got {model_config_file_poll_wait_s!r}")
        self.model_config_file = model_config_file
        self.model_config_file_poll_wait_s = float(model_config_file_poll_wait_s)
        self.allow_version_labels_for_unavailable_models = bool(allow_version_labels_for_unavailable_models)
        self._config_text: Optional[str] = None
        self._config_error: Optional[str] = None
        self._config_stopped = threading.Event()
        self._config_thread: Optional[threading.Thread] = None
        if model_config_file is not None:
            if model_names is not None or version_labels is not None:
                raise ValueError("model_names and version_labels come from the model config file: give neither with it")
            self._config_text, entries = read_model_config_file(model_config_file)
            if not entries:
                raise ModelConfigError(f"{model_config_file}: lists no models (model_config_list has no config)")
            beside = os.path.join(os.path.dirname(os.path.abspath(model_config_file)), BATCHING_FILE)
            if batching is None and os.path.isfile(beside):
                batching = read_batching_parameters(beside)
            self.manager = ModelManager(
                {e.name: e.base_path for e in entries}, batching, poll_interval_s,
                prefer_tflite_model=prefer_tflite_model, version_policies={e.name: e.policy for e in entries},
                prefer_openvino_model=prefer_openvino_model, openvino_threads=openvino_threads,
            )
            # As TF Serving, the labels are checked before anything loads: without the flag a
            # label at startup is refused (no version is AVAILABLE yet).
            self.manager.version_labels = self.manager.check_labels(entries, self.allow_version_labels_for_unavailable_models)
        else:
            if model_names is None:
                model_names = sorted(
                    n for n in os.listdir(export_base) if not n.startswith(".") and model_versions(os.path.join(export_base, n))
                )
            if not model_names:
                raise ValueError(f"{export_base} holds no model with an integer version directory")
            if batching is None and os.path.isfile(os.path.join(export_base, BATCHING_FILE)):
                batching = read_batching_parameters(os.path.join(export_base, BATCHING_FILE))
            self.manager = ModelManager(
                {n: os.path.join(export_base, n) for n in model_names}, batching, poll_interval_s, version_labels,
                prefer_tflite_model=prefer_tflite_model, prefer_openvino_model=prefer_openvino_model,
                openvino_threads=openvino_threads,
            )
        if request_logging:
            from albert_tf.model_server.request_log import RequestLogger, load_logging_config

            self.manager.request_logger = RequestLogger(load_logging_config(request_logging))
        self.host = host
        self._grpc_port, self._rest_port = grpc_port, rest_port
        self._grpc_max_threads = grpc_max_threads
        self._max_request_bytes = max_request_bytes
        self.rest_read_timeout_s = float(rest_read_timeout_s)
        self.max_request_bytes: Optional[int] = None  # the limit in force, set by `start`
        self.grpc_max_threads: Optional[int] = None  # the handler threads in force, set by `start`
        self.grpc_port: Optional[int] = None
        self.rest_port: Optional[int] = None
        self._grpc_server = None
        self._http_server: Optional[ThreadingHTTPServer] = None
        self._http_thread: Optional[threading.Thread] = None

    def start(self) -> "LocalModelServer":
        """Binds both ports, loads the models and starts serving; returns self.

        The ports are bound first, so a taken port fails at once, before any model loads.

        Raises:
          OSError: a port cannot be listened on (the message names the protocol and port).
        """
        self.max_request_bytes = self._max_request_bytes or default_max_request_bytes(self.manager.batching)
        self.grpc_max_threads = self._grpc_max_threads or default_grpc_max_threads(self.manager.batching)
        try:
            if self._grpc_port is not None:
                self._bind_grpc()
            if self._rest_port is not None:
                self._bind_rest()
            self.manager.start()
        except BaseException:
            self.stop()
            raise
        if self._grpc_server is not None:
            self._grpc_server.start()
        if self._http_server is not None:
            self._http_thread = threading.Thread(target=self._http_server.serve_forever, name="rest", daemon=True)
            self._http_thread.start()
        if self.model_config_file is not None and self.model_config_file_poll_wait_s > 0:
            self._config_thread = threading.Thread(target=self._config_poll_loop, name="model-config-poller", daemon=True)
            self._config_thread.start()
        return self

    def _config_poll_loop(self) -> None:
        while not self._config_stopped.wait(self.model_config_file_poll_wait_s):
            try:
                self.reload_model_config()
            except Exception:  # a reload must never kill the poller: the next one retries
                logger.exception("reloading the model config file %s failed", self.model_config_file)

    def reload_model_config(self) -> bool:
        """Re-reads the model config file and applies it if it differs from the one in force
        (TF Serving's config poll); returns whether it applied a new config.

        A file that cannot be read, parsed or served is logged in one line (once, while it stays
        so) and the previous config stays in force; it is tried again at the next poll, as TF
        Serving does (a label may name a version that has become AVAILABLE since). An empty
        config (nothing set) is no action, as in TF Serving.
        """
        try:
            text, entries = read_model_config_file(self.model_config_file)
            if text == self._config_text:
                self._config_error = None
                return False
            if entries is None:
                self._report(f"model config {self.model_config_file} is empty: no action (as TF Serving)", logging.INFO)
                return False
            self.manager.apply_config(entries, self.allow_version_labels_for_unavailable_models)
        except ModelConfigError as e:
            self._report(f"model config {self.model_config_file} not applied, the previous one stays in force: {e}")
            return False
        self._config_text, self._config_error = text, None
        logger.info(
            "model config %s applied: %s", self.model_config_file,
            "; ".join(f"{e.name} ({e.policy.describe()}" + "".join(f", label {k}: {v}" for k, v in e.labels) + ")" for e in entries),
        )
        return True

    def _report(self, message: str, level: int = logging.ERROR) -> None:
        if message != self._config_error:
            logger.log(level, "%s", message)
        self._config_error = message

    def _bind_grpc(self) -> None:
        import grpc

        if self._grpc_port:
            _check_port_free("gRPC", self.host, self._grpc_port)
        prediction, model, prediction_grpc, model_grpc = _make_servicers(self.manager, self.max_request_bytes)
        options = [
            # gRPC sets SO_REUSEPORT by default, so a second server on a taken port binds too and
            # the kernel splits the connections between the two; refuse instead.
            ("grpc.so_reuseport", 0),
            ("grpc.max_receive_message_length", min(self.max_request_bytes, 2**31 - 1)),  # a C int
        ]
        # maximum_concurrent_rpcs: beyond the handlers a request is refused (RESOURCE_EXHAUSTED, as
        # TF Serving's) rather than queued, unbounded and unseen, in front of the batcher.
        self._grpc_server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=self.grpc_max_threads, thread_name_prefix="grpc"),
            options=options, maximum_concurrent_rpcs=self.grpc_max_threads,
        )
        prediction_grpc.add_PredictionServiceServicer_to_server(prediction, self._grpc_server)
        model_grpc.add_ModelServiceServicer_to_server(model, self._grpc_server)
        try:
            port = self._grpc_server.add_insecure_port(f"{self.host}:{self._grpc_port}")
        except RuntimeError:  # grpcio >= 1.57 raises where older versions returned 0
            port = 0
        if not port:
            raise OSError(f"gRPC port {self._grpc_port} on {self.host} cannot be listened on (in use by another server?)")
        self.grpc_port = port

    def _bind_rest(self) -> None:
        handler = type(
            "RestHandler",
            (_RestHandler,),
            {
                "manager": self.manager,
                "max_request_bytes": self.max_request_bytes,
                "read_timeout_s": self.rest_read_timeout_s,
                "timeout": self.rest_read_timeout_s,
            },
        )
        try:
            self._http_server = _HttpServer((self.host, self._rest_port), handler)
        except OSError as e:
            raise _port_error("REST", self.host, self._rest_port, e) from None
        self.rest_port = self._http_server.server_address[1]

    def stop(self) -> None:
        """Stops serving and unloads the models (also after a failed `start`)."""
        self._config_stopped.set()
        if self._config_thread is not None:
            self._config_thread.join(timeout=30)
            self._config_thread = None
        if self._grpc_server is not None:
            self._grpc_server.stop(grace=1).wait()
            self._grpc_server = None
        if self._http_server is not None:
            if self._http_thread is not None:  # shutdown() waits for serve_forever, so only once it runs
                self._http_server.shutdown()
                self._http_thread = None
            self._http_server.server_close()
            self._http_server = None
        self.manager.stop()
        if self.manager.request_logger is not None:
            self.manager.request_logger.close()

    def __enter__(self) -> "LocalModelServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def wait(self) -> None:
        """Blocks until interrupted (the `albert-tf serve` loop)."""
        stop = threading.Event()
        try:
            while not stop.wait(3600):
                pass
        except KeyboardInterrupt:
            pass
