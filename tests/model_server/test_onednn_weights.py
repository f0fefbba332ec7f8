"""Tests of `albert_tf.export.onednn_weights`: when `albert-tf serve` lets TensorFlow's oneDNN
matmuls take the weights as constants (`TF_ONEDNN_ASSUME_FROZEN_WEIGHTS`), that only the serving
command's own process sets it, and that a bf16 export served so answers as the SavedModel does."""

import json
import os
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from albert_tf.model_server.manager import ModelManager
from albert_tf.model_server.model_config import VersionPolicy
from albert_tf.export.onednn_weights import ENV_VAR, apply_frozen_weights, frozen_weights_wanted
from tests._serving_helpers import LABELS, tiny_classifier, tiny_spm, tokenizer_layer

TEXTS = ["the people of good law", "bad year in congress", "it's the nation"]


def _fake_version(base: Path, model: str, version: int, precision, tflite: bool = False) -> Path:
    """A version directory as the model server reads it before loading: `saved_model.pb` and
    `assets/export.json` (its precision; None: no record of one)."""
    path = base / model / str(version)
    (path / "assets").mkdir(parents=True)
    (path / "saved_model.pb").write_bytes(b"")
    info = {"kind": "classification"} if precision is None else {"kind": "classification", "precision": precision}
    (path / "assets" / "export.json").write_text(json.dumps(info))
    if tflite:
        (path / "model.tflite").write_bytes(b"")
    return path


def test_auto_is_on_only_when_every_served_savedmodel_is_bf16(tmp_path):
    bf16 = [_fake_version(tmp_path, "a", 1, "mixed_bfloat16"), _fake_version(tmp_path, "b", 3, "mixed_bfloat16")]
    fp32 = _fake_version(tmp_path, "c", 1, "float32")
    unrecorded = _fake_version(tmp_path, "d", 1, None)
    assert frozen_weights_wanted("auto", bf16) == (True, "every SavedModel served (2) is a bf16 export")
    assert frozen_weights_wanted("auto", [*bf16, fp32]) == (False, f"{fp32} is a float32 export, not bf16")
    assert frozen_weights_wanted("auto", [unrecorded])[0] is False
    assert frozen_weights_wanted("auto", [tmp_path / "missing" / "1"])[0] is False
    assert frozen_weights_wanted("auto", []) == (False, "no SavedModel runs in TensorFlow here")
    assert frozen_weights_wanted("on", [fp32])[0] is True
    assert frozen_weights_wanted("off", bf16)[0] is False
    with pytest.raises(ValueError, match="must be one of auto, on, off, got 'yes'"):
        frozen_weights_wanted("yes", bf16)


def test_the_decision_reads_the_versions_tensorflow_will_run(tmp_path):
    """Only the versions the policy serves count, and not those served from a `model.tflite`."""
    _fake_version(tmp_path, "m", 1, "float32")  # an older version: not served by the default policy
    newest = _fake_version(tmp_path, "m", 2, "mixed_bfloat16")
    lite = _fake_version(tmp_path, "lite", 1, "float32", tflite=True)
    manager = ModelManager({"m": str(tmp_path / "m"), "lite": str(tmp_path / "lite")}, poll_interval_s=0)
    assert manager.tensorflow_version_dirs() == [str(newest), str(lite)]
    manager.prefer_tflite_model = True
    assert manager.runtime_of(str(lite)) == "tflite"
    assert manager.tensorflow_version_dirs() == [str(newest)]
    assert frozen_weights_wanted("auto", manager.tensorflow_version_dirs())[0] is True
    manager.version_policies["m"] = VersionPolicy("all")
    assert frozen_weights_wanted("auto", manager.tensorflow_version_dirs())[0] is False


