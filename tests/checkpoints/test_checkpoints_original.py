"""Tests for albert_tf.checkpoints.original: TF1 checkpoints in and out, against the NumPy reference."""

import os

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig, AlbertEncoder, AlbertMLMHead, AlbertSOPHead
from albert_tf.checkpoints import original
from albert_tf.checkpoints.original import (
    CheckpointError,
    config_from_original_checkpoint,
    load_original_checkpoint,
    original_variable_map,
    read_original_variables,
    save_original_checkpoint,
)
from albert_numpy import (
    albert_numpy_forward,
    albert_numpy_mlm_logits,
    albert_numpy_sop_logits,
    original_weight_shapes,
    random_original_weights,
)

ATOL = 1e-5


def tiny_config(**overrides):
    fields = dict(
        vocab_size=40,
        embedding_size=8,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=24,
        max_position_embeddings=12,
        type_vocab_size=2,
    )
    fields.update(overrides)
    return AlbertConfig(**fields)


def build_model(config):
    encoder = AlbertEncoder.from_albert_config(config)
    mlm = AlbertMLMHead(config.vocab_size, config.embedding_size, activation=config.hidden_act)
    sop = AlbertSOPHead(config.hidden_size)
    return encoder, mlm, sop


def write_tf1_checkpoint(prefix, weights):
    """Writes `weights` (name -> array) with TF1 graph-mode variables and Saver, independently of our saver."""
    graph = tf.Graph()
    with graph.as_default():
        placeholders, variables, assigns = {}, [], []
        for name, value in weights.items():
            var = tf.compat.v1.get_variable(name, shape=value.shape, dtype=tf.as_dtype(value.dtype), use_resource=False)
            ph = tf.compat.v1.placeholder(var.dtype.base_dtype, shape=value.shape)
            placeholders[ph] = value
            variables.append(var)
            assigns.append(tf.compat.v1.assign(var, ph))
        saver = tf.compat.v1.train.Saver(variables)
        with tf.compat.v1.Session(graph=graph) as sess:
            sess.run(assigns, feed_dict=placeholders)
            return saver.save(sess, prefix, write_meta_graph=False)


def batch(config, seed=1):
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, config.vocab_size, size=(3, 7)).astype("int32")
    mask = np.ones_like(ids)
    mask[1, 4:] = 0  # padded rows exercise the attention mask
    mask[2, 2:] = 0
    ids[mask == 0] = 0
    segments = np.zeros_like(ids)
    segments[:, 3:] = 1
    return ids, mask, segments


def assert_matches_reference(weights, config, encoder, mlm, sop):
    ids, mask, segments = batch(config)
    out = encoder({"input_ids": ids, "input_mask": mask, "segment_ids": segments})
    ref_seq, ref_pooled = albert_numpy_forward(weights, config, ids, mask, segments)
    np.testing.assert_allclose(out["sequence_output"].numpy(), ref_seq, atol=ATOL, rtol=ATOL)
    np.testing.assert_allclose(out["pooled_output"].numpy(), ref_pooled, atol=ATOL, rtol=ATOL)
    if mlm is not None:
        logits = mlm(out["sequence_output"], encoder.embeddings.word_embeddings).numpy()
        np.testing.assert_allclose(logits, albert_numpy_mlm_logits(weights, config, ref_seq), atol=ATOL, rtol=ATOL)
    if sop is not None:
        np.testing.assert_allclose(
            sop(out["pooled_output"]).numpy(), albert_numpy_sop_logits(weights, ref_pooled), atol=ATOL, rtol=ATOL
        )


def model_values(encoder, mlm=None, sop=None):
    return {name: np.asarray(v.numpy()) for name, v in original_variable_map(encoder, mlm, sop).items()}


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        dict(num_hidden_layers=4, num_hidden_groups=2, inner_group_num=2),
        dict(embedding_size=16, hidden_act="gelu_exact"),  # E == H: no embedding_hidden_mapping_in
    ],
    ids=["G1K1", "G2K2", "E_eq_H"],
)
def test_tf1_checkpoint_reproduces_numpy_reference(tmp_path, overrides):
    config = tiny_config(**overrides)
    weights = random_original_weights(config, seed=3)
    prefix = write_tf1_checkpoint(str(tmp_path / "model.ckpt"), weights)
    encoder, mlm, sop = build_model(config)
    report = load_original_checkpoint(prefix, encoder, mlm, sop)
    assert report.ok and not report.unused
    assert sorted(report.loaded) == sorted(weights)
    assert_matches_reference(weights, config, encoder, mlm, sop)


