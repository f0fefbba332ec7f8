"""Tests of the OpenVINO target (`albert_tf.export.openvino`): the text-in IR beside the SavedModel
in OVMS's layout, its answers against the SavedModel's (f32 tight, int8 by argmax), the in-model
tokenizer's ids against `AlbertTokenizerLayer`'s, the record in export.json, OVMS's config.json,
one-line refusals that publish nothing, and `albert-tf serve --prefer-openvino-model` over REST
and gRPC."""

import csv
import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest


sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import _serving_helpers as helpers  # noqa: E402

from albert_tf.export import openvino as ov_export  # noqa: E402
from albert_tf.export import saved_model  # noqa: E402
from albert_tf.export.saved_model import ExportError, export_saved_model  # noqa: E402

SEQ = 32
SAMPLE_DEV = Path(__file__).resolve().parents[2] / "albert_tf" / "resources" / "sample" / "rotten_tomatoes" / "dev.tsv"


def _encoder(seed=0):
    import keras

    from albert_tf.config import AlbertConfig
    from albert_tf.modeling import AlbertEncoder

    keras.utils.set_random_seed(seed)
    return AlbertEncoder.from_albert_config(AlbertConfig(
        vocab_size=48, embedding_size=16, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=SEQ))


@pytest.fixture(scope="module")
def spm(tmp_path_factory):
    return helpers.tiny_spm(tmp_path_factory.mktemp("openvino_spm"))


@pytest.fixture(scope="module")
def layer(spm):
    from albert_tf.tokenization.in_graph import AlbertTokenizerLayer

    return AlbertTokenizerLayer.from_sentencepiece(spm, sequence_length=SEQ)


@pytest.fixture(scope="module")
def trained(layer):
    """A classifier that has learned the toy task (int8's argmax check needs decided answers)."""
    import keras
    import tensorflow as tf

    from albert_tf.tasks.classification import AlbertForClassification

    model = AlbertForClassification(_encoder(), num_labels=2, dropout=0.0)
    texts, labels = helpers.toy_texts(192, seed=0)
    x = {k: v.numpy() for k, v in layer(tf.constant(texts)).items()}
    model.compile(optimizer=keras.optimizers.Adam(3e-3))
    model.fit(dict(x, labels=np.array(labels)), batch_size=32, epochs=3, verbose=0)
    return model


@pytest.fixture(scope="module")
def exported(trained, layer, tmp_path_factory):
    """`cls/1` exported with an f32 OpenVINO IR and the accuracy check on held-out toy texts."""
    from albert_tf.export.accuracy_check import LabelledTexts

    base = tmp_path_factory.mktemp("openvino_base")
    texts, labels = helpers.toy_texts(64, seed=1)
    result = export_saved_model(trained, layer, str(base), "cls", labels=helpers.LABELS, check=False,
                                openvino="f32", check_data=LabelledTexts(texts, labels))
    return base, result


def _saved_model_text(version_dir, texts):
    from albert_tf.model_server.servable import SessionServable

    servable = SessionServable(version_dir)
    try:
        return servable.run("serving_default", {"text": np.array([t.encode() for t in texts], dtype=object)})
    finally:
        servable.close()


# --- the export ----------------------------------------------------------------------------------------


