"""Tests of `albert_tf.model_server.server` / `manager` / `servable`: TF Serving's gRPC and REST protocols,
its error codes and messages, version polling, broken versions, batching, and a bounded load test."""

import base64
import json
import os
import shutil
import sys
import threading
import time
import urllib.error
import urllib.request
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



@pytest.fixture(scope="module")
def server(tmp_path_factory):
    return helpers.shared_server(tmp_path_factory)[0]


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return helpers.shared_server(tmp_path_factory)[1]


@pytest.fixture(scope="module")
def stub(server):
    channel = grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}")
    yield prediction_service_pb2_grpc.PredictionServiceStub(channel)
    channel.close()


def rest(server, path, body=None, raw=None, method=None):
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    request = urllib.request.Request(f"http://127.0.0.1:{server.rest_port}{path}", data=data, method=method or ("GET" if data is None else "POST"))
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def predict_request(texts, model="cls", signature="", version=None, name="text", dtype=object):
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model
    request.model_spec.signature_name = signature
    if version is not None:
        request.model_spec.version.value = version
    request.inputs[name].CopyFrom(tf.make_tensor_proto(np.array(texts, dtype=dtype)))
    return request


def grpc_error(call, request):
    with pytest.raises(grpc.RpcError) as info:
        call(request, timeout=30)
    return info.value.code(), info.value.details()


def test_grpc_predict_classify_regress_metadata_status(server, stub):
    response = stub.Predict(predict_request([b"the nation", b"good law"]), timeout=30)
    assert response.model_spec.name == "cls" and response.model_spec.version.value == 1
    assert response.model_spec.signature_name == "serving_default"
    probabilities = tf.make_ndarray(response.outputs["probabilities"])
    assert probabilities.shape == (2, 2)
    np.testing.assert_allclose(probabilities.sum(-1), 1.0, rtol=1e-5)
    labels = tf.make_ndarray(response.outputs["label"]).tolist()
    assert labels == [helpers.LABELS[i].encode() for i in tf.make_ndarray(response.outputs["label_id"])]

    classify = classification_pb2.ClassificationRequest()
    classify.model_spec.name, classify.model_spec.signature_name = "cls", "classify"
    example = classify.input.example_list.examples.add()
    example.features.feature["text"].bytes_list.value.append(b"the nation")
    result = stub.Classify(classify, timeout=30).result.classifications[0]
    assert [c.label for c in result.classes] == helpers.LABELS
    np.testing.assert_allclose([c.score for c in result.classes], probabilities[0], rtol=1e-5)

    regress = regression_pb2.RegressionRequest()
    regress.model_spec.name, regress.model_spec.signature_name = "reg", "regress"
    context = regress.input.example_list_with_context.context
    context.features.feature["text_b"].bytes_list.value.append(b"people")
    for text in (b"good", b"bad"):
        regress.input.example_list_with_context.examples.add().features.feature["text"].bytes_list.value.append(text)
    values = [r.value for r in stub.Regress(regress, timeout=30).result.regressions]
    pair = predict_request([b"good", b"bad"], model="reg")
    pair.inputs["text_b"].CopyFrom(tf.make_tensor_proto(np.array([b"people"] * 2, dtype=object)))
    np.testing.assert_allclose(values, tf.make_ndarray(stub.Predict(pair, timeout=30).outputs["score"]), rtol=1e-5)

    metadata = get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=["signature_def"])
    metadata.model_spec.name = "cls"
    signature_map = get_model_metadata_pb2.SignatureDefMap()
    stub.GetModelMetadata(metadata, timeout=30).metadata["signature_def"].Unpack(signature_map)
    assert set(signature_map.signature_def) == {"serving_default", "tokens", "classify"}

    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
        status_request = get_model_status_pb2.GetModelStatusRequest()
        status_request.model_spec.name = "reg"
        status = model_service_pb2_grpc.ModelServiceStub(channel).GetModelStatus(status_request, timeout=30)
    assert [(s.version, s.state) for s in status.model_version_status] == [(1, get_model_status_pb2.ModelVersionStatus.AVAILABLE)]


