"""Tests of `albert_tf.export.saved_model` / `signatures` / `warmup` / `serving_config`: the layout,
signatures, method names, assets, warmup file, serving configs and atomic publication of an export."""

import os
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import _serving_helpers as helpers  # noqa: E402

from albert_tf.export import saved_model, serving_config, signatures, warmup  # noqa: E402
from albert_tf.model_server.servable import SessionServable  # noqa: E402

JSON_DTYPES = {tf.float32.as_datatype_enum, tf.int32.as_datatype_enum, tf.string.as_datatype_enum}


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return helpers.export_base(tmp_path_factory)


@pytest.fixture(scope="module")
def servable(base):
    loaded = SessionServable(str(base / "cls" / "1"))
    yield loaded
    loaded.close()


@pytest.mark.slow
def test_layout_assets_and_no_leftovers(base):
    assert sorted(os.listdir(base / "cls")) == ["1"]  # no temporary export directory left
    version = base / "cls" / "1"
    for name in ("saved_model.pb", "variables", "assets/spiece.model", "assets/albert_config.json",
                 "assets/export.json", "assets.extra/tf_serving_warmup_requests"):
        assert (version / name).exists(), name
    info = saved_model.read_export_info(str(version))
    assert info["kind"] == "classification" and info["labels"] == helpers.LABELS and info["sequence_length"] == helpers.SEQ
    assert info["length_bucket"] == 16  # length-aware by default
    assert info["tokenizer"]["type"] == "sentencepiece"
    assert saved_model.list_exports(str(base)) == ["cls/1", "reg/1"]


@pytest.mark.slow
def test_signatures_are_dense_json_mappable_with_serving_method_names(servable):
    defs = servable.signature_defs
    assert set(defs) == {"serving_default", "tokens", "classify"}
    assert defs["classify"].method_name == signatures.CLASSIFY_METHOD
    assert defs["serving_default"].method_name == signatures.PREDICT_METHOD
    assert set(defs["serving_default"].inputs) == {"text"}
    assert set(defs["serving_default"].outputs) == {"probabilities", "logits", "label_id", "label"}
    assert set(defs["classify"].inputs) == {"inputs"} and set(defs["classify"].outputs) == {"classes", "scores"}
    assert set(defs["tokens"].inputs) == {"input_ids", "input_mask", "segment_ids"}
    for key, definition in defs.items():
        for name, info in list(definition.inputs.items()) + list(definition.outputs.items()):
            assert info.dtype in JSON_DTYPES, (key, name)
            assert info.WhichOneof("encoding") == "name", (key, name)  # no composite (ragged) tensors
            assert info.tensor_shape.dim[0].size == -1, (key, name)


