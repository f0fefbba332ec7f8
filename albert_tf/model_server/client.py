"""Clients for TF Serving (or the local stand-in): raw text in, predictions out, over gRPC or REST.

`predict_text(server, model, texts, text_b=None, protocol="grpc", signature="serving_default")`
sends one Predict request with the `text` (and `text_b`) inputs of an exported model and returns
`{output_name: numpy array}`. `model_status` and `model_metadata` query the server. Errors come
back as `ServingClientError` with the server's status code (gRPC code name, or the HTTP status)
and message.

A served model that takes token ids instead of text (a `model.tflite` under
`--prefer_tflite_model`: its one signature, `tokens`, has `input_ids` and no `text`, as
GetModelMetadata shows; `serving_default` then means it) is sent ids tokenized here, with `vocab=` (the export's version directory, or its `spiece.model` /
`vocab.txt`; `albert_tf.model_server.client_tokenizer`).
"""

from __future__ import annotations

import base64
import http.client
import json
import socket
import urllib.error
import urllib.request
from typing import Any, Dict, Optional, Sequence

import numpy as np

from albert_tf.errors import ParameterError, param

PROTOCOLS = ("grpc", "rest")


class ServingClientError(RuntimeError):
    """A request the server rejected: `code` (gRPC code name or HTTP status) and `message`."""

    def __init__(self, code, message: str):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class WrongProtocolError(ParameterError, ServingClientError):
    """The port speaks the other protocol (gRPC where REST was asked for, or the reverse)."""

    def __init__(self, server: str, found: str, asked: str):
        other = "grpc" if found == "gRPC" else "rest"
        ServingClientError.__init__(
            self, "WRONG_PROTOCOL",
            f"{server} speaks {found}, not {'REST' if asked == 'rest' else 'gRPC'}: pass {param('protocol', other)}, "
            f"or the server's {'REST' if asked == 'rest' else 'gRPC'} port",
        )
        self.found = found


def _speaks_http2(server: str, timeout: float) -> bool:
    """Whether `server` answers an HTTP/1.1 request with HTTP/2 frames, as a gRPC server does."""
    host, _, port = server.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]") or "localhost", int(port)), timeout=min(timeout, 5.0)) as sock:
            sock.sendall(b"GET / HTTP/1.1\r\nHost: " + host.encode("ascii", "replace") + b"\r\n\r\n")
            data = sock.recv(64)
    except (OSError, ValueError):
        return False
    # A frame header: 3 bytes of length, then the type: SETTINGS (4) or GOAWAY (7).
    return len(data) >= 9 and not data.startswith(b"HTTP/") and data[3] in (4, 7)


def _speaks_http1(server: str, timeout: float) -> bool:
    """Whether `server` answers an HTTP/1.1 request in HTTP/1.x, as a REST server does."""
    host, _, port = server.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]") or "localhost", int(port)), timeout=min(timeout, 5.0)) as sock:
            sock.sendall(b"GET /v1/models HTTP/1.1\r\nHost: " + host.encode("ascii", "replace") + b"\r\nConnection: close\r\n\r\n")
            data = sock.recv(16)
    except (OSError, ValueError):
        return False
    return data.startswith(b"HTTP/1.")


def _as_list(texts, what: str):
    if isinstance(texts, (str, bytes)):
        texts = [texts]
    texts = list(texts)
    if not texts:
        raise ValueError(f"{what}: no texts to send")
    for i, text in enumerate(texts):
        if not isinstance(text, (str, bytes)):
            raise TypeError(f"{what}[{i}] must be str or bytes, got {type(text).__name__}")
    return [t.encode("utf-8") if isinstance(t, str) else t for t in texts]


def _model_path(model: str, version: Optional[int]) -> str:
    return f"/v1/models/{model}" + (f"/versions/{int(version)}" if version is not None else "")


def _rest_call(server: str, path: str, body: Optional[Dict[str, Any]], timeout: float) -> Dict[str, Any]:
    data = None if body is None else json.dumps(body).encode("utf-8")
    request = urllib.request.Request(f"http://{server}{path}", data=data, method="GET" if body is None else "POST")
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read().decode("utf-8"))
    except urllib.error.HTTPError as e:
        payload = e.read().decode("utf-8", "replace")
        try:
            message = json.loads(payload).get("error", payload)
        except ValueError:
            message = payload
        raise ServingClientError(e.code, message) from None
    except (http.client.HTTPException, ConnectionError, urllib.error.URLError, socket.timeout) as e:
        if _speaks_http2(server, timeout):
            raise WrongProtocolError(server, "gRPC", "rest") from None
        reason = getattr(e, "reason", None) or e
        raise ServingClientError("UNAVAILABLE", f"cannot reach a REST server at {server}: {reason}") from None