def test_grpc_errors_match_tf_serving(stub):
    code, details = grpc_error(stub.Predict, predict_request([b"a"], signature="nope"))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and details == 'Serving signature key "nope" not found.'
    code, details = grpc_error(stub.Predict, predict_request([b"a"], version=9))
    assert code == grpc.StatusCode.NOT_FOUND and details == "Servable not found for request: Specific(cls, 9)"
    code, details = grpc_error(stub.Predict, predict_request([b"a"], model="missing"))
    assert code == grpc.StatusCode.NOT_FOUND and details == "Servable not found for request: Latest(missing)"
    code, details = grpc_error(stub.Predict, predict_request([1.5], dtype=np.float32))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and details == "Expects arg[0] to be string but float is provided"
    code, details = grpc_error(stub.Predict, predict_request([[b"a", b"b"]]))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "shape [1,2]" in details
    extra = predict_request([b"a"])
    extra.inputs["other"].CopyFrom(tf.make_tensor_proto(np.array([b"b"], dtype=object)))
    code, details = grpc_error(stub.Predict, extra)
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "Sent extra: {other}. Missing but required: {}." in details
    missing = predict_request([b"a"], model="reg")
    code, details = grpc_error(stub.Predict, missing)
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "Missing but required: {text_b}." in details
    code, details = grpc_error(stub.Predict, predict_request([b"x"] * 9))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and details == "Task size 9 is larger than maximum input batch size 8"
    # Length-aware export: token ids of any length up to the sequence length (16), longer refused.
    tokens = predict_request(np.zeros((1, 17), np.int32), signature="tokens", name="input_ids", dtype=np.int32)
    for name in ("input_mask", "segment_ids"):
        tokens.inputs[name].CopyFrom(tf.make_tensor_proto(np.zeros((1, 17), np.int32)))
    code, details = grpc_error(stub.Predict, tokens)
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "at most sequence_length = 16 positions" in details
    classify = classification_pb2.ClassificationRequest()
    classify.model_spec.name = "cls"
    classify.input.example_list.examples.add()
    code, details = grpc_error(stub.Classify, classify)
    assert details == "Expected classification signature method_name to be tensorflow/serving/classify. Was: tensorflow/serving/predict"
    classify.model_spec.signature_name = "classify"
    del classify.input.example_list.examples[:]
    code, details = grpc_error(stub.Classify, classify)
    assert code == grpc.StatusCode.INVALID_ARGUMENT and details == "Input is empty."
    # Empty strings and invalid UTF-8 are valid text: the graph sanitizes, as the Python tokenizers.
    response = stub.Predict(predict_request([b"", b"\xff\xfe caf\xc3"]), timeout=30)
    assert tf.make_ndarray(response.outputs["probabilities"]).shape == (2, 2)


def test_rest_formats(server):
    status, body = rest(server, "/v1/models/cls:predict", {"instances": ["the nation", {"b64": base64.b64encode(b"good").decode()}]})
    assert status == 200 and [sorted(p) for p in body["predictions"]] == [["label", "label_id", "logits", "probabilities"]] * 2
    status, columnar = rest(server, "/v1/models/cls/versions/1:predict", {"inputs": {"text": ["the nation", "good"]}})
    assert status == 200
    np.testing.assert_allclose(columnar["outputs"]["probabilities"], [p["probabilities"] for p in body["predictions"]], rtol=1e-5)
    status, labelled = rest(server, "/v1/models/cls/labels/stable:predict", {"inputs": ["the nation"]})
    assert status == 200 and labelled["outputs"]["label"] == [body["predictions"][0]["label"]]
    status, pair = rest(server, "/v1/models/reg:predict", {"instances": [{"text": "good", "text_b": "people"}]})
    assert status == 200 and isinstance(pair["predictions"][0], float)
    status, classified = rest(server, "/v1/models/cls:classify", {"signature_name": "classify", "examples": [{"text": "the nation"}]})
    assert status == 200 and [c[0] for c in classified["result"][0]] == helpers.LABELS
    status, regressed = rest(server, "/v1/models/reg:regress", {"signature_name": "regress", "context": {"text_b": "people"}, "examples": [{"text": "good"}]})
    assert status == 200 and regressed["result"][0] == pytest.approx(pair["predictions"][0], rel=1e-5)
    status, metadata = rest(server, "/v1/models/cls/metadata")
    assert status == 200 and metadata["model_spec"] == {"name": "cls", "signature_name": "", "version": "1"}
    assert metadata["metadata"]["signature_def"]["signature_def"]["classify"]["method_name"] == "tensorflow/serving/classify"
    status, model_status = rest(server, "/v1/models/cls/versions/1")
    assert status == 200 and model_status["model_version_status"][0]["state"] == "AVAILABLE"


