"""Numerical parity of our `AlbertEncoder` with three independent implementations of ALBERT.

(a) keras-hub's `AlbertBackbone` and (b) tf-models-official's `AlbertEncoder`, each given our
weights through `albert_tf.checkpoints`, and (c) the NumPy reference of `tests/albert_numpy.py`
fed the same original-named random weights. All in float32 on padded batches (rows of different
lengths, padding at the end, segment ids 0/1), comparing every position, padded ones included:
the original computes them like any other. Also: XLA equals eager, and `mixed_bfloat16` gives
float32 outputs close to float32 ones.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import albert_tf  # noqa: F401  (sets KERAS_BACKEND before keras is imported)
import keras
from albert_numpy import albert_numpy_forward, block_prefixes, random_original_weights
from albert_tf import AlbertConfig, AlbertEncoder
from albert_tf.checkpoints import keras_hub as hub_interop
from albert_tf.checkpoints import tf_models as official_interop

ATOL = 1e-5


def make_config(**overrides) -> AlbertConfig:
    values = dict(
        vocab_size=97,
        embedding_size=8,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=24,
        hidden_act="gelu",
    )
    values.update(overrides)
    return AlbertConfig(**values)


def padded_batch(config: AlbertConfig, seed: int = 0, seq_length: int = 10):
    """4 rows of lengths 10, 7, 4 and 1 (padding at the end), two segments in the longer ones."""
    rng = np.random.default_rng(seed)
    lengths = [seq_length, 7, 4, 1]
    first_segment = [6, 3, 2, 1]
    ids = rng.integers(1, config.vocab_size, size=(len(lengths), seq_length)).astype(np.int32)
    positions = np.arange(seq_length)[None, :]
    mask = (positions < np.array(lengths)[:, None]).astype(np.int32)
    segments = ((positions >= np.array(first_segment)[:, None]) * mask).astype(np.int32)
    ids = ids * mask  # padding id 0, as the original's pipelines write
    return {"input_ids": ids, "input_mask": mask, "segment_ids": segments}


def assign_original(encoder: AlbertEncoder, weights, config: AlbertConfig) -> None:
    """Puts original-named weights into `encoder` through its attribute layout (test-local on purpose)."""
    emb = encoder.embeddings
    emb.word_embeddings.assign(weights["bert/embeddings/word_embeddings"])
    emb.token_type_embeddings.assign(weights["bert/embeddings/token_type_embeddings"])
    emb.position_embeddings.assign(weights["bert/embeddings/position_embeddings"])
    emb.layer_norm.gamma.assign(weights["bert/embeddings/LayerNorm/gamma"])
    emb.layer_norm.beta.assign(weights["bert/embeddings/LayerNorm/beta"])
    if config.embedding_size != config.hidden_size:
        encoder.embedding_hidden_mapping_in.kernel.assign(weights["bert/encoder/embedding_hidden_mapping_in/kernel"])
        encoder.embedding_hidden_mapping_in.bias.assign(weights["bert/encoder/embedding_hidden_mapping_in/bias"])
    else:
        assert encoder.embedding_hidden_mapping_in is None

    def dense(layer, prefix):
        layer.kernel.assign(weights[prefix + "/kernel"])
        layer.bias.assign(weights[prefix + "/bias"])

    def norm(layer, prefix):
        layer.gamma.assign(weights[prefix + "/gamma"])
        layer.beta.assign(weights[prefix + "/beta"])

    position = 0
    for layer in range(config.num_hidden_layers):
        for inner in range(config.inner_group_num):
            a_prefix, f_prefix = block_prefixes(config, layer, inner)
            a_name, f_name = encoder.schedule[position]
            position += 1
            attention, ffn = encoder.attention_blocks[a_name], encoder.ffn_blocks[f_name]
            dense(attention.query, a_prefix + "/attention_1/self/query")
            dense(attention.key, a_prefix + "/attention_1/self/key")
            dense(attention.value, a_prefix + "/attention_1/self/value")
            dense(attention.output_dense, a_prefix + "/attention_1/output/dense")
            norm(attention.layer_norm, a_prefix + "/LayerNorm")
            dense(ffn.intermediate, f_prefix + "/ffn_1/intermediate/dense")
            dense(ffn.output_dense, f_prefix + "/ffn_1/intermediate/output/dense")
            norm(ffn.layer_norm, f_prefix + "/LayerNorm_1")
    dense(encoder.pooler, "bert/pooler/dense")


def encoder_with_weights(config: AlbertConfig, seed: int = 0, **kwargs):
    weights = random_original_weights(config, seed)
    encoder = AlbertEncoder.from_albert_config(config, **kwargs)
    assign_original(encoder, weights, config)
    return encoder, weights


def outputs(model, inputs):
    out = model(inputs)
    return np.asarray(out["sequence_output"]), np.asarray(out["pooled_output"])


def max_diffs(a, b):
    return float(np.max(np.abs(a[0] - b[0]))), float(np.max(np.abs(a[1] - b[1])))


def assert_parity(ours, theirs, what, atol=ATOL):
    seq_diff, pooled_diff = max_diffs(ours, theirs)
    assert seq_diff <= atol and pooled_diff <= atol, (
        f"{what}: max |diff| sequence {seq_diff:.3g}, pooled {pooled_diff:.3g} (tolerance {atol})"
    )
    # The comparison must be able to fail: outputs are far from trivial.
    assert np.std(ours[0]) > 0.1 and np.std(ours[1]) > 0.05


# --- (c) the NumPy reference -------------------------------------------------------------------

NUMPY_CASES = {
    "E!=H gelu": dict(),
    "E==H relu": dict(embedding_size=16, hidden_act="relu", num_hidden_layers=3),
    "E==H gelu_exact": dict(embedding_size=16, hidden_act="gelu_exact"),
    "groups2 inner2 gelu": dict(num_hidden_layers=4, num_hidden_groups=2, inner_group_num=2),
    "groups2 inner2 relu E==H": dict(
        num_hidden_layers=4, num_hidden_groups=2, inner_group_num=2, embedding_size=16, hidden_act="relu"
    ),
    "sharing attention": dict(num_hidden_layers=4, num_hidden_groups=2, inner_group_num=2, sharing="attention"),
    "sharing ffn relu": dict(
        num_hidden_layers=4, num_hidden_groups=2, inner_group_num=2, sharing="ffn", hidden_act="relu"
    ),
    "sharing none": dict(num_hidden_layers=3, inner_group_num=2, sharing="none", hidden_size=32, num_attention_heads=4),
}


@pytest.mark.parametrize("case", list(NUMPY_CASES))
def test_matches_numpy_reference(case):
    config = make_config(**NUMPY_CASES[case])
    encoder, weights = encoder_with_weights(config, seed=1)
    inputs = padded_batch(config)
    reference = albert_numpy_forward(weights, config, inputs["input_ids"], inputs["input_mask"], inputs["segment_ids"])
    assert_parity(outputs(encoder, inputs), reference, f"numpy reference, {case}")


def test_numpy_reference_sees_padding_and_segments():
    """Guards the test data: the mask and the segment ids both change the outputs."""
    config = make_config()
    encoder, _ = encoder_with_weights(config)
    inputs = padded_batch(config)
    base = outputs(encoder, inputs)
    unmasked = outputs(encoder, {**inputs, "input_mask": np.ones_like(inputs["input_mask"])})
    one_segment = outputs(encoder, {**inputs, "segment_ids": np.zeros_like(inputs["segment_ids"])})
    assert max_diffs(base, unmasked)[0] > 1e-2
    assert max_diffs(base, one_segment)[0] > 1e-2


# --- (a) keras-hub -----------------------------------------------------------------------------

HUB_CASES = {
    "E!=H": dict(),
    "E==H": dict(embedding_size=16, num_hidden_layers=3),
    "groups2 inner2": dict(num_hidden_layers=4, num_hidden_groups=2, inner_group_num=2),
}


@pytest.mark.parametrize("case", list(HUB_CASES))
def test_matches_keras_hub(case):
    config = make_config(**HUB_CASES[case])
    encoder, weights = encoder_with_weights(config, seed=2)
    backbone = hub_interop.to_keras_hub_backbone(encoder)
    inputs = padded_batch(config)
    ours = outputs(encoder, inputs)
    assert_parity(ours, outputs(backbone, hub_interop.keras_hub_inputs(inputs)), f"keras-hub, {case}")
    # keras-hub itself is an implementation of the same equations, checked against the reference too.
    reference = albert_numpy_forward(weights, config, inputs["input_ids"], inputs["input_mask"], inputs["segment_ids"])
    assert_parity(outputs(backbone, hub_interop.keras_hub_inputs(inputs)), reference, f"keras-hub vs numpy, {case}")


def test_keras_hub_weights_into_ours():
    """The other direction: a keras-hub backbone's own (random) weights, perturbed so biases are nonzero."""
    import keras_hub

    backbone = keras_hub.models.AlbertBackbone(
        vocabulary_size=97, num_layers=4, num_heads=2, embedding_dim=8, hidden_dim=16, intermediate_dim=32,
        num_groups=2, num_inner_repetitions=2, max_sequence_length=24,
    )  # fmt: skip
    rng = np.random.default_rng(3)
    for variable in backbone.weights:
        variable.assign(np.asarray(variable) + 0.05 * rng.standard_normal(variable.shape).astype("float32"))
    encoder = hub_interop.encoder_from_keras_hub(backbone)
    inputs = padded_batch(encoder.to_albert_config())
    assert_parity(outputs(encoder, inputs), outputs(backbone, hub_interop.keras_hub_inputs(inputs)), "keras-hub -> ours")


