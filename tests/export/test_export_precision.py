"""Tests of a raw-text model's export options: `precision` (albert_tf.export.precision: the graph computes
in the precision asked for, whatever the model was trained in, records it in export.json and is checked
at that precision's tolerance) and Keras 3's `format="tf_saved_model"`."""

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.export.accuracy_check import AccuracyCheckError, LabelledTexts, check_accuracy
from albert_tf.export.precision import TOLERANCES as precision_tolerances, model_precision, with_precision
from albert_tf.export.saved_model import ExportError
from albert_tf.tasks.spec import TaskSpec
from albert_tf.modeling import AlbertEncoder
from albert_tf import AlbertTextClassifier
from albert_tf.tokenization.in_graph import AlbertTokenizerLayer

TEXTS = ["a good film", "the plot was bad", "it was"]


def _classifier(tiny_config, tiny_spm_model, dtype=None):
    encoder = AlbertEncoder.from_albert_config(tiny_config, dtype=dtype)
    preprocessor = AlbertTokenizerLayer.from_sentencepiece(tiny_spm_model, sequence_length=16)
    return AlbertTextClassifier(encoder, preprocessor, num_classes=2, labels=["neg", "pos"])


@pytest.mark.slow
def test_a_float32_model_exports_a_bf16_graph_checked_at_bf16_tolerance(tiny_config, tiny_spm_model, tmp_path):
    model = _classifier(tiny_config, tiny_spm_model)
    assert model_precision(model) == "float32"
    result = model.export(tmp_path, model_name="clf", precision="mixed_bfloat16")  # with the reload check
    info = json.loads((tmp_path / "clf" / "1" / "assets" / "export.json").read_text())
    assert info["precision"] == info["dtype_policy"] == "mixed_bfloat16"
    served = tf.saved_model.load(result.path).signatures["serving_default"](text=tf.constant(TEXTS))["logits"].numpy()
    np.testing.assert_allclose(served, model.predict(TEXTS, verbose=0), atol=2e-2, rtol=2e-2)
    # The model exported is unchanged, and the export loads back whole.
    assert model_precision(model) == "float32"
    assert AlbertTextClassifier.from_pretrained(result.path).labels == ["neg", "pos"]


def test_with_precision_keeps_the_weights_and_refuses_other_models(tiny_config, tiny_spm_model):
    model = _classifier(tiny_config, tiny_spm_model, dtype="mixed_bfloat16")
    head = model.task_model
    assert model_precision(head) == "mixed_bfloat16" and with_precision(head, "mixed_bfloat16") is head
    converted = with_precision(head, "float32")
    assert model_precision(converted) == "float32"
    for a, b in zip(converted.weights, head.weights):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    with pytest.raises(ValueError, match="precision must be one of float32, mixed_bfloat16"):
        with_precision(head, "float16")
    with pytest.raises(ValueError, match="precision is for encoders and task models, not a AlbertTokenizerLayer"):
        with_precision(model.preprocessor, "mixed_bfloat16")


def test_keras_format_writes_the_savedmodel_at_the_path(tiny_config, tiny_spm_model, tmp_path):
    """`export(path, format="tf_saved_model")`, as Keras 3: the SavedModel itself at `path` (signatures,
    assets, task.json, warmup), nothing else beside it; a path in use and other formats are refused."""
    model = _classifier(tiny_config, tiny_spm_model)
    path = tmp_path / "exported"
    result = model.export(path, format="tf_saved_model", check=False)
    assert result.path == str(path) and (path / "saved_model.pb").is_file()
    assert (path / "assets" / "task.json").is_file() and (path / "assets.extra" / "tf_serving_warmup_requests").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exported"]
    served = tf.saved_model.load(str(path)).signatures["serving_default"](text=tf.constant(TEXTS))["logits"].numpy()
    np.testing.assert_allclose(served, model.predict(TEXTS, verbose=0), atol=1e-5, rtol=1e-5)
    assert AlbertTextClassifier.from_pretrained(path).labels == ["neg", "pos"]
    with pytest.raises(ValueError, match="exists and is not an empty folder"):
        model.export(path, format="tf_saved_model", check=False)
    with pytest.raises(ValueError, match="format must be 'tf_saved_model', got 'onnx'"):
        model.export(tmp_path / "other", format="onnx")
    with pytest.raises(ValueError, match="model_name and version are for the TF Serving layout"):
        model.export(tmp_path / "other", model_name="x", format="tf_saved_model")


