"""Hardening of `albert_tf.model_server.server`: request size limit, read timeout, Content-Length
checks, client mistakes answered as client errors (never 500 / UNKNOWN), empty batches, taken
ports, and a bounded, seeded fuzz of malformed REST and gRPC requests."""

import http.client
import json
import random
import socket
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import _serving_helpers as helpers  # noqa: E402

import grpc  # noqa: E402
from tensorflow_serving.apis import (  # noqa: E402
    classification_pb2,
    get_model_metadata_pb2,
    get_model_status_pb2,
    model_service_pb2_grpc,
    predict_pb2,
    prediction_service_pb2_grpc,
    regression_pb2,
)

from tensorflow.core.framework.tensor_pb2 import TensorProto  # noqa: E402

from albert_tf.export.serving_config import BatchingConfig  # noqa: E402
from albert_tf.model_server import server as server_module  # noqa: E402
from albert_tf.model_server.server import LocalModelServer, default_max_request_bytes  # noqa: E402

READ_TIMEOUT_S = 1.0
TOKENS = {"input_ids": [2] * helpers.SEQ, "input_mask": [1] * helpers.SEQ, "segment_ids": [0] * helpers.SEQ}


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return helpers.export_base(tmp_path_factory)


@pytest.fixture(scope="module")
def server(base):
    # The shared export base batches at most 8 rows: the default limit is derived from that.
    with LocalModelServer(str(base), poll_interval_s=0, rest_read_timeout_s=READ_TIMEOUT_S) as running:
        yield running


@pytest.fixture(scope="module")
def channel(server):
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as opened:
        yield opened


def exchange(server, data: bytes, half_close: bool = True):
    """Sends raw bytes to the REST port; returns `(status, JSON body)` of the answer."""
    with socket.create_connection(("127.0.0.1", server.rest_port), timeout=30) as conn:
        try:
            conn.sendall(data)
            if half_close:
                conn.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # the server may refuse before all is sent; its answer is still there to read
        response = http.client.HTTPResponse(conn)
        response.begin()
        payload = response.read()
        return response.status, json.loads(payload)