def test_f32_export_is_written_in_ovms_layout_and_recorded(exported):
    base, result = exported
    ir = base / "openvino" / "cls" / "1"
    assert sorted(os.listdir(ir)) == ["model.bin", "model.xml"]
    assert ov_export.beside(result.path) == str(ir)
    info = json.loads((Path(result.path) / "assets" / "export.json").read_text())["openvino"]
    assert info == result.openvino
    assert info["dir"] == "openvino/cls/1" and info["mode"] == "f32" and info["inference_precision_hint"] == "f32"
    assert info["tolerance"] == ov_export.TOLERANCES["f32"]
    assert set(info["runtime_precisions"]["matmuls"]) == {"f32"}  # no bf16 or int8 matmul in an f32 model
    assert info["inputs"] == {"text": {"dtype": "string", "shape": [-1]}}
    assert sorted(info["outputs"]) == ["label", "label_id", "logits", "probabilities"]
    assert info["check"]["argmax_agreement"] == 1.0 and info["check"]["texts"] == 2
    assert info["accuracy"]["drop"] == 0.0 and info["accuracy"]["examples"] == 64
    # TF Serving's models.config never lists the OpenVINO repository; OVMS's config.json does.
    assert "openvino" not in (base / "models.config").read_text()
    assert result.serving_configs["ovms_config"] == str(base / "openvino" / "config.json")
    assert json.loads((base / "openvino" / "config.json").read_text()) == {"model_config_list": [{"config": {
        "name": "cls", "base_path": "/models/openvino/cls", "target_device": "CPU",
        "model_version_policy": {"latest": {"num_versions": 1}},
        "plugin_config": {"INFERENCE_PRECISION_HINT": "f32"}}}]}


def test_f32_model_answers_as_the_saved_model_on_text(exported):
    base, result = exported
    texts = helpers.toy_texts(24, seed=2)[0] + ["", "  GOOD   people ", "Café bad 1,000 year"]
    reference = _saved_model_text(result.path, texts)
    compiled = ov_export.compile_model(str(base / "openvino" / "cls" / "1" / "model.xml"))
    assert compiled.get_property("INFERENCE_PRECISION_HINT").to_string() == "f32"
    got = ov_export.run_text(compiled, texts)
    assert sorted(got) == sorted(reference)
    np.testing.assert_allclose(got["probabilities"], reference["probabilities"], atol=1e-5)
    np.testing.assert_allclose(got["logits"], reference["logits"], atol=1e-4)
    np.testing.assert_array_equal(got["label_id"], reference["label_id"])
    assert [s.encode() for s in got["label"].tolist()] == reference["label"].tolist()


def test_the_converted_graph_keeps_the_signature_names_and_fuses_layer_norms(layer):
    """A model whose Keras names carry a suffix (not the first of its class in the process): the
    converter named its `logits` after the classifier's MatMul, and the export was refused."""
    from albert_tf.export.signatures import ServingModule
    from albert_tf.tasks.classification import AlbertForClassification

    models = [AlbertForClassification(_encoder(seed), num_labels=2) for seed in (1, 2)]
    ids = {k: np.zeros((1, 4), "int32") for k in ("input_ids", "input_mask", "segment_ids")}
    for model in models:
        model(ids)
    assert models[1].name.endswith("_1") or models[1].name != models[0].name
    converted = ov_export.token_model(ServingModule(models[1], layer, labels=["neg", "pos"]))
    assert sorted(o.get_any_name() for o in converted.outputs) == ["label", "label_id", "logits", "probabilities"]
    assert all(len(o.get_names()) == 1 for o in converted.outputs)
    # Every LayerNorm (the embeddings' and two per layer) is one MVN op, as in a converted PyTorch
    # model: Keras's folded form ran as a dozen elementwise ops and two reductions each.
    types = [op.get_type_name() for op in converted.get_ops()]
    assert types.count("MVN") == 1 + 2 * 2 and "SquaredDifference" not in types
    # The blocks' dense layers take the 3-D hidden states: a Reshape between a LayerNorm (with its
    # scale and shift) and the next MatMul kept NNCF's int8 quantizers from fusing into the LayerNorm.
    assert "Reshape" not in _consumers_past_elementwise(converted, "MVN")


def _consumers_past_elementwise(model, type_name: str) -> set:
    """The types of the first non-elementwise ops fed by the `type_name` ops of `model`."""
    elementwise = {"Multiply", "Add", "Convert"}
    found, todo = set(), [op for op in model.get_ops() if op.get_type_name() == type_name]
    while todo:
        op = todo.pop()
        for target in (t.get_node() for output in op.outputs() for t in output.get_target_inputs()):
            if target.get_type_name() in elementwise:
                todo.append(target)
            else:
                found.add(target.get_type_name())
    return found


