"""Weight transfer between keras-hub's `keras_hub.models.AlbertBackbone` and our `AlbertEncoder`.

keras-hub implements the same equations as the original ALBERT (post-LN blocks, tanh-approximate
GELU, LayerNorm epsilon 1e-12, layer `l` routed to group `l * G // L`, tanh pooler on the first
token), with three differences in what it can express:

* it always has the E -> H `embedding_projection`, while the original (and we) have none when
  E == H. An identity kernel with a zero bias is exact in floating point, so ours -> keras-hub
  always works; keras-hub -> ours with E == H works only when its projection is that identity,
  and raises `KerasHubConversionError` otherwise;
* its activation is fixed to the tanh-approximate GELU, so only `hidden_act` "gelu"/"gelu_new"
  convert; and its sharing is the original group scheme only (`sharing="all"`);
* one `dropout` rate serves both hidden and attention dropout, so the two rates must be equal.

Masking agrees for every query of a row with at least one real token: keras-hub drops padded
keys with -1e9 instead of the original's additive -10000, and both give exactly zero
probability in float32. A row whose `input_mask` is all zeros differs (uniform attention over
all keys in the original, over none in keras-hub); such rows carry no information anyway.

Its attention kernels are `EinsumDense` [H, N, D] (query/key/value, bias [N, D]) and [N, D, H]
(output), which are our [H, H] Dense kernels reshaped.
"""

from __future__ import annotations

from typing import Dict, Iterator, List, NamedTuple, Optional, Tuple

import numpy as np
from keras import ops

from albert_tf.config import AlbertConfig
from albert_tf.modeling import AlbertEncoder

_KERAS_HUB_ACTIVATIONS = ("gelu", "gelu_new")


class KerasHubConversionError(ValueError):
    """A model that keras-hub's `AlbertBackbone` and our `AlbertEncoder` cannot both represent exactly."""


def _keras_hub():
    try:
        import keras_hub
    except ImportError as e:  # pragma: no cover - keras-hub is a declared dependency
        raise ImportError("keras-hub is required for keras-hub interop: pip install keras-hub") from e
    return keras_hub


def _numpy(variable) -> np.ndarray:
    return np.asarray(ops.convert_to_numpy(variable))


def _assign(variable, value: np.ndarray, source: str, target: str) -> None:
    """Assigns `value` (read from `source`) to `variable` (called `target`), checking the shape."""
    value = np.asarray(value)
    expected = tuple(variable.shape)
    if tuple(value.shape) != expected:
        raise KerasHubConversionError(
            f"shape mismatch: {source} has shape {tuple(value.shape)} but {target} expects {expected}"
        )
    variable.assign(value.astype(np.dtype(variable.dtype)))


# --- configs ---------------------------------------------------------------------------------


def config_from_keras_hub(backbone) -> AlbertConfig:
    """The `AlbertConfig` of a keras-hub `AlbertBackbone`.

    `num_groups` -> `num_hidden_groups`, `num_inner_repetitions` -> `inner_group_num`,
    `max_sequence_length` -> `max_position_embeddings`, `num_segments` -> `type_vocab_size`,
    `dropout` -> both dropout rates; the activation is keras-hub's fixed tanh GELU ("gelu") and
    `initializer_range` its fixed 0.02 (read from the embedding initializer).
    """
    stddev = getattr(backbone.token_embedding.embeddings_initializer, "stddev", 0.02)
    return AlbertConfig(
        vocab_size=backbone.vocabulary_size,
        embedding_size=backbone.embedding_dim,
        hidden_size=backbone.hidden_dim,
        num_hidden_layers=backbone.num_layers,
        num_hidden_groups=backbone.num_groups,
        inner_group_num=backbone.num_inner_repetitions,
        num_attention_heads=backbone.num_heads,
        intermediate_size=backbone.intermediate_dim,
        hidden_act="gelu",
        hidden_dropout_prob=float(backbone.dropout),
        attention_probs_dropout_prob=float(backbone.dropout),
        max_position_embeddings=backbone.max_sequence_length,
        type_vocab_size=backbone.num_segments,
        initializer_range=float(stddev),
        sharing="all",
    )