def request_bytes(path: str, body: bytes, method: str = "POST", headers=None) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: localhost"]
    lines += headers if headers is not None else [f"Content-Length: {len(body)}"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8") + body


def post(server, path: str, body) -> tuple:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return exchange(server, request_bytes(path, data))


def predict_request(model="cls", signature="", **tensors):
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model
    request.model_spec.signature_name = signature
    for name, value in tensors.items():
        request.inputs[name].CopyFrom(value if isinstance(value, TensorProto) else tf.make_tensor_proto(value))
    return request


def grpc_error(channel, request):
    stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
    with pytest.raises(grpc.RpcError) as info:
        stub.Predict(request, timeout=30)
    return info.value.code(), info.value.details()


def still_serving(server, channel):
    status, body = post(server, "/v1/models/cls:predict", {"instances": ["the nation"]})
    assert status == 200 and len(body["predictions"]) == 1
    stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
    response = stub.Predict(predict_request(text=np.array([b"good law"], dtype=object)), timeout=30)
    assert tf.make_ndarray(response.outputs["probabilities"]).shape == (1, 2)


# --- 1. size limit, read timeout, Content-Length ------------------------------------------------------


@pytest.mark.slow
def test_default_limit_admits_the_largest_batch_and_refuses_more(server):
    limit = 8 * 2 * 64 * 1024 * 3 + 64 * 1024
    assert server.max_request_bytes == default_max_request_bytes(BatchingConfig(max_batch_size=8)) == limit
    assert default_max_request_bytes(None) == default_max_request_bytes(BatchingConfig()) == 32 * 2 * 64 * 1024 * 3 + 64 * 1024
    # The largest accepted batch at worst-case JSON size: 8 rows of two 64 KiB texts whose every
    # character is escaped to 3x its UTF-8 bytes ("\u00e9" for the 2 bytes of é).
    text = "é" * (32 * 1024)
    body = json.dumps({"instances": [{"text": text, "text_b": text}] * 8}).encode()
    assert len(body) <= limit
    status, answer = post(server, "/v1/models/reg:predict", body)
    assert status == 200 and len(answer["predictions"]) == 8

    # Refused before reading: a huge declared length with no body (was a 500 MemoryError) ...
    status, answer = exchange(server, request_bytes("/v1/models/cls:predict", b"", headers=["Content-Length: 100000000000"]))
    assert status == 413 and answer["error"] == (
        f"Request body of 100000000000 bytes is larger than the server's limit of {limit} bytes (max_request_bytes)"
    )
    # ... and a body one byte over the limit, sent in full: the client still reads the 413.
    status, answer = exchange(server, request_bytes("/v1/models/cls:predict", b" " * (limit + 1)))
    assert status == 413 and f"Request body of {limit + 1} bytes" in answer["error"]
    # A client asking first (Expect: 100-continue, as curl does) is refused without sending it.
    headers = [f"Content-Length: {limit + 1}", "Expect: 100-continue"]
    status, answer = exchange(server, request_bytes("/v1/models/cls:predict", b"", headers=headers), half_close=False)
    assert status == 413


@pytest.mark.slow
def test_limits_are_options_and_serve_flags(base, tmp_path):
    from albert_tf.cli import build_parser

    with LocalModelServer(str(base), ["cls"], grpc_port=None, poll_interval_s=0, max_request_bytes=1000, rest_read_timeout_s=5) as small:
        assert small.max_request_bytes == 1000 and small.rest_read_timeout_s == 5.0
        status, answer = post(small, "/v1/models/cls:predict", {"instances": ["x" * 1000]})
        assert status == 413 and "limit of 1000 bytes" in answer["error"]
        assert post(small, "/v1/models/cls:predict", {"instances": ["x"]})[0] == 200
    with pytest.raises(ValueError, match="max_request_bytes must be a positive integer"):
        LocalModelServer(str(base), max_request_bytes=0)
    with pytest.raises(ValueError, match="rest_read_timeout_s must be a positive number"):
        LocalModelServer(str(base), rest_read_timeout_s=0)
    args = build_parser().parse_args(["serve", "--export-base", str(base), "--max-request-bytes", "5000",
                                      "--rest-read-timeout-seconds", "2.5"])
    assert args.max_request_bytes == 5000 and args.rest_read_timeout_seconds == 2.5
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--export-base", str(base), "--max-request-bytes", "-1"])


@pytest.mark.slow
def test_bad_content_length_is_a_400(server, channel):
    path = "/v1/models/cls:predict"
    cases = [
        (["Content-Length: abc"], 400, "Invalid Content-Length header 'abc': it must be a non-negative integer"),
        (["Content-Length: -5"], 400, "Invalid Content-Length header '-5'"),
        (["Content-Length: 1e3"], 400, "Invalid Content-Length header '1e3'"),
        (["Content-Length: 5", "Content-Length: 6"], 400, "Conflicting Content-Length headers: 5, 6"),
        (["Content-Length: " + "9" * 5000], 413, "Request body of over 10^30 bytes"),
        (["Transfer-Encoding: chunked"], 411, "Transfer-Encoding is not supported"),
    ]
    for headers, code, message in cases:
        status, answer = exchange(server, request_bytes(path, b'{"instances": ["a"]}', headers=headers))
        assert status == code and message in answer["error"], (headers, status, answer)
    # Leading zeros are still a valid length; a body cut short (the client half-closed) is a 400.
    status, _ = exchange(server, request_bytes(path, b'{"instances": ["a"]}', headers=["Content-Length: 00020"]))
    assert status == 200
    status, answer = exchange(server, request_bytes(path, b'{"instan', headers=["Content-Length: 20"]))
    assert status == 400 and answer["error"] == "Request body truncated: the connection ended after 8 of the 20 bytes of Content-Length"
    still_serving(server, channel)


@pytest.mark.slow
def test_incomplete_body_and_idle_connection_time_out(server, channel):
    with socket.create_connection(("127.0.0.1", server.rest_port), timeout=30) as conn:
        conn.sendall(request_bytes("/v1/models/cls:predict", b"{", headers=["Content-Length: 100"]))
        response = http.client.HTTPResponse(conn)
        response.begin()
        answer = json.loads(response.read())
        assert response.status == 408
        assert answer["error"] == f"Request body not received within {READ_TIMEOUT_S:g} s: 1 of the 100 bytes of Content-Length arrived"
        assert conn.recv(1) == b""  # and the connection is closed
    with socket.create_connection(("127.0.0.1", server.rest_port), timeout=30) as idle:
        assert idle.recv(1) == b""  # a connection that sends nothing is closed too
    still_serving(server, channel)


# --- 2. client mistakes are client errors -------------------------------------------------------------


def test_client_mistakes_are_400_not_500(server):
    tokens = dict(TOKENS)
    cases = [
        (b'{"instances": ' + b"[" * 100000 + b"]" * 100000 + b"}", "JSON Parse error: the document is nested too deeply"),
        (b'{"instances": ' + b"[" * 800 + b'"a"' + b"]" * 800 + b"}", "input text: lists nested deeper than a tensor's 254 dimensions"),
        (b'{"instances": [' + b"1" * 5000 + b"]}", "JSON Parse error: Exceeds the limit (4300 digits)"),
        ({"signature_name": "tokens", "instances": [{**tokens, "input_ids": [2**40] + [0] * 15}]},
         "JSON Value: 1099511627776 Type: Number is not of expected type: int32 (out of its range [-2147483648, 2147483647])"),
        ({"signature_name": "tokens", "instances": [{**tokens, "input_ids": [-1] + [0] * 15}]},
         "input input_ids: indices[0,0] = -1 is negative; ids index the embedding table and must be >= 0"),
        ({"signature_name": "tokens", "inputs": {**{k: [v] for k, v in tokens.items()}, "segment_ids": [[0] * 15 + [-2]]}},
         "input segment_ids: indices[0,15] = -2 is negative"),
        ({"signature_name": "tokens", "instances": [{**tokens, "input_ids": [99999] + [0] * 15}]}, "assertion failed: [input_ids must be < the vocabulary size 48]"),
        ({"signature_name": "tokens", "instances": [{**tokens, "input_ids": [1.5] + [0] * 15}]},
         "JSON Value: 1.5 Type: Number is not of expected type: int32"),
        ({"instances": ["\ud800"]}, "JSON Parse error: The surrogate pair in string is invalid."),
        ({"instances": ["a"], "signature_name": "\udc00"}, "JSON Parse error: The surrogate pair in string is invalid."),
        ({"signature_name": "classify", "examples": [{"\ud83d": "a"}]}, "JSON Parse error: The surrogate pair in string is invalid."),
        # The echoed value is cut short: an error message does not repeat a large request.
        ({"instances": [{"b64": {"deep": [[[[1]]]] * 5000}}]}, 'JSON Value: {"b64": {"deep": [[[[1]]], [[[1]]], '),
    ]
    for body, message in cases:
        status, answer = post(server, "/v1/models/cls:predict", body)
        # An id past the table: the graph's assert, or the gather's own error where the graph has none.
        accepted = (message, "indices[0,0] = 99999 is not in [0, 48)") if "vocabulary size" in message else (message,)
        assert status == 400 and answer["error"].startswith(accepted) and len(answer["error"]) < 200, (message, status, answer)
    # A valid surrogate pair (json.dumps escapes emoji so) is text like any other.
    status, answer = post(server, "/v1/models/cls:predict", {"instances": ["good 😀"]})
    assert status == 200
    status, answer = post(server, "/v1/models/cls:classify", {"signature_name": "classify", "examples": [{"text": "a", "n": 2**70}]})
    assert status == 400 and answer["error"].startswith("Feature n: a value is out of range")
    status, answer = exchange(server, request_bytes("/v1/models/cls:predict", b"", method="DELETE"))
    assert status == 405 and answer["error"] == "Method DELETE is not allowed: the REST API takes GET and POST"


def test_grpc_mistakes_are_invalid_argument_not_unknown(server, channel):
    def tensor(dtype, dims):
        proto = TensorProto(dtype=dtype)
        for size in dims:
            proto.tensor_shape.dim.add(size=size)
        return proto

    cases = [
        (tensor(21, [1]), "input text: a tensor of dtype DT_VARIANT cannot be sent in a request"),
        (tensor(20, [1]), "input text: a tensor of dtype DT_RESOURCE cannot be sent in a request"),
        (tensor(101, [1]), "input text: a tensor of dtype DT_FLOAT_REF cannot be sent in a request"),
        (tensor(999, [1]), "input text: a tensor of dtype 999 cannot be sent in a request"),
        (tensor(7, [2**40]), f"input text: shape [1099511627776] decodes to more than the request limit of {server.max_request_bytes} bytes"),
        (tensor(2, [server.max_request_bytes // 8 + 1]), "input text: shape ["),
        (tensor(7, [-3]), "input text: invalid tensor shape [-3]: sizes must be >= 0"),
    ]
    for proto, message in cases:
        code, details = grpc_error(channel, predict_request(text=proto))
        assert code == grpc.StatusCode.INVALID_ARGUMENT and details.startswith(message), (message, details)
    unsigned = tensor(17, [2])  # DT_UINT16 with an int_val out of its range
    unsigned.int_val.extend([-1, 5])
    code, details = grpc_error(channel, predict_request(text=unsigned))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and details.startswith("input text: invalid tensor:")
    content = tensor(1, [3])
    content.tensor_content = b"\0" * 5
    code, details = grpc_error(channel, predict_request(text=content))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and details.startswith("input text: invalid tensor:")
    tokens = {k: np.array([v], np.int32) for k, v in TOKENS.items()}
    for ids in (-1, -48):
        tokens["input_ids"][0, 3] = ids
        assert grpc_error(channel, predict_request(signature="tokens", **tokens)) == (
            grpc.StatusCode.INVALID_ARGUMENT,
            f"input input_ids: indices[0,3] = {ids} is negative; ids index the embedding table and must be >= 0",
        )
    code, details = grpc_error(channel, predict_request(text=np.array(["x" * (server.max_request_bytes + 1)], dtype=object)))
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED


# --- 3. empty batches -------------------------------------------------------------------------------


def test_empty_batches_are_refused_on_every_path(server, channel):
    assert post(server, "/v1/models/cls:predict", {"instances": []}) == (
        400, {"error": "No values in 'instances' array: a request needs at least one instance"}
    )
    empty = {"error": "input text is an empty batch (0 rows): a request needs at least one row"}
    assert post(server, "/v1/models/cls:predict", {"inputs": {"text": []}}) == (400, empty)
    assert post(server, "/v1/models/cls:predict", {"inputs": []}) == (400, empty)
    assert grpc_error(channel, predict_request(text=np.array([], dtype=object))) == (grpc.StatusCode.INVALID_ARGUMENT, empty["error"])
    tokens = {k: np.zeros((0, helpers.SEQ), np.int32) for k in TOKENS}
    code, details = grpc_error(channel, predict_request(signature="tokens", **tokens))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "is an empty batch (0 rows)" in details


# --- 4. taken ports ---------------------------------------------------------------------------------


def test_taken_ports_are_refused(server, channel, base, monkeypatch, capsys):
    from albert_tf.cli import main

    grpc_taken = f"gRPC port {server.grpc_port} on 127.0.0.1 is already in use (another server is listening on it)"
    rest_taken = f"REST port {server.rest_port} on 127.0.0.1 is already in use (another server is listening on it)"
    with pytest.raises(OSError) as info:
        LocalModelServer(str(base), grpc_port=server.grpc_port, rest_port=None, poll_interval_s=0).start()
    assert str(info.value) == grpc_taken
    with pytest.raises(OSError) as info:
        LocalModelServer(str(base), grpc_port=0, rest_port=server.rest_port, poll_interval_s=0).start()
    assert str(info.value) == rest_taken

    assert main(["serve", "--export-base", str(base), "--port", str(server.grpc_port), "--rest-api-port", "0"]) == 2
    assert capsys.readouterr().err.splitlines() == [f"albert-tf serve: error: {grpc_taken}"]
    assert main(["serve", "--export-base", str(base), "--port", "0", "--rest-api-port", str(server.rest_port)]) == 2
    assert capsys.readouterr().err.splitlines() == [f"albert-tf serve: error: {rest_taken}"]

    # gRPC itself refuses the port too (no SO_REUSEPORT), not only the probe before it.
    monkeypatch.setattr(server_module, "_check_port_free", lambda *args: None)
    with pytest.raises(OSError, match=f"gRPC port {server.grpc_port} on 127.0.0.1 cannot be listened on"):
        LocalModelServer(str(base), grpc_port=server.grpc_port, rest_port=None, poll_interval_s=0).start()
    still_serving(server, channel)


# --- 5. fuzz ----------------------------------------------------------------------------------------

_VALID_REST = [
    ("/v1/models/cls:predict", {"instances": ["the nation", "good law"]}),
    ("/v1/models/cls:predict", {"inputs": {"text": ["people"]}}),
    ("/v1/models/reg:predict", {"instances": [{"text": "a", "text_b": "b"}]}),
    ("/v1/models/cls:predict", {"signature_name": "tokens", "instances": [TOKENS]}),
    ("/v1/models/cls:classify", {"signature_name": "classify", "examples": [{"text": "x"}]}),
    ("/v1/models/reg:regress", {"signature_name": "regress", "context": {"text_b": "y"}, "examples": [{"text": "x"}]}),
]
_ODD_VALUES = [
    2**40, -1, -(2**63), 2**64, 10**400, 99999, 1.5, -0.0, float("nan"), float("inf"), "", "text", "\ud800", "é" * 3,
    None, True, False, [], {}, [[[]]], [[1, 2], [3]], {"b64": "!!"}, {"b64": 5}, {"b64": "Zm9v"}, [[[[[[[[1]]]]]]]],
    ["a"] * 9, [[0] * helpers.SEQ], {"text": "a"}, {"instances": []},
]
_PATHS = [
    "/v1/models/cls:predict", "/v1/models/cls/versions/1:predict", "/v1/models/cls/versions/99999999999999999999:predict",
    "/v1/models/cls/labels/stable:predict", "/v1/models/cls:classify", "/v1/models/reg:regress", "/v1/models/nope:predict",
    "/v1/models/cls", "/v1/models/cls/metadata", "/v1/models/cls:explain", "/v2/models/cls:predict", "/", "/v1/models/%ff:predict",
    "/v1/models/cls/versions/abc:predict", "/v1/models/" + "x" * 3000 + ":predict",
]


def _mutate(value, rng, depth=0):
    if rng.random() < 0.15 or depth > 4:
        return rng.choice(_ODD_VALUES)
    if isinstance(value, dict):
        out = {k: _mutate(v, rng, depth + 1) for k, v in value.items() if rng.random() > 0.1}
        if rng.random() < 0.2:
            out[rng.choice(["instances", "inputs", "signature_name", "examples", "context", "extra", ""])] = rng.choice(_ODD_VALUES)
        return out
    if isinstance(value, list):
        return [_mutate(v, rng, depth + 1) for v in value if rng.random() > 0.1]
    return value


def _rest_case(rng):
    path, body = rng.choice(_VALID_REST)
    data = json.dumps(_mutate(body, rng)).encode()
    kind = rng.randrange(16)  # about 3 in 4 requests are well-framed JSON with odd values
    if kind == 0:
        data = bytes(rng.randrange(256) for _ in range(rng.randrange(64)))  # random bytes
    elif kind == 1:
        data = data[: rng.randrange(len(data) + 1)]  # cut JSON
    elif kind == 2:
        at = rng.randrange(len(data) + 1)
        data = data[:at] + rng.choice([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x00"]) + data[at:]  # invalid UTF-8
    elif kind == 3:
        data = b'{"instances": ' + b"[" * rng.randrange(200, 3000) + b"]}"  # deep nesting
    if rng.random() < 0.1:
        path = rng.choice(_PATHS)
    method = "POST" if rng.random() < 0.9 else rng.choice(["GET", "PUT", "DELETE", "PATCH", "OPTIONS", "FOO"])
    headers = [f"Content-Length: {len(data)}"]
    framing = rng.randrange(20)
    if framing == 0:
        headers = [f"Content-Length: {rng.choice(['abc', '-1', '1e3', '', ' ', '0x10', '99999999999999999999', '١٢'])}"]
    elif framing == 1:
        headers = [f"Content-Length: {len(data) + rng.randrange(1, 50)}"]  # truncated body (then half-closed)
    elif framing == 2:
        headers = []  # no length: the body is not read as one
    elif framing == 3:
        headers = [f"Content-Length: {len(data)}", f"Content-Length: {len(data) + 1}"]
    elif framing == 4:
        headers = ["Transfer-Encoding: chunked"]
    return request_bytes(path, data, method=method, headers=headers)


def _tensor_proto(rng):
    kind = rng.randrange(5)
    if kind == 0:
        proto = TensorProto(dtype=rng.choice(list(range(0, 30)) + [101, 107, 120, 999]))
        for _ in range(rng.randrange(4)):
            proto.tensor_shape.dim.add(size=rng.choice([-1, 0, 1, 2, 16, 2**31, 2**62]))
        if rng.random() < 0.3:
            proto.tensor_shape.unknown_rank = True
        if rng.random() < 0.5:
            proto.tensor_content = bytes(rng.randrange(256) for _ in range(rng.randrange(40)))
        if rng.random() < 0.3:
            proto.string_val.extend([b"\xff\xfe", b"text"])
        if rng.random() < 0.3:
            proto.int_val.extend([-1, 2**31 - 1, 5])
        return proto
    shape = tuple(rng.choice([0, 1, 2, 9, helpers.SEQ, helpers.SEQ]) for _ in range(rng.choice([0, 1, 1, 2, 2, 3])))
    dtype = rng.choice([object, object, np.int32, np.int32, np.int64, np.float32, np.bool_, np.uint8, np.float16, np.complex64])
    if dtype is object:
        values = np.array([rng.choice([b"", b"the nation", b"\xff\xc3", "é".encode()]) for _ in range(int(np.prod(shape)))], dtype=object)
    else:
        with np.errstate(all="ignore"):  # wrapping out-of-range values (uint8, float16) is the point
            values = np.array([rng.choice([0, 1, 2, -1, 47, 48, 99999, 2**31 - 1]) for _ in range(int(np.prod(shape)))]).astype(dtype)
    return tf.make_tensor_proto(values.reshape(shape))


def _model_spec(spec, rng):
    # Mostly a model spec that resolves, so that most requests reach the input checks.
    spec.name = rng.choice(["cls"] * 6 + ["reg"] * 2 + ["", "nope", "é"])
    choice = rng.randrange(8)
    if choice == 1:
        spec.version.value = rng.choice([0, 1, 2, -1, 2**62])
    elif choice == 2:
        spec.version_label = rng.choice(["stable", "canary", ""])
    spec.signature_name = rng.choice(["", "", "serving_default", "tokens", "tokens", "classify", "regress", "nope", "\u00e9"])


def _grpc_call(rng, stubs):
    prediction, model = stubs
    kind = rng.randrange(10)
    if kind < 6:
        request = predict_pb2.PredictRequest()
        _model_spec(request.model_spec, rng)
        names = ["input_ids", "input_mask", "segment_ids"] if request.model_spec.signature_name == "tokens" else ["text"]
        for name in names + rng.sample(["text", "text_b", "input_ids", "inputs", "", "x"], rng.choice([0, 0, 1])):
            request.inputs[name].CopyFrom(_tensor_proto(rng))
        if rng.random() < 0.2:
            request.output_filter.extend(rng.sample(["label", "probabilities", "score", "nope", ""], 2))
        return prediction.Predict, request
    if kind < 8:
        request = (classification_pb2.ClassificationRequest if kind == 6 else regression_pb2.RegressionRequest)()
        _model_spec(request.model_spec, rng)
        examples = request.input.example_list if rng.random() < 0.5 else request.input.example_list_with_context
        for _ in range(rng.randrange(3)):
            features = examples.examples.add().features.feature
            for name in rng.sample(["text", "text_b", "n", ""], rng.randrange(3)):
                feature = features[name]
                pick = rng.randrange(3)
                if pick == 0:
                    feature.bytes_list.value.extend([b"good", b"\xff"][: rng.randrange(3)])
                elif pick == 1:
                    feature.int64_list.value.extend([1, -(2**63)])
                else:
                    feature.float_list.value.append(float("nan"))
        call = prediction.Classify if kind == 6 else prediction.Regress
        return call, request
    if kind == 8:
        request = get_model_metadata_pb2.GetModelMetadataRequest()
        _model_spec(request.model_spec, rng)
        request.metadata_field.extend(rng.sample(["signature_def", "other", ""], rng.randrange(3)))
        return prediction.GetModelMetadata, request
    request = get_model_status_pb2.GetModelStatusRequest()
    _model_spec(request.model_spec, rng)
    return model.GetModelStatus, request


def test_fuzz_malformed_requests_get_client_errors(server, channel):
    rng = random.Random(20240611)
    for index in range(300):
        data = _rest_case(rng)
        status, answer = exchange(server, data)
        assert status < 500, (index, data[:300], status, answer)
        assert status < 400 or isinstance(answer.get("error"), str), (index, data[:300], answer)
    stubs = (prediction_service_pb2_grpc.PredictionServiceStub(channel), model_service_pb2_grpc.ModelServiceStub(channel))
    for index in range(200):
        call, request = _grpc_call(rng, stubs)
        try:
            call(request, timeout=30)
        except grpc.RpcError as e:
            assert e.code() not in (grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL), (index, str(request)[:400], e.code(), e.details())
    still_serving(server, channel)
