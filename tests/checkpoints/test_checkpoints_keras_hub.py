"""Tests of `albert_tf.checkpoints.keras_hub`: round trips, config mapping and error reporting.

Output parity with keras-hub against the NumPy reference lives in `test_parity.py`; here the
transfers themselves are checked to be exact and to refuse what cannot be exact.
"""

from __future__ import annotations

import numpy as np
import pytest

import albert_tf  # noqa: F401  (sets KERAS_BACKEND before keras is imported)
import keras_hub
from albert_tf import AlbertConfig, AlbertEncoder
from albert_tf.checkpoints.keras_hub import (
    KerasHubConversionError,
    config_from_keras_hub,
    encoder_from_keras_hub,
    keras_hub_inputs,
    load_keras_hub_backbone,
    save_to_keras_hub_backbone,
    to_keras_hub_backbone,
)


def make_config(**overrides) -> AlbertConfig:
    values = dict(
        vocab_size=53,
        embedding_size=8,
        hidden_size=16,
        num_hidden_layers=4,
        num_hidden_groups=2,
        inner_group_num=2,
        num_attention_heads=2,
        intermediate_size=24,
        max_position_embeddings=16,
        type_vocab_size=3,
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
    )
    values.update(overrides)
    return AlbertConfig(**values)


def randomized_encoder(config: AlbertConfig, seed: int = 0) -> AlbertEncoder:
    """An encoder whose every variable (biases, LayerNorm betas included) holds distinct random values."""
    encoder = AlbertEncoder.from_albert_config(config)
    rng = np.random.default_rng(seed)
    for variable in encoder.weights:
        variable.assign(rng.standard_normal(variable.shape).astype("float32") * 0.3)
    return encoder


def batch(config: AlbertConfig):
    rng = np.random.default_rng(7)
    mask = np.array([[1] * 9, [1] * 5 + [0] * 4, [1] * 2 + [0] * 7], np.int32)
    ids = rng.integers(1, config.vocab_size, size=mask.shape).astype(np.int32) * mask
    segments = (rng.integers(0, config.type_vocab_size, size=mask.shape) * mask).astype(np.int32)
    return {"input_ids": ids, "input_mask": mask, "segment_ids": segments}


def weights_by_path(model):
    return {v.path: np.asarray(v) for v in model.weights}


def assert_same_weights(a, b):
    wa, wb = weights_by_path(a), weights_by_path(b)
    assert sorted(wa) == sorted(wb)
    for path in wa:
        np.testing.assert_array_equal(wa[path], wb[path], err_msg=path)


@pytest.mark.parametrize(
    "overrides",
    [dict(), dict(embedding_size=16, num_hidden_groups=1, inner_group_num=1, num_hidden_layers=2)],
    ids=["E!=H groups2 inner2", "E==H"],
)
def test_round_trip_ours_keras_hub_ours_is_exact(overrides):
    config = make_config(**overrides)
    encoder = randomized_encoder(config)
    backbone = to_keras_hub_backbone(encoder)
    back = encoder_from_keras_hub(backbone)
    assert back.to_albert_config() == config
    assert_same_weights(encoder, back)
    inputs = batch(config)
    ours, again = encoder(inputs), back(inputs)
    for key in ("sequence_output", "pooled_output"):
        np.testing.assert_array_equal(np.asarray(ours[key]), np.asarray(again[key]))
    theirs = backbone(keras_hub_inputs(inputs))
    np.testing.assert_allclose(np.asarray(theirs["sequence_output"]), np.asarray(ours["sequence_output"]), atol=1e-5)
    np.testing.assert_allclose(np.asarray(theirs["pooled_output"]), np.asarray(ours["pooled_output"]), atol=1e-5)


def test_round_trip_keras_hub_ours_keras_hub_is_exact():
    backbone = keras_hub.models.AlbertBackbone(
        vocabulary_size=53, num_layers=4, num_heads=2, embedding_dim=8, hidden_dim=16, intermediate_dim=24,
        num_groups=2, num_inner_repetitions=2, max_sequence_length=16, num_segments=3,
    )  # fmt: skip
    rng = np.random.default_rng(1)
    for variable in backbone.weights:
        variable.assign(rng.standard_normal(variable.shape).astype("float32") * 0.3)
    again = to_keras_hub_backbone(encoder_from_keras_hub(backbone))
    assert_same_weights(backbone, again)


def test_identity_projection_for_equal_sizes():
    config = make_config(embedding_size=16)
    backbone = to_keras_hub_backbone(randomized_encoder(config))
    np.testing.assert_array_equal(np.asarray(backbone.embeddings_projection.kernel), np.eye(16))
    np.testing.assert_array_equal(np.asarray(backbone.embeddings_projection.bias), np.zeros(16))


