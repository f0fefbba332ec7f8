"""A TF Serving export is a checkpoint again (`albert_tf.weight_index`): `from_pretrained`,
`init_encoder` and the pipeline's warm start read its encoder, its head or the whole task model
back, bit for bit; an export without the index, or a model of another architecture, is refused
in one line. Also the warm-start resolver and its checks (`albert_tf.pipeline_steps.warm_start`)."""

import json
import os

import numpy as np
import pytest

SEQ = 16


@pytest.fixture(scope="module")
def exported(tmp_path_factory, tiny_spm_model, tiny_config):
    """A trained tiny raw-text classifier (labels "neg", "pos") and its export version directory."""
    import keras

    from albert_tf import AlbertTextClassifier
    from albert_tf.modeling import AlbertEncoder
    from albert_tf.tokenization.in_graph import AlbertTokenizerLayer

    keras.utils.set_random_seed(1)
    encoder = AlbertEncoder.from_albert_config(tiny_config, name="encoder")
    preprocessor = AlbertTokenizerLayer.from_sentencepiece(tiny_spm_model, sequence_length=SEQ, name="preprocessor")
    model = AlbertTextClassifier(encoder, preprocessor, num_classes=2, pooling="cls")
    model.fit(x=["a good film", "a bad film", "good", "bad"], y=[1, 0, 1, 0], epochs=2, verbose=0)
    result = model.export(str(tmp_path_factory.mktemp("weight_index")), "tiny", labels=["neg", "pos"])
    return model, result.path


@pytest.mark.slow
def test_the_index_names_every_exported_variable(exported):
    model, path = exported
    index = json.load(open(os.path.join(path, "assets", "weights.json")))
    assert index["model_class"] == "AlbertForClassification" and index["model_weights"] == len(model.task_model.weights)
    entries = index["variables"]
    assert all(e["model"] is not None for e in entries)
    assert {e["path"] for e in entries if e["encoder"] is None} == {"classifier/classifier/kernel", "classifier/classifier/bias"}