def test_apply_sets_the_variable_only_when_on_and_keeps_the_users(tmp_path):
    """On an environment of its own: set in this process, TensorFlow would take it for every test
    after (it reads it once), and the training tests' weights would go stale."""
    before = os.environ.get(ENV_VAR)
    bf16 = [_fake_version(tmp_path, "a", 1, "mixed_bfloat16")]
    environ = {}
    assert apply_frozen_weights("off", bf16, environ) == "oneDNN frozen weights: off (--onednn-frozen-weights off)"
    assert environ == {}
    on = apply_frozen_weights("auto", bf16, environ)
    assert on == "oneDNN frozen weights: on (every SavedModel served (1) is a bf16 export)" and environ == {ENV_VAR: "1"}
    environ = {ENV_VAR: "0"}
    assert apply_frozen_weights("on", bf16, environ) == f"oneDNN frozen weights: {ENV_VAR}=0 as set in the environment"
    assert environ == {ENV_VAR: "0"}
    with pytest.raises(ValueError, match="must be one of"):
        apply_frozen_weights("always", bf16, {})
    assert os.environ.get(ENV_VAR) == before


def test_the_export_base_tells_tf_serving_by_the_same_rule(tmp_path):
    """`serving.env` (docker compose's `env_file`), rewritten with `models.config`: 1 while the newest
    version of every model is bf16, 0 once one is not."""
    from albert_tf.export.serving_config import SERVING_ENV_FILE, write_serving_configs

    _fake_version(tmp_path, "a", 1, "float32")
    _fake_version(tmp_path, "a", 2, "mixed_bfloat16")
    paths = write_serving_configs(str(tmp_path))
    assert paths["serving_env"] == str(tmp_path / SERVING_ENV_FILE)
    text = (tmp_path / SERVING_ENV_FILE).read_text()
    assert text.startswith("# Written by albert-tf export") and text.endswith(f"\n{ENV_VAR}=1\n")
    _fake_version(tmp_path, "b", 1, "float32")
    write_serving_configs(str(tmp_path))
    lines = (tmp_path / SERVING_ENV_FILE).read_text().splitlines()
    assert lines[-1] == f"{ENV_VAR}=0" and f"{tmp_path / 'b' / '1'} is a float32 export" in lines[0]


@pytest.mark.slow
def test_serve_runs_a_bf16_export_with_frozen_weights_and_answers_as_the_savedmodel(tmp_path):
    """`albert-tf serve` on a bf16 export turns the mode on in its own process (its start line says
    so) and answers as the SavedModel does without it; `LocalModelServer` in this process, which
    also trains models, leaves the environment alone."""
    import tensorflow as tf

    from albert_tf.export.saved_model import export_saved_model
    from albert_tf.model_server.server import LocalModelServer

    base = tmp_path / "base"
    result = export_saved_model(tiny_classifier(), tokenizer_layer(tiny_spm(tmp_path)), str(base), "cls",
                                labels=LABELS, precision="mixed_bfloat16")
    assert (base / "serving.env").read_text().endswith(f"\n{ENV_VAR}=1\n")
    want = tf.saved_model.load(result.path).signatures["serving_default"](text=tf.constant(TEXTS))["probabilities"].numpy()

    before = os.environ.get(ENV_VAR)
    server = LocalModelServer(str(base), poll_interval_s=0, rest_port=0, grpc_port=None).start()
    server.stop()
    assert os.environ.get(ENV_VAR) == before

    env = {k: v for k, v in os.environ.items() if k != ENV_VAR}
    process = subprocess.Popen(
        [sys.executable, "-m", "albert_tf", "serve", "--export-base", str(base), "--port", "0", "--rest-api-port", "0",
         "--poll-seconds", "0"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        line = process.stdout.readline()
        assert "oneDNN frozen weights: on (every SavedModel served (1) is a bf16 export)" in line, line
        port = re.search(r"REST 127\.0\.0\.1:(\d+)", line).group(1)
        request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/models/cls:predict",
                                         data=json.dumps({"instances": TEXTS}).encode())
        with urllib.request.urlopen(request, timeout=60) as response:
            got = [row["probabilities"] for row in json.loads(response.read())["predictions"]]
    finally:
        process.terminate()
        process.wait(timeout=60)
    np.testing.assert_allclose(np.array(got), want, atol=2e-2)