def check_keras_hub_compatible(config: AlbertConfig) -> None:
    """Raises `KerasHubConversionError` if keras-hub's `AlbertBackbone` cannot represent `config`."""
    if config.sharing != "all":
        raise KerasHubConversionError(
            "keras-hub's AlbertBackbone only shares whole blocks by group (sharing='all'); "
            f"got sharing={config.sharing!r}"
        )
    if config.hidden_act not in _KERAS_HUB_ACTIVATIONS:
        raise KerasHubConversionError(
            f"keras-hub's AlbertBackbone always uses the tanh-approximate GELU; hidden_act={config.hidden_act!r} "
            "would change the outputs"
        )
    if config.hidden_dropout_prob != config.attention_probs_dropout_prob:
        raise KerasHubConversionError(
            "keras-hub's AlbertBackbone has one dropout rate for hidden and attention dropout; got "
            f"hidden_dropout_prob={config.hidden_dropout_prob} and "
            f"attention_probs_dropout_prob={config.attention_probs_dropout_prob}"
        )


# --- the variable correspondence ---------------------------------------------------------------


def _check_structure(encoder: AlbertEncoder, backbone) -> None:
    """Shapes are checked variable by variable; this checks what shapes cannot show."""
    if encoder.sharing != "all":
        raise KerasHubConversionError(
            f"keras-hub's AlbertBackbone only supports sharing='all'; the encoder has sharing={encoder.sharing!r}"
        )
    pairs = (
        ("num_layers", encoder.num_layers, backbone.num_layers),
        ("num_groups", encoder.num_groups, backbone.num_groups),
        ("inner_group_num / num_inner_repetitions", encoder.inner_group_num, backbone.num_inner_repetitions),
        ("num_heads", encoder.num_heads, backbone.num_heads),
    )
    for name, ours, theirs in pairs:
        if ours != theirs:
            raise KerasHubConversionError(f"{name} differs: encoder has {ours}, keras-hub backbone has {theirs}")


def _block_pairs(encoder: AlbertEncoder, backbone) -> Iterator[Tuple[str, object, object, object]]:
    """(keras-hub layer name, TransformerEncoder, our AlbertAttention, our AlbertFeedForward) per block."""
    layers_per_group = encoder.num_layers // encoder.num_groups
    for group, inner_layers in enumerate(backbone.transformer_layers):
        first_layer = group * layers_per_group
        for inner, hub_layer in enumerate(inner_layers):
            a_name, f_name = encoder.schedule[first_layer * encoder.inner_group_num + inner]
            yield hub_layer.name, hub_layer, encoder.attention_blocks[a_name], encoder.ffn_blocks[f_name]


class _Pair(NamedTuple):
    """One of our variables and its keras-hub counterpart; `hub_shape` is set where they are reshaped."""

    ours_name: str
    ours: object
    hub_name: str
    hub: object
    hub_shape: Optional[Tuple[int, ...]] = None

    def to_hub(self, value: np.ndarray) -> np.ndarray:
        return value if self.hub_shape is None else value.reshape(self.hub_shape)

    def to_ours(self, value: np.ndarray) -> np.ndarray:
        return value if self.hub_shape is None else value.reshape(tuple(self.ours.shape))