# --- the bf16 export graph: bf16 weights read once, float32 where accuracy needs it ----------------------


def _tokens_graph_ops(version_dir):
    """The NodeDefs of the exported `tokens` signature's computation: the functions its outputs call,
    and the functions those call, read from saved_model.pb (no load, no custom-op registration)."""
    from albert_tf.export import compatibility

    meta_graph = compatibility.read_meta_graph(str(version_dir))
    library = {f.signature.name: f for f in meta_graph.graph_def.library.function}
    nodes = {n.name: n for n in meta_graph.graph_def.node}

    def called(node):
        return [v.func.name for v in node.attr.values() if v.func.name] + [
            f.name for v in node.attr.values() for f in v.list.func]

    pending = [name for out in meta_graph.signature_def["tokens"].outputs.values()
               for name in called(nodes[out.name.split(":")[0]])]
    functions = {}
    while pending:
        name = pending.pop()
        if name in library and name not in functions:
            functions[name] = library[name]
            pending += [f for n in library[name].node_def for f in called(n)]
    return [(f, n) for f in functions.values() for n in f.node_def]


def _weight_casts(nodes):
    """Casts of a variable read (ReadVariableOp -> [Identity ->] Cast): a weight converted at its use."""
    by_function = {}
    for function, node in nodes:
        by_function.setdefault(function.signature.name, {})[node.name] = node
    casts = []
    for function, node in nodes:
        if node.op != "Cast":
            continue
        names, source = by_function[function.signature.name], node.input[0].split(":")[0]
        while source in names and names[source].op == "Identity":
            source = names[source].input[0].split(":")[0]
        if source in names and names[source].op == "ReadVariableOp":
            casts.append(node.name)
    return casts