def test_int8_is_calibrated_and_agrees_by_argmax(trained, layer, tmp_path):
    from albert_tf.export import signatures

    module = signatures.ServingModule(trained, layer, labels=helpers.LABELS)
    calibration, _ = helpers.toy_texts(32, seed=3)
    check, _ = helpers.toy_texts(32, seed=4)
    info = ov_export.write_openvino(str(tmp_path), module, "int8", calibration_texts=calibration, check_texts=check)
    assert info["mode"] == "int8" and info["calibration"]["texts"] == 32
    # No SmoothQuant: its per-channel activation scales sent the CPU plugin's int8 matmuls to their slow
    # legacy kernel.
    assert info["calibration"]["smooth_quant"] is False
    ops = ov_export.require_openvino().Core().read_model(str(tmp_path / "model.xml")).get_ops()
    assert not [op for op in ops if "smooth_quant" in op.get_friendly_name()]
    assert info["check"]["texts"] == 32 + 32
    assert info["check"]["argmax_agreement"] >= ov_export.TOLERANCES["int8"]["min_argmax_agreement"]
    # NNCF put int8 matmuls in the graph and the CPU runs them so.
    assert set(info["runtime_precisions"]["matmuls"]) & {"i8", "u8"}
    compiled = ov_export.compile_model(str(tmp_path / "model.xml"))
    reference = ov_export._reference(module, check)
    got = ov_export.run_text(compiled, check)
    assert np.mean(got["label_id"] == reference["label_id"]) >= 0.9
    assert np.max(np.abs(got["probabilities"] - reference["probabilities"])) <= 0.15


def _rt_texts():
    with open(SAMPLE_DEV, encoding="utf-8", newline="") as f:
        return [row["text"] for row in csv.DictReader(f, delimiter="\t")]


@pytest.mark.parametrize("which", ["tiny_spm_model", "toy"])
def test_in_model_tokenizer_ids_equal_the_layer_on_the_rt_sample(which, tiny_spm_model, spm):
    import tensorflow as tf

    import openvino as ov

    from albert_tf.tokenization.in_graph import AlbertTokenizerLayer

    path = tiny_spm_model if which == "tiny_spm_model" else spm
    layer = AlbertTokenizerLayer.from_sentencepiece(path, sequence_length=SEQ)
    texts = _rt_texts() + ["", "   ", "ÉCOLE  Naïve\tcafé", "A" * 200, "“quotes” and ``ticks''", "ﬁ ligature ½"]
    compiled = ov.Core().compile_model(ov_export.tokenizer_model(layer), "CPU")
    for start in range(0, len(texts), 128):
        batch = texts[start:start + 128]
        ours = {k: v.numpy() for k, v in layer.tokenize_and_pack(tf.constant(batch), length_bucket=None).items()}
        result = compiled({"text": np.array(batch, dtype=str)})
        got = {port.get_any_name(): result[port] for port in compiled.outputs}
        width = got["input_ids"].shape[1]
        assert width <= SEQ
        for key in ("input_ids", "input_mask", "segment_ids"):
            np.testing.assert_array_equal(got[key], ours[key][:, :width], err_msg=key)
            assert not ours["input_mask"][:, width:].any()


# --- refusals ------------------------------------------------------------------------------------------


def _published(base):
    ir = os.path.join(base, "openvino")
    return saved_model.list_exports(str(base)), sorted(os.listdir(ir)) if os.path.isdir(ir) else []