def grpc_call(server: str, stub_name: str, method: str, request, timeout: float):
    import grpc
    from tensorflow_serving.apis import model_service_pb2_grpc, prediction_service_pb2_grpc

    module = prediction_service_pb2_grpc if stub_name == "prediction" else model_service_pb2_grpc
    stub_class = module.PredictionServiceStub if stub_name == "prediction" else module.ModelServiceStub
    with grpc.insecure_channel(server) as channel:
        try:
            return getattr(stub_class(channel), method)(request, timeout=timeout)
        except grpc.RpcError as e:
            details = e.details() or ""
            if e.code() == grpc.StatusCode.UNAVAILABLE and _speaks_http1(server, timeout):
                raise WrongProtocolError(server, "REST (HTTP/1.1)", "grpc") from None
            raise ServingClientError(e.code().name, details) from None


def _decode_rest(value: Any) -> np.ndarray:
    def leaf(v):
        if isinstance(v, dict) and set(v) == {"b64"}:
            return base64.b64decode(v["b64"])
        return v.encode("utf-8") if isinstance(v, str) else v

    def walk(v):
        return [walk(x) for x in v] if isinstance(v, list) else leaf(v)

    converted = walk(value)
    array = np.array(converted)
    return array.astype(object) if array.dtype.kind == "S" else array


def predict_text(
    server: str,
    model: str,
    texts: Sequence[str],
    text_b: Optional[Sequence[str]] = None,
    protocol: str = "grpc",
    signature: str = "serving_default",
    version: Optional[int] = None,
    timeout: float = 30.0,
    vocab: Optional[str] = None,
    sequence_length: Optional[int] = None,
) -> Dict[str, np.ndarray]:
    """Predictions of an exported model for raw texts.

    Args:
      server: `HOST:PORT` of the gRPC (8500) or REST (8501) endpoint.
      model: the model name.
      texts: the texts (a str is one text).
      text_b: the second texts of sentence pairs, one per text.
      protocol: "grpc" or "rest".
      signature: the signature to call.
      version: a specific version (default: the newest).
      timeout: seconds.
      vocab: for a signature that takes token ids (looked up with GetModelMetadata): the export's
        version directory (vocabulary, casing and sequence length from its `assets/`) or a
        `spiece.model` / `vocab.txt` file; the texts are tokenized here.
      sequence_length: with `vocab`, the longest packed input (default the export's, or 128 for a
        bare vocabulary file); batches are padded to their longest row rounded up to 16.

    Returns:
      `{output_name: array}` (strings as `bytes` in object arrays).

    Raises:
      ValueError / TypeError: bad arguments, or a token-ids signature without `vocab`.
      ServingClientError: the server's error.
    """
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {PROTOCOLS}, got {protocol!r}")
    inputs = {"text": _as_list(texts, "texts")}
    if text_b is not None:
        inputs["text_b"] = _as_list(text_b, "text_b")
        if len(inputs["text_b"]) != len(inputs["text"]):
            raise ValueError(f"{len(inputs['text'])} texts but {len(inputs['text_b'])} text_b")
    served = model_metadata(server, model, protocol, timeout)["signature_def"]
    if signature == "serving_default" and signature not in served and "tokens" in served:
        signature = "tokens"  # a model.tflite: its one signature is the SavedModel's `tokens`
    definition = served.get(signature)
    if definition is not None and takes_token_ids(definition):
        from albert_tf.model_server import client_tokenizer

        if vocab is None:
            raise ValueError(
                f"{model}'s {signature} signature takes token ids, not text (a TFLite model): give the vocabulary "
                "(--vocab: the export's version directory, or its spiece.model / vocab.txt) to tokenize here"
            )
        layer = client_tokenizer.tokenizer_layer(vocab, sequence_length)
        ids = client_tokenizer.encode(layer, inputs["text"], inputs.get("text_b"))
        return _predict_strings(server, model, ids, protocol, signature, version, timeout)
    return _predict_strings(server, model, inputs, protocol, signature, version, timeout)


def takes_token_ids(signature_def: Dict[str, Any]) -> bool:
    """Whether a signature (GetModelMetadata's dict form) takes `input_ids` and no `text`."""
    inputs = signature_def.get("inputs", {})
    return "input_ids" in inputs and "text" not in inputs


def predict_qa(
    server: str,
    model: str,
    questions: Sequence[str],
    contexts: Sequence[str],
    protocol: str = "grpc",
    version: Optional[int] = None,
    timeout: float = 30.0,
) -> Dict[str, np.ndarray]:
    """Answers of an exported SQuAD model (`serving_default` with `question` and `context`).

    Returns `{output_name: array}`: `answer_text` (bytes), `start_char`, `end_char`, `score`,
    `has_answer`, `num_windows` (and `null_score` for v2); see `albert_tf.tasks.squad.serving`.
    """
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {PROTOCOLS}, got {protocol!r}")
    inputs = {"question": _as_list(questions, "questions"), "context": _as_list(contexts, "contexts")}
    if len(inputs["question"]) != len(inputs["context"]):
        raise ValueError(f"{len(inputs['question'])} questions but {len(inputs['context'])} contexts")
    return _predict_strings(server, model, inputs, protocol, "serving_default", version, timeout)


