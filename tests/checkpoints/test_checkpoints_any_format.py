"""Tests of `albert_tf.checkpoints.any_format`: `init_encoder` and `config_from_init` for every checkpoint kind."""

import json
import os

import numpy as np
import pytest

import keras
import tensorflow as tf

from albert_tf.checkpoints import any_format
from albert_tf.checkpoints.original import CheckpointError, save_original_checkpoint
from albert_tf.config import AlbertConfig
from albert_tf.modeling import AlbertEncoder
from albert_tf.pretrainer import AlbertPretrainer
from albert_tf.tasks.classification import AlbertForClassification

CONFIG = AlbertConfig(
    vocab_size=40, embedding_size=8, hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
    max_position_embeddings=16,
)
INPUTS = {
    "input_ids": np.array([[2, 7, 9, 3, 0]], "int32"),
    "input_mask": np.array([[1, 1, 1, 1, 0]], "int32"),
    "segment_ids": np.zeros((1, 5), "int32"),
}


def source_encoder(seed=1, config=CONFIG):
    keras.utils.set_random_seed(seed)
    return AlbertEncoder.from_albert_config(config)


def assert_same_function(a, b):
    np.testing.assert_allclose(
        np.asarray(a(INPUTS)["pooled_output"]), np.asarray(b(INPUTS)["pooled_output"]), rtol=1e-5, atol=1e-6
    )


def fresh(config=CONFIG):
    keras.utils.set_random_seed(99)
    return AlbertEncoder.from_albert_config(config)


@pytest.mark.slow
def test_keras_files_and_run_directories(tmp_path):
    source = source_encoder()
    source.save(tmp_path / "encoder.keras")
    target = fresh()
    result = any_format.init_encoder(target, str(tmp_path / "encoder.keras"))
    assert result.kind == "keras" and result.report.missing == []
    assert_same_function(source, target)

    # A pretrainer or task model: its encoder is taken, heads ignored.
    pretrainer = AlbertPretrainer(source)
    pretrainer({**INPUTS, "masked_lm_positions": np.zeros((1, 2), "int32")})
    pretrainer.save(tmp_path / "pretrainer.keras")
    target = fresh()
    any_format.init_encoder(target, str(tmp_path / "pretrainer.keras"))
    assert_same_function(source, target)

    # A fine-tuning output directory (model.keras + COMPLETE) and a pretraining output (encoder.keras).
    finetuned = tmp_path / "finetuned"
    finetuned.mkdir()
    classifier = AlbertForClassification(source, num_labels=3)
    classifier(INPUTS)
    classifier.save(finetuned / "model.keras")
    (finetuned / "COMPLETE").write_text("done")
    target = fresh()
    assert any_format.init_encoder(target, str(finetuned)).source.endswith("model.keras")
    assert_same_function(source, target)
    assert any_format.config_from_init(str(finetuned)) == CONFIG
    pretraining_dir = tmp_path / "pretraining"
    pretraining_dir.mkdir()
    source.save(pretraining_dir / "encoder.keras")
    target = fresh()
    any_format.init_encoder(target, str(pretraining_dir))
    assert_same_function(source, target)
    assert any_format.config_from_init(str(tmp_path / "encoder.keras")) == CONFIG

    source.save_weights(tmp_path / "encoder.weights.h5")
    target = fresh()
    assert any_format.init_encoder(target, str(tmp_path / "encoder.weights.h5")).kind == "weights_h5"
    assert_same_function(source, target)


def test_original_tf1_and_huggingface(tmp_path):
    from albert_tf.checkpoints.huggingface import save_huggingface_safetensors

    source = source_encoder(seed=2)
    prefix = save_original_checkpoint(str(tmp_path / "tf1" / "model.ckpt"), source)
    CONFIG.to_json_file(str(tmp_path / "tf1" / "albert_config.json"))
    for path in (prefix, prefix + ".index", str(tmp_path / "tf1")):
        target = fresh()
        result = any_format.init_encoder(target, path)
        assert result.kind == "original" and not result.report.missing
        assert_same_function(source, target)
    assert any_format.config_from_init(prefix) == CONFIG

    hf_dir = tmp_path / "hf"
    hf_dir.mkdir()
    save_huggingface_safetensors(str(hf_dir), source, prefix="albert.")  # a task model's naming
    target = fresh()
    assert any_format.init_encoder(target, str(hf_dir)).kind == "huggingface"
    assert_same_function(source, target)


def test_pretraining_tf2_checkpoint(tmp_path):
    from albert_tf.training.optimizers import create_optimizer
    from albert_tf.training.checkpointing import training_state

    keras.utils.set_random_seed(3)
    pretrainer = AlbertPretrainer(AlbertEncoder.from_albert_config(CONFIG))
    pretrainer({**INPUTS, "masked_lm_positions": np.zeros((1, 2), "int32")})
    optimizer = create_optimizer("lamb", 1e-3, num_train_steps=10, num_warmup_steps=1)
    optimizer.build(pretrainer.trainable_variables)
    run_dir = tmp_path / "run"
    manager = tf.train.CheckpointManager(training_state(pretrainer, optimizer), str(run_dir / "checkpoints"), max_to_keep=1, checkpoint_name="ckpt")
    manager.save(checkpoint_number=10)
    (run_dir / "run_config.json").write_text(json.dumps({"model_config": CONFIG.to_dict(), "sentence_task": "sop"}))
    target = fresh()
    result = any_format.init_encoder(target, str(run_dir))
    assert result.kind == "pretraining_checkpoint" and result.source.endswith("ckpt-10")
    assert_same_function(pretrainer.encoder, target)
    assert any_format.config_from_init(str(run_dir)) == CONFIG


def test_keras_hub_preset(tmp_path):
    pytest.importorskip("keras_hub")
    from albert_tf.checkpoints.keras_hub import to_keras_hub_backbone

    source = source_encoder(seed=4)
    backbone = to_keras_hub_backbone(source)
    backbone.save_to_preset(str(tmp_path / "preset"))
    target = fresh()
    assert any_format.init_encoder(target, str(tmp_path / "preset")).kind == "keras_hub"
    assert_same_function(source, target)


def test_errors(tmp_path):
    with pytest.raises(CheckpointError, match="not found"):
        any_format.init_encoder(fresh(), str(tmp_path / "nothing"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match="holds no checkpoint"):
        any_format.init_encoder(fresh(), str(tmp_path / "empty"))
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(CheckpointError, match="not a checkpoint this project reads"):
        any_format.init_encoder(fresh(), str(tmp_path / "notes.txt"))
    # Another architecture: every mismatch is named and nothing is assigned.
    wide = CONFIG.replace(hidden_size=24, num_attention_heads=2)
    source_encoder(config=wide).save(tmp_path / "wide.keras")
    target = fresh()
    before = target.pooler.kernel.numpy().copy()
    with pytest.raises(CheckpointError, match=r"shape mismatch: bert/pooler/dense/kernel: source \[24, 24\]"):
        any_format.init_encoder(target, str(tmp_path / "wide.keras"))
    np.testing.assert_array_equal(target.pooler.kernel.numpy(), before)
    assert any_format.config_from_init(str(tmp_path / "empty")) is None