def test_refusals_are_one_line_and_publish_nothing(trained, layer, tmp_path, monkeypatch, numbers_spm_model):
    from types import SimpleNamespace

    from albert_tf.tokenization.in_graph import AlbertTokenizerLayer

    base = str(tmp_path / "base")
    cases = [
        (dict(openvino="int8"), r"^int8 needs calibration texts .*--openvino-calibration"),
        (dict(openvino="int4"), r"^openvino must be one of int8, bf16, f32, got 'int4'$"),
    ]
    for kwargs, pattern in cases:
        with pytest.raises(ExportError, match=pattern):
            export_saved_model(trained, layer, base, "m", labels=helpers.LABELS, check=False, **kwargs)
    # What `check_request` reads of a ServingModule: its kind, pair flag and tokenizer.
    numbers = AlbertTokenizerLayer.from_sentencepiece(numbers_spm_model, sequence_length=SEQ)
    refused = [
        (SimpleNamespace(kind="encoder", pair=False, tokenizer=layer),
         r"^the OpenVINO target exports classification and regression models, not encoder models$"),
        (SimpleNamespace(kind="regression", pair=True, tokenizer=layer), "sentence-pair models are not supported"),
        (SimpleNamespace(kind="regression", pair=False, tokenizer=SimpleNamespace(is_sentencepiece=False)),
         r"^the OpenVINO target's in-model tokenizer needs a SentencePiece vocabulary, not WordPiece$"),
        (SimpleNamespace(kind="classification", pair=False, tokenizer=numbers),
         r"^the vocabulary has pieces ending in a digit and ',' .*digit-comma rule"),
    ]
    for module, pattern in refused:
        with pytest.raises(ov_export.OpenVinoExportError, match=pattern):
            ov_export.check_request(module, "f32", None)
    # A model that misses the tolerance is refused after the IR was written: nothing is published.
    monkeypatch.setitem(ov_export.TOLERANCES, "f32", {"relative_max_abs_diff": -1.0, "min_argmax_agreement": 1.0})
    with pytest.raises(ExportError, match=r"^OpenVINO f32 output logits differs by .* from the SavedModel's$"):
        export_saved_model(trained, layer, base, "m", labels=helpers.LABELS, check=False, openvino="f32")
    assert _published(base) == ([], ["m"]) and os.listdir(os.path.join(base, "openvino", "m")) == []
    assert os.listdir(os.path.join(base, "m")) == []


def _regressor_for(layer):
    import keras

    from albert_tf.config import AlbertConfig
    from albert_tf.modeling import AlbertEncoder
    from albert_tf.tasks.classification import AlbertForRegression

    keras.utils.set_random_seed(0)
    encoder = AlbertEncoder.from_albert_config(AlbertConfig(
        vocab_size=layer.vocab_size, embedding_size=8, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=SEQ))
    return AlbertForRegression(encoder)


def test_missing_openvino_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "openvino", None)
    with pytest.raises(ov_export.OpenVinoExportError, match=r"^the OpenVINO target needs openvino: pip install -e '\.\[openvino\]'$"):
        ov_export.require_openvino()


def test_cli_refuses_int8_without_calibration(tmp_path, spm):
    import argparse

    from albert_tf.cli import CommandError
    from albert_tf.cli import export as export_cli
    from albert_tf.tasks.spec import TaskSpec

    model_dir = tmp_path / "finetuned"
    model_dir.mkdir()
    (model_dir / "spiece.model").write_bytes(Path(spm).read_bytes())
    TaskSpec("sst-2", "classification", ["0", "1"], helpers.SEQ, ["accuracy"], "accuracy",
             {"type": "sentencepiece", "file": "spiece.model", "lower_case": True}).write(str(model_dir))
    (model_dir / "COMPLETE").write_text("")
    parser = argparse.ArgumentParser()
    export_cli.add_arguments(parser)
    common = ["--model-dir", str(model_dir), "--export-base", str(tmp_path / "cli"), "--model-name", "m"]
    with pytest.raises(CommandError, match=r"^int8 needs calibration texts .*records no training data\)$"):
        export_cli.run(parser.parse_args(common + ["--openvino", "int8"]))
    with pytest.raises(CommandError, match="^--openvino-calibration goes with --openvino$"):
        export_cli.run(parser.parse_args(common + ["--openvino-calibration", str(spm)]))
    with pytest.raises(CommandError, match=r"^calibration texts: .*absent does not exist$"):
        export_cli.run(parser.parse_args(common + ["--openvino", "int8", "--openvino-calibration", str(tmp_path / "absent")]))
    texts = tmp_path / "texts.txt"
    texts.write_text("good people\n\n bad law \n", encoding="utf-8")
    assert ov_export.read_calibration_texts(str(texts)) == ["good people", "bad law"]