@pytest.mark.slow
def test_from_pretrained_and_init_encoder_read_an_export(exported):
    from albert_tf import AlbertTextClassifier
    from albert_tf.checkpoints.any_format import init_encoder
    from albert_tf.weight_index import MODEL, load_export_weights
    from albert_tf.modeling import AlbertEncoder

    model, path = exported
    again = AlbertTextClassifier.from_pretrained(path, num_classes=2, sequence_length=SEQ, pooling="cls")
    for a, b in zip(model.encoder.weights, again.encoder.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    # The head too, for the whole model: the same answers, bit for bit.
    loaded = load_export_weights(path, again.task_model, MODEL)
    assert loaded["missing"] == []
    texts = ["a good film", "bad", "film"]
    np.testing.assert_array_equal(model.predict(texts, verbose=0), again.predict(texts, verbose=0))
    encoder = AlbertEncoder.from_albert_config(again.encoder.to_albert_config())
    assert init_encoder(encoder, path).kind == "export"


@pytest.mark.slow
def test_head_only_leaves_the_encoder_alone(exported, tiny_config):
    import keras

    from albert_tf import AlbertTextClassifier
    from albert_tf.weight_index import HEAD, load_export_weights
    from albert_tf.modeling import AlbertEncoder
    from albert_tf.tokenization.in_graph import AlbertTokenizerLayer

    model, path = exported
    keras.utils.set_random_seed(7)
    encoder = AlbertEncoder.from_albert_config(tiny_config, name="encoder")
    fresh = AlbertTextClassifier(encoder, AlbertTokenizerLayer.from_sentencepiece(
        os.path.join(path, "assets", "spiece.model"), sequence_length=SEQ), num_classes=2, pooling="cls", compile=False)
    before = [w.numpy().copy() for w in fresh.encoder.weights]
    loaded = load_export_weights(path, fresh.task_model, HEAD)
    assert loaded["loaded"] == ["classifier/classifier/kernel", "classifier/classifier/bias"] and loaded["missing"] == []
    for b, w in zip(before, fresh.encoder.weights):
        np.testing.assert_array_equal(b, w.numpy())
    np.testing.assert_array_equal(fresh.task_model.weights[-1].numpy(), model.task_model.weights[-1].numpy())


@pytest.mark.slow
def test_refusals_are_one_line(exported, tmp_path, tiny_config):
    import shutil

    from albert_tf.checkpoints.any_format import init_encoder
    from albert_tf.checkpoints.original import CheckpointError
    from albert_tf.weight_index import ENCODER, ExportWeightsError, load_export_weights
    from albert_tf.modeling import AlbertEncoder
    from albert_tf import AlbertTextClassifier
    from albert_tf.tasks.pretrained import PretrainedNotFoundError

    _, path = exported
    wide = AlbertEncoder.from_albert_config(tiny_config.replace(num_hidden_groups=2))
    with pytest.raises(ExportWeightsError, match="not the exported architecture") as raised:
        load_export_weights(path, wide, ENCODER)
    assert "\n" not in str(raised.value)
    old = tmp_path / "old"
    shutil.copytree(path, old)
    os.remove(old / "assets" / "weights.json")
    with pytest.raises(PretrainedNotFoundError, match="export the model again") as raised:
        AlbertTextClassifier.from_pretrained(str(old), num_classes=2, sequence_length=SEQ)
    assert "\n" not in str(raised.value)
    encoder = AlbertEncoder.from_albert_config(tiny_config)
    with pytest.raises(CheckpointError, match="export the model again"):
        init_encoder(encoder, str(old))


@pytest.mark.slow
def test_warm_start_resolves_the_newest_version_and_checks_it(exported, tmp_path, tiny_config):
    import shutil

    from albert_tf.pipeline_steps.warm_start import (
        WarmStartError,
        base_tokenizer,
        check_architecture,
        check_labels,
        latest_blessed_model,
        resolve_base,
    )

    _, path = exported
    base = tmp_path / "serving"
    assert resolve_base(str(base), "tiny") is None
    for version in ("1", "3"):
        shutil.copytree(path, base / "tiny" / version)
    (base / "tiny" / ".push-4-tmp").mkdir()  # a push in progress is not a version
    assert latest_blessed_model(str(base), "tiny") == str(base / "tiny" / "3")
    resolved = resolve_base(str(base), "tiny")
    assert resolved["version"] == 3 and resolved["kind"] == "classification"
    file, info = base_tokenizer(resolved["path"])
    assert os.path.isfile(file) and info["type"] == "sentencepiece"
    check_labels(resolved["path"], ["neg", "pos"])
    with pytest.raises(WarmStartError, match=r"predicts \['neg', 'pos'\], the data have labels \['0', '1', '2'\]"):
        check_labels(resolved["path"], ["0", "1", "2"])
    check_architecture(resolved["path"], tiny_config)
    with pytest.raises(WarmStartError, match="hidden_size 16 \\(pipeline: 32\\)"):
        check_architecture(resolved["path"], tiny_config.replace(hidden_size=32, intermediate_size=64))
    os.remove(base / "tiny" / "3" / "assets" / "weights.json")
    with pytest.raises(WarmStartError, match="export the model again"):
        resolve_base(str(base), "tiny")


@pytest.mark.slow
def test_vocab_gen_takes_the_bases_vocabulary(exported, tmp_path):
    import shutil

    from albert_tf.pipeline_steps import vocab_gen

    _, path = exported
    shutil.copytree(path, tmp_path / "serving" / "tiny" / "1")
    out = tmp_path / "vocab"
    # No corpus is read: the base's vocabulary is taken as it is.
    summary = vocab_gen.run_vocab_gen(str(tmp_path / "no-corpus"), str(tmp_path / "no-examples"), str(out),
                                      warm_start=True, serving_base=str(tmp_path / "serving"), model_name="tiny")
    assert summary["warm_start"]["version"] == 1 and summary["vocab_size"] == 64
    assert (out / "spm.model").read_bytes() == (tmp_path / "serving" / "tiny" / "1" / "assets" / "spiece.model").read_bytes()
    assert vocab_gen.warm_start_base(str(out)) == summary["warm_start"]["path"]
