"""Hugging Face ALBERT weights and config.json, in and out, without PyTorch.

`HF_NAME_TABLE` translates Hugging Face state-dict names to the original TF1 names (torch `Linear`
weights are [out, in], so they are transposed); loading then goes through
`albert_tf.checkpoints.original.assign_original_weights`, the one assignment path, with problems
reported under the Hugging Face names.

Accepted sources: a `.safetensors` file (read with `safetensors.numpy`), a directory holding
`model.safetensors` or a sharded `model.safetensors.index.json`, an `.npz` state dict, or an
in-memory mapping of NumPy arrays. Names may carry the `albert.` prefix (AlbertForPreTraining,
AlbertForMaskedLM) or not (AlbertModel). The MLM decoder is tied to the word embeddings and its
bias to `predictions.bias`; copies present in a file are checked to be equal. Hugging Face has
only the original sharing scheme, so encoders with another `sharing` are refused.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np

from albert_tf import file_io
from albert_tf.checkpoints.original import (
    CheckpointError,
    LoadReport,
    assign_original_weights,
    original_variable_map,
)
from albert_tf.config import AlbertConfig, ConfigError

ENCODER_PREFIX = "albert."
LAYER = "encoder.albert_layer_groups.{g}.albert_layers.{k}"
BLOCK = "bert/encoder/transformer/group_{g}/inner_group_{k}"

# (Hugging Face name, original name, transpose). `{g}` / `{k}`: group / inner-group indices.
HF_NAME_TABLE: Tuple[Tuple[str, str, bool], ...] = (
    ("embeddings.word_embeddings.weight", "bert/embeddings/word_embeddings", False),
    ("embeddings.position_embeddings.weight", "bert/embeddings/position_embeddings", False),
    ("embeddings.token_type_embeddings.weight", "bert/embeddings/token_type_embeddings", False),
    ("embeddings.LayerNorm.weight", "bert/embeddings/LayerNorm/gamma", False),
    ("embeddings.LayerNorm.bias", "bert/embeddings/LayerNorm/beta", False),
    ("encoder.embedding_hidden_mapping_in.weight", "bert/encoder/embedding_hidden_mapping_in/kernel", True),
    ("encoder.embedding_hidden_mapping_in.bias", "bert/encoder/embedding_hidden_mapping_in/bias", False),
    (f"{LAYER}.attention.query.weight", f"{BLOCK}/attention_1/self/query/kernel", True),
    (f"{LAYER}.attention.query.bias", f"{BLOCK}/attention_1/self/query/bias", False),
    (f"{LAYER}.attention.key.weight", f"{BLOCK}/attention_1/self/key/kernel", True),
    (f"{LAYER}.attention.key.bias", f"{BLOCK}/attention_1/self/key/bias", False),
    (f"{LAYER}.attention.value.weight", f"{BLOCK}/attention_1/self/value/kernel", True),
    (f"{LAYER}.attention.value.bias", f"{BLOCK}/attention_1/self/value/bias", False),
    (f"{LAYER}.attention.dense.weight", f"{BLOCK}/attention_1/output/dense/kernel", True),
    (f"{LAYER}.attention.dense.bias", f"{BLOCK}/attention_1/output/dense/bias", False),
    (f"{LAYER}.attention.LayerNorm.weight", f"{BLOCK}/LayerNorm/gamma", False),
    (f"{LAYER}.attention.LayerNorm.bias", f"{BLOCK}/LayerNorm/beta", False),
    (f"{LAYER}.ffn.weight", f"{BLOCK}/ffn_1/intermediate/dense/kernel", True),
    (f"{LAYER}.ffn.bias", f"{BLOCK}/ffn_1/intermediate/dense/bias", False),
    (f"{LAYER}.ffn_output.weight", f"{BLOCK}/ffn_1/intermediate/output/dense/kernel", True),
    (f"{LAYER}.ffn_output.bias", f"{BLOCK}/ffn_1/intermediate/output/dense/bias", False),
    (f"{LAYER}.full_layer_layer_norm.weight", f"{BLOCK}/LayerNorm_1/gamma", False),
    (f"{LAYER}.full_layer_layer_norm.bias", f"{BLOCK}/LayerNorm_1/beta", False),
    ("pooler.weight", "bert/pooler/dense/kernel", True),
    ("pooler.bias", "bert/pooler/dense/bias", False),
    ("predictions.dense.weight", "cls/predictions/transform/dense/kernel", True),
    ("predictions.dense.bias", "cls/predictions/transform/dense/bias", False),
    ("predictions.LayerNorm.weight", "cls/predictions/transform/LayerNorm/gamma", False),
    ("predictions.LayerNorm.bias", "cls/predictions/transform/LayerNorm/beta", False),
    ("predictions.bias", "cls/predictions/output_bias", False),
    # The SOP classifier's torch weight [2, H] is already the original's output_weights layout.
    ("sop_classifier.classifier.weight", "cls/seq_relationship/output_weights", False),
    ("sop_classifier.classifier.bias", "cls/seq_relationship/output_bias", False),
)

# Tied copies Hugging Face may also store: name -> the Hugging Face name they must equal.
TIED_COPIES = {
    "predictions.decoder.weight": "embeddings.word_embeddings.weight",
    "predictions.decoder.bias": "predictions.bias",
}
# Non-persistent buffers that older transformers versions saved.
_BUFFERS = re.compile(r"^(embeddings\.position_ids|embeddings\.token_type_ids)$")

# hidden_act in a Hugging Face config -> ours. HF "gelu" is the erf form, "gelu_new" the tanh one.
HF_ACTIVATIONS = {
    "gelu": "gelu_exact",
    "gelu_new": "gelu",
    "gelu_pytorch_tanh": "gelu",
    "relu": "relu",
    "tanh": "tanh",
    "swish": "swish",
    "silu": "silu",
    "linear": "linear",
}
_OUR_TO_HF_ACTIVATION = {"gelu": "gelu_new", "gelu_new": "gelu_new", "gelu_exact": "gelu"}


def _compile(template: str, escape) -> re.Pattern:
    pattern = escape(template)
    for field in ("g", "k"):
        pattern = pattern.replace(escape("{" + field + "}"), rf"(?P<{field}>\d+)")
    return re.compile(f"^{pattern}$")


_FORWARD = [(_compile(hf, re.escape), orig, t) for hf, orig, t in HF_NAME_TABLE]
_BACKWARD = [(_compile(orig, re.escape), hf, t) for hf, orig, t in HF_NAME_TABLE]


def hf_to_original_name(name: str) -> Optional[Tuple[str, bool]]:
    """(original name, transpose) for a Hugging Face name without the `albert.` prefix, or None."""
    for pattern, template, transpose in _FORWARD:
        match = pattern.match(name)
        if match:
            return template.format(**match.groupdict()), transpose
    return None


def original_to_hf_name(name: str) -> Optional[Tuple[str, bool]]:
    """(Hugging Face name without prefix, transpose) for an original name, or None (e.g. `layer_{l}`)."""
    for pattern, template, transpose in _BACKWARD:
        match = pattern.match(name)
        if match:
            return template.format(**match.groupdict()), transpose
    return None


# --- config -----------------------------------------------------------------------------------


def config_from_huggingface(config: Mapping[str, Any] | str | os.PathLike, **overrides) -> AlbertConfig:
    """An `AlbertConfig` from a Hugging Face ALBERT `config.json` (a dict, a file, or its directory).

    Args:
        config: the parsed JSON object, or a path to `config.json` or to a directory holding it.
        **overrides: `AlbertConfig` fields to set after the mapping.

    Raises:
        ConfigError: for a malformed file, a non-ALBERT model type, or settings we do not
            implement (non-absolute position embeddings, a LayerNorm epsilon other than 1e-12).
    """
    if not isinstance(config, Mapping):
        path = os.fspath(config)
        if os.path.isdir(path):
            path = os.path.join(path, "config.json")
        try:
            with open(path, encoding="utf-8") as f:
                config = json.load(f)
        except FileNotFoundError:
            raise ConfigError(f"Hugging Face config not found: {path}") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ConfigError(f"{path} is not valid JSON: {e}") from None
        if not isinstance(config, Mapping):
            raise ConfigError(f"{path}: a config must be a JSON object, got {type(config).__name__}")
    model_type = config.get("model_type", "albert")
    if model_type != "albert":
        raise ConfigError(f"not an ALBERT config: model_type is {model_type!r}")
    position_type = config.get("position_embedding_type", "absolute")
    if position_type != "absolute":
        raise ConfigError(f"position_embedding_type {position_type!r} is not supported (only 'absolute')")
    epsilon = config.get("layer_norm_eps", 1e-12)
    if not isinstance(epsilon, (int, float)) or abs(epsilon - 1e-12) > 1e-15:
        raise ConfigError(f"layer_norm_eps {epsilon!r} is not supported: the ALBERT LayerNorms use 1e-12")
    act = config.get("hidden_act", "gelu_new")
    if act not in HF_ACTIVATIONS:
        raise ConfigError(f"unsupported hidden_act {act!r}; expected one of {', '.join(HF_ACTIVATIONS)}")
    required = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")
    missing = [k for k in required if k not in config]
    if missing:
        raise ConfigError(f"Hugging Face config is missing required key(s): {', '.join(missing)}")
    # Hugging Face's AlbertConfig defaults, for keys a config.json may leave out.
    fields = dict(
        vocab_size=config["vocab_size"],
        embedding_size=config.get("embedding_size", 128),
        hidden_size=config["hidden_size"],
        num_hidden_layers=config["num_hidden_layers"],
        num_hidden_groups=config.get("num_hidden_groups", 1),
        inner_group_num=config.get("inner_group_num", 1),
        num_attention_heads=config["num_attention_heads"],
        intermediate_size=config["intermediate_size"],
        hidden_act=HF_ACTIVATIONS[act],
        hidden_dropout_prob=config.get("hidden_dropout_prob", 0.0),
        attention_probs_dropout_prob=config.get("attention_probs_dropout_prob", 0.0),
        max_position_embeddings=config.get("max_position_embeddings", 512),
        type_vocab_size=config.get("type_vocab_size", 2),
        initializer_range=config.get("initializer_range", 0.02),
        sharing="all",
    )
    fields.update(overrides)
    return AlbertConfig(**fields)


def config_to_huggingface(config: AlbertConfig) -> Dict[str, Any]:
    """The Hugging Face `config.json` object for an `AlbertConfig` (original sharing only)."""
    if config.sharing != "all":
        raise ConfigError(f"Hugging Face ALBERT has no sharing={config.sharing!r}; only 'all' can be exported")
    act = _OUR_TO_HF_ACTIVATION.get(config.hidden_act, config.hidden_act)
    return {
        "architectures": ["AlbertForPreTraining"],
        "model_type": "albert",
        "vocab_size": config.vocab_size,
        "embedding_size": config.embedding_size,
        "hidden_size": config.hidden_size,
        "num_hidden_layers": config.num_hidden_layers,
        "num_hidden_groups": config.num_hidden_groups,
        "inner_group_num": config.inner_group_num,
        "num_attention_heads": config.num_attention_heads,
        "intermediate_size": config.intermediate_size,
        "hidden_act": act,
        "hidden_dropout_prob": config.hidden_dropout_prob,
        "attention_probs_dropout_prob": config.attention_probs_dropout_prob,
        "max_position_embeddings": config.max_position_embeddings,
        "type_vocab_size": config.type_vocab_size,
        "initializer_range": config.initializer_range,
        "layer_norm_eps": 1e-12,
        "position_embedding_type": "absolute",
    }


# --- reading ----------------------------------------------------------------------------------


def _load_safetensors(path: str) -> Dict[str, np.ndarray]:
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    try:
        return load_file(path)
    except TypeError as e:
        if "bfloat16" not in str(e):
            raise CheckpointError(f"cannot read safetensors file {path}: {type(e).__name__}: {e}") from None
    except (SafetensorError, OSError, ValueError) as e:
        raise CheckpointError(f"cannot read safetensors file {path}: {type(e).__name__}: {e}") from None
    # NumPy has no bfloat16, but TensorFlow does and hands back ml_dtypes arrays; values are
    # cast to the variables' dtype on assignment.
    from safetensors.tensorflow import load_file as load_file_tf

    try:
        return {name: tensor.numpy() for name, tensor in load_file_tf(path).items()}
    except (SafetensorError, OSError, ValueError, TypeError) as e:
        raise CheckpointError(f"cannot read safetensors file {path}: {type(e).__name__}: {e}") from None


def read_huggingface_weights(source: Mapping[str, Any] | str | os.PathLike) -> Dict[str, np.ndarray]:
    """A Hugging Face state dict as NumPy arrays, from any accepted source (see the module docstring).

    Raises:
        CheckpointError: for a missing, unreadable or unsupported file, or non-array values.
    """
    if isinstance(source, Mapping):
        weights = dict(source)
    else:
        path = os.fspath(source)
        if os.path.isdir(path):
            single = os.path.join(path, "model.safetensors")
            index = os.path.join(path, "model.safetensors.index.json")
            if os.path.exists(single):
                path = single
            elif os.path.exists(index):
                return _read_sharded(index)
            else:
                raise CheckpointError(f"no model.safetensors or model.safetensors.index.json in {path}")
        if not os.path.exists(path):
            raise CheckpointError(f"Hugging Face weights not found: {path}")
        if path.endswith(".safetensors"):
            weights = _load_safetensors(path)
        elif path.endswith(".npz"):
            try:
                with np.load(path, allow_pickle=False) as archive:
                    weights = {name: archive[name] for name in archive.files}
            except (OSError, ValueError, EOFError) as e:
                raise CheckpointError(f"cannot read .npz state dict {path}: {type(e).__name__}: {e}") from None
        elif path.endswith(".index.json"):
            return _read_sharded(path)
        elif path.endswith((".bin", ".pt", ".pth")):
            raise CheckpointError(
                f"{path} is a PyTorch pickle, which is not read (it can execute code); "
                f"convert it to .safetensors first"
            )
        else:
            raise CheckpointError(f"unsupported Hugging Face weights file {path}: expected .safetensors or .npz")
    out = {}
    for name, value in weights.items():
        if not isinstance(name, str):
            raise CheckpointError(f"state-dict keys must be strings, got {name!r}")
        try:
            out[name] = np.asarray(value)
        except Exception as e:  # e.g. a torch tensor on an accelerator, or a ragged list.
            raise CheckpointError(f"{name}: cannot convert {type(value).__name__} to a NumPy array: {e}") from None
        if out[name].dtype == object:
            raise CheckpointError(f"{name}: not a numeric array")
    return out


def _read_sharded(index_path: str) -> Dict[str, np.ndarray]:
    try:
        with open(index_path, encoding="utf-8") as f:
            weight_map = json.load(f)["weight_map"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise CheckpointError(f"cannot read safetensors index {index_path}: {type(e).__name__}: {e}") from None
    directory = os.path.dirname(index_path)
    weights: Dict[str, np.ndarray] = {}
    for shard in sorted(set(weight_map.values())):
        weights.update(_load_safetensors(os.path.join(directory, shard)))
    absent = sorted(set(weight_map) - set(weights))
    if absent:
        raise CheckpointError(f"{index_path} lists tensors its shards lack: {', '.join(absent)}")
    return weights


# --- loading ----------------------------------------------------------------------------------


def load_huggingface_weights(
    path_or_dict: Mapping[str, Any] | str | os.PathLike,
    encoder,
    mlm_head=None,
    sop_head=None,
    strict: bool = True,
) -> LoadReport:
    """Loads Hugging Face ALBERT weights into the model (names in the report are Hugging Face's).

    Args:
        path_or_dict: a `.safetensors` / `.npz` file, a model directory, or a dict of arrays.
        encoder: an `AlbertEncoder` with `sharing="all"` whose config matches the weights.
        mlm_head: optional `AlbertMLMHead` for `predictions.*`.
        sop_head: optional `AlbertSOPHead` for `sop_classifier.classifier.*`.
        strict: raise `CheckpointError` naming every missing, unexpected, mis-shaped or
            inconsistent (tied) tensor instead of loading what matches.

    Returns:
        The `LoadReport`.
    """
    if encoder.sharing != "all":
        raise CheckpointError(
            f"Hugging Face ALBERT only has the original sharing scheme; the encoder has sharing={encoder.sharing!r}"
        )
    weights = read_huggingface_weights(path_or_dict)
    source = path_or_dict if not isinstance(path_or_dict, Mapping) else "state dict"
    # AlbertModel saves bare names; the task models prefix the encoder's with `albert.`.
    prefixed = any(name.startswith(ENCODER_PREFIX) for name in weights)
    stripped: Dict[str, Tuple[str, np.ndarray]] = {}
    for name, value in weights.items():
        bare = name[len(ENCODER_PREFIX) :] if name.startswith(ENCODER_PREFIX) else name
        if bare in stripped:
            raise CheckpointError(f"{source} holds both {stripped[bare][0]} and {name}")
        stripped[bare] = (name, value)

    values: Dict[str, np.ndarray] = {}
    display: Dict[str, str] = {}
    unexpected: List[str] = []
    skipped: List[str] = []
    conflicts: List[Tuple[str, str]] = []
    for bare, (name, value) in stripped.items():
        if _BUFFERS.match(bare):
            skipped.append(name)
            continue
        if bare in TIED_COPIES:
            continue
        target = hf_to_original_name(bare)
        if target is None:
            unexpected.append(name)
            continue
        original, transpose = target
        values[original] = np.ascontiguousarray(value.T) if transpose and value.ndim == 2 else value
        display[original] = name

    for copy, tied_to in TIED_COPIES.items():
        if copy not in stripped:
            continue
        copy_name, copy_value = stripped[copy]
        if tied_to in stripped:
            tied_name, tied_value = stripped[tied_to]
            if tied_value.shape != copy_value.shape or not np.array_equal(tied_value, copy_value):
                conflicts.append((copy_name, f"differs from {tied_name}, to which it is tied"))
            else:
                skipped.append(copy_name)
        elif copy == "predictions.decoder.bias":
            # save_pretrained may keep only the decoder's copy of the shared bias.
            values["cls/predictions/output_bias"] = copy_value
            display["cls/predictions/output_bias"] = copy_name
        else:
            conflicts.append((copy_name, f"present without {tied_to}, to which it is tied"))

    head_prefixes = ("predictions.", "sop_classifier.")

    def display_name(original: str) -> str:
        if original in display:
            return display[original]
        hf = original_to_hf_name(original)
        if hf is None:
            return original
        bare = hf[0]
        return bare if bare.startswith(head_prefixes) or not prefixed else ENCODER_PREFIX + bare

    return assign_original_weights(
        values,
        encoder,
        mlm_head,
        sop_head,
        strict,
        skipped=skipped,
        unexpected=unexpected,
        conflicts=conflicts,
        display_name=display_name,
        source=f"Hugging Face weights {source}",
    )


# --- exporting --------------------------------------------------------------------------------


def export_huggingface_weights(
    encoder, mlm_head=None, sop_head=None, prefix: Optional[str] = None, include_tied: bool = False
) -> Dict[str, np.ndarray]:
    """The model as a Hugging Face ALBERT state dict of float32 NumPy arrays.

    Args:
        encoder: an `AlbertEncoder` with `sharing="all"`.
        mlm_head, sop_head: optional heads (`predictions.*`, `sop_classifier.classifier.*`).
        prefix: put before the encoder's names; default `"albert."` when a head is given (as
            AlbertForPreTraining / AlbertForMaskedLM save), else `""` (as AlbertModel does).
        include_tied: also write `predictions.decoder.{weight,bias}`, the tied copies that
            `save_pretrained` leaves out.
    """
    if encoder.sharing != "all":
        raise CheckpointError(
            f"Hugging Face ALBERT only has the original sharing scheme; the encoder has sharing={encoder.sharing!r}"
        )
    if prefix is None:
        prefix = ENCODER_PREFIX if (mlm_head is not None or sop_head is not None) else ""
    out: Dict[str, np.ndarray] = {}
    for original, variable in original_variable_map(encoder, mlm_head, sop_head).items():
        hf = original_to_hf_name(original)
        if hf is None:  # the table covers every variable of a sharing="all" model
            raise CheckpointError(f"no Hugging Face name for {original}")
        bare, transpose = hf
        value = np.asarray(variable.numpy()).astype(np.float32, copy=False)
        name = bare if bare.startswith(("predictions.", "sop_classifier.")) else prefix + bare
        out[name] = np.ascontiguousarray(value.T if transpose else value)
    if include_tied and mlm_head is not None:
        out["predictions.decoder.weight"] = out[prefix + "embeddings.word_embeddings.weight"].copy()
        out["predictions.decoder.bias"] = out["predictions.bias"].copy()
    return out


def save_huggingface_safetensors(
    path: str | os.PathLike,
    encoder,
    mlm_head=None,
    sop_head=None,
    prefix: Optional[str] = None,
    include_tied: bool = False,
) -> str:
    """Writes `export_huggingface_weights(...)` as a `.safetensors` file, atomically.

    The file carries `{"format": "pt"}` metadata, which `transformers`' `from_pretrained` requires.

    Returns:
        The path written.
    """
    from safetensors.numpy import save_file

    path = os.fspath(path)
    if os.path.isdir(path):
        path = os.path.join(path, "model.safetensors")
    tensors = export_huggingface_weights(encoder, mlm_head, sop_head, prefix=prefix, include_tied=include_tied)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    with file_io.atomic_output(path) as tmp:
        save_file(tensors, tmp, metadata={"format": "pt"})
    return path