def _predict_strings(server, model, inputs, protocol, signature, version, timeout) -> Dict[str, np.ndarray]:
    """Predict with string inputs `{name: [bytes]}` (or integer arrays) over gRPC or REST."""
    if protocol == "rest":
        body = {
            "signature_name": signature,
            "inputs": {
                k: v.tolist() if isinstance(v, np.ndarray) else [{"b64": base64.b64encode(t).decode("ascii")} for t in v]
                for k, v in inputs.items()
            },
        }
        outputs = _rest_call(server, _model_path(model, version) + ":predict", body, timeout)["outputs"]
        if not isinstance(outputs, dict):
            # TF Serving's REST API drops the name of a signature's only output: look it up.
            definition = model_metadata(server, model, "rest", timeout)["signature_def"][signature]
            outputs = {next(iter(definition["outputs"])): outputs}
        return {k: _decode_rest(v) for k, v in outputs.items()}
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2

    request = predict_pb2.PredictRequest()
    request.model_spec.name = model
    request.model_spec.signature_name = signature
    if version is not None:
        request.model_spec.version.value = int(version)
    for name, values in inputs.items():
        array = values if isinstance(values, np.ndarray) else np.array(values, dtype=object)
        request.inputs[name].CopyFrom(tf.make_tensor_proto(array))
    response = grpc_call(server, "prediction", "Predict", request, timeout)
    return {k: tf.make_ndarray(v) for k, v in response.outputs.items()}


def model_status(server: str, model: str, protocol: str = "grpc", version: Optional[int] = None, timeout: float = 10.0):
    """`[{"version": int, "state": str, "error_code": str, "error_message": str}]`, newest first."""
    if protocol == "rest":
        result = _rest_call(server, _model_path(model, version), None, timeout)
        return [
            {"version": int(s["version"]), "state": s["state"], "error_code": s["status"]["error_code"], "error_message": s["status"]["error_message"]}
            for s in result["model_version_status"]
        ]
    from tensorflow.core.protobuf import error_codes_pb2
    from tensorflow_serving.apis import get_model_status_pb2

    request = get_model_status_pb2.GetModelStatusRequest()
    request.model_spec.name = model
    if version is not None:
        request.model_spec.version.value = int(version)
    response = grpc_call(server, "model", "GetModelStatus", request, timeout)
    return [
        {
            "version": s.version,
            "state": get_model_status_pb2.ModelVersionStatus.State.Name(s.state),
            "error_code": error_codes_pb2.Code.Name(s.status.error_code),
            "error_message": s.status.error_message,
        }
        for s in response.model_version_status
    ]


def model_metadata(server: str, model: str, protocol: str = "grpc", timeout: float = 10.0) -> Dict[str, Any]:
    """`{"version": int, "signature_def": {key: SignatureDef as a dict}}`."""
    from google.protobuf import json_format

    if protocol == "rest":
        result = _rest_call(server, f"/v1/models/{model}/metadata", None, timeout)
        return {"version": int(result["model_spec"]["version"]), "signature_def": result["metadata"]["signature_def"]["signature_def"]}
    from tensorflow_serving.apis import get_model_metadata_pb2

    request = get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=["signature_def"])
    request.model_spec.name = model
    response = grpc_call(server, "prediction", "GetModelMetadata", request, timeout)
    signature_map = get_model_metadata_pb2.SignatureDefMap()
    response.metadata["signature_def"].Unpack(signature_map)
    as_dict = json_format.MessageToDict(signature_map, preserving_proto_field_name=True)
    return {"version": response.model_spec.version.value, "signature_def": as_dict["signature_def"]}


def format_predictions(outputs: Dict[str, np.ndarray]) -> list:
    """One JSON-able dict per row of a text signature's outputs (for printing)."""
    rows = len(next(iter(outputs.values())))
    result = []
    for i in range(rows):
        row = {}
        for name, value in sorted(outputs.items()):
            row[name] = _json_value(value[i])
        result.append(row)
    return result


def _json_value(item):
    """Bytes as text, arrays as (nested) lists of them: string matrices (entities, words) included."""
    if isinstance(item, bytes):
        return item.decode("utf-8", "replace")
    if isinstance(item, np.ndarray):
        return [_json_value(x) for x in item] if item.dtype == object or item.dtype.kind == "S" else item.tolist()
    if isinstance(item, np.generic):
        return item.item()
    return item