def _correspondence(encoder: AlbertEncoder, backbone) -> List[_Pair]:
    """Every (our variable, keras-hub variable) pair.

    Our attention weights are [H, H] / [H] Dense weights; keras-hub's are `EinsumDense`
    [H, N, D] / [N, D] (query, key, value) and [N, D, H] (output): the same numbers, reshaped.
    """
    H, N = encoder.hidden_size, encoder.num_heads
    D = H // N
    emb = encoder.embeddings
    pairs = [
        _Pair("embeddings/word_embeddings", emb.word_embeddings, "token_embedding/embeddings",
              backbone.token_embedding.embeddings),
        _Pair("embeddings/token_type_embeddings", emb.token_type_embeddings, "segment_embedding/embeddings",
              backbone.segment_embedding.embeddings),
        _Pair("embeddings/position_embeddings", emb.position_embeddings, "position_embedding/embeddings",
              backbone.position_embedding.position_embeddings),
        _Pair("embeddings/LayerNorm/gamma", emb.layer_norm.gamma, "embeddings_layer_norm/gamma",
              backbone.embeddings_layer_norm.gamma),
        _Pair("embeddings/LayerNorm/beta", emb.layer_norm.beta, "embeddings_layer_norm/beta",
              backbone.embeddings_layer_norm.beta),
    ]  # fmt: skip

    def dense(ours_name, ours_layer, hub_name, hub_layer, kernel_shape=None, bias_shape=None):
        pairs.append(
            _Pair(f"{ours_name}/kernel", ours_layer.kernel, f"{hub_name}/kernel", hub_layer.kernel, kernel_shape)
        )
        pairs.append(_Pair(f"{ours_name}/bias", ours_layer.bias, f"{hub_name}/bias", hub_layer.bias, bias_shape))

    def norm(ours_name, ours_layer, hub_name, hub_layer):
        pairs.append(_Pair(f"{ours_name}/gamma", ours_layer.gamma, f"{hub_name}/gamma", hub_layer.gamma))
        pairs.append(_Pair(f"{ours_name}/beta", ours_layer.beta, f"{hub_name}/beta", hub_layer.beta))

    if encoder.embedding_hidden_mapping_in is not None:
        dense("embedding_hidden_mapping_in", encoder.embedding_hidden_mapping_in,
              "embedding_projection", backbone.embeddings_projection)  # fmt: skip
    for hub_name, hub_layer, attention, ffn in _block_pairs(encoder, backbone):
        mha = hub_layer._self_attention_layer
        a, f, h = attention.name, ffn.name, f"{hub_name}/self_attention_layer"
        dense(f"{a}/query", attention.query, f"{h}/query", mha._query_dense, (H, N, D), (N, D))
        dense(f"{a}/key", attention.key, f"{h}/key", mha._key_dense, (H, N, D), (N, D))
        dense(f"{a}/value", attention.value, f"{h}/value", mha._value_dense, (H, N, D), (N, D))
        dense(f"{a}/output_dense", attention.output_dense, f"{h}/attention_output", mha._output_dense, (N, D, H))
        norm(f"{a}/LayerNorm", attention.layer_norm, f"{hub_name}/self_attention_layer_norm",
             hub_layer._self_attention_layer_norm)  # fmt: skip
        dense(f"{f}/intermediate", ffn.intermediate, f"{hub_name}/feedforward_intermediate_dense",
              hub_layer._feedforward_intermediate_dense)  # fmt: skip
        dense(f"{f}/output_dense", ffn.output_dense, f"{hub_name}/feedforward_output_dense",
              hub_layer._feedforward_output_dense)  # fmt: skip
        norm(f"{f}/LayerNorm_1", ffn.layer_norm, f"{hub_name}/feedforward_layer_norm", hub_layer._feedforward_layer_norm)
    dense("pooler", encoder.pooler, "pooled_dense", backbone.pooled_dense)
    return pairs


def _convert(value: np.ndarray, fn, target_shape, source: str, target: str) -> np.ndarray:
    """`fn(value)`, checked to have `target_shape`; the error names both variables."""
    target_shape = tuple(target_shape)
    if int(np.prod(value.shape)) == int(np.prod(target_shape)):
        value = fn(value)
    if tuple(value.shape) != target_shape:
        raise KerasHubConversionError(
            f"shape mismatch: {source} has shape {tuple(value.shape)} but {target} expects {target_shape}"
        )
    return value


# --- keras-hub -> ours -------------------------------------------------------------------------


def load_keras_hub_backbone(encoder: AlbertEncoder, backbone) -> None:
    """Copies a keras-hub `AlbertBackbone`'s weights into `encoder` (same architecture).

    Raises:
        KerasHubConversionError: structures differ (layers, groups, inner groups, heads, sharing),
            a variable's shape differs (the message names both variables), or E == H and the
            backbone's `embedding_projection` is not the identity our encoder implies.
    """
    _check_structure(encoder, backbone)
    if encoder.embedding_hidden_mapping_in is None:
        _check_identity_projection(backbone)
    pending = []
    for pair in _correspondence(encoder, backbone):
        source, target = f"keras-hub {pair.hub_name}", f"encoder {pair.ours_name}"
        value = _convert(_numpy(pair.hub), pair.to_ours, pair.ours.shape, source, target)
        pending.append((pair.ours, value, source, target))
    # Assign only after every pair checked out, so a failed load leaves the encoder untouched.
    for var, value, source, target in pending:
        _assign(var, value, source, target)


