"""Weight transfer between tf-models-official's `official.nlp.modeling.networks.AlbertEncoder` and ours.

The Model Garden encoder is a tf_keras (Keras 2) model with ONE `TransformerEncoderBlock` called
`num_layers` times, so it corresponds to our `num_hidden_groups=1`, `inner_group_num=1`; any
other structure raises `TfModelsConversionError`. It matches the original equations: post-LN
blocks with LayerNorm epsilon 1e-12, no E -> H projection when E == H, a tanh pooler on the first
token, and a configurable activation. Its default activation, `official.modeling.activations.gelu`,
is the tanh approximation (our "gelu"); `tf_keras.activations.gelu` is the erf form ("gelu_exact").

Masking agrees for every row with at least one real token: padded keys get -1e9 (not -10000)
before the softmax, which in float32 gives the same exact zeros. An all-padding row differs, as
it does for keras-hub.
"""

from __future__ import annotations

from typing import Dict, List, Mapping, Tuple

import numpy as np
from keras import ops

from albert_tf.config import AlbertConfig
from albert_tf.modeling import AlbertEncoder


class TfModelsConversionError(ValueError):
    """A model that the Model Garden `AlbertEncoder` and ours cannot both represent exactly."""


def _official():
    try:
        import tf_keras
        from official.modeling import activations as official_activations
        from official.nlp.modeling import networks
    except ImportError as e:  # pragma: no cover - tf-models-official is a declared dependency
        raise ImportError("tf-models-official (with tf_keras) is required: pip install tf-models-official") from e
    return tf_keras, official_activations, networks


def _activation_table() -> List[Tuple[object, str]]:
    """(activation function, our hidden_act) pairs, identified by identity, first match wins."""
    tf_keras, official_activations, _ = _official()
    acts = tf_keras.activations
    return [
        (official_activations.gelu, "gelu"),
        (acts.gelu, "gelu_exact"),
        (acts.relu, "relu"),
        (acts.tanh, "tanh"),
        (acts.swish, "swish"),
        (acts.linear, "linear"),
    ]


def official_activation(hidden_act: str):
    """The tf_keras activation function equal to our `hidden_act`."""
    names = {"gelu_new": "gelu", "silu": "swish"}
    wanted = names.get(hidden_act, hidden_act)
    for fn, name in _activation_table():
        if name == wanted:
            return fn
    raise TfModelsConversionError(f"hidden_act {hidden_act!r} has no Model Garden equivalent")


def _hidden_act(fn) -> str:
    for candidate, name in _activation_table():
        if fn is candidate:
            return name
    raise TfModelsConversionError(
        f"the Model Garden encoder's activation {getattr(fn, '__module__', '?')}.{getattr(fn, '__name__', fn)!r} "
        "has no exact AlbertConfig equivalent (supported: official gelu, tf_keras gelu/relu/tanh/swish/linear)"
    )


def config_from_official(official) -> AlbertConfig:
    """The `AlbertConfig` of a Model Garden `AlbertEncoder` (one group, one inner block, sharing "all")."""
    config = official.get_config()
    transformer = official.get_layer("transformer")
    initializer = config.get("initializer")
    stddev = 0.02
    if isinstance(initializer, Mapping) and isinstance(initializer.get("config"), Mapping):
        stddev = initializer["config"].get("stddev", stddev)
    return AlbertConfig(
        vocab_size=int(config["vocab_size"]),
        embedding_size=int(config["embedding_width"]),
        hidden_size=int(config["hidden_size"]),
        num_hidden_layers=int(config["num_layers"]),
        num_hidden_groups=1,
        inner_group_num=1,
        num_attention_heads=int(config["num_attention_heads"]),
        intermediate_size=int(config["intermediate_size"]),
        hidden_act=_hidden_act(transformer._inner_activation),
        hidden_dropout_prob=float(config["dropout_rate"]),
        attention_probs_dropout_prob=float(config["attention_dropout_rate"]),
        max_position_embeddings=int(config["max_sequence_length"]),
        type_vocab_size=int(config["type_vocab_size"]),
        initializer_range=float(stddev),
        sharing="all",
    )


