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
`grpc_port`/`rest_port`). It is not hardened for untrusted networks: bind it to loopback.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import re
import threading
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from albert_tf.export.serving_config import BATCHING_FILE, BatchingConfig, model_versions, read_batching_parameters
from albert_tf.export.signatures import CLASSIFY_METHOD, REGRESS_METHOD
from albert_tf.serving.manager import ModelManager, serialized_examples
from albert_tf.serving.servable import INVALID_ARGUMENT, NOT_FOUND, ServingError

logger = logging.getLogger(__name__)

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


def _make_servicers(manager: ModelManager):
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

        return wrapper

    def set_spec(response, name, version, key):
        response.model_spec.name = name
        response.model_spec.version.value = version
        response.model_spec.signature_name = key

    class PredictionServicer(prediction_service_pb2_grpc.PredictionServiceServicer):
        @guarded
        def Predict(self, request, context):  # noqa: N802 (the gRPC method name)
            name, version, label = _spec(request)
            try:
                inputs = {k: tf.make_ndarray(v) for k, v in request.inputs.items()}
            except (TypeError, ValueError) as e:
                raise ServingError(INVALID_ARGUMENT, f"Invalid input tensor: {e}") from None
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


def _type_error(value: Any, dtype_name: str) -> ServingError:
    return ServingError(
        INVALID_ARGUMENT,
        f"JSON Value: {json.dumps(value)} Type: {_json_type(value)} is not of expected type: {dtype_name}",
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
            return value
        raise _type_error(value, np.dtype(dtype).name)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    if value in ("NaN", "Infinity", "-Infinity"):
        return float(value.replace("Infinity", "inf"))
    raise _type_error(value, np.dtype(dtype).name)


def _to_array(value: Any, dtype, what: str) -> np.ndarray:
    def convert(v):
        if isinstance(v, list):
            return [convert(x) for x in v]
        return _convert_leaf(v, dtype)

    converted = convert(value)
    try:
        array = np.array(converted, dtype=dtype)
    except ValueError:
        raise ServingError(INVALID_ARGUMENT, f"{what}: all items must have the same shape (a dense tensor)") from None
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
        if not isinstance(instances, list) or not instances:
            raise ServingError(INVALID_ARGUMENT, "'instances' must be a non-empty JSON array")
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
    if all(isinstance(v, str) or (isinstance(v, dict) and set(v) == {"b64"}) for v in values):
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=[_convert_leaf(v, np.object_) for v in values]))
    if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=values))
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return tf.train.Feature(float_list=tf.train.FloatList(value=values))
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


class _RestHandler(BaseHTTPRequestHandler):
    manager: ModelManager  # set on the subclass made per server
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):  # noqa: A002 (the stdlib's signature)
        logger.debug("rest: " + format, *args)

    def _send(self, status: int, payload: Dict[str, Any]) -> None:
        data = json.dumps(payload, ensure_ascii=False, allow_nan=False).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, error: ServingError) -> None:
        self._send(HTTP_STATUS.get(error.code, 500), {"error": error.message})

    def _route(self, method: str):
        match = _PATH.match(self.path.split("?", 1)[0])
        if not match:
            raise ServingError(NOT_FOUND, f"Malformed request: {method} {self.path}")
        name, version, label, metadata, verb = match.groups()
        if (method == "GET") != (verb is None):
            raise ServingError(NOT_FOUND, f"Malformed request: {method} {self.path}")
        return name, int(version) if version else None, label, bool(metadata), verb

    def do_GET(self):  # noqa: N802 (BaseHTTPRequestHandler's name)
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
        try:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length > 0 else b""
            name, version, label, _, verb = self._route("POST")
            try:
                body = json.loads(raw.decode("utf-8"))
            except UnicodeDecodeError:
                raise ServingError(INVALID_ARGUMENT, "JSON Parse error: Invalid encoding in string.") from None
            except json.JSONDecodeError as e:
                raise ServingError(INVALID_ARGUMENT, f"JSON Parse error: {e.msg}. at offset: {e.pos}") from None
            if not isinstance(body, dict):
                raise ServingError(INVALID_ARGUMENT, "JSON Parse error: the request body must be a JSON object")
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


class LocalModelServer:
    """gRPC + REST front ends over a `ModelManager`, on `host` (127.0.0.1 by default).

    Args:
      export_base: the directory of `<model_name>/<version>/` SavedModels.
      model_names: the models to serve (default: every model directory with a version).
      grpc_port, rest_port: ports (0: a free port, see the attributes after `start`; None: off).
      batching: batching settings; default `batching_parameters.txt` of `export_base` if present.
      poll_interval_s: version polling interval (TF Serving's file system poll).
      version_labels: `{model_name: {label: version}}`.
      host: the address to bind; keep loopback for development.
    """

    def __init__(
        self,
        export_base: str,
        model_names: Optional[List[str]] = None,
        grpc_port: Optional[int] = 0,
        rest_port: Optional[int] = 0,
        batching: Optional[BatchingConfig] = None,
        poll_interval_s: float = 1.0,
        version_labels: Optional[Dict[str, Dict[str, int]]] = None,
        host: str = "127.0.0.1",
        grpc_workers: int = 16,
    ):
        if model_names is None:
            model_names = sorted(
                n for n in os.listdir(export_base) if not n.startswith(".") and model_versions(os.path.join(export_base, n))
            )
        if not model_names:
            raise ValueError(f"{export_base} holds no model with an integer version directory")
        if batching is None and os.path.isfile(os.path.join(export_base, BATCHING_FILE)):
            batching = read_batching_parameters(os.path.join(export_base, BATCHING_FILE))
        self.manager = ModelManager(
            {n: os.path.join(export_base, n) for n in model_names}, batching, poll_interval_s, version_labels
        )
        self.host = host
        self._grpc_port, self._rest_port = grpc_port, rest_port
        self._grpc_workers = grpc_workers
        self.grpc_port: Optional[int] = None
        self.rest_port: Optional[int] = None
        self._grpc_server = None
        self._http_server: Optional[ThreadingHTTPServer] = None
        self._http_thread: Optional[threading.Thread] = None

    def start(self) -> "LocalModelServer":
        """Loads the models and starts listening; returns self."""
        import grpc

        self.manager.start()
        if self._grpc_port is not None:
            prediction, model, prediction_grpc, model_grpc = _make_servicers(self.manager)
            self._grpc_server = grpc.server(futures.ThreadPoolExecutor(max_workers=self._grpc_workers))
            prediction_grpc.add_PredictionServiceServicer_to_server(prediction, self._grpc_server)
            model_grpc.add_ModelServiceServicer_to_server(model, self._grpc_server)
            self.grpc_port = self._grpc_server.add_insecure_port(f"{self.host}:{self._grpc_port}")
            if not self.grpc_port:
                raise OSError(f"cannot bind gRPC to {self.host}:{self._grpc_port}")
            self._grpc_server.start()
        if self._rest_port is not None:
            handler = type("RestHandler", (_RestHandler,), {"manager": self.manager})
            self._http_server = ThreadingHTTPServer((self.host, self._rest_port), handler)
            self._http_server.daemon_threads = True
            self.rest_port = self._http_server.server_address[1]
            self._http_thread = threading.Thread(target=self._http_server.serve_forever, name="rest", daemon=True)
            self._http_thread.start()
        return self

    def stop(self) -> None:
        if self._grpc_server is not None:
            self._grpc_server.stop(grace=1).wait()
        if self._http_server is not None:
            self._http_server.shutdown()
            self._http_server.server_close()
        self.manager.stop()

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
