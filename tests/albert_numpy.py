"""An independent NumPy implementation of the ALBERT equations, used as the parity reference in tests.

Written from the paper and the equations of google-research/albert's `modeling.py`, not from
`albert_tf`: it shares no code with the package, so a mistake in one does not hide in the other.
Weights are a flat dict keyed by the ORIGINAL TF1 checkpoint variable names, e.g.
`bert/encoder/transformer/group_0/inner_group_0/attention_1/self/query/kernel`. For our non-"all"
sharing modes, a part that is not shared lives under `bert/encoder/transformer/layer_{l}/...`
instead of `group_{g}/...` (attention part: `attention_1` + `LayerNorm`; feed-forward part:
`ffn_1` + `LayerNorm_1`).

Everything is computed in float64 from float32 weights, so the reference is more precise than
any float32 implementation under test.
"""

from __future__ import annotations

import math
from typing import Dict, Tuple

import numpy as np

LAYER_NORM_EPSILON = 1e-12
MASK_ADDER = -10000.0
TRANSFORMER = "bert/encoder/transformer"


def _gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def _gelu_erf(x):
    erf = np.vectorize(math.erf, otypes=[np.float64])
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


_ACTIVATIONS = {
    "gelu": _gelu_tanh,
    "gelu_new": _gelu_tanh,
    "gelu_exact": _gelu_erf,
    "relu": lambda x: np.maximum(x, 0.0),
    "tanh": np.tanh,
    "swish": lambda x: x * _sigmoid(x),
    "silu": lambda x: x * _sigmoid(x),
    "linear": lambda x: x,
}


def activation(name: str):
    """The NumPy activation called `name` in an ALBERT config."""
    if name not in _ACTIVATIONS:
        raise ValueError(f"unknown activation {name!r}")
    return _ACTIVATIONS[name]


def layer_norm(x, gamma, beta, epsilon=LAYER_NORM_EPSILON):
    mean = x.mean(axis=-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + epsilon) * gamma + beta


def _sharing_flags(sharing: str) -> Tuple[bool, bool]:
    if sharing not in ("all", "attention", "ffn", "none"):
        raise ValueError(f"unknown sharing {sharing!r}")
    return sharing in ("all", "attention"), sharing in ("all", "ffn")


def block_prefixes(config, layer: int, inner: int) -> Tuple[str, str]:
    """Checkpoint prefixes (attention part, ffn part) of inner block `inner` of layer `layer`."""
    share_attention, share_ffn = _sharing_flags(config.sharing)
    group = layer * config.num_hidden_groups // config.num_hidden_layers
    shared = f"{TRANSFORMER}/group_{group}/inner_group_{inner}"
    own = f"{TRANSFORMER}/layer_{layer}/inner_group_{inner}"
    return (shared if share_attention else own), (shared if share_ffn else own)


def _weights(weights, name):
    if name not in weights:
        raise KeyError(f"missing weight {name}")
    return np.asarray(weights[name], np.float64)


def _dense(weights, prefix, x):
    return x @ _weights(weights, prefix + "/kernel") + _weights(weights, prefix + "/bias")


def _attention(weights, prefix, x, bias, num_heads):
    batch, seq, hidden = x.shape
    head = hidden // num_heads

    def heads(t):  # [B, S, H] -> [B, N, S, D]
        return t.reshape(batch, seq, num_heads, head).transpose(0, 2, 1, 3)

    q = heads(_dense(weights, prefix + "/attention_1/self/query", x))
    k = heads(_dense(weights, prefix + "/attention_1/self/key", x))
    v = heads(_dense(weights, prefix + "/attention_1/self/value", x))
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(head) + bias
    scores = scores - scores.max(axis=-1, keepdims=True)
    probs = np.exp(scores)
    probs /= probs.sum(axis=-1, keepdims=True)
    context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, seq, hidden)
    out = _dense(weights, prefix + "/attention_1/output/dense", context)
    gamma, beta = _weights(weights, prefix + "/LayerNorm/gamma"), _weights(weights, prefix + "/LayerNorm/beta")
    return layer_norm(x + out, gamma, beta)


def _ffn(weights, prefix, x, act):
    h = act(_dense(weights, prefix + "/ffn_1/intermediate/dense", x))
    out = _dense(weights, prefix + "/ffn_1/intermediate/output/dense", h)
    return layer_norm(
        x + out, _weights(weights, prefix + "/LayerNorm_1/gamma"), _weights(weights, prefix + "/LayerNorm_1/beta")
    )


def albert_numpy_forward(
    weights: Dict[str, np.ndarray], config, input_ids, input_mask, segment_ids
) -> Tuple[np.ndarray, np.ndarray]:
    """The ALBERT encoder on a batch: returns (sequence_output [B, S, H], pooled_output [B, H]) in float64.

    Args:
        weights: original-named arrays (see the module docstring).
        config: an `AlbertConfig` (only its fields are read).
        input_ids, input_mask, segment_ids: integer arrays [B, S]; `input_mask` is 1 for real tokens.
    """
    input_ids = np.asarray(input_ids)
    input_mask = np.asarray(input_mask)
    segment_ids = np.asarray(segment_ids)
    seq = input_ids.shape[1]
    act = activation(config.hidden_act)

    x = (
        _weights(weights, "bert/embeddings/word_embeddings")[input_ids]
        + _weights(weights, "bert/embeddings/token_type_embeddings")[segment_ids]
        + _weights(weights, "bert/embeddings/position_embeddings")[:seq][None]
    )
    x = layer_norm(
        x, _weights(weights, "bert/embeddings/LayerNorm/gamma"), _weights(weights, "bert/embeddings/LayerNorm/beta")
    )
    if config.embedding_size != config.hidden_size:
        x = _dense(weights, "bert/encoder/embedding_hidden_mapping_in", x)

    # Additive mask on the keys, identical for every head and query position.
    bias = (1.0 - input_mask.astype(np.float64))[:, None, None, :] * MASK_ADDER
    for layer in range(config.num_hidden_layers):
        for inner in range(config.inner_group_num):
            attention_prefix, ffn_prefix = block_prefixes(config, layer, inner)
            x = _attention(weights, attention_prefix, x, bias, config.num_attention_heads)
            x = _ffn(weights, ffn_prefix, x, act)
    pooled = np.tanh(_dense(weights, "bert/pooler/dense", x[:, 0]))
    return x, pooled


