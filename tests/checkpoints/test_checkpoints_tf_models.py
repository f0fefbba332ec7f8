"""Tests of `albert_tf.checkpoints.tf_models`: exact round trips with the Model Garden encoder and errors.

Output parity (ours vs Model Garden on padded batches) lives in `test_parity.py`.
"""

from __future__ import annotations

import numpy as np
import pytest

import albert_tf  # noqa: F401  (sets KERAS_BACKEND before keras is imported)
import tf_keras
from albert_tf import AlbertConfig, AlbertEncoder
from albert_tf.checkpoints.tf_models import (
    TfModelsConversionError,
    config_from_official,
    encoder_from_official,
    load_official_encoder,
    official_inputs,
    official_variables,
    to_official_encoder,
)
from official.modeling import activations as official_activations
from official.nlp.modeling.networks import AlbertEncoder as OfficialAlbertEncoder


def make_config(**overrides) -> AlbertConfig:
    values = dict(
        vocab_size=41,
        embedding_size=8,
        hidden_size=16,
        num_hidden_layers=3,
        num_attention_heads=2,
        intermediate_size=24,
        max_position_embeddings=12,
        type_vocab_size=2,
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.05,
    )
    values.update(overrides)
    return AlbertConfig(**values)


def randomized_encoder(config: AlbertConfig, seed: int = 0) -> AlbertEncoder:
    encoder = AlbertEncoder.from_albert_config(config)
    rng = np.random.default_rng(seed)
    for variable in encoder.weights:
        variable.assign(rng.standard_normal(variable.shape).astype("float32") * 0.3)
    return encoder


def ours_by_path(encoder):
    return {v.path: np.asarray(v) for v in encoder.weights}


@pytest.mark.parametrize("overrides", [dict(), dict(embedding_size=16, hidden_act="relu")], ids=["E!=H", "E==H relu"])
def test_round_trip_is_exact(overrides):
    config = make_config(**overrides)
    encoder = randomized_encoder(config)
    official = to_official_encoder(encoder, dict_outputs=True)
    assert ("embedding_projection/kernel" in official_variables(official)) == (config.embedding_size != config.hidden_size)
    back = encoder_from_official(official)
    assert back.to_albert_config() == config
    before, after = ours_by_path(encoder), ours_by_path(back)
    assert sorted(before) == sorted(after)
    for path in before:
        np.testing.assert_array_equal(before[path], after[path], err_msg=path)
    mask = np.array([[1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0]], np.int32)
    inputs = {"input_ids": np.arange(12, dtype=np.int32).reshape(2, 6) * mask, "input_mask": mask,
              "segment_ids": np.array([[0, 0, 1, 1, 1, 1], [0, 1, 1, 0, 0, 0]], np.int32)}  # fmt: skip
    theirs = official(official_inputs(inputs))
    ours = encoder(inputs)
    np.testing.assert_allclose(theirs["sequence_output"].numpy(), np.asarray(ours["sequence_output"]), atol=1e-5)
    np.testing.assert_allclose(theirs["pooled_output"].numpy(), np.asarray(ours["pooled_output"]), atol=1e-5)


def test_attention_kernel_layout():
    encoder = randomized_encoder(make_config())
    official = to_official_encoder(encoder)
    (attention,) = encoder.attention_blocks.values()
    theirs = official_variables(official)
    query = theirs["transformer/self_attention/query/kernel"].numpy()  # [H, N, D]
    np.testing.assert_array_equal(query[:, 1, :], np.asarray(attention.query.kernel)[:, 8:])
    out = theirs["transformer/self_attention/attention_output/kernel"].numpy()  # [N, D, H]
    np.testing.assert_array_equal(out[1], np.asarray(attention.output_dense.kernel)[8:])


@pytest.mark.parametrize(
    "activation, expected",
    [
        (official_activations.gelu, "gelu"),
        (tf_keras.activations.gelu, "gelu_exact"),
        ("relu", "relu"),
        ("tanh", "tanh"),
    ],
)
def test_activation_mapping(activation, expected):
    official = OfficialAlbertEncoder(
        vocab_size=41, embedding_width=8, hidden_size=16, num_layers=2, num_attention_heads=2,
        max_sequence_length=12, type_vocab_size=2, intermediate_size=24, activation=activation,
        dropout_rate=0.0, attention_dropout_rate=0.0,
    )  # fmt: skip
    config = config_from_official(official)
    assert config.hidden_act == expected
    assert (config.num_hidden_groups, config.inner_group_num, config.sharing) == (1, 1, "all")
    assert (config.vocab_size, config.embedding_size, config.hidden_size, config.num_hidden_layers) == (41, 8, 16, 2)


def test_unsupported_activation_is_refused():
    official = OfficialAlbertEncoder(
        vocab_size=41, embedding_width=8, hidden_size=16, num_layers=2, num_attention_heads=2,
        max_sequence_length=12, intermediate_size=24, activation="elu",
    )  # fmt: skip
    with pytest.raises(TfModelsConversionError, match="elu"):
        config_from_official(official)


@pytest.mark.parametrize(
    "overrides",
    [dict(num_hidden_layers=4, num_hidden_groups=2), dict(inner_group_num=2), dict(sharing="none")],
    ids=["groups", "inner groups", "sharing none"],
)
def test_more_than_one_block_is_refused(overrides):
    with pytest.raises(TfModelsConversionError, match="shares one transformer block"):
        to_official_encoder(randomized_encoder(make_config(**overrides)))


def test_shape_mismatch_names_the_variable_and_assigns_nothing():
    encoder = randomized_encoder(make_config())
    before = ours_by_path(encoder)
    official = to_official_encoder(randomized_encoder(make_config(max_position_embeddings=20)))
    with pytest.raises(TfModelsConversionError) as info:
        load_official_encoder(encoder, official)
    message = str(info.value)
    assert "position_embedding/embeddings" in message and "embeddings/position_embeddings" in message
    assert "(20, 8)" in message and "(12, 8)" in message
    for path, value in ours_by_path(encoder).items():
        np.testing.assert_array_equal(before[path], value, err_msg=path)


def test_head_and_projection_mismatches_are_reported():
    encoder = randomized_encoder(make_config())
    with pytest.raises(TfModelsConversionError, match="num_heads differs: encoder has 2"):
        load_official_encoder(encoder, to_official_encoder(randomized_encoder(make_config(num_attention_heads=4))))
    with pytest.raises(TfModelsConversionError, match="embedding_projection"):
        load_official_encoder(encoder, to_official_encoder(randomized_encoder(make_config(embedding_size=16))))
