"""Tests for albert_tf.modeling: structure, sharing modes, serialization, XLA, mixed precision, heads."""

import numpy as np
import pytest
import tensorflow as tf
import keras

from albert_tf import AlbertConfig, AlbertEncoder, AlbertMLMHead, AlbertSOPHead, count_parameters

TINY = AlbertConfig(
    vocab_size=97,
    embedding_size=8,
    hidden_size=16,
    num_hidden_layers=4,
    num_hidden_groups=2,
    inner_group_num=2,
    num_attention_heads=2,
    intermediate_size=24,
    max_position_embeddings=32,
)


def make_batch(batch=3, seq=10, vocab=97, seed=0):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(3, seq + 1, size=batch)
    lengths[0] = seq
    mask = (np.arange(seq)[None, :] < lengths[:, None]).astype("int32")
    ids = rng.integers(5, vocab, size=(batch, seq)).astype("int32") * mask
    segments = ((np.arange(seq)[None, :] >= lengths[:, None] // 2) * mask).astype("int32")
    return {"input_ids": ids, "input_mask": mask, "segment_ids": segments}


@pytest.mark.parametrize("sharing", ["all", "attention", "ffn", "none"])
def test_parameter_count_matches_hand_derivation(sharing):
    config = TINY.replace(sharing=sharing)
    encoder = AlbertEncoder.from_albert_config(config)
    assert encoder.count_params() == count_parameters(config)


def test_base_parameter_count():
    config = AlbertConfig.preset("base-v2")
    assert AlbertEncoder.from_albert_config(config).count_params() == 11_683_584


def test_no_projection_when_embedding_equals_hidden():
    encoder = AlbertEncoder.from_albert_config(TINY.replace(embedding_size=16))
    assert encoder.embedding_hidden_mapping_in is None
    assert "embedding_hidden_mapping_in" not in [layer.name for layer in encoder.layers]


def test_group_schedule_follows_the_original_formula():
    config = AlbertConfig(
        vocab_size=10, embedding_size=4, hidden_size=8, num_hidden_layers=6, num_hidden_groups=3,
        inner_group_num=2, num_attention_heads=2, intermediate_size=8,
    )
    encoder = AlbertEncoder.from_albert_config(config)
    expected = []
    for layer in range(6):
        group = int(layer / 6 * 3)
        for inner in range(2):
            expected.append((f"group_{group}_inner_group_{inner}_attention_1", f"group_{group}_inner_group_{inner}_ffn_1"))
    assert encoder.schedule == expected
    assert len(encoder.attention_blocks) == 6 and len(encoder.ffn_blocks) == 6
    unshared = AlbertEncoder.from_albert_config(config.replace(sharing="attention"))
    assert len(unshared.attention_blocks) == 6 and len(unshared.ffn_blocks) == 12
    assert unshared.schedule[3] == ("group_0_inner_group_1_attention_1", "layer_1_inner_group_1_ffn_1")


def test_outputs_and_padding_invariance():
    encoder = AlbertEncoder.from_albert_config(TINY, output_all_layers=True)
    batch = make_batch()
    out = encoder(batch)
    assert out["sequence_output"].shape == (3, 10, 16)
    assert out["pooled_output"].shape == (3, 16)
    assert len(out["encoder_outputs"]) == TINY.num_hidden_layers
    np.testing.assert_allclose(out["encoder_outputs"][-1], out["sequence_output"], atol=0)
    # Extra padding must not change the outputs at real positions.
    padded = {k: np.pad(v, ((0, 0), (0, 5))) for k, v in batch.items()}
    out_padded = encoder(padded)
    mask = batch["input_mask"].astype(bool)
    np.testing.assert_allclose(
        np.asarray(out_padded["sequence_output"])[:, :10][mask], np.asarray(out["sequence_output"])[mask], atol=2e-6
    )
    np.testing.assert_allclose(out_padded["pooled_output"], out["pooled_output"], atol=2e-6)


def test_dropout_only_in_training():
    encoder = AlbertEncoder.from_albert_config(TINY.replace(hidden_dropout_prob=0.3, attention_probs_dropout_prob=0.3))
    batch = make_batch()
    a = encoder(batch, training=False)["sequence_output"]
    b = encoder(batch, training=False)["sequence_output"]
    c = encoder(batch, training=True)["sequence_output"]
    np.testing.assert_array_equal(a, b)
    assert np.abs(np.asarray(a) - np.asarray(c)).max() > 1e-3


def test_get_config_round_trip_and_keras_file(tmp_path):
    encoder = AlbertEncoder.from_albert_config(TINY.replace(sharing="ffn"), name="my_encoder")
    config = encoder.get_config()
    clone = AlbertEncoder.from_config(config)
    assert clone.get_config() == config
    assert clone.to_albert_config() == TINY.replace(sharing="ffn")
    batch = make_batch()
    path = tmp_path / "encoder.keras"
    encoder.save(path)
    restored = keras.saving.load_model(path)
    assert isinstance(restored, AlbertEncoder) and restored.name == "my_encoder"
    np.testing.assert_array_equal(restored(batch)["sequence_output"], encoder(batch)["sequence_output"])


@pytest.mark.slow
def test_xla_matches_eager():
    encoder = AlbertEncoder.from_albert_config(TINY)
    batch = make_batch()
    eager = encoder(batch)
    compiled = tf.function(lambda x: encoder(x), jit_compile=True)(batch)
    for key in ("sequence_output", "pooled_output"):
        np.testing.assert_allclose(compiled[key], eager[key], atol=1e-5)


def test_mixed_bfloat16_outputs_float32_and_close_to_fp32():
    fp32 = AlbertEncoder.from_albert_config(TINY)
    bf16 = AlbertEncoder.from_albert_config(TINY, dtype="mixed_bfloat16")
    bf16.set_weights(fp32.get_weights())
    assert all(w.dtype == "float32" for w in bf16.weights)
    batch = make_batch()
    out16, out32 = bf16(batch), fp32(batch)
    for key in ("sequence_output", "pooled_output"):
        assert out16[key].dtype == tf.float32
        # bfloat16 keeps 8 mantissa bits; LayerNorm-ed activations of order 1 stay within ~0.1 through 8 blocks.
        np.testing.assert_allclose(out16[key], out32[key], atol=0.15)
    path_config = bf16.get_config()
    clone = AlbertEncoder.from_config(path_config)
    assert clone.embeddings.dtype_policy.name == "mixed_bfloat16"
    assert clone.attention_blocks["group_0_inner_group_0_attention_1"].compute_dtype == "bfloat16"


def test_heads_shapes_and_tying():
    encoder = AlbertEncoder.from_albert_config(TINY)
    mlm = AlbertMLMHead(TINY.vocab_size, TINY.embedding_size, name="predictions")
    sop = AlbertSOPHead(TINY.hidden_size, name="seq_relationship")
    batch = make_batch()
    out = encoder(batch)
    positions = np.array([[1, 2], [0, 3], [4, 4]], "int32")
    logits = mlm(out["sequence_output"], encoder.embeddings.word_embeddings, positions)
    assert logits.shape == (3, 2, TINY.vocab_size) and logits.dtype == tf.float32
    full = mlm(out["sequence_output"], encoder.embeddings.word_embeddings)
    np.testing.assert_allclose(np.asarray(full)[1, 3], np.asarray(logits)[1, 1], atol=1e-5)
    # Tied: the logits are the transform output times the embedding table, so changing the table changes them.
    table = encoder.embeddings.word_embeddings
    table.assign(table * 2.0)
    assert np.abs(np.asarray(mlm(out["sequence_output"], table, positions)) - np.asarray(logits)).max() > 1e-4
    sop_logits = sop(out["pooled_output"])
    assert sop_logits.shape == (3, 2)
    expected = np.asarray(out["pooled_output"]) @ np.asarray(sop.output_weights).T + np.asarray(sop.output_bias)
    np.testing.assert_allclose(sop_logits, expected, atol=1e-6)


def test_invalid_constructor_arguments():
    with pytest.raises(ValueError, match="sharing"):
        AlbertEncoder(10, 4, 8, 2, 2, 8, sharing="half")
    with pytest.raises(ValueError, match="multiple of num_heads"):
        AlbertEncoder(10, 4, 9, 2, 2, 8)
    with pytest.raises(ValueError, match="must divide"):
        AlbertEncoder(10, 4, 8, 3, 2, 8, num_groups=2)


@pytest.mark.parametrize("sharing", ["all", "none"])
def test_pooled_output_path_matches_the_full_encoder(sharing):
    """`pooled_output` computes only position 0 after the last attention block: same values and gradients."""
    encoder = AlbertEncoder.from_albert_config(TINY.replace(sharing=sharing))
    batch = make_batch()
    np.testing.assert_allclose(encoder.pooled_output(batch).numpy(), encoder(batch)["pooled_output"].numpy(),
                               atol=1e-6)
    with tf.GradientTape(persistent=True) as tape:
        full = tf.reduce_sum(tf.sin(encoder(batch, training=False)["pooled_output"]))
        fast = tf.reduce_sum(tf.sin(encoder.pooled_output(batch, training=False)))
    for variable, a, b in zip(encoder.trainable_variables, tape.gradient(full, encoder.trainable_variables),
                              tape.gradient(fast, encoder.trainable_variables)):
        np.testing.assert_allclose(tf.convert_to_tensor(a).numpy(), tf.convert_to_tensor(b).numpy(), rtol=1e-4, atol=1e-5,
                                   err_msg=variable.path)


def test_pooled_output_path_skips_the_last_blocks_work():
    """The last attention block takes one query row per sequence: its FFN matmul sees [batch, H]."""
    encoder = AlbertEncoder.from_albert_config(TINY)
    specs = {k: tf.TensorSpec([3, 10], tf.int32) for k in ("input_ids", "input_mask", "segment_ids")}

    def matmul_rows(fn):
        graph = tf.function(fn).get_concrete_function(specs).graph
        return sorted(op.inputs[0].shape[0] for op in graph.get_operations()
                      if op.type == "MatMul" and op.inputs[1].shape[-1] == TINY.intermediate_size)

    full = matmul_rows(lambda b: encoder(b)["pooled_output"])
    fast = matmul_rows(lambda b: encoder.pooled_output(b))
    assert full == [30] * TINY.num_hidden_layers * TINY.inner_group_num
    assert fast == [3] + [30] * (TINY.num_hidden_layers * TINY.inner_group_num - 1)


@pytest.mark.slow
def test_shared_weights_are_cast_once_per_inference_graph():
    encoder = AlbertEncoder.from_albert_config(TINY, dtype="mixed_bfloat16")
    specs = {k: tf.TensorSpec([None, 10], tf.int32) for k in ("input_ids", "input_mask", "segment_ids")}

    def matmul_weights(training):
        """The bf16 weight tensor of every block matmul (MatMul's second input, a Cast)."""
        graph = tf.function(lambda b: encoder(b, training=training)).get_concrete_function(specs).graph
        return [op.inputs[1].name for op in graph.get_operations()
                if op.type == "MatMul" and op.inputs[1].op.type == "Cast" and "group" in op.name]

    inference, training = matmul_weights(False), matmul_weights(True)
    # 4 layers x 2 inner blocks x 6 matmuls, over 2 groups' distinct weights: 24 casts, not 48.
    assert len(inference) == len(training) == 48
    assert len(set(inference)) == 24
    assert len(set(training)) == 48
    batch = make_batch()
    np.testing.assert_allclose(encoder(batch, training=False)["pooled_output"].numpy(),
                               tf.function(lambda b: encoder(b, training=False))(batch)["pooled_output"].numpy(),
                               atol=1e-2)


@pytest.mark.slow
def test_weight_cast_cache_does_not_keep_graphs_alive():
    import gc
    import weakref

    from albert_tf import modeling

    encoder = AlbertEncoder.from_albert_config(TINY)
    specs = {k: tf.TensorSpec([None, 10], tf.int32) for k in ("input_ids", "input_mask", "segment_ids")}
    graph = tf.function(lambda b: encoder(b, training=False)).get_concrete_function(specs).graph
    assert graph in modeling._weight_casts
    graph_ref = weakref.ref(graph)
    del graph
    gc.collect()
    assert graph_ref() is None