def albert_numpy_mlm_logits(weights: Dict[str, np.ndarray], config, sequence_output) -> np.ndarray:
    """Masked-LM logits [..., V]: transform dense + activation, LayerNorm, tied word embeddings, bias."""
    x = np.asarray(sequence_output, np.float64)
    x = activation(config.hidden_act)(_dense(weights, "cls/predictions/transform/dense", x))
    x = layer_norm(
        x,
        _weights(weights, "cls/predictions/transform/LayerNorm/gamma"),
        _weights(weights, "cls/predictions/transform/LayerNorm/beta"),
    )
    return x @ _weights(weights, "bert/embeddings/word_embeddings").T + _weights(weights, "cls/predictions/output_bias")


def albert_numpy_sop_logits(weights: Dict[str, np.ndarray], pooled) -> np.ndarray:
    """Sentence-order logits [B, 2] = pooled @ output_weights.T + output_bias."""
    pooled = np.asarray(pooled, np.float64)
    return pooled @ _weights(weights, "cls/seq_relationship/output_weights").T + _weights(
        weights, "cls/seq_relationship/output_bias"
    )


def original_weight_shapes(config) -> Dict[str, Tuple[int, ...]]:
    """Every original-named variable of the encoder, pooler and pre-training heads, with its shape."""
    V, E, H, I = config.vocab_size, config.embedding_size, config.hidden_size, config.intermediate_size
    shapes: Dict[str, Tuple[int, ...]] = {
        "bert/embeddings/word_embeddings": (V, E),
        "bert/embeddings/token_type_embeddings": (config.type_vocab_size, E),
        "bert/embeddings/position_embeddings": (config.max_position_embeddings, E),
        "bert/embeddings/LayerNorm/gamma": (E,),
        "bert/embeddings/LayerNorm/beta": (E,),
    }
    if E != H:
        shapes["bert/encoder/embedding_hidden_mapping_in/kernel"] = (E, H)
        shapes["bert/encoder/embedding_hidden_mapping_in/bias"] = (H,)
    for layer in range(config.num_hidden_layers):
        for inner in range(config.inner_group_num):
            a, f = block_prefixes(config, layer, inner)
            for part in ("self/query", "self/key", "self/value", "output/dense"):
                shapes[f"{a}/attention_1/{part}/kernel"] = (H, H)
                shapes[f"{a}/attention_1/{part}/bias"] = (H,)
            shapes[f"{a}/LayerNorm/gamma"] = (H,)
            shapes[f"{a}/LayerNorm/beta"] = (H,)
            shapes[f"{f}/ffn_1/intermediate/dense/kernel"] = (H, I)
            shapes[f"{f}/ffn_1/intermediate/dense/bias"] = (I,)
            shapes[f"{f}/ffn_1/intermediate/output/dense/kernel"] = (I, H)
            shapes[f"{f}/ffn_1/intermediate/output/dense/bias"] = (H,)
            shapes[f"{f}/LayerNorm_1/gamma"] = (H,)
            shapes[f"{f}/LayerNorm_1/beta"] = (H,)
    shapes["bert/pooler/dense/kernel"] = (H, H)
    shapes["bert/pooler/dense/bias"] = (H,)
    shapes["cls/predictions/transform/dense/kernel"] = (H, E)
    shapes["cls/predictions/transform/dense/bias"] = (E,)
    shapes["cls/predictions/transform/LayerNorm/gamma"] = (E,)
    shapes["cls/predictions/transform/LayerNorm/beta"] = (E,)
    shapes["cls/predictions/output_bias"] = (V,)
    shapes["cls/seq_relationship/output_weights"] = (2, H)
    shapes["cls/seq_relationship/output_bias"] = (2,)
    return shapes


def random_original_weights(config, seed: int = 0) -> Dict[str, np.ndarray]:
    """Random float32 weights under the original names, for every part the config has.

    Kernels have std max(0.02, 1/sqrt(fan_in)) and embedding tables std 0.5 (0.02, the pre-training
    init, would make the attention nearly uniform at test widths, hiding errors in q/k); LayerNorm
    gammas are 1 + noise and every beta/bias is nonzero, so that dropping or misplacing any term of
    the equations changes the outputs well beyond float32 rounding.
    """
    rng = np.random.default_rng(seed)
    weights = {}
    for name, shape in original_weight_shapes(config).items():
        leaf = name.rsplit("/", 1)[-1]
        if leaf == "gamma":
            value = 1.0 + 0.1 * rng.standard_normal(shape)
        elif leaf in ("beta", "bias", "output_bias"):
            value = 0.05 * rng.standard_normal(shape)
        elif leaf == "kernel" or leaf == "output_weights":
            fan_in = shape[-1] if leaf == "output_weights" else shape[0]
            value = rng.standard_normal(shape) * max(0.02, 1.0 / math.sqrt(fan_in))
        else:  # embedding tables
            value = rng.standard_normal(shape) * 0.5
        weights[name] = value.astype(np.float32)
    return weights