def check_official_compatible(encoder: AlbertEncoder) -> None:
    """Raises `TfModelsConversionError` unless `encoder` has exactly one attention and one FFN block."""
    if len(encoder.attention_blocks) != 1 or len(encoder.ffn_blocks) != 1:
        raise TfModelsConversionError(
            "the Model Garden AlbertEncoder shares one transformer block across all layers; the encoder has "
            f"{len(encoder.attention_blocks)} attention and {len(encoder.ffn_blocks)} feed-forward blocks "
            f"(num_groups={encoder.num_groups}, inner_group_num={encoder.inner_group_num}, sharing={encoder.sharing!r})"
        )
    official_activation(encoder.hidden_act)


# --- the variable correspondence ---------------------------------------------------------------


def _pairs(encoder: AlbertEncoder):
    """(Model Garden variable name, our name, our variable, ours->official reshape, official->ours reshape)."""
    H, N = encoder.hidden_size, encoder.num_heads
    D = H // N
    same = (lambda x: x, lambda x: x)

    def reshaper(ours_shape, theirs_shape):
        return (lambda x: x.reshape(theirs_shape), lambda x: x.reshape(ours_shape))

    emb = encoder.embeddings
    yield "word_embeddings/embeddings", "embeddings/word_embeddings", emb.word_embeddings, *same
    yield "position_embedding/embeddings", "embeddings/position_embeddings", emb.position_embeddings, *same
    yield "type_embeddings/embeddings", "embeddings/token_type_embeddings", emb.token_type_embeddings, *same
    yield "embeddings/layer_norm/gamma", "embeddings/LayerNorm/gamma", emb.layer_norm.gamma, *same
    yield "embeddings/layer_norm/beta", "embeddings/LayerNorm/beta", emb.layer_norm.beta, *same
    if encoder.embedding_hidden_mapping_in is not None:
        proj = encoder.embedding_hidden_mapping_in
        yield "embedding_projection/kernel", "embedding_hidden_mapping_in/kernel", proj.kernel, *same
        yield "embedding_projection/bias", "embedding_hidden_mapping_in/bias", proj.bias, *same
    (attention,) = encoder.attention_blocks.values()
    (ffn,) = encoder.ffn_blocks.values()
    a, f = attention.name, ffn.name
    att = "transformer/self_attention"
    for label, dense in (("query", attention.query), ("key", attention.key), ("value", attention.value)):
        yield f"{att}/{label}/kernel", f"{a}/{label}/kernel", dense.kernel, *reshaper((H, H), (H, N, D))
        yield f"{att}/{label}/bias", f"{a}/{label}/bias", dense.bias, *reshaper((H,), (N, D))
    out = attention.output_dense
    yield f"{att}/attention_output/kernel", f"{a}/output_dense/kernel", out.kernel, *reshaper((H, H), (N, D, H))
    yield f"{att}/attention_output/bias", f"{a}/output_dense/bias", out.bias, *same
    yield "transformer/self_attention_layer_norm/gamma", f"{a}/LayerNorm/gamma", attention.layer_norm.gamma, *same
    yield "transformer/self_attention_layer_norm/beta", f"{a}/LayerNorm/beta", attention.layer_norm.beta, *same
    yield "transformer/intermediate/kernel", f"{f}/intermediate/kernel", ffn.intermediate.kernel, *same
    yield "transformer/intermediate/bias", f"{f}/intermediate/bias", ffn.intermediate.bias, *same
    yield "transformer/output/kernel", f"{f}/output_dense/kernel", ffn.output_dense.kernel, *same
    yield "transformer/output/bias", f"{f}/output_dense/bias", ffn.output_dense.bias, *same
    yield "transformer/output_layer_norm/gamma", f"{f}/LayerNorm_1/gamma", ffn.layer_norm.gamma, *same
    yield "transformer/output_layer_norm/beta", f"{f}/LayerNorm_1/beta", ffn.layer_norm.beta, *same
    yield "pooler_transform/kernel", "pooler/kernel", encoder.pooler.kernel, *same
    yield "pooler_transform/bias", "pooler/bias", encoder.pooler.bias, *same