# --- (b) tf-models-official ---------------------------------------------------------------------

OFFICIAL_CASES = {
    "E!=H gelu": dict(num_hidden_layers=3),
    "E==H relu": dict(embedding_size=16, hidden_act="relu"),
    "E!=H gelu_exact": dict(hidden_act="gelu_exact", hidden_size=32, num_attention_heads=4),
}


@pytest.mark.parametrize("case", list(OFFICIAL_CASES))
def test_matches_tf_models_official(case):
    config = make_config(**OFFICIAL_CASES[case])
    encoder, _ = encoder_with_weights(config, seed=4)
    official = official_interop.to_official_encoder(encoder, dict_outputs=True)
    inputs = padded_batch(config)
    out = official(official_interop.official_inputs(inputs))
    theirs = (out["sequence_output"].numpy(), out["pooled_output"].numpy())
    assert_parity(outputs(encoder, inputs), theirs, f"tf-models-official, {case}")
    # And back: Model Garden -> ours reproduces the same function and config.
    back = official_interop.encoder_from_official(official)
    assert back.to_albert_config() == config
    assert_parity(outputs(back, inputs), theirs, f"tf-models-official -> ours, {case}")


# --- XLA and mixed precision ----------------------------------------------------------------------


@pytest.mark.slow
def test_xla_matches_eager():
    config = make_config(num_hidden_layers=4, num_hidden_groups=2, inner_group_num=2)
    encoder, _ = encoder_with_weights(config, seed=5)
    inputs = {k: tf.constant(v) for k, v in padded_batch(config).items()}
    compiled = tf.function(lambda x: encoder(x, training=False), jit_compile=True)
    assert_parity(outputs(encoder, inputs), outputs(compiled, inputs), "XLA vs eager")