def test_tfhub_module_prefix_and_optimizer_slots(tmp_path):
    config = tiny_config(num_hidden_layers=4, num_hidden_groups=2, inner_group_num=2)
    weights = random_original_weights(config, seed=4)
    stored = {"module/" + name: value for name, value in weights.items()}
    slot_names = []
    for name in list(weights)[:3]:
        for slot in ("adam_m", "adam_v", "lamb_m"):
            stored[f"module/{name}/{slot}"] = np.full_like(weights[name], 7.0)
            slot_names.append(f"module/{name}/{slot}")
    stored["global_step"] = np.array(1000, np.int64)
    stored["module/bert/pooler/dense/kernel/Adam_1"] = np.zeros_like(weights["bert/pooler/dense/kernel"])
    write_tf1_checkpoint(str(tmp_path / "variables"), stored)
    encoder, mlm, sop = build_model(config)
    report = load_original_checkpoint(tmp_path, encoder, mlm, sop)  # a directory: state file lookup
    assert report.ok
    assert set(report.skipped) == set(slot_names) | {"global_step", "module/bert/pooler/dense/kernel/Adam_1"}
    assert_matches_reference(weights, config, encoder, mlm, sop)
    assert set(read_original_variables(tmp_path)) == set(weights)


def test_encoder_only_lists_head_variables_as_unused(tmp_path):
    config = tiny_config()
    weights = random_original_weights(config, seed=5)
    prefix = write_tf1_checkpoint(str(tmp_path / "m"), weights)
    encoder = AlbertEncoder.from_albert_config(config)
    report = load_original_checkpoint(prefix, encoder)
    assert report.ok
    assert sorted(report.unused) == sorted(n for n in weights if n.startswith("cls/"))
    assert_matches_reference(weights, config, encoder, None, None)


def test_missing_unexpected_and_shape_mismatch_are_named(tmp_path):
    config = tiny_config()
    weights = random_original_weights(config, seed=6)
    missing = "bert/encoder/transformer/group_0/inner_group_0/attention_1/self/key/bias"
    mismatched = "bert/pooler/dense/bias"
    del weights[missing]
    weights[mismatched] = np.zeros((3,), np.float32)
    weights["bert/encoder/transformer/group_0/inner_group_0/extra/kernel"] = np.zeros((2, 2), np.float32)
    prefix = write_tf1_checkpoint(str(tmp_path / "bad"), weights)
    encoder, mlm, sop = build_model(config)
    before = model_values(encoder, mlm, sop)
    with pytest.raises(CheckpointError) as err:
        load_original_checkpoint(prefix, encoder, mlm, sop)
    message = str(err.value)
    assert f"missing: {missing}" in message
    assert "unexpected: bert/encoder/transformer/group_0/inner_group_0/extra/kernel" in message
    assert f"shape mismatch: {mismatched}: source [3] vs model [16]" in message
    # A strict failure assigns nothing.
    after = model_values(encoder, mlm, sop)
    assert all(np.array_equal(before[n], after[n]) for n in before)

    report = load_original_checkpoint(prefix, encoder, mlm, sop, strict=False)
    assert report.missing == [missing]
    assert report.unexpected == ["bert/encoder/transformer/group_0/inner_group_0/extra/kernel"]
    assert report.shape_mismatches == [(mismatched, (3,), (16,))]
    assert not report.ok
    loaded = model_values(encoder, mlm, sop)
    np.testing.assert_array_equal(loaded["bert/pooler/dense/kernel"], weights["bert/pooler/dense/kernel"])
    np.testing.assert_array_equal(loaded[missing], before[missing])
    np.testing.assert_array_equal(loaded[mismatched], before[mismatched])


@pytest.mark.parametrize("sharing", ["all", "attention", "ffn", "none"])
def test_save_load_round_trip_is_bitwise_exact(tmp_path, sharing):
    config = tiny_config(num_hidden_layers=2, inner_group_num=2, sharing=sharing)
    source = build_model(config)
    rng = np.random.default_rng(7)
    for variable in original_variable_map(*source).values():  # nonzero everywhere, biases included
        variable.assign(rng.standard_normal(variable.shape).astype("float32"))
    prefix = save_original_checkpoint(tmp_path / "model.ckpt-10", *source)
    assert prefix == str(tmp_path / "model.ckpt-10")
    assert tf.train.latest_checkpoint(str(tmp_path)) == prefix
    assert sorted(f for f in os.listdir(tmp_path)) == [
        "checkpoint",
        "model.ckpt-10.data-00000-of-00001",
        "model.ckpt-10.index",
    ]

    stored = read_original_variables(prefix)
    assert set(stored) == set(original_weight_shapes(config))  # the reference's naming, layer_{l} included
    target = build_model(config)
    assert load_original_checkpoint(tmp_path, *target).ok
    a, b = model_values(*source), model_values(*target)
    assert a.keys() == b.keys()
    for name in a:
        assert a[name].dtype == b[name].dtype == np.float32
        assert a[name].tobytes() == b[name].tobytes(), name
    assert_matches_reference(stored, config, *target)


def test_saved_checkpoint_restores_in_tf1_saver(tmp_path):
    config = tiny_config(num_hidden_layers=4, num_hidden_groups=2, inner_group_num=2)
    encoder, mlm, sop = build_model(config)
    prefix = save_original_checkpoint(str(tmp_path), encoder, mlm, sop)
    assert prefix == str(tmp_path / "model.ckpt")
    expected = model_values(encoder, mlm, sop)
    graph = tf.Graph()
    with graph.as_default():
        variables = {
            name: tf.compat.v1.get_variable(name, shape=shape, dtype=tf.float32)
            for name, shape in original_weight_shapes(config).items()
        }
        saver = tf.compat.v1.train.Saver(list(variables.values()))
        with tf.compat.v1.Session(graph=graph) as sess:
            saver.restore(sess, tf.train.latest_checkpoint(str(tmp_path)))
            restored = sess.run(variables)
    assert restored.keys() == expected.keys()
    for name, value in restored.items():
        assert value.tobytes() == expected[name].tobytes(), name