def test_rest_errors_match_tf_serving(server):
    cases = [
        ("/v1/models/cls:predict", None, b"{not json", 400, "JSON Parse error"),
        ("/v1/models/cls:predict", None, b'{"instances": ["\xff"]}', 400, "JSON Parse error: Invalid encoding in string."),
        ("/v1/models/cls:predict", {"instances": [1]}, None, 400, "JSON Value: 1 Type: Number is not of expected type: string"),
        ("/v1/models/cls:predict", {"instances": ["a"], "signature_name": "nope"}, None, 400, 'Serving signature key "nope" not found.'),
        ("/v1/models/cls/versions/4:predict", {"instances": ["a"]}, None, 404, "Servable not found for request: Specific(cls, 4)"),
        ("/v1/models/none:predict", {"instances": ["a"]}, None, 404, "Servable not found for request: Latest(none)"),
        ("/v1/models/cls:predict", {"signature_name": "serving_default"}, None, 400, "Missing 'inputs' or 'instances' key"),
        ("/v1/models/cls:predict", {"instances": ["a"] * 9}, None, 400, "Task size 9 is larger than maximum input batch size 8"),
        ("/v1/models/cls:predict", {"inputs": {"text": ["a"], "more": ["b"]}}, None, 400, "Sent extra: {more}"),
        ("/v1/models/cls/labels/beta:predict", {"instances": ["a"]}, None, 400, "Unrecognized servable version label: beta"),
        ("/v1/models/cls:explain", {"instances": ["a"]}, None, 404, "Malformed request: POST /v1/models/cls:explain"),
    ]
    for path, body, raw, code, message in cases:
        status, answer = rest(server, path, body, raw)
        assert status == code and message in answer["error"], (path, status, answer)
    status, _ = rest(server, "/v1/models/cls:predict", {"instances": ["", "still serving"]})
    assert status == 200


def _copy_version(base, source, target):
    staging = base / "cls" / f".copy-{target}"
    shutil.copytree(base / "cls" / str(source), staging)
    os.rename(staging, base / "cls" / str(target))


def _wait_for(predicate, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return False


@pytest.mark.slow
def test_new_version_without_restart_and_broken_version_keeps_serving(server, stub, base):
    _copy_version(base, 1, 2)
    assert _wait_for(lambda: server.manager.resolve("cls")[0] == 2)
    assert stub.Predict(predict_request([b"a"]), timeout=30).model_spec.version.value == 2
    states = {s.version: s.state for s in server.manager.status("cls")}
    assert states == {2: "AVAILABLE", 1: "END"}
    broken = base / "cls" / "3"
    broken.mkdir()
    (broken / "saved_model.pb").write_bytes(b"not a SavedModel")
    assert _wait_for(lambda: 3 in {s.version for s in server.manager.status("cls") if s.state == "END"})
    status, body = rest(server, "/v1/models/cls/versions/3")
    assert status == 200 and body["model_version_status"][0]["status"]["error_code"] != "OK"
    assert "Failed to load SavedModel" in body["model_version_status"][0]["status"]["error_message"]
    assert stub.Predict(predict_request([b"a"]), timeout=30).model_spec.version.value == 2


@pytest.mark.slow
def test_load_eight_clients_by_200_requests(server, stub):
    import psutil

    process = psutil.Process()
    texts = [b"the nation of people", b"good law in states", b""]

    def client(errors, latencies, count):
        for i in range(count):
            start = time.perf_counter()
            try:
                response = stub.Predict(predict_request([texts[i % 3]]), timeout=30)
                if tf.make_ndarray(response.outputs["probabilities"]).shape != (1, 2):
                    errors.append("bad shape")
            except grpc.RpcError as e:
                errors.append(e.details())
            latencies.append(time.perf_counter() - start)

    def run(count):
        errors, latencies = [], []
        threads = [threading.Thread(target=client, args=(errors, latencies, count)) for _ in range(8)]
        start = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=240)
        return errors, latencies, time.perf_counter() - start

    run(20)  # warm the channel, the batch threads and the allocator
    rss_before = process.memory_info().rss
    errors, latencies, elapsed = run(200)
    rss_after = process.memory_info().rss
    assert errors == [] and len(latencies) == 1600
    assert elapsed < 240
    growth_mb = (rss_after - rss_before) / 2**20
    print(f"\nload: 1600 requests in {elapsed:.1f}s ({1600 / elapsed:.0f}/s), p50 {np.percentile(latencies, 50) * 1e3:.1f} ms, "
          f"p99 {np.percentile(latencies, 99) * 1e3:.1f} ms, RSS {rss_before / 2**20:.0f} -> {rss_after / 2**20:.0f} MiB")
    assert growth_mb < 64, f"RSS grew by {growth_mb:.0f} MiB over 1600 requests"
