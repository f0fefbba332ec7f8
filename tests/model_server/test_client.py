"""Tests of `albert_tf.model_server.client`: `predict_text` over gRPC and REST against the local server,
status and metadata queries, pairs, and the errors it raises."""

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import _serving_helpers as helpers  # noqa: E402

from albert_tf.model_server import client  # noqa: E402


@pytest.fixture(scope="module")
def addresses(tmp_path_factory):
    server, _ = helpers.shared_server(tmp_path_factory)
    return {"grpc": f"127.0.0.1:{server.grpc_port}", "rest": f"127.0.0.1:{server.rest_port}"}


@pytest.mark.slow
def test_grpc_and_rest_agree(addresses):
    texts = ["the nation", "good law", ""]
    by_grpc = client.predict_text(addresses["grpc"], "cls", texts)
    by_rest = client.predict_text(addresses["rest"], "cls", texts, protocol="rest")
    assert sorted(by_grpc) == sorted(by_rest) == ["label", "label_id", "logits", "probabilities"]
    np.testing.assert_allclose(by_grpc["probabilities"], by_rest["probabilities"], rtol=1e-5)
    assert by_grpc["label"].tolist() == by_rest["label"].tolist()
    rows = client.format_predictions(by_grpc)
    assert len(rows) == 3 and rows[0]["label"] in helpers.LABELS and len(rows[0]["probabilities"]) == 2


@pytest.mark.slow
def test_pairs_status_and_metadata(addresses):
    grpc_scores = client.predict_text(addresses["grpc"], "reg", ["good", "bad"], text_b=["people", "law"])["score"]
    rest_scores = client.predict_text(addresses["rest"], "reg", ["good", "bad"], text_b=["people", "law"], protocol="rest")["score"]
    np.testing.assert_allclose(grpc_scores, rest_scores, rtol=1e-5)
    for protocol in ("grpc", "rest"):
        status = client.model_status(addresses[protocol], "reg", protocol=protocol)
        assert status == [{"version": 1, "state": "AVAILABLE", "error_code": "OK", "error_message": ""}]
        metadata = client.model_metadata(addresses[protocol], "reg", protocol=protocol)
        assert metadata["version"] == 1 and metadata["signature_def"]["regress"]["method_name"] == "tensorflow/serving/regress"


def test_errors(addresses):
    for protocol, not_found in (("grpc", "NOT_FOUND"), ("rest", 404)):
        with pytest.raises(client.ServingClientError) as info:
            client.predict_text(addresses[protocol], "absent", ["a"], protocol=protocol)
        assert info.value.code == not_found and info.value.message == "Servable not found for request: Latest(absent)"
    with pytest.raises(client.ServingClientError) as info:
        client.predict_text(addresses["grpc"], "reg", ["a"])  # a pair model without text_b
    assert info.value.code == "INVALID_ARGUMENT" and "Missing but required: {text_b}." in info.value.message
    with pytest.raises(ValueError, match="no texts"):
        client.predict_text(addresses["grpc"], "cls", [])
    with pytest.raises(ValueError, match="protocol"):
        client.predict_text(addresses["grpc"], "cls", ["a"], protocol="http2")
    with pytest.raises(ValueError, match="2 texts but 1 text_b"):
        client.predict_text(addresses["grpc"], "reg", ["a", "b"], text_b=["c"])


def test_cli_predict_against_the_server(addresses, capsys):
    import json

    from albert_tf.cli import main

    for protocol in ("grpc", "rest"):
        argv = ["predict", "--server", addresses[protocol], "--model", "cls", "--protocol", protocol, "good law", "x"]
        assert main(argv) == 0
        rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert len(rows) == 2 and rows[0]["label"] in helpers.LABELS
    assert main(["predict", "--server", addresses["grpc"], "--model", "absent", "a"]) == 2
    assert "Servable not found" in capsys.readouterr().err
    assert main(["predict", "--server", addresses["grpc"], "a"]) == 2
    assert "--model" in capsys.readouterr().err


def test_format_predictions_turns_string_matrices_into_json():
    """A tagger answers string matrices (entity labels per text): every row must be JSON-able."""
    import json

    outputs = {
        "entity_labels": np.array([[b"PER", b""], [b"LOC", b"ORG"]], dtype=object),
        "entity_starts": np.array([[0, -1], [3, 9]], np.int32),
        "num_entities": np.array([1, 2], np.int32),
        "words": np.array([[b"caf\xc3\xa9"], [b"\xff"]], dtype=object),
    }
    rows = client.format_predictions(outputs)
    assert rows[0] == {"entity_labels": ["PER", ""], "entity_starts": [0, -1], "num_entities": 1, "words": ["café"]}
    assert rows[1]["words"] == ["\ufffd"]
    json.dumps(rows)
