"""The OpenVINO Model Server deployment files (`serving/openvino/`): the Compose file serves the
export base's OVMS configuration on TF Serving's ports, and the example `config.json` is what
`albert_tf.export.openvino.write_ovms_config` writes (real OVMS is not run here: no image pulls)."""

import json
from pathlib import Path

import pytest
import yaml

from albert_tf.export import openvino as ov_export

REPO = Path(__file__).resolve().parents[2]


def test_compose_serves_the_export_base_config_on_tf_serving_ports():
    compose = yaml.safe_load((REPO / "serving" / "openvino" / "docker-compose.yml").read_text())
    service = compose["services"]["ovms"]
    assert service["image"].startswith("openvino/model_server:")
    assert service["ports"] == ["8500:8500", "8501:8501"]
    (volume,) = service["volumes"]
    assert volume["target"] == "/models" and volume["read_only"] is True
    default_source = volume["source"].split(":-", 1)[1].rstrip("}")
    assert (REPO / "serving" / "openvino" / default_source).resolve() == (REPO / "serving" / "models")
    assert "--config_path=/models/openvino/config.json" in service["command"]
    assert "--port=8500" in service["command"] and "--rest_port=8501" in service["command"]
    tf_serving = yaml.safe_load((REPO / "serving" / "docker-compose.yml").read_text())["services"]["tf-serving"]
    assert service["ports"] == tf_serving["ports"]


def _version(base: Path, name: str, version: int, mode):
    ir = base / "openvino" / name / str(version)
    ir.mkdir(parents=True)
    (ir / "model.xml").write_text("<net/>")
    assets = base / name / str(version) / "assets"
    assets.mkdir(parents=True)
    (assets / "export.json").write_text(json.dumps({"openvino": {"mode": mode}} if mode else {}))


def test_the_example_config_is_what_the_export_writes(tmp_path):
    _version(tmp_path, "sst2", 1, "int8")
    _version(tmp_path, "sst2", 2, "bf16")  # the latest version's mode sets the hint
    path = ov_export.write_ovms_config(str(tmp_path))
    assert path == str(tmp_path / "openvino" / "config.json")
    written = json.loads(Path(path).read_text())
    assert written == json.loads((REPO / "serving" / "openvino" / "config.json").read_text())
    _version(tmp_path, "reg", 1, "int8")  # int8 keeps the plugin's default: no hint
    (tmp_path / "openvino" / ".tmp-openvino-3-x").mkdir()  # a staged version is no model
    configs = [entry["config"] for entry in ov_export.ovms_config(str(tmp_path), "/srv")["model_config_list"]]
    assert [c["name"] for c in configs] == ["reg", "sst2"]
    assert configs[0] == {"name": "reg", "base_path": "/srv/openvino/reg", "target_device": "CPU",
                          "model_version_policy": {"latest": {"num_versions": 1}}}


def test_no_openvino_model_is_refused_in_one_line(tmp_path):
    with pytest.raises(ov_export.OpenVinoExportError, match=r"^.*openvino holds no OpenVINO model with an integer version directory$"):
        ov_export.ovms_config(str(tmp_path))