def official_variables(official) -> Dict[str, object]:
    """The Model Garden encoder's variables by name, without `:0` and any enclosing name scope.

    Raises:
        TfModelsConversionError: the model does not have the Model Garden ALBERT layout (it lacks
            the `transformer` block or some of its expected variables).
    """
    names = [
        "word_embeddings/embeddings", "position_embedding/embeddings", "type_embeddings/embeddings",
        "embeddings/layer_norm/gamma", "embeddings/layer_norm/beta",
        "embedding_projection/kernel", "embedding_projection/bias",
        "pooler_transform/kernel", "pooler_transform/bias",
    ]  # fmt: skip
    found: Dict[str, object] = {}
    for variable in official.weights:
        name = variable.name.split(":")[0]
        # A model built inside a name scope prefixes every name; match on whole components.
        for known in names + _transformer_names():
            if name == known or name.endswith("/" + known):
                if known in found:
                    raise TfModelsConversionError(f"the Model Garden encoder has two variables named like {known}")
                found[known] = variable
    missing = [n for n in _transformer_names() if n not in found]
    if missing:
        raise TfModelsConversionError(
            f"not a Model Garden AlbertEncoder layout: missing variable(s) {', '.join(missing)}"
        )
    return found


def _transformer_names() -> List[str]:
    out = []
    for label in ("query", "key", "value", "attention_output"):
        out += [f"transformer/self_attention/{label}/kernel", f"transformer/self_attention/{label}/bias"]
    for part in ("self_attention_layer_norm", "output_layer_norm"):
        out += [f"transformer/{part}/gamma", f"transformer/{part}/beta"]
    for part in ("intermediate", "output"):
        out += [f"transformer/{part}/kernel", f"transformer/{part}/bias"]
    return out


def _convert(value: np.ndarray, fn, target_shape, source: str, target: str) -> np.ndarray:
    """`fn(value)`, checked to have `target_shape`; the error names both variables."""
    value = np.asarray(value)
    target_shape = tuple(int(d) for d in target_shape)
    if int(np.prod(value.shape)) == int(np.prod(target_shape)):
        value = fn(value)
    if tuple(value.shape) != target_shape:
        raise TfModelsConversionError(
            f"shape mismatch: {source} has shape {tuple(value.shape)} but {target} expects {target_shape}"
        )
    return value


def _check_heads(encoder: AlbertEncoder, theirs: Dict[str, object]) -> None:
    # A head count mismatch keeps the element count of every kernel; only the 3-D shape shows it.
    num_heads = int(theirs["transformer/self_attention/query/kernel"].shape[1])
    if num_heads != encoder.num_heads:
        raise TfModelsConversionError(
            f"num_heads differs: encoder has {encoder.num_heads}, the Model Garden encoder has {num_heads}"
        )


def _check_projection(encoder: AlbertEncoder, theirs: Dict[str, object]) -> None:
    theirs_has = "embedding_projection/kernel" in theirs
    ours_has = encoder.embedding_hidden_mapping_in is not None
    if theirs_has != ours_has:
        raise TfModelsConversionError(
            f"embedding projection: the encoder {'has' if ours_has else 'has no'} embedding_hidden_mapping_in "
            f"but the Model Garden encoder {'has' if theirs_has else 'has no'} embedding_projection"
        )


# --- Model Garden -> ours ----------------------------------------------------------------------