# Measured on this config (CPU, weight seeds 6-15, outputs of std ~1.0 / ~0.6): max |bf16 - fp32|
# up to 0.17 (sequence) and 0.079 (pooled); RMS difference up to 0.034 and 0.022. That is bf16's
# 2^-8 relative rounding accumulated over 8 block applications. Tolerances leave >2x margin; a real
# bug (a dropped term, a wrong cast) moves the outputs by O(1) (RMS ~1.4 between unrelated weights).
BF16_SEQUENCE_ATOL, BF16_POOLED_ATOL = 0.4, 0.2
BF16_SEQUENCE_RMS, BF16_POOLED_RMS = 0.08, 0.06


def test_mixed_bfloat16_outputs_float32_and_close():
    config = make_config(num_hidden_layers=4, num_hidden_groups=2, inner_group_num=2)
    weights = random_original_weights(config, 6)
    fp32 = AlbertEncoder.from_albert_config(config)
    assign_original(fp32, weights, config)
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy("mixed_bfloat16")
    try:
        mixed = AlbertEncoder.from_albert_config(config)
    finally:
        keras.config.set_dtype_policy(previous)
    assert mixed.attention_blocks[mixed.schedule[0][0]].query.compute_dtype == "bfloat16"
    assign_original(mixed, weights, config)
    inputs = padded_batch(config)
    out = mixed(inputs)
    assert out["sequence_output"].dtype == tf.float32
    assert out["pooled_output"].dtype == tf.float32
    low, full = outputs(mixed, inputs), outputs(fp32, inputs)
    seq_diff, pooled_diff = max_diffs(low, full)
    seq_rms, pooled_rms = (float(np.sqrt(np.mean((a - b) ** 2))) for a, b in zip(low, full))
    assert seq_diff <= BF16_SEQUENCE_ATOL, f"bf16 sequence max |diff| {seq_diff:.3g}"
    assert pooled_diff <= BF16_POOLED_ATOL, f"bf16 pooled max |diff| {pooled_diff:.3g}"
    assert seq_rms <= BF16_SEQUENCE_RMS, f"bf16 sequence RMS diff {seq_rms:.3g}"
    assert pooled_rms <= BF16_POOLED_RMS, f"bf16 pooled RMS diff {pooled_rms:.3g}"
    assert seq_diff > 0.0  # bf16 really ran