# --- serving -------------------------------------------------------------------------------------------


def test_serve_prefer_openvino_model_over_rest_and_grpc(exported):
    from albert_tf.model_server import client
    from albert_tf.model_server.openvino_servable import OpenVinoServable
    from albert_tf.model_server.server import LocalModelServer

    base, result = exported
    texts = ["the nation of good law", "bad people", "it's good"]
    reference = _saved_model_text(result.path, texts)
    servable = OpenVinoServable(result.path, num_threads=1)
    assert sorted(servable.signature_defs) == ["serving_default"]
    servable.close()
    server = LocalModelServer(str(base), poll_interval_s=0, prefer_openvino_model=True, openvino_threads=1).start()
    try:
        assert list(server.manager.models) == ["cls"]
        for protocol, port in (("grpc", server.grpc_port), ("rest", server.rest_port)):
            address = f"127.0.0.1:{port}"
            metadata = client.model_metadata(address, "cls", protocol=protocol)["signature_def"]
            assert sorted(metadata) == ["serving_default"]
            assert sorted(metadata["serving_default"]["inputs"]) == ["text"]
            assert sorted(metadata["serving_default"]["outputs"]) == sorted(reference)
            outputs = client.predict_text(address, "cls", texts, protocol=protocol)
            np.testing.assert_allclose(outputs["probabilities"], reference["probabilities"], atol=1e-5)
            assert outputs["label"].tolist() == reference["label"].tolist()
            with pytest.raises(client.ServingClientError, match="tokens"):
                client._predict_strings(address, "cls", {k: np.zeros((1, 4), np.int32) for k in
                                                         ("input_ids", "input_mask", "segment_ids")},
                                        protocol, "tokens", None, 30.0)
    finally:
        server.stop()


# --- the SavedModel itself through OpenVINO's converter --------------------------------------------


def test_openvino_converts_the_saved_model_tokens_signature(exported, layer):
    """OpenVINO's TF frontend converts the `tokens` signature of a loaded SavedModel: no op it lacks
    (no Cumprod / ReverseV2). The classifier's string `label` output is left out here: the Python
    reader of an in-memory function cannot read string constants (`Unsupported data type: object`);
    the C++ reader of a file can (next test)."""
    import openvino as ov
    import tensorflow as tf

    from albert_tf.export import signatures

    base, result = exported
    texts = ["the nation of good law", "bad", "people in the states year after year of congress"]
    packed = {k: v.numpy() for k, v in layer.tokenize_and_pack(tf.constant(texts), length_bucket=16).items()}
    # A merged TF Serving batch: the shorter row padded with its first element, [CLS] (masked out).
    padded = {k: np.concatenate([v, np.repeat(v[:, :1], 3, axis=1)], axis=1) for k, v in packed.items()}
    loaded = tf.saved_model.load(result.path)  # kept: the signature reads its variables
    # The regressor's `tokens` as its SavedModel stores it (every output converts), the classifier's
    # as TF Serving loads it.
    regressor = signatures.ServingModule(_regressor_for(layer), layer).signatures()["tokens"]
    for tokens, outputs in ((regressor, None), (loaded.signatures["tokens"], ["logits", "probabilities", "label_id"])):
        model = ov.convert_model(tokens, **({"output": outputs} if outputs else {}))
        assert "CumProd" not in {op.get_type_name() for op in model.get_ops()}
        compiled = ov.Core().compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
        for inputs in (packed, padded):
            reference = {k: v.numpy() for k, v in tokens(**{k: tf.constant(v) for k, v in inputs.items()}).items()}
            got = compiled({name: inputs[name] for name in ("input_ids", "input_mask", "segment_ids")})
            assert len(compiled.outputs) == len(outputs or reference)
            for port in compiled.outputs:
                # An in-memory function's outputs are named by their tensors; the regressor has one.
                name = next((n for n in port.get_names() if n in reference), "score")
                np.testing.assert_allclose(got[port], reference[name], atol=1e-5)