def load_official_encoder(encoder: AlbertEncoder, official) -> None:
    """Copies a Model Garden `AlbertEncoder`'s weights into `encoder`; nothing is assigned on error.

    Raises:
        TfModelsConversionError: `encoder` has more than one block, the head counts or the presence
            of the E -> H projection differ, or a shape differs (the message names both variables).
    """
    check_official_compatible(encoder)
    theirs = official_variables(official)
    _check_heads(encoder, theirs)
    _check_projection(encoder, theirs)
    if official.get_config()["num_layers"] != encoder.num_layers:
        raise TfModelsConversionError(
            f"num_layers differs: encoder has {encoder.num_layers}, the Model Garden encoder has "
            f"{official.get_config()['num_layers']}"
        )
    pending = []
    for their_name, our_name, our_var, _, to_ours in _pairs(encoder):
        source, target = f"Model Garden {their_name}", f"encoder {our_name}"
        value = _convert(theirs[their_name].numpy(), to_ours, our_var.shape, source, target)
        pending.append((our_var, value))
    for var, value in pending:
        var.assign(value.astype(np.dtype(var.dtype)))


def encoder_from_official(official, **kwargs) -> AlbertEncoder:
    """A new `AlbertEncoder` with the architecture and weights of a Model Garden `AlbertEncoder`.

    `kwargs` go to `AlbertEncoder.from_albert_config` (`dtype`, `name`, ...).
    """
    encoder = AlbertEncoder.from_albert_config(config_from_official(official), **kwargs)
    load_official_encoder(encoder, official)
    return encoder


# --- ours -> Model Garden ----------------------------------------------------------------------


def save_to_official_encoder(encoder: AlbertEncoder, official) -> None:
    """Copies `encoder`'s weights into an existing Model Garden `AlbertEncoder`; nothing is assigned on error."""
    check_official_compatible(encoder)
    theirs = official_variables(official)
    _check_heads(encoder, theirs)
    _check_projection(encoder, theirs)
    pending = []
    for their_name, our_name, our_var, to_theirs, _ in _pairs(encoder):
        target_var = theirs[their_name]
        source, target = f"encoder {our_name}", f"Model Garden {their_name}"
        value = _convert(np.asarray(ops.convert_to_numpy(our_var)), to_theirs, target_var.shape, source, target)
        pending.append((target_var, value))
    for var, value in pending:
        var.assign(value.astype(var.dtype.as_numpy_dtype))


def to_official_encoder(encoder: AlbertEncoder, **kwargs):
    """A new Model Garden `AlbertEncoder` (tf_keras) computing the same function as `encoder`.

    Args:
        encoder: our encoder with one attention and one feed-forward block.
        **kwargs: passed to the Model Garden constructor (`dict_outputs`, `name`, ...).
    """
    check_official_compatible(encoder)
    tf_keras, _, networks = _official()
    official = networks.AlbertEncoder(
        vocab_size=encoder.vocab_size,
        embedding_width=encoder.embedding_size,
        hidden_size=encoder.hidden_size,
        num_layers=encoder.num_layers,
        num_attention_heads=encoder.num_heads,
        max_sequence_length=encoder.max_position_embeddings,
        type_vocab_size=encoder.type_vocab_size,
        intermediate_size=encoder.intermediate_size,
        activation=official_activation(encoder.hidden_act),
        dropout_rate=encoder.hidden_dropout,
        attention_dropout_rate=encoder.attention_dropout,
        initializer=tf_keras.initializers.TruncatedNormal(stddev=encoder.initializer_range),
        **kwargs,
    )
    save_to_official_encoder(encoder, official)
    return official


def official_inputs(inputs: Dict[str, object]) -> list:
    """Our input dict (`input_ids`, `input_mask`, `segment_ids`) as the Model Garden encoder's input list."""
    return [inputs["input_ids"], inputs["input_mask"], inputs["segment_ids"]]