def _check_identity_projection(backbone) -> None:
    kernel = _numpy(backbone.embeddings_projection.kernel)
    bias = _numpy(backbone.embeddings_projection.bias)
    if kernel.shape[0] != kernel.shape[1]:
        raise KerasHubConversionError(
            f"the encoder has embedding_size == hidden_size but the backbone's embedding_projection/kernel "
            f"has shape {kernel.shape}"
        )
    if not (np.array_equal(kernel, np.eye(kernel.shape[0], dtype=kernel.dtype)) and not np.any(bias)):
        raise KerasHubConversionError(
            "the backbone has embedding_dim == hidden_dim and a trained embedding_projection; the original "
            "ALBERT architecture (and our AlbertEncoder) has no projection when E == H, so these weights "
            "cannot be converted exactly"
        )


def encoder_from_keras_hub(backbone, **kwargs) -> AlbertEncoder:
    """A new `AlbertEncoder` with the architecture and weights of a keras-hub `AlbertBackbone`.

    Args:
        backbone: a `keras_hub.models.AlbertBackbone`.
        **kwargs: passed to `AlbertEncoder.from_albert_config` (`dtype`, `name`, ...); the dtype
            policy defaults to the backbone's.
    """
    kwargs.setdefault("dtype", backbone.dtype_policy)
    encoder = AlbertEncoder.from_albert_config(config_from_keras_hub(backbone), **kwargs)
    load_keras_hub_backbone(encoder, backbone)
    return encoder


# --- ours -> keras-hub -------------------------------------------------------------------------


def save_to_keras_hub_backbone(encoder: AlbertEncoder, backbone) -> None:
    """Copies `encoder`'s weights into an existing keras-hub `AlbertBackbone` of the same architecture.

    With E == H, the backbone's projection is set to the identity and a zero bias, which is exact.

    Raises:
        KerasHubConversionError: the encoder's config cannot be expressed in keras-hub, structures
            differ, or a variable's shape differs (the message names both variables).
    """
    check_keras_hub_compatible(encoder.to_albert_config())
    _check_structure(encoder, backbone)
    pending = []
    for pair in _correspondence(encoder, backbone):
        source, target = f"encoder {pair.ours_name}", f"keras-hub {pair.hub_name}"
        value = _convert(_numpy(pair.ours), pair.to_hub, pair.hub.shape, source, target)
        pending.append((pair.hub, value, source, target))
    if encoder.embedding_hidden_mapping_in is None:
        proj = backbone.embeddings_projection
        if tuple(proj.kernel.shape) != (encoder.hidden_size, encoder.hidden_size):
            raise KerasHubConversionError(
                f"shape mismatch: keras-hub embedding_projection/kernel has shape {tuple(proj.kernel.shape)}, "
                f"expected ({encoder.hidden_size}, {encoder.hidden_size}) for E == H"
            )
        pending.append((proj.kernel, np.eye(encoder.hidden_size), "identity", "keras-hub embedding_projection/kernel"))
        pending.append((proj.bias, np.zeros(encoder.hidden_size), "zeros", "keras-hub embedding_projection/bias"))
    for var, value, source, target in pending:
        _assign(var, value, source, target)


def to_keras_hub_backbone(encoder: AlbertEncoder, **kwargs):
    """A new keras-hub `AlbertBackbone` computing the same function as `encoder`.

    Args:
        encoder: our `AlbertEncoder` (sharing "all", hidden_act "gelu"/"gelu_new", equal dropouts).
        **kwargs: passed to `AlbertBackbone` (`name`, ...); `dtype` defaults to the encoder's policy.
    """
    config = encoder.to_albert_config()
    check_keras_hub_compatible(config)
    kwargs.setdefault("dtype", encoder.dtype_policy)
    backbone = _keras_hub().models.AlbertBackbone(
        vocabulary_size=config.vocab_size,
        num_layers=config.num_hidden_layers,
        num_heads=config.num_attention_heads,
        embedding_dim=config.embedding_size,
        hidden_dim=config.hidden_size,
        intermediate_dim=config.intermediate_size,
        num_groups=config.num_hidden_groups,
        num_inner_repetitions=config.inner_group_num,
        dropout=config.hidden_dropout_prob,
        max_sequence_length=config.max_position_embeddings,
        num_segments=config.type_vocab_size,
        **kwargs,
    )
    save_to_keras_hub_backbone(encoder, backbone)
    return backbone


def keras_hub_inputs(inputs: Dict[str, object]) -> Dict[str, object]:
    """Our input dict (`input_ids`, `input_mask`, `segment_ids`) renamed for keras-hub."""
    return {"token_ids": inputs["input_ids"], "padding_mask": inputs["input_mask"], "segment_ids": inputs["segment_ids"]}
