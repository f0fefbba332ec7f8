"""Tests of a raw-text model's export options: `precision` (albert_tf.export.precision: the graph computes
in the precision asked for, whatever the model was trained in, records it in export.json and is checked
at that precision's tolerance) and Keras 3's `format="tf_saved_model"`."""

import json

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.export.precision import model_precision, with_precision
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
