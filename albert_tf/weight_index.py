"""The weight index of an export, so that a served version is a checkpoint again.

A TF Serving export checkpoints the variables its signatures read as `exported_variables/<i>`,
sorted by variable name. Keras 3's variable names are short and repeat (`kernel`, `bias`), so
that order alone cannot say which weight is which. `assets/weights.json` records, for each i,
the weight's index and path in the exported model's `weights` and, for an encoder weight, its
index in the encoder's `weights`. With it, `from_pretrained`, `finetune --init` and the
pipeline's warm start read the encoder, or the whole task model, back from a pushed version.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any, Dict, Optional, Sequence

from albert_tf.legacy_names import current_layer_path

WEIGHT_INDEX_ASSET = "weights.json"
EXPORT_INFO_ASSET = "export.json"
_FORMAT = 1
_VARIABLE_KEY = "exported_variables/{}/.ATTRIBUTES/VARIABLE_VALUE"
_SUFFIX = re.compile(r"_\d+(?=/|$)")
# What to read back: the encoder, the whole task model, or the task model's head (its weights
# outside the encoder).
ENCODER, MODEL, HEAD = "encoder", "model", "head"


class ExportWeightsError(ValueError):
    """An export whose weights cannot be read back into the model given (no index, another
    architecture)."""


# `export.json`'s "kind" is the task kind (`TaskSpec.kind`; SQuAD's with its version). Exports
# written before it was read older names.
_RENAMED_EXPORT_KINDS = {"classifier": "classification", "regressor": "regression", "tagger": "tagging"}


def read_export_info(directory: str) -> Dict[str, Any]:
    """The `assets/export.json` of an exported version, its "kind" in today's names."""
    with open(os.path.join(directory, "assets", EXPORT_INFO_ASSET), encoding="utf-8") as f:
        info = json.load(f)
    if isinstance(info, dict) and info.get("kind") in _RENAMED_EXPORT_KINDS:
        info["kind"] = _RENAMED_EXPORT_KINDS[info["kind"]]
    return info


def is_export(directory: str) -> bool:
    """Whether `directory` is an albert-tf TF Serving version (`saved_model.pb` + `assets/export.json`)."""
    return os.path.isfile(os.path.join(directory, "saved_model.pb")) and os.path.isfile(
        os.path.join(directory, "assets", EXPORT_INFO_ASSET)
    )


def weight_index(exported_variables: Sequence[Any], model, encoder) -> Dict[str, Any]:
    """The index of `exported_variables` (the `ServingModule`'s, in checkpoint order) in `model`
    and `encoder` (`model` itself for an encoder export)."""
    # Outside an autocast scope a Keras variable's `value` is the tf.Variable the functions capture.
    in_model = {id(w.value): (j, w.path) for j, w in enumerate(model.weights)}
    in_encoder = {id(w.value): k for k, w in enumerate(encoder.weights)}
    entries = []
    for variable in exported_variables:
        j, path = in_model.get(id(variable), (None, None))
        entries.append({MODEL: j, ENCODER: in_encoder.get(id(variable)), "path": path,
                        "shape": [int(d) for d in variable.shape]})
    return {"format": _FORMAT, "model_class": type(model).__name__, "model_weights": len(model.weights),
            "encoder_weights": len(encoder.weights), "variables": entries}


def write_weight_index(assets_dir: str, exported_variables: Sequence[Any], model, encoder) -> str:
    path = os.path.join(assets_dir, WEIGHT_INDEX_ASSET)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(weight_index(exported_variables, model, encoder), f, indent=1, sort_keys=True)
        f.write("\n")
    return path


def read_weight_index(version_dir: str) -> Dict[str, Any]:
    path = os.path.join(version_dir, "assets", WEIGHT_INDEX_ASSET)
    try:
        with open(path, encoding="utf-8") as f:
            index = json.load(f)
    except FileNotFoundError:
        raise ExportWeightsError(
            f"{version_dir} was exported without assets/{WEIGHT_INDEX_ASSET} (by an albert-tf older than its "
            "weight index), so its weights cannot be read back; export the model again, or pass the directory it "
            "was exported from"
        ) from None
    except (OSError, ValueError) as e:
        raise ExportWeightsError(f"{path} is not readable: {e}") from None
    if not isinstance(index, dict) or index.get("format") != _FORMAT or not isinstance(index.get("variables"), list):
        raise ExportWeightsError(f"{path} is not an albert-tf weight index of format {_FORMAT}")
    return index


def _selected(entry: Dict[str, Any], part: str) -> Optional[int]:
    """The entry's index in the weights of `part`'s target, None when it is not part of it."""
    if part == HEAD:
        return entry.get(MODEL) if entry.get(ENCODER) is None else None
    return entry.get(part)


def _layer_path(path: Optional[str]) -> str:
    """A weight's path without Keras's uniquifying suffixes (`attention_1/query` -> `attention/query`),
    which depend on what else the process built, and in today's names where a renamed head class
    gave an export's head its name (`albert_tf.legacy_names`)."""
    return current_layer_path(_SUFFIX.sub("", path or ""))


def export_weight_values(version_dir: str, part: str) -> Dict[int, Any]:
    """`{index in the target's weights: (path, value)}` of the export's variables of `part`
    ("encoder": indices in the encoder's weights; "model" and "head": in the task model's)."""
    import tensorflow as tf

    if part not in (ENCODER, MODEL, HEAD):
        raise ValueError(f"part must be {ENCODER!r}, {MODEL!r} or {HEAD!r}, got {part!r}")
    index = read_weight_index(version_dir)
    reader = tf.train.load_checkpoint(os.path.join(version_dir, "variables", "variables"))
    values = {}
    for i, entry in enumerate(index["variables"]):
        selected = _selected(entry, part)
        if selected is not None:
            values[int(selected)] = (entry.get("path"), reader.get_tensor(_VARIABLE_KEY.format(i)))
    return values


def load_export_weights(version_dir: str, target, part: str = MODEL) -> Dict[str, Any]:
    """Assigns the export's weights of `part` to `target` (a model of the exported architecture:
    the task model for "model" and "head", an `AlbertEncoder` for "encoder").

    Returns:
        `{"loaded": [paths], "missing": [paths]}`: the target's weights of `part` the export did
        not hold are those its signatures never read (a pooler no head uses); they keep their
        values, as do the encoder's weights when only the head is read.

    Raises:
        ExportWeightsError: no index, or a target of another architecture (nothing is assigned).
    """
    index = read_weight_index(version_dir)
    weights = target.weights
    expected = index["encoder_weights" if part == ENCODER else "model_weights"]
    if len(weights) != expected:
        what = "encoder" if part == ENCODER else index["model_class"]
        raise ExportWeightsError(
            f"{version_dir} holds an {what} of {expected} weights; the {type(target).__name__} given has "
            f"{len(weights)}: not the exported architecture"
        )
    values = export_weight_values(version_dir, part)
    problems = [
        f"{weights[k].path}: export {path} {list(v.shape)} vs model {list(weights[k].shape)}"
        for k, (path, v) in sorted(values.items())
        if tuple(v.shape) != tuple(weights[k].shape) or _layer_path(path) != _layer_path(weights[k].path)
    ]
    if problems:
        raise ExportWeightsError(f"{version_dir} does not fit the {type(target).__name__}: " + "; ".join(problems[:3]))
    for k, (_, value) in values.items():
        weights[k].assign(value)
    skip = {id(w) for w in target.encoder.weights} if part == HEAD else set()
    return {"loaded": [weights[k].path for k in sorted(values)],
            "missing": [w.path for k, w in enumerate(weights) if k not in values and id(w) not in skip]}