def test_openvino_reads_the_tokens_signature_label_table_included_from_a_file(exported, layer, tmp_path):
    """Read from a file, as OVMS reads a model (the frontend's C++ reader), the classifier's `tokens`
    signature converts with every output: the label table becomes a string constant and `label`
    an OpenVINO string tensor, equal to the SavedModel's. Only the in-memory Python reader of a
    loaded function lacks string constants (the test above)."""
    import openvino as ov
    import tensorflow as tf
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    base, result = exported
    texts = ["the nation of good law", "bad", "people in the states year after year of congress"]
    packed = {k: v.numpy() for k, v in layer.tokenize_and_pack(tf.constant(texts), length_bucket=16).items()}
    loaded = tf.saved_model.load(result.path)  # kept: the signature reads its variables
    tokens = loaded.signatures["tokens"]
    frozen = convert_variables_to_constants_v2(tokens)
    tf.io.write_graph(frozen.graph.as_graph_def(), str(tmp_path), "tokens.pb", as_text=False)
    model = ov.convert_model(str(tmp_path / "tokens.pb"))
    compiled = ov.Core().compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    # Inputs by name: the graph's order of Parameters is not the signature's (`segment_ids` second).
    got = compiled({port: packed[next(iter(port.get_names())).split(":")[0]] for port in compiled.inputs})
    reference = {k: v.numpy() for k, v in tokens(**{k: tf.constant(v) for k, v in packed.items()}).items()}
    # The frozen graph's outputs (`Identity:0`, ...) are the signature's flattened outputs: its
    # output names in sorted order.
    key_of = {t.name: key for key, t in zip(sorted(tokens.structured_outputs), frozen.outputs)}
    by_name = {next(key_of[n] for n in port.get_names() if n in key_of): port for port in compiled.outputs}
    assert sorted(by_name) == sorted(reference) == ["label", "label_id", "logits", "probabilities"]
    assert by_name["label"].get_element_type() == ov.Type.string
    assert [str(v) for v in got[by_name["label"]]] == [v.decode() for v in reference["label"]]
    for name in ("logits", "probabilities", "label_id"):
        np.testing.assert_allclose(got[by_name[name]], reference[name], atol=1e-5)


def test_openvino_cannot_read_the_saved_model_directory_text_signature(exported):
    """OVMS given the SavedModel directory converts its `serving_default`, which takes raw text:
    the in-graph tokenizer's TF Text and string ops (FastSentencepieceTokenize, UnsortedSegmentJoin,
    Substr, ...) have no OpenVINO conversion, so OVMS serves the IR that `--openvino` writes (its
    tokenizer is `openvino_tokenizers`' op). If a future OpenVINO reads the directory, this test
    fails and the serving README's advice should change."""
    import openvino as ov
    import openvino_tokenizers  # noqa: F401  (registers the tokenizer ops OpenVINO can convert)

    base, result = exported
    assert os.path.isfile(os.path.join(result.path, "saved_model.pb"))
    # The pinned OpenVINO fails in its shape inference of the tokenizer's slices.
    with pytest.raises(RuntimeError, match="slice_plan|OpConversionFailure|not fully converted"):
        ov.convert_model(result.path)
