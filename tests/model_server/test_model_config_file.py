"""`albert-tf serve --model_config_file`: TF Serving's `ModelServerConfig` text file served by the local
server — version policies, version labels over REST and gRPC (checked as TF Serving checks them),
re-reading the file while serving, one-line refusals of what it does not support, and one log line
per load and unload."""

import json
import logging
import os
import shutil
import sys
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
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc  # noqa: E402

from albert_tf.model_server.model_config import (  # noqa: E402
    ModelConfigError,
    VersionPolicy,
    parse_model_config_text,
)
from albert_tf.model_server.server import LocalModelServer  # noqa: E402

POLL_S = 0.2


def config_text(base, versions=(1, 2), labels=(), extra=""):
    policy = " ".join(f"versions: {v}" for v in versions)
    label_lines = "".join(f'    version_labels {{ key: "{k}" value: {v} }}\n' for k, v in labels)
    return (
        "model_config_list {\n  config {\n"
        f'    name: "m"\n    base_path: "{base}"\n    model_platform: "tensorflow"\n'
        f"    model_version_policy {{ specific {{ {policy} }} }}\n{label_lines}{extra}"
        "  }\n}\n"
    )


def write_atomically(path: Path, text: str) -> None:
    staging = path.with_name(path.name + ".tmp")
    staging.write_text(text, encoding="utf-8")
    os.replace(staging, path)


def wait_for(predicate, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


class _Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.INFO)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """Versions 1, 2 and 3 of one tiny classifier (copies of the shared export's `cls/1`)."""
    source = helpers.export_base(tmp_path_factory) / "cls" / "1"
    root = tmp_path_factory.mktemp("model_config_file")
    for version in (1, 2, 3):
        shutil.copytree(source, root / "m" / str(version))
    return root


@pytest.fixture(scope="module")
def served(model_dir):
    """A server on `models.config` (specific 1 and 2, label stable -> 1, allowed at startup by
    the flag), re-read every 0.2 s; yields `(server, config_path, log_messages)`."""
    records = _Records()
    package_logger = logging.getLogger("albert_tf.model_server")
    level = package_logger.level
    package_logger.setLevel(logging.INFO)
    package_logger.addHandler(records)
    path = model_dir / "models.config"
    write_atomically(path, config_text(model_dir / "m", labels=[("stable", 1)]))
    server = LocalModelServer(
        model_config_file=str(path), model_config_file_poll_wait_s=POLL_S, poll_interval_s=0,
        allow_version_labels_for_unavailable_models=True,
    ).start()
    try:
        yield server, path, records.messages
    finally:
        server.stop()
        package_logger.removeHandler(records)
        package_logger.setLevel(level)