def test_save_overwrites_and_keeps_state_history(tmp_path):
    config = tiny_config()
    encoder, _, _ = build_model(config)
    first = save_original_checkpoint(tmp_path / "model.ckpt-1", encoder)
    encoder.pooler.bias.assign(np.full((16,), 3.0, "float32"))
    second = save_original_checkpoint(tmp_path / "model.ckpt-2", encoder)
    state = tf.train.get_checkpoint_state(str(tmp_path))
    assert state.model_checkpoint_path == second
    assert list(state.all_model_checkpoint_paths) == [first, second]
    # The state file stores relative names, so the directory can move.
    assert 'model_checkpoint_path: "model.ckpt-2"' in (tmp_path / "checkpoint").read_text()
    encoder.pooler.bias.assign(np.full((16,), 5.0, "float32"))
    save_original_checkpoint(first, encoder)  # overwrite in place
    np.testing.assert_array_equal(read_original_variables(first)["bert/pooler/dense/bias"], 5.0)
    np.testing.assert_array_equal(read_original_variables(second)["bert/pooler/dense/bias"], 3.0)
    assert tf.train.latest_checkpoint(str(tmp_path)) == first
    assert not [f for f in os.listdir(tmp_path) if ".tmp-" in f]


def test_failed_save_leaves_nothing_under_the_prefix(tmp_path, monkeypatch):
    encoder, _, _ = build_model(tiny_config())

    def failing_rename(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(original.os, "replace", failing_rename)
    with pytest.raises(OSError, match="disk full"):
        save_original_checkpoint(tmp_path / "model.ckpt", encoder)
    assert os.listdir(tmp_path) == []


def test_corrupt_and_absent_checkpoints_give_clear_errors(tmp_path):
    config = tiny_config()
    encoder, _, _ = build_model(config)
    prefix = save_original_checkpoint(tmp_path / "model.ckpt", encoder)
    data = prefix + ".data-00000-of-00001"
    with open(data, "r+b") as f:
        f.truncate(os.path.getsize(data) // 2)
    with pytest.raises(CheckpointError, match="corrupt or truncated"):
        load_original_checkpoint(prefix, encoder)
    with open(prefix + ".index", "r+b") as f:
        f.truncate(10)
    with pytest.raises(CheckpointError, match="cannot read checkpoint"):
        load_original_checkpoint(prefix, encoder)
    with pytest.raises(CheckpointError, match="no checkpoint at"):
        load_original_checkpoint(tmp_path / "nothing_here", encoder)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(CheckpointError, match="no checkpoint in directory"):
        load_original_checkpoint(empty, encoder)


def test_directory_with_several_checkpoints_and_no_state_file_is_ambiguous(tmp_path):
    weights = random_original_weights(tiny_config(), seed=8)
    write_tf1_checkpoint(str(tmp_path / "a"), weights)
    write_tf1_checkpoint(str(tmp_path / "b"), weights)
    (tmp_path / "checkpoint").unlink()
    with pytest.raises(CheckpointError, match=r"several checkpoints \(a, b\)"):
        read_original_variables(tmp_path)
    assert set(read_original_variables(tmp_path / "b.index")) == set(weights)


def test_config_inferred_from_checkpoint(tmp_path):
    config = tiny_config(num_hidden_layers=4, num_hidden_groups=2, inner_group_num=2, max_position_embeddings=10)
    prefix = write_tf1_checkpoint(str(tmp_path / "m"), random_original_weights(config, seed=9))
    with pytest.raises(CheckpointError, match="pass num_hidden_layers"):
        config_from_original_checkpoint(prefix, num_attention_heads=2)
    inferred = config_from_original_checkpoint(prefix, num_attention_heads=2, num_hidden_layers=4)
    assert inferred.to_dict() == config.to_dict()

    unshared = tiny_config(num_hidden_layers=3, intermediate_size=20, sharing="ffn")
    prefix = write_tf1_checkpoint(str(tmp_path / "u"), random_original_weights(unshared, seed=9))
    inferred = config_from_original_checkpoint(prefix, num_attention_heads=2, hidden_act="relu")
    assert inferred.to_dict() == unshared.replace(hidden_act="relu").to_dict()


def test_tf2_object_based_checkpoint_is_named_as_such(tmp_path):
    prefix = tf.train.Checkpoint(v=tf.Variable(np.ones((2, 2), "float32"))).write(str(tmp_path / "tf2"))
    with pytest.raises(CheckpointError, match="TF2 object-based checkpoint"):
        load_original_checkpoint(prefix, AlbertEncoder.from_albert_config(tiny_config()))