@pytest.fixture(scope="module")
def shared_stack_exports(tiny_config, tiny_spm_model, tmp_path_factory):
    """{(layers, precision): version dir} of one shared-block classifier of 2 layers (float32 and
    bf16) and of 4 (bf16)."""
    base = tmp_path_factory.mktemp("shared_stack")
    exports = {}
    for layers in (2, 4):
        config = dataclasses.replace(tiny_config, num_hidden_layers=layers)
        model = _classifier(config, tiny_spm_model)
        for precision in ("float32", "mixed_bfloat16")[layers // 4:]:
            exports[layers, precision] = model.export(base, model_name=f"l{layers}_{precision}", precision=precision,
                                                      check=False).path
    return exports


def test_a_bf16_export_stores_bf16_weights_and_casts_no_variable_read(shared_stack_exports):
    """The shared block's weights are bf16 variables read as stored: no ReadVariableOp -> Cast in
    the `tokens` graph, whatever the depth, and each variable read as often as in float32 (Keras's
    mixed_bfloat16 cast every weight at each of its uses: 28 such Casts at 2 layers, 36 at 4)."""
    ops = {key: _tokens_graph_ops(path) for key, path in shared_stack_exports.items()}
    for key, nodes in ops.items():
        assert _weight_casts(nodes) == [], key
    reads = {key: sum(n.op == "ReadVariableOp" for _, n in nodes) for key, nodes in ops.items()}
    # bf16 reads the query, key and value weights once more, into their concatenation (one matmul):
    # made once per graph, for the last layer's key / value alone too (it computes [CLS]'s query only).
    assert reads[2, "mixed_bfloat16"] == reads[2, "float32"] + 6
    assert reads[4, "mixed_bfloat16"] - reads[2, "mixed_bfloat16"] == 8  # the LayerNorms' gamma and beta, as float32
    casts = {key: sum(n.op == "Cast" for _, n in nodes) for key, nodes in ops.items()}
    # What casts remain are activations': into a bf16 matmul, out of it into a float32 LayerNorm or
    # softmax; a fixed number per layer, none per weight.
    per_layer = (casts[4, "mixed_bfloat16"] - casts[2, "mixed_bfloat16"]) / 2
    assert per_layer <= 7, casts
    bf16_matmuls = [n for _, n in ops[2, "mixed_bfloat16"] if n.op == "MatMul" and n.attr["T"].type == tf.bfloat16.as_datatype_enum]
    # The projection; layer 1: q|k|v (one matmul), output, intermediate, output; layer 2 the same with
    # q (of its [CLS] row only, for the pooler) apart from k|v.
    assert len(bf16_matmuls) == 1 + 4 + 5
    for op in ("Softmax", "FusedBatchNormV3"):
        assert {n.attr["T"].type for _, n in ops[2, "mixed_bfloat16"] if n.op == op} == {tf.float32.as_datatype_enum}, op
    for layers in (2, 4):
        info = json.loads((Path(shared_stack_exports[layers, "mixed_bfloat16"]) / "assets" / "export.json").read_text())
        assert info["precision"] == "mixed_bfloat16" and info["variable_dtypes"]["bfloat16"] == 14  # 6 dense layers + the projection, kernel and bias
    f32 = json.loads((Path(shared_stack_exports[2, "float32"]) / "assets" / "export.json").read_text())
    assert list(f32["variable_dtypes"]) == ["float32"]


@pytest.fixture(scope="module")
def checked_bf16_export(task_family, tmp_path_factory):
    """The trained classifier's bf16 export with `check_data` (its training texts) and a float32
    LiteRT model (`tflite="float32"`): the `ExportResult`."""
    trained = task_family("classifier")
    return trained.model.export(tmp_path_factory.mktemp("checked_bf16"), model_name="clf", precision="mixed_bfloat16",
                                check=False, check_data=_texts(trained), tflite="float32", **trained.case.export_kwargs)


def test_the_bf16_graph_answers_as_float32_within_bf16_tolerance(task_family, checked_bf16_export, tmp_path):
    """A trained classifier (its export with the accuracy check: the same graph) and tagger: the
    bf16 export's `tokens` logits are the float32 export's within bf16's tolerance, and the
    classifier's labels are the same; outputs stay float32."""
    for name in ("classifier", "tagger"):
        trained = task_family(name)
        bf16 = checked_bf16_export if name == "classifier" else trained.model.export(
            tmp_path, model_name=name, precision="mixed_bfloat16", check=False, **trained.case.export_kwargs)
        ids = {"input_ids": tf.constant([[2, 10, 20, 30, 3, 0, 0, 0], [2, 11, 12, 3, 0, 0, 0, 0]], tf.int32)}
        ids["input_mask"] = tf.cast(ids["input_ids"] > 0, tf.int32)
        ids["segment_ids"] = tf.zeros_like(ids["input_ids"])
        outputs = [tf.saved_model.load(str(path)).signatures["tokens"](**ids)
                   for path in (trained.paths["export"], bf16.path)]
        assert outputs[1]["logits"].dtype == tf.float32
        np.testing.assert_allclose(outputs[1]["logits"].numpy(), outputs[0]["logits"].numpy(),
                                   **precision_tolerances["mixed_bfloat16"])
        if name == "classifier":
            np.testing.assert_array_equal(outputs[1]["label_id"].numpy(), outputs[0]["label_id"].numpy())


def _texts(trained):
    texts, labels = trained.case.x, trained.case.y
    return LabelledTexts(list(texts), [int(label) for label in labels])


def test_the_accuracy_check_passes_a_trained_model_and_refuses_a_flipped_one(task_family):
    trained = task_family("classifier")
    data = _texts(trained)
    scores = trained.model.predict(list(data.texts), verbose=0)
    reference = lambda texts, texts_b=None: trained.model.predict(list(texts), verbose=0)  # noqa: E731
    record = check_accuracy(reference, reference, data, what="bf16 graph")
    assert record["drop"] == 0 and record["accuracy"] == record["reference_accuracy"] > 0.9
    flipped = {text: -score for text, score in zip(data.texts, scores)}
    with pytest.raises(AccuracyCheckError, match=r"^the bf16 graph scores 0\.\d+ on 32 labelled texts, \d+\.\d+ points "
                       r"below float32's 1\.0000 \(at most 0\.50 allowed\): not exported$"):
        check_accuracy(reference, lambda texts, texts_b=None: np.stack([flipped[t] for t in texts]), data,
                       what="bf16 graph")


def test_a_bf16_export_with_check_data_records_the_accuracies(task_family, checked_bf16_export, tmp_path):
    """`export_saved_model(check_data=...)`: both graphs score the texts as served; the record is in
    export.json; a non-classifier or texts of the wrong shape are refused before anything is written.
    With `tflite=`, the LiteRT model (no bf16 builtins) is the float32 graph's, checked against it."""
    trained, result = task_family("classifier"), checked_bf16_export
    info = json.loads((Path(result.path) / "assets" / "export.json").read_text())
    assert info["accuracy_check"] == result.accuracy_check and info["tflite"] == result.tflite
    assert result.tflite["check"]["logits"]["max_abs_diff"] < 1e-4
    assert result.accuracy_check["examples"] == 32 and result.accuracy_check["reference_accuracy"] > 0.9
    assert result.accuracy_check["drop"] <= 0.005
    pairs = LabelledTexts(["a good dog"], [1], texts_b=["x"])
    with pytest.raises(ExportError, match="^the accuracy check's texts are pairs, the model takes single texts$"):
        trained.model.export(tmp_path, model_name="pairs", precision="mixed_bfloat16", check=False, check_data=pairs,
                             **trained.case.export_kwargs)
    assert not (tmp_path / "pairs" / "1").exists()
    tagger = task_family("tagger")
    with pytest.raises(ExportError, match="^the accuracy check \\(check_data\\) is for classification models, not a "
                                          "tagging export$"):
        tagger.model.export(tmp_path, model_name="tagger", precision="mixed_bfloat16", check=False,
                            check_data=_texts(trained))


def test_cli_export_refuses_a_bf16_graph_that_loses_accuracy(task_family, tmp_path, monkeypatch, capsys):
    """`albert-tf export --check-data`: a bf16 graph that flips the answers (doctored here: its head
    negated) is refused in one line and nothing is published; bad check data is refused first."""
    from _cli_helpers import cli_runner

    from albert_tf.export import precision

    trained = task_family("classifier")
    model_dir = trained.paths["model.finetune"]
    data = tmp_path / "data"
    data.mkdir()
    names = TaskSpec.read(str(model_dir)).labels
    (data / "dev.tsv").write_text("text\tlabel\n" + "".join(
        f"{t}\t{names[int(l)]}\n" for t, l in zip(trained.case.x, trained.case.y)), encoding="utf-8")
    cli = cli_runner(["albert_tf.cli.export"])
    base = tmp_path / "serving"
    common = ["export", "--model-dir", model_dir, "--export-base", base, "--model-name", "clf", "--precision",
              "mixed_bfloat16", "--skip-check"]
    assert cli(common + ["--check-data", tmp_path / "nowhere"]) == (2, f"--check-data not found: {tmp_path / 'nowhere'}")
    status, message = cli(common + ["--check-data", data, "--check-split", "test"])
    assert status == 2 and "\n" not in message and "test" in message
    tagger = task_family("tagger").paths["model.finetune"]
    assert cli(["export", "--model-dir", tagger, *common[3:], "--check-data", data]) == (
        2, f"--check-data scores classifiers; {tagger} is a tagging model")
    original = precision.export_form

    def doctored(model, asked):
        converted = original(model, asked)
        converted.head.kernel.assign(-converted.head.kernel)
        converted.head.bias.assign(-converted.head.bias)
        return converted

    monkeypatch.setattr(precision, "export_form", doctored)
    status, message = cli(common + ["--check-data", data])
    assert status == 2 and "\n" not in message, message
    assert message.startswith("the bf16 graph scores 0.") and message.endswith("not exported"), message
    assert not (base / "clf").exists() or not any((base / "clf").iterdir())
    monkeypatch.setattr(precision, "export_form", original)
    assert cli(common + ["--check-data", data]) == (0, "")
    printed = json.loads(capsys.readouterr().out)
    assert printed["version"] == 1 and printed["accuracy_check"]["drop"] <= 0.005, printed


def test_cli_output_says_which_check_a_bf16_export_had(shared_stack_exports):
    """Without --check-data a bf16 export was compared with float32 at the reload's tolerance only,
    and `albert-tf export` says so (or that it was not compared at all, with --skip-check)."""
    import argparse

    from albert_tf.cli.export import _accuracy_note

    def note(precision, **flags):
        result = argparse.Namespace(path=shared_stack_exports[2, precision], accuracy_check=None)
        return _accuracy_note(result, argparse.Namespace(**{"check_data": None, "skip_check": False, **flags}))

    assert note("mixed_bfloat16") == ("not run (no --check-data): the mixed_bfloat16 graph was checked only against "
                                      "float32 at the reload (rtol 0.02, atol 0.02)")
    assert note("mixed_bfloat16", skip_check=True) == (
        "not run (no --check-data, --skip-check): the mixed_bfloat16 graph was not compared with float32")
    assert note("float32") is None
    assert note("float32", check_data="dir") == "not run: a float32 export is the reference"
