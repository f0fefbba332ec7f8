"""Tests of int8 that is right or refused: Keras `quantize()` on albert_tf models (refused; a Dense
quantized layer by layer still right), `model.tflite` exports (`albert_tf.export.tflite`: builtin
ops, variable shapes, parity with the SavedModel's `tokens` signature in float32 and dynamic-int8,
refusals), the `TfliteModel` runner, `albert-tf serve --prefer-tflite-model` over REST and gRPC,
and the client that tokenizes for a token-ids model (`--vocab`)."""

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import _serving_helpers as helpers  # noqa: E402

from albert_tf.export import saved_model, tflite, warmup  # noqa: E402
from albert_tf.export.saved_model import ExportError, export_saved_model  # noqa: E402

SEQ = 32
TOKEN_KEYS = ("input_ids", "input_mask", "segment_ids")


def _cosine(a, b):
    a, b = np.ravel(a).astype(np.float64), np.ravel(b).astype(np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def _encoder(seed=0):
    """Wide enough (64) that dynamic-range quantization applies (TFLite skips weights < 1024 values)."""
    import keras

    from albert_tf.config import AlbertConfig
    from albert_tf.modeling import AlbertEncoder

    keras.utils.set_random_seed(seed)
    return AlbertEncoder.from_albert_config(AlbertConfig(
        vocab_size=48, embedding_size=32, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=128, max_position_embeddings=SEQ))


def _features(batch=1, seq=SEQ):
    return {k: np.zeros((batch, seq), "int32") for k in TOKEN_KEYS}


@pytest.fixture(scope="module")
def spm(tmp_path_factory):
    return helpers.tiny_spm(tmp_path_factory.mktemp("tflite_spm"))


@pytest.fixture(scope="module")
def layer(spm):
    from albert_tf.tokenization.in_graph import AlbertTokenizerLayer

    return AlbertTokenizerLayer.from_sentencepiece(spm, sequence_length=SEQ)


@pytest.fixture(scope="module")
def trained(layer):
    """A classifier trained on the toy task (accuracy parity needs a model that has learned)."""
    import keras
    import tensorflow as tf

    from albert_tf.tasks.classification import AlbertForClassification

    model = AlbertForClassification(_encoder(), num_labels=2, dropout=0.0)
    texts, labels = helpers.toy_texts(320, seed=0)
    x = {k: v.numpy() for k, v in layer(tf.constant(texts)).items()}
    model.compile(optimizer=keras.optimizers.Adam(2e-3))  # the task model's own loss on x["labels"]
    model.fit(dict(x, labels=labels), batch_size=32, epochs=4, verbose=0)
    return model


@pytest.fixture(scope="module")
def exports(trained, layer, tmp_path_factory):
    """`cls/1`: the trained classifier exported with a dynamic-int8 `model.tflite`."""
    base = tmp_path_factory.mktemp("tflite_base")
    result = export_saved_model(trained, layer, str(base), "cls", labels=helpers.LABELS, check=False, tflite="dynamic-int8")
    return base, {"cls": result}


@pytest.fixture(scope="module")
def loose(trained, layer, tmp_path_factory):
    """`model.tflite` files written without a SavedModel (`write_tflite` on a ServingModule): the
    trained classifier in float32, its encoder in dynamic-int8; `(path, info, module)` each."""
    from albert_tf.export import signatures

    out = {}
    for name, model, kwargs, mode in (("cls32", trained, {"labels": helpers.LABELS}, "float32"),
                                      ("enc", trained.encoder, {}, "dynamic-int8")):
        directory = tmp_path_factory.mktemp(f"tflite_{name}")
        module = signatures.ServingModule(model, layer, **kwargs)
        info = tflite.write_tflite(str(directory), module, mode)
        out[name] = (str(directory / tflite.TFLITE_FILE), info, module)
    return out


def _module_tokens(module, inputs):
    import tensorflow as tf

    return {k: v.numpy() for k, v in module.signatures()["tokens"](**{k: tf.constant(v) for k, v in inputs.items()}).items()}


def _tokens_outputs(version_dir, inputs):
    """The SavedModel's `tokens` signature, loaded as TF Serving loads it."""
    from albert_tf.model_server.servable import SessionServable

    servable = SessionServable(version_dir)
    try:
        return servable.run("tokens", inputs)
    finally:
        servable.close()


# --- Keras quantize() --------------------------------------------------------------------------------


def test_quantize_is_refused_on_every_model_type(layer):
    from albert_tf.pretrainer import AlbertPretrainer
    from albert_tf.quantization import QuantizationError
    from albert_tf.tasks.classification import AlbertForClassification, AlbertForRegression
    from albert_tf.tasks.multiple_choice import AlbertForMultipleChoice
    from albert_tf.tasks.squad import build_squad_model
    from albert_tf.tasks.tagging import AlbertForTagging
    from albert_tf import AlbertTextClassifier

    encoder = _encoder()
    f = _features()
    models = [
        (encoder, f), (AlbertForClassification(encoder, num_labels=2), f), (AlbertForRegression(encoder), f),
        (AlbertPretrainer(encoder), dict(f, masked_lm_positions=np.zeros((1, 2), "int32"))),
        (build_squad_model(encoder, "v1"), f), (build_squad_model(encoder, "v2"), dict(f, p_mask=f["input_ids"])),
        (AlbertForTagging(encoder, num_labels=3), f), (AlbertForMultipleChoice(encoder), _features(4)),
        (AlbertTextClassifier(encoder, layer, num_classes=2, compile=False), None),
    ]
    for model, inputs in models:
        if inputs is not None:  # Keras refuses to quantize an unbuilt model before asking the model
            model({k: v[None] if model.__class__.__name__ == "AlbertForMultipleChoice" else v for k, v in inputs.items()})
        assert model.built
        for mode in ("int8", "int4", "float8"):
            with pytest.raises(QuantizationError) as info:
                model.quantize(mode)
            message = str(info.value)
            assert "\n" not in message and message.startswith(f"{type(model).__name__}.quantize('{mode}') is not supported")
            assert "tflite='dynamic-int8'" in message and "albert-tf export --tflite dynamic-int8" in message
    # Nothing was quantized on the way to the refusal.
    assert all(getattr(l, "quantization_mode", None) is None for l in encoder._flatten_layers())


@pytest.mark.slow
def test_dense_layers_quantized_one_by_one_give_the_quantized_answer():
    """The encoder's fused dense path read `layer.kernel` and bypassed Dense's quantized call:
    int8 pooled cosine 0.27 to float32, silently. Now each quantized Dense runs its own call."""
    import keras
    import tensorflow as tf

    encoder = _encoder(seed=3)
    rng = np.random.default_rng(0)
    inputs = dict(_features(3), input_ids=rng.integers(0, 48, (3, SEQ)).astype("int32"))
    inputs["input_mask"][:] = 1
    reference = encoder(inputs)["pooled_output"].numpy()
    for sublayer in encoder._flatten_layers():
        if isinstance(sublayer, keras.layers.Dense):
            sublayer.quantize("int8")
    eager = encoder(inputs)["pooled_output"].numpy()
    graph = tf.function(lambda f: encoder(f, training=False)["pooled_output"])(inputs).numpy()
    assert _cosine(reference, eager) >= 0.999 and _cosine(reference, graph) >= 0.999
    assert not np.allclose(reference, eager)  # it is the quantized model that answered


# --- the model.tflite export --------------------------------------------------------------------------


@pytest.mark.slow
def test_export_writes_a_builtin_only_tflite_with_variable_shapes(exports, loose):
    base, results = exports
    result = results["cls"]
    assert saved_model.read_export_info(result.path)["tflite"] == result.tflite
    assert result.tflite["signature"] == "tokens"
    # TF Serving replays the warmup file on a preferred model.tflite too: only `tokens`, which both run.
    logs = warmup.read_warmup_file(result.path)
    assert [log.predict_log.request.model_spec.signature_name for log in logs] == ["tokens"]
    for path, info, mode in ((os.path.join(result.path, tflite.TFLITE_FILE), result.tflite, "dynamic-int8"),
                             (loose["cls32"][0], loose["cls32"][1], "float32")):
        assert info["mode"] == mode and info["bytes"] == os.path.getsize(path)
        assert info["inputs"] == {k: {"dtype": "int32", "shape": [-1, -1]} for k in TOKEN_KEYS}
        assert info["outputs"] == {"label": {"dtype": "string", "shape": [-1]}, "label_id": {"dtype": "int32", "shape": [-1]},
                                   "logits": {"dtype": "float32", "shape": [-1, 2]},
                                   "probabilities": {"dtype": "float32", "shape": [-1, 2]}}
        assert info["vocab_size"] == 48 and set(info["check"]) == {"logits", "probabilities"}
        ops = tflite.model_ops(path)
        assert "FULLY_CONNECTED" in ops and not [op for op in ops if op in ("CUSTOM", "DELEGATE") or op.startswith("Flex")]
    assert sorted(os.listdir(base / "cls")) == ["1"]  # no staging left behind
    # int8 weights: the 64-wide model's file is well under half the float32 one.
    assert result.tflite["bytes"] < 0.5 * loose["cls32"][1]["bytes"]


@pytest.mark.slow
def test_tflite_matches_the_saved_model_tokens_signature(exports, loose, layer):
    """Stated tolerances: float32 within 1e-4; dynamic-int8 probabilities within 0.02, pooled
    cosine >= 0.9995, and accuracy within 0.5 point of the SavedModel's on held-out toy data."""
    import tensorflow as tf

    _, results = exports
    texts, labels = helpers.toy_texts(256, seed=1)
    inputs = {k: v.numpy() for k, v in layer(tf.constant(texts)).items()}
    reference = _tokens_outputs(results["cls"].path, inputs)
    int8 = tflite.TfliteModel(os.path.join(results["cls"].path, tflite.TFLITE_FILE))(inputs)
    fp32 = tflite.TfliteModel(loose["cls32"][0])(inputs)
    np.testing.assert_allclose(fp32["probabilities"], reference["probabilities"], atol=1e-4)
    np.testing.assert_array_equal(fp32["label"], reference["label"])
    assert np.max(np.abs(int8["probabilities"] - reference["probabilities"])) <= 0.02
    accuracy = {k: float(np.mean(v["label_id"] == labels)) for k, v in (("saved_model", reference), ("int8", int8))}
    assert accuracy["saved_model"] >= 0.9 and abs(accuracy["int8"] - accuracy["saved_model"]) <= 0.005, accuracy
    path, _, module = loose["enc"]
    encoder_ref = _module_tokens(module, inputs)
    encoder_int8 = tflite.TfliteModel(path)(inputs)
    assert _cosine(encoder_int8["pooled_output"], encoder_ref["pooled_output"]) >= 0.9995
    assert _cosine(encoder_int8["sequence_output"], encoder_ref["sequence_output"]) >= 0.999


@pytest.mark.slow
def test_runner_resizes_buckets_lengths_and_checks_ids(loose):
    path = loose["enc"][0]
    plain = tflite.TfliteModel(path, vocab_size=48)
    bucketed = tflite.TfliteModel(path, num_threads=1, length_bucket=16)
    rng = np.random.default_rng(2)
    for batch, longest in ((1, 5), (3, 17), (2, SEQ)):
        mask = np.zeros((batch, SEQ), "int32")
        mask[:, :3] = 1
        mask[0, :longest] = 1
        features = {"input_ids": rng.integers(0, 48, (batch, SEQ)).astype("int32") * mask, "input_mask": mask,
                    "segment_ids": np.zeros_like(mask)}
        assert bucketed.bucketed_length(mask) == min(SEQ, 16 * -(-longest // 16))
        full, cut = plain(features), bucketed(features)
        assert full["sequence_output"].shape == (batch, SEQ, 64)
        assert cut["sequence_output"].shape == (batch, bucketed.bucketed_length(mask), 64)
        # Padding is masked out: cutting it changes nothing the real tokens see.
        np.testing.assert_allclose(cut["pooled_output"], full["pooled_output"], atol=1e-4)
    good = _features(1)
    for bad, message in (
        (dict(good, input_ids=np.full((1, SEQ), -1, "int32")), "input_ids must be >= 0"),
        (dict(good, input_ids=np.full((1, SEQ), 48, "int32")), "input_ids must be < the vocabulary size 48"),
        ({k: good[k] for k in ("input_ids", "input_mask")}, "missing ['segment_ids']"),
        (dict(good, input_mask=np.zeros((1, SEQ), "float32")), "input_mask must be integer token ids"),
        (dict(good, segment_ids=np.zeros((1, 4), "int32")), "one shape"),
    ):
        with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
            plain(bad)
    with pytest.raises(ValueError, match="length_bucket"):
        tflite.TfliteModel(path, length_bucket=0)


@pytest.mark.slow
def test_refusals_are_one_line_and_publish_nothing(tmp_path, layer, monkeypatch):
    import tensorflow as tf

    from albert_tf.export import signatures
    from albert_tf.tasks.classification import AlbertForClassification

    model = AlbertForClassification(_encoder(), num_labels=2)
    model(_features())
    with pytest.raises(ExportError, match="^tflite must be one of dynamic-int8, float32, got 'int4'$"):
        export_saved_model(model, layer, str(tmp_path), "m", labels=helpers.LABELS, tflite="int4")
    assert saved_model.list_exports(str(tmp_path)) == []
    from albert_tf.tasks.squad.serving import SquadV2Serving

    with pytest.raises(tflite.TfliteExportError, match=r"^a squad_v2 export has no TFLite model \(.*tf.Einsum.*\)$"):
        tflite.check_request(SquadV2Serving, "dynamic-int8")
    # A graph that needs a non-builtin op fails conversion with the op named.
    module = signatures.ServingModule(model, layer, labels=helpers.LABELS)
    monkeypatch.setattr(module, "_token_outputs", lambda f: {"x": tf.math.special.bessel_i0e(tf.cast(f["input_ids"], tf.float32))})
    with pytest.raises(tflite.TfliteExportError) as info:
        tflite.convert(module, "float32")
    assert "(tf.BesselI0e)" in str(info.value) and "builtins" in str(info.value) and "\n" not in str(info.value)


@pytest.mark.slow
def test_text_model_and_cli_export_tflite(tmp_path, layer, spm, capsys):
    import argparse

    from albert_tf.cli import export as export_cli
    from albert_tf.tasks.spec import TaskSpec
    from albert_tf import AlbertTextClassifier

    text_model = AlbertTextClassifier(_encoder(), layer, num_classes=2, compile=False)
    result = text_model.export(str(tmp_path / "base"), "text", tflite="float32", check=False)
    assert result.tflite["mode"] == "float32" and os.path.isfile(os.path.join(result.path, "model.tflite"))

    model_dir = tmp_path / "finetuned"
    model_dir.mkdir()
    helpers.tiny_classifier(seed=3).save(str(model_dir / "model.keras"))
    (model_dir / "spiece.model").write_bytes(Path(spm).read_bytes())
    TaskSpec("sst-2", "classification", ["0", "1"], helpers.SEQ, ["accuracy"], "accuracy",
             {"type": "sentencepiece", "file": "spiece.model", "lower_case": True}).write(str(model_dir))
    (model_dir / "COMPLETE").write_text("")
    parser = argparse.ArgumentParser()
    export_cli.add_arguments(parser)
    common = ["--model-dir", str(model_dir), "--export-base", str(tmp_path / "cli"), "--model-name", "sst2", "--skip-check"]
    assert export_cli.run(parser.parse_args(common + ["--tflite", "dynamic-int8"])) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["tflite"]["mode"] == "dynamic-int8" and printed["tflite"]["file"] == "model.tflite"
    with pytest.raises(SystemExit):
        parser.parse_args(common + ["--tflite", "int4"])


@pytest.mark.slow
def test_client_tokenizer_matches_the_export(exports, layer, spm):
    import tensorflow as tf

    from albert_tf.model_server import client_tokenizer

    _, results = exports
    from_export = client_tokenizer.tokenizer_layer(results["cls"].path)
    assert from_export.sequence_length == SEQ
    texts = [b"the nation of good law", b"bad"]
    encoded = client_tokenizer.encode(from_export, texts)
    expected = {k: v.numpy() for k, v in layer(tf.constant(texts)).items()}
    assert encoded["input_ids"].shape == (2, 16)
    for k in TOKEN_KEYS:
        np.testing.assert_array_equal(encoded[k], expected[k][:, :16])
        assert not expected[k][:, 16:].any()
    bare = client_tokenizer.tokenizer_layer(spm, sequence_length=20)
    assert bare.sequence_length == 20
    for bad in (os.path.dirname(spm), os.path.join(os.path.dirname(spm), "absent.model")):
        with pytest.raises(client_tokenizer.VocabularyError):
            client_tokenizer.tokenizer_layer(bad)


# --- serving -----------------------------------------------------------------------------------------


@pytest.mark.slow
def test_serve_prefer_tflite_model_over_rest_and_grpc_with_the_client(exports, layer, capsys):
    import argparse

    import tensorflow as tf

    from albert_tf.cli import CommandError
    from albert_tf.cli import predict as predict_cli

    from albert_tf.model_server import client
    from albert_tf.model_server.server import LocalModelServer

    base, results = exports
    texts = ["the nation of good law", "bad people", "it's good"]
    inputs = {k: v.numpy() for k, v in layer(tf.constant(texts)).items()}
    reference = _tokens_outputs(results["cls"].path, inputs)
    server = LocalModelServer(str(base), model_names=["cls"], poll_interval_s=0, prefer_tflite_model=True).start()
    try:
        grpc_address, rest_address = f"127.0.0.1:{server.grpc_port}", f"127.0.0.1:{server.rest_port}"
        for address, protocol in ((grpc_address, "grpc"), (rest_address, "rest")):
            metadata = client.model_metadata(address, "cls", protocol=protocol)["signature_def"]
            assert sorted(metadata) == ["tokens"]  # the SavedModel's token-ids signature, any length
            assert sorted(metadata["tokens"]["inputs"]) == sorted(TOKEN_KEYS)
            assert sorted(metadata["tokens"]["outputs"]) == sorted(reference)
            dims = metadata["tokens"]["inputs"]["input_ids"]["tensor_shape"]["dim"]
            assert [int(d["size"]) for d in dims] == [-1, -1]
            # Token ids over the wire, the SavedModel's input names, the same outputs.
            outputs = client._predict_strings(address, "cls", inputs, protocol, "tokens", None, 30.0)
            assert sorted(outputs) == sorted(reference)
            assert np.max(np.abs(outputs["probabilities"] - reference["probabilities"])) <= 0.02
            assert outputs["label"].tolist() == reference["label"].tolist()
            # The client tokenizes itself with the export's vocabulary (padding cut to 16).
            by_client = client.predict_text(address, "cls", texts, protocol=protocol, vocab=results["cls"].path)
            assert np.max(np.abs(by_client["probabilities"] - reference["probabilities"])) <= 0.02
            with pytest.raises(ValueError, match="takes token ids, not text .*--vocab"):
                client.predict_text(address, "cls", texts, protocol=protocol)
        # `albert-tf predict --server ... --vocab VERSION_DIR`: one JSON row per text.
        parser = argparse.ArgumentParser()
        predict_cli.add_arguments(parser)
        argv = ["--server", grpc_address, "--model", "cls"] + texts
        assert predict_cli.run(parser.parse_args(argv + ["--vocab", results["cls"].path])) == 0
        rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert [r["label"] for r in rows] == [x.decode() for x in reference["label"]]
        with pytest.raises(CommandError, match="--vocab"):
            predict_cli.run(parser.parse_args(argv))
        with pytest.raises(client.ServingClientError, match="input_ids must be < the vocabulary size 48"):
            client._predict_strings(grpc_address, "cls", dict(inputs, input_ids=inputs["input_ids"] + 48), "grpc",
                                    "tokens", None, 30.0)
    finally:
        server.stop()
    # Without the flag the same version serves its SavedModel (text in), warmed up by `tokens`.
    server = LocalModelServer(str(base), model_names=["cls"], poll_interval_s=0).start()
    try:
        outputs = client.predict_text(f"127.0.0.1:{server.grpc_port}", "cls", texts, vocab=results["cls"].path)
        np.testing.assert_allclose(outputs["probabilities"], reference["probabilities"], atol=1e-5)
    finally:
        server.stop()


@pytest.mark.slow
def test_tflite_export_prints_no_converter_notices(tmp_path, layer, capfd):
    """The converter's "Ignored output_format" lines and the interpreter's XNNPACK notice are
    dropped; a line that is not one of them still reaches stderr."""
    import re

    from _quiet import unexpected_stderr

    from albert_tf.runtime_env import native_notices_dropped
    from albert_tf import AlbertTextClassifier

    text_model = AlbertTextClassifier(_encoder(), layer, num_classes=2, compile=False)
    capfd.readouterr()
    text_model.export(str(tmp_path / "quiet"), "quiet", tflite="dynamic-int8", check=False)
    err = capfd.readouterr().err
    assert "Ignored output_format" not in err and "XNNPACK" not in err
    # C++ INFO lines show only where TensorFlow was imported before albert_tf set its log level
    # (as in this test process); the commands never print them.
    info = re.compile(r"^(\S+ \S+: I |I\d{4} )")
    assert unexpected_stderr("\n".join(line for line in err.splitlines() if not info.match(line))) == []
    with native_notices_dropped([re.compile(r"^drop me$")]):
        os.write(2, b"drop me\nkeep me\n")
    assert capfd.readouterr().err == "keep me\n"