def test_config_mapping():
    config = make_config(vocab_size=61, max_position_embeddings=20, num_hidden_layers=6, num_hidden_groups=3)
    backbone = to_keras_hub_backbone(randomized_encoder(config))
    assert (backbone.vocabulary_size, backbone.embedding_dim, backbone.hidden_dim) == (61, 8, 16)
    assert (backbone.num_layers, backbone.num_groups, backbone.num_inner_repetitions) == (6, 3, 2)
    assert (backbone.num_heads, backbone.intermediate_dim) == (2, 24)
    assert (backbone.max_sequence_length, backbone.num_segments, backbone.dropout) == (20, 3, 0.1)
    assert len(backbone.transformer_layers) == 3 and all(len(g) == 2 for g in backbone.transformer_layers)
    assert config_from_keras_hub(backbone) == config


def test_attention_kernels_are_reshaped_per_head():
    config = make_config()
    encoder = randomized_encoder(config)
    backbone = to_keras_hub_backbone(encoder)
    a_name, _ = encoder.schedule[0]
    ours = np.asarray(encoder.attention_blocks[a_name].query.kernel)  # [H, N*D]
    theirs = np.asarray(backbone.transformer_layers[0][0]._self_attention_layer._query_dense.kernel)  # [H, N, D]
    np.testing.assert_array_equal(theirs[:, 1, :], ours[:, 8:16])  # head 1 = columns D..2D


def test_shape_mismatch_names_the_variable_and_assigns_nothing():
    config = make_config()
    encoder = randomized_encoder(config)
    before = weights_by_path(encoder)
    backbone = to_keras_hub_backbone(randomized_encoder(config.replace(intermediate_size=32), seed=3))
    with pytest.raises(KerasHubConversionError) as info:
        load_keras_hub_backbone(encoder, backbone)
    message = str(info.value)
    assert "feedforward_intermediate_dense/kernel" in message and "intermediate/kernel" in message
    assert "(16, 32)" in message and "(16, 24)" in message
    after = weights_by_path(encoder)
    for path in before:
        np.testing.assert_array_equal(before[path], after[path], err_msg=path)


def test_vocab_mismatch_names_the_embedding():
    encoder = randomized_encoder(make_config())
    backbone = to_keras_hub_backbone(randomized_encoder(make_config(vocab_size=54)))
    with pytest.raises(KerasHubConversionError, match=r"token_embedding/embeddings.*\(54, 8\).*embeddings/word_embeddings"):
        load_keras_hub_backbone(encoder, backbone)
    with pytest.raises(KerasHubConversionError, match=r"embeddings/word_embeddings.*token_embedding/embeddings"):
        save_to_keras_hub_backbone(encoder, backbone)


def test_structure_mismatch_is_reported():
    encoder = randomized_encoder(make_config())
    backbone = to_keras_hub_backbone(randomized_encoder(make_config(num_hidden_groups=1)))
    with pytest.raises(KerasHubConversionError, match="num_groups differs: encoder has 2, keras-hub backbone has 1"):
        load_keras_hub_backbone(encoder, backbone)
    backbone = to_keras_hub_backbone(randomized_encoder(make_config(num_attention_heads=4)))
    with pytest.raises(KerasHubConversionError, match="num_heads"):
        load_keras_hub_backbone(encoder, backbone)


@pytest.mark.parametrize(
    "overrides, pattern",
    [
        (dict(hidden_act="relu"), "tanh-approximate GELU"),
        (dict(hidden_act="gelu_exact"), "tanh-approximate GELU"),
        (dict(sharing="ffn"), "sharing='all'"),
        (dict(attention_probs_dropout_prob=0.0), "one dropout rate"),
    ],
)
def test_unrepresentable_configs_are_refused(overrides, pattern):
    with pytest.raises(KerasHubConversionError, match=pattern):
        to_keras_hub_backbone(randomized_encoder(make_config(**overrides)))


def test_trained_projection_with_equal_sizes_is_refused():
    backbone = keras_hub.models.AlbertBackbone(
        vocabulary_size=53, num_layers=2, num_heads=2, embedding_dim=16, hidden_dim=16, intermediate_dim=24,
        max_sequence_length=16,
    )  # fmt: skip
    # keras-hub's own random init: the projection is a trained-looking matrix, not the identity.
    with pytest.raises(KerasHubConversionError, match="no projection when E == H"):
        encoder_from_keras_hub(backbone)