@pytest.mark.slow
def test_in_graph_tokenization_matches_python_tokenizer(servable, tmp_path_factory):
    from albert_tf.tokenization import SentencePieceTokenizer

    texts = ["The nation, 1,000 people!", "", "  good  LAW\tin states ", "caf\u00e9 \xff"]
    python = SentencePieceTokenizer(helpers.spm_file(tmp_path_factory))
    packed = [python.encode_inputs(t, None, seq_length=helpers.SEQ) for t in texts]
    tokens = {k: np.array([p[k] for p in packed], np.int32) for k in ("input_ids", "input_mask", "segment_ids")}
    from_text = servable.run("serving_default", {"text": np.array([t.encode() for t in texts], object)})
    from_tokens = servable.run("tokens", tokens)
    np.testing.assert_allclose(from_text["logits"], from_tokens["logits"], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(from_text["probabilities"].sum(-1), 1.0, rtol=1e-5)
    assert from_text["label"].tolist() == [helpers.LABELS[i].encode() for i in from_text["label_id"]]
    # The classify signature returns every class with its probability.
    examples = warmup.warmup_inputs({"classify": servable.signature_defs["classify"]}, False, helpers.SEQ, texts[:2])
    classified = servable.run("classify", examples["classify"])
    assert classified["classes"].tolist() == [[b"neg", b"pos"]] * 2
    np.testing.assert_allclose(classified["scores"], from_text["probabilities"][:2], rtol=1e-5)


@pytest.mark.slow
def test_warmup_file_has_one_request_per_signature_and_per_length_bucket(base):
    logs = warmup.read_warmup_file(str(base / "cls" / "1"))
    kinds = [(log.WhichOneof("log_type"), getattr(log, log.WhichOneof("log_type")).request.model_spec.signature_name) for log in logs]
    # One request per signature, then (length-aware, bucket 16 of sequence length 16) one single-text
    # request per bucket for each text signature.
    assert kinds[:3] == [("classify_log", "classify"), ("predict_log", "serving_default"), ("predict_log", "tokens")]
    assert kinds[3:] == [("classify_log", "classify"), ("predict_log", "serving_default")]
    reg = {getattr(l, l.WhichOneof("log_type")).request.model_spec.signature_name: l.WhichOneof("log_type") for l in warmup.read_warmup_file(str(base / "reg" / "1"))}
    assert reg == {"regress": "regress_log", "serving_default": "predict_log", "tokens": "predict_log"}


@pytest.mark.slow
def test_serving_configs(base):
    from google.protobuf import text_format
    from tensorflow_serving.config import model_server_config_pb2

    config = text_format.Parse((base / "models.config").read_text(), model_server_config_pb2.ModelServerConfig())
    entries = {c.name: c for c in config.model_config_list.config}
    assert sorted(entries) == ["cls", "reg"]
    assert entries["cls"].base_path == "/models/cls" and entries["cls"].model_platform == "tensorflow"
    batching = serving_config.read_batching_parameters(str(base / "batching_parameters.txt"))
    assert batching == serving_config.BatchingConfig(max_batch_size=8, batch_timeout_micros=5000, num_batch_threads=2)
    with pytest.raises(ValueError, match="max_batch_size"):
        serving_config.BatchingConfig(max_batch_size=0)
    bad = base.parent / "bad_batching.txt"
    bad.write_text("max_batch_size: 3\n")
    with pytest.raises(ValueError, match="not a BatchingParameters"):
        serving_config.read_batching_parameters(str(bad))


@pytest.mark.slow
def test_existing_version_and_bad_names_are_refused(base, tmp_path_factory):
    layer = helpers.tokenizer_layer(helpers.spm_file(tmp_path_factory))
    model = helpers.tiny_classifier()
    with pytest.raises(saved_model.ExportError, match="never overwritten"):
        saved_model.export_saved_model(model, layer, str(base), "cls", version=1, labels=helpers.LABELS)
    with pytest.raises(saved_model.ExportError, match="model_name"):
        saved_model.export_saved_model(model, layer, str(base), "../x", labels=helpers.LABELS)
    with pytest.raises(ValueError, match="3 labels"):
        signatures.ServingModule(model, layer, labels=["a", "b", "c"])
    assert saved_model.next_version(str(base / "cls")) == 2


def test_crash_during_export_leaves_no_version(tmp_path, tmp_path_factory, monkeypatch):
    layer = helpers.tokenizer_layer(helpers.spm_file(tmp_path_factory))
    real_save = tf.saved_model.save

    def crashing_save(obj, path, signatures=None):
        os.makedirs(os.path.join(path, "variables"))
        Path(path, "saved_model.pb").write_bytes(b"half")
        raise RuntimeError("simulated crash while writing")

    monkeypatch.setattr(tf.saved_model, "save", crashing_save)
    with pytest.raises(RuntimeError, match="simulated crash"):
        saved_model.export_saved_model(helpers.tiny_classifier(), layer, str(tmp_path), "m", labels=helpers.LABELS, check=False)
    assert os.listdir(tmp_path / "m") == []
    assert real_save is not crashing_save


@pytest.mark.slow
def test_pretrainer_export_has_hub_signatures(tmp_path, tmp_path_factory):
    from albert_tf.pretrainer import AlbertPretrainer

    layer = helpers.tokenizer_layer(helpers.spm_file(tmp_path_factory))
    model = AlbertPretrainer(helpers.tiny_encoder())
    model(dict(helpers.features(), masked_lm_positions=np.zeros((1, 2), "int32")))
    result = saved_model.export_saved_model(model, layer, str(tmp_path), "albert", check=False)
    assert result.version == 1 and set(result.signatures) == {"serving_default", "tokens", "sop", "mlm"}
    servable = SessionServable(result.path)
    try:
        inputs = warmup.warmup_inputs(servable.signature_defs, False, helpers.SEQ)
        tokens = servable.run("tokens", inputs["tokens"])
        assert tokens["sequence_output"].shape == (2, helpers.SEQ, 16) and tokens["pooled_output"].shape == (2, 16)
        mlm = servable.run("mlm", inputs["mlm"])
        assert mlm["mlm_logits"].shape == (2, 2, 48)
        sop = servable.run("sop", inputs["sop"])
        np.testing.assert_allclose(sop["sop_probabilities"].sum(-1), 1.0, rtol=1e-5)
        text = servable.run("serving_default", inputs["serving_default"])
        np.testing.assert_array_equal(text["input_mask"].sum(-1) > 2, True)
        # In-memory model and exported graph agree on the encoder outputs.
        expected = model.encoder({k: tf.constant(v) for k, v in inputs["tokens"].items()})
        np.testing.assert_allclose(tokens["pooled_output"], expected["pooled_output"].numpy(), rtol=1e-5, atol=1e-6)
    finally:
        servable.close()


REPO = Path(__file__).resolve().parents[2]


def _server_args(args):
    return {a.split("=", 1)[0]: a.split("=", 1)[1] for a in args if "=" in a}


def test_compose_and_kubernetes_files_parse_and_match_the_export_layout():
    import yaml

    compose = yaml.safe_load((REPO / "serving" / "docker-compose.yml").read_text())
    service = compose["services"]["tf-serving"]
    assert service["image"] == "tensorflow/serving:2.20.0"
    assert sorted(service["ports"]) == ["8500:8500", "8501:8501"]
    volume = service["volumes"][0]
    default_source = volume["source"].split(":-", 1)[1].rstrip("}")
    assert (REPO / "serving" / default_source).is_dir() and volume["target"] == "/models"
    args = _server_args(service["command"])
    assert args["--model_config_file"] == f"/models/{serving_config.MODELS_CONFIG_FILE}"
    assert args["--batching_parameters_file"] == f"/models/{serving_config.BATCHING_FILE}"
    assert args["--port"] == "8500" and args["--rest_api_port"] == "8501"
    # Enough gRPC handler threads for what the export's default batching holds (a request holds
    # one while it waits for its batch), as the local server's default.
    from albert_tf.model_server.server import default_grpc_max_threads

    assert int(args["--grpc_max_threads"]) == default_grpc_max_threads(serving_config.BatchingConfig(), cpus=1)
    # oneDNN's frozen-weights mode: off unless asked for (bf16 exports; albert_tf.export.onednn_weights).
    assert service["env_file"] == [{"path": "${ALBERT_EXPORT_BASE:-./models}/serving.env", "required": False}]
    deployment, service_k8s = yaml.safe_load_all((REPO / "serving" / "kubernetes" / "albert-serving.yaml").read_text())
    assert deployment["kind"] == "Deployment" and service_k8s["kind"] == "Service"
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "tensorflow/serving:2.20.0"
    assert _server_args(container["args"]) == {k: v for k, v in args.items()}
    assert container["env"] == [{"name": "TF_ONEDNN_ASSUME_FROZEN_WEIGHTS", "value": "0"}]
    assert container["volumeMounts"][0]["mountPath"] == "/models"
    port_names = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert {p["targetPort"] for p in service_k8s["spec"]["ports"]} == set(port_names) == {"grpc", "rest"}
    assert deployment["spec"]["selector"]["matchLabels"] == service_k8s["spec"]["selector"]
    for entry_point in ("local_server.py", "client.py", "README.md"):
        assert (REPO / "serving" / entry_point).is_file()


def test_export_cli_errors(tmp_path):
    import argparse

    from albert_tf.cli import CommandError
    from albert_tf.cli import export as export_cli

    parser = argparse.ArgumentParser()
    export_cli.add_arguments(parser)
    args = parser.parse_args(["--init", str(tmp_path / "ckpt"), "--export-base", str(tmp_path), "--model-name", "m"])
    with pytest.raises(CommandError, match="exactly one of --spm-model and --vocab-file"):
        export_cli.run(args)
    args = parser.parse_args(["--model-dir", str(tmp_path / "nothing"), "--export-base", str(tmp_path), "--model-name", "m"])
    with pytest.raises(CommandError, match="model directory not found"):
        export_cli.run(args)
    args = parser.parse_args(["--model-dir", str(tmp_path), "--export-base", str(tmp_path), "--model-name", "m", "--max-batch-size", "0"])
    with pytest.raises(CommandError, match="max_batch_size"):
        export_cli.run(args)


@pytest.mark.slow
def test_export_cli_from_finetuned_model_dir(tmp_path, tmp_path_factory, capsys):
    import argparse
    import json

    from albert_tf.cli import CommandError
    from albert_tf.cli import export as export_cli
    from albert_tf.export import compatibility
    from albert_tf.tasks.spec import TaskSpec

    model_dir = tmp_path / "finetuned"
    model_dir.mkdir()
    model = helpers.tiny_classifier(seed=3)
    model.save(str(model_dir / "model.keras"))
    shutil.copyfile(helpers.spm_file(tmp_path_factory), model_dir / "spiece.model")
    TaskSpec("sst-2", "classification", ["0", "1"], helpers.SEQ, ["accuracy"], "accuracy",
             {"type": "sentencepiece", "file": "spiece.model", "lower_case": True}).write(str(model_dir))
    (model_dir / "COMPLETE").write_text("")
    parser = argparse.ArgumentParser()
    export_cli.add_arguments(parser)
    args = parser.parse_args(["--model-dir", str(model_dir), "--export-base", str(tmp_path / "base"), "--model-name", "sst2", "--skip-check"])
    assert export_cli.run(args) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["version"] == 1 and set(printed["signatures"]) == {"serving_default", "tokens", "classify"}
    assert (Path(printed["path"]) / "assets" / "task.json").is_file()
    info = saved_model.read_export_info(printed["path"])
    assert info["labels"] == ["0", "1"] and info["pair"] is False and info["sequence_length"] == helpers.SEQ
    servable = SessionServable(printed["path"])
    try:
        inputs = warmup.warmup_inputs(servable.signature_defs, False, helpers.SEQ)
        got = servable.run("tokens", inputs["tokens"])
        expected = model({k: tf.constant(v) for k, v in inputs["tokens"].items()})["logits"].numpy()
        np.testing.assert_allclose(got["logits"], expected, rtol=1e-5, atol=1e-6)
    finally:
        servable.close()
    assert (tmp_path / "base" / "models.config").is_file()
    assert info["length_bucket"] == 16
    assert info["length_chunk"] is None  # auto: the tiny model has too little work per token to chunk
    # --length-chunk N: a batch in length-sorted chunks of N rows; anything but auto or N >= 0 is refused.
    chunked = parser.parse_args(["--model-dir", str(model_dir), "--export-base", str(tmp_path / "base"),
                                 "--model-name", "sst2-chunked", "--skip-check", "--length-chunk", "4"])
    assert export_cli.run(chunked) == 0
    assert saved_model.read_export_info(json.loads(capsys.readouterr().out)["path"])["length_chunk"] == 4
    for bad in ("-1", "x", "2.5"):
        chunked.length_chunk = bad
        with pytest.raises(CommandError, match="--length-chunk must be auto or an integer >= 0"):
            export_cli.run(chunked)
    # --length-bucket 0: the fixed-length export; a negative bucket is a one-line error.
    args = parser.parse_args(["--model-dir", str(model_dir), "--export-base", str(tmp_path / "base"), "--model-name", "sst2",
                              "--skip-check", "--length-bucket", "0"])
    assert export_cli.run(args) == 0
    printed = json.loads(capsys.readouterr().out)
    assert saved_model.read_export_info(printed["path"])["length_bucket"] is None
    tokens = compatibility.read_meta_graph(printed["path"]).signature_def["tokens"]
    assert [d.size for d in tokens.inputs["input_ids"].tensor_shape.dim] == [-1, helpers.SEQ]
    args.length_bucket = -1
    with pytest.raises(CommandError, match="--length-bucket must be >= 0"):
        export_cli.run(args)


def test_encoder_module_has_text_and_tokens_signatures(tmp_path_factory):
    encoder = helpers.tiny_encoder()
    module = signatures.ServingModule(encoder, helpers.tokenizer_layer(helpers.spm_file(tmp_path_factory)))
    assert module.kind == signatures.ENCODER and module.signatures_keys() == ["serving_default", "tokens"]
    assert module.method_names() == {}
    out = module.serve_text(tf.constant(["the nation", ""]))
    assert sorted(out) == ["input_mask", "pooled_output", "sequence_output"]
    assert out["sequence_output"].shape == (2, helpers.SEQ, 16) and out["sequence_output"].dtype == tf.float32
    with pytest.raises(ValueError, match="labels are for classifiers"):
        signatures.ServingModule(encoder, helpers.tokenizer_layer(helpers.spm_file(tmp_path_factory)), labels=["a", "b"])
    with pytest.raises(TypeError, match="export supports"):
        signatures.ServingModule(object(), helpers.tokenizer_layer(helpers.spm_file(tmp_path_factory)))


@pytest.mark.slow
def test_the_graph_refuses_ids_outside_the_table(base):
    """What real TF Serving runs is the graph: a negative id must not wrap to the table's end."""
    loaded = tf.saved_model.load(str(base / "cls" / "1"))
    tokens = loaded.signatures["tokens"]
    ids = np.full((1, helpers.SEQ), 5, np.int32)
    mask = np.ones_like(ids)
    segments = np.zeros_like(ids)
    assert "logits" in tokens(input_ids=ids, input_mask=mask, segment_ids=segments)
    for name, bad in (("input_ids", -1), ("input_ids", 10**6), ("segment_ids", -1)):
        values = {"input_ids": ids.copy(), "input_mask": mask, "segment_ids": segments.copy()}
        values[name][0, 1] = bad
        with pytest.raises(tf.errors.InvalidArgumentError, match=name):
            tokens(**values)


@pytest.mark.slow
def test_an_export_traces_each_serving_function_once(tmp_path, tmp_path_factory, monkeypatch):
    """`tf.saved_model.save` keys its traces on the save context: functions traced outside it were
    traced a second time by the save (half the export's time) and stored twice."""
    from albert_tf.pretrainer import AlbertPretrainer

    layer = helpers.tokenizer_layer(helpers.spm_file(tmp_path_factory))
    model = AlbertPretrainer(helpers.tiny_encoder())
    model(dict(helpers.features(), masked_lm_positions=np.zeros((1, 2), "int32")))
    saved, real_save = [], tf.saved_model.save
    monkeypatch.setattr(tf.saved_model, "save", lambda obj, *args, **kwargs: saved.append(obj) or real_save(obj, *args, **kwargs))
    result = saved_model.export_saved_model(model, layer, str(tmp_path), "albert", check=False)
    [module] = saved
    functions = {name: getattr(module, name) for name in dir(module) if name.startswith("serve_")}
    assert sorted(functions) == ["serve_mlm", "serve_sop", "serve_text", "serve_tokens"]
    assert {name: f.experimental_get_tracing_count() for name, f in functions.items()} == dict.fromkeys(functions, 1)
    # What TF-Hub-style users call on the loaded object is still there, and answers as the signature.
    loaded = tf.saved_model.load(result.path)
    texts = tf.constant(["the nation", ""])
    np.testing.assert_allclose(loaded.serve_text(texts)["pooled_output"].numpy(),
                               loaded.signatures["serving_default"](text=texts)["pooled_output"].numpy(), rtol=1e-6)