def rest(server, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{server.rest_port}{path}", data=data)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def grpc_predict(server, version=None, label=None):
    """The version that answered a Predict, or the gRPC error `(code, details)`."""
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "m"
    if version is not None:
        request.model_spec.version.value = version
    if label is not None:
        request.model_spec.version_label = label
    request.inputs["text"].CopyFrom(tf.make_tensor_proto(np.array([b"the nation"], dtype=object)))
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        try:
            return stub.Predict(request, timeout=30).model_spec.version.value
        except grpc.RpcError as e:
            return e.code(), e.details()


def test_specific_versions_side_by_side_and_labels_on_rest_and_grpc(served):
    server, _, messages = served
    body = {"instances": ["the nation", "good law"]}
    for version in (1, 2):
        status, answer = rest(server, f"/v1/models/m/versions/{version}:predict", body)
        assert status == 200 and len(answer["predictions"]) == 2
        assert grpc_predict(server, version=version) == version
    status, answer = rest(server, "/v1/models/m/versions/3:predict", body)
    assert status == 404 and answer["error"] == "Servable not found for request: Specific(m, 3)"
    assert grpc_predict(server, version=3) == (grpc.StatusCode.NOT_FOUND, "Servable not found for request: Specific(m, 3)")
    assert grpc_predict(server) == 2  # latest of the served versions

    status, answer = rest(server, "/v1/models/m/labels/stable:predict", body)
    assert status == 200 and len(answer["predictions"]) == 2
    assert rest(server, "/v1/models/m/labels/stable")[1]["model_version_status"][0]["version"] == "1"
    status, metadata = rest(server, "/v1/models/m/labels/stable/metadata")
    assert status == 200 and metadata["model_spec"]["version"] == "1"
    status, classified = rest(server, "/v1/models/m/labels/stable:classify", {"signature_name": "classify", "examples": [{"text": "x"}]})
    assert status == 200 and [c[0] for c in classified["result"][0]] == helpers.LABELS
    assert grpc_predict(server, label="stable") == 1
    status, answer = rest(server, "/v1/models/m/labels/beta:predict", body)
    assert status == 400 and answer["error"] == "Unrecognized servable version label: beta"
    assert grpc_predict(server, label="beta") == (grpc.StatusCode.INVALID_ARGUMENT, "Unrecognized servable version label: beta")

    # Each load logged once, with model and version; TF's "Restoring parameters" is not repeated.
    assert sorted(m.split(" from ")[0] for m in messages if m.startswith("loaded")) == [
        "loaded model m version 1", "loaded model m version 2",
    ]
    assert not any("Restoring parameters" in m for m in messages)


def test_label_moves_when_the_file_is_edited(served):
    server, path, _ = served
    write_atomically(path, config_text(path.parent / "m", labels=[("stable", 2)]))
    assert wait_for(lambda: grpc_predict(server, label="stable") == 2)
    assert rest(server, "/v1/models/m/labels/stable")[1]["model_version_status"][0]["version"] == "2"
    assert grpc_predict(server, version=1) == 1  # both versions still served


def test_label_to_an_unavailable_version_is_refused(served, model_dir):
    server, path, messages = served
    # Moving an existing label to a version that is not AVAILABLE is refused even with the flag.
    write_atomically(path, config_text(path.parent / "m", labels=[("stable", 3)]))
    refusal = (
        f"model config {path} not applied, the previous one stays in force: Request to assign label stable to "
        "version 3 of model m, which is not currently available for inference"
    )
    assert wait_for(lambda: refusal in messages)
    time.sleep(3 * POLL_S)  # refused at every poll, logged once
    assert messages.count(refusal) == 1
    assert grpc_predict(server, label="stable") == 2
    # A *new* label may name an unavailable version with the flag (TF Serving's rule); it 404s.
    write_atomically(path, config_text(path.parent / "m", labels=[("stable", 2), ("canary", 3)]))
    assert wait_for(lambda: rest(server, "/v1/models/m/labels/canary:predict", {"instances": ["a"]})[0] == 404)
    assert rest(server, "/v1/models/m/labels/canary:predict", {"instances": ["a"]})[1]["error"] == (
        "Servable not found for request: Specific(m, 3)"
    )

    # Without the flag (TF Serving's default) a label is refused at startup: nothing is AVAILABLE yet.
    startup = model_dir / "startup.config"
    write_atomically(startup, config_text(model_dir / "m", labels=[("stable", 1)]))
    with pytest.raises(ModelConfigError, match=r"^Request to assign label stable to version 1 of model m, which is not "
                       r"currently available for inference \(.*--allow_version_labels_for_unavailable_models\)$"):
        LocalModelServer(model_config_file=str(startup), grpc_port=None, rest_port=None)


def test_policy_edit_unloads_once_and_a_bad_edit_keeps_serving(served):
    server, path, messages = served
    write_atomically(path, config_text(path.parent / "m", versions=(2,), labels=[("stable", 2)]))
    assert wait_for(lambda: "unloaded model m version 1" in messages)
    assert rest(server, "/v1/models/m/versions/1:predict", {"instances": ["a"]})[0] == 404
    assert messages.count("unloaded model m version 1") == 1
    # A misspelt field while serving: one line naming the file and line; version 2 keeps serving.
    write_atomically(path, config_text(path.parent / "m", versions=(2,), extra="    model_platfrom: \"tensorflow\"\n"))
    assert wait_for(lambda: any("not a valid ModelServerConfig text proto" in m for m in messages))
    assert grpc_predict(server, label="stable") == 2


def test_unsupported_fields_and_parse_errors_are_one_line(model_dir):
    base = model_dir / "m"
    cases = [
        (config_text(base, extra="    logging_config { }\n"),
         "f.config: model_config_list.config[0] (m): logging_config is not supported by the local server "
         "(log requests with --request-logging-config)"),
        (config_text(base).replace('"tensorflow"', '"pytorch"'),
         'f.config: model_config_list.config[0] (m): model_platform "pytorch" is not supported (only "tensorflow")'),
        (config_text(base).replace('    model_platform: "tensorflow"\n', ""),
         'f.config: model_config_list.config[0] (m): model_platform is not set (TF Serving refuses that too: set '
         'model_platform: "tensorflow")'),
        ('custom_model_config { }\n', "f.config: custom_model_config is not supported by the local server "
         "(it serves a model_config_list only)"),
        (config_text(base).replace("model_version_policy", "model_version_polcy"),
         'f.config:6:5: not a valid ModelServerConfig text proto: Message type "tensorflow.serving.ModelConfig" '
         'has no field named "model_version_polcy".'),
        (config_text("models/m"), "f.config: model_config_list.config[0] (m): Expected model m to have an absolute "
         "path; got base_path models/m"),
        (config_text(base).replace("  }\n}", "  }\n  config { name: \"m\" }\n}"),
         "f.config: Illegal to list model m multiple times in config list"),
    ]
    for text, message in cases:
        with pytest.raises(ModelConfigError) as info:
            parse_model_config_text(text, "f.config")
        assert str(info.value) == message


def test_cli_flags_and_one_line_errors(model_dir, tmp_path, capsys):
    from albert_tf.cli import build_parser, main

    path = tmp_path / "bad.config"
    path.write_text(config_text(model_dir / "m", extra="    logging_config { }\n"), encoding="utf-8")
    assert main(["serve", "--model_config_file", str(path), "--port", "0", "--rest-api-port", "0"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"albert-tf serve: error: {path}: model_config_list.config[0] (m): logging_config is not supported by the "
        "local server (log requests with --request-logging-config)"
    ]
    assert main(["serve", "--model-config-file", str(path), "--export-base", str(model_dir)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "albert-tf serve: error: --model_config_file and --export-base are exclusive (TF Serving would ignore "
        "--model_base_path beside --model_config_file): give one"
    ]
    assert main(["serve", "--export-base", str(model_dir), "--allow_version_labels_for_unavailable_models"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "albert-tf serve: error: --allow_version_labels_for_unavailable_models applies to --model_config_file only"
    ]
    args = build_parser().parse_args(["serve", "--model-config-file", "f", "--model-config-file-poll-wait-seconds", "0.5"])
    assert args.model_config_file == "f" and args.model_config_file_poll_wait_seconds == 0.5
    args = build_parser().parse_args(["serve", "--model_config_file", "f", "--model_config_file_poll_wait_seconds", "0"])
    assert args.model_config_file_poll_wait_seconds == 0.0
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--model_config_file", "f", "--model_config_file_poll_wait_seconds", "-1"])


def test_version_policies():
    on_disk = [1, 2, 5, 7]
    assert VersionPolicy().aspired(on_disk) == {7}
    assert VersionPolicy("latest", 2).aspired(on_disk) == {5, 7}
    assert VersionPolicy("all").aspired(on_disk) == set(on_disk)
    assert VersionPolicy("specific", versions=frozenset({2, 3})).aspired(on_disk) == {2}
    text = config_text("/tmp").replace("specific { versions: 1 versions: 2 }", "latest { }")
    assert parse_model_config_text(text)[0].policy == VersionPolicy("latest", 1)  # num_versions 0: TF Serving's 1
