"""`init_encoder`: initialise an encoder from any checkpoint kind this project reads or writes.

One function detects what `init_path` is and loads the encoder weights from it:

=========================================  =====================================================
`init_path`                                 kind
=========================================  =====================================================
``*.keras`` file                           a saved `AlbertEncoder`, `AlbertPretrainer`, task
                                           model (its `.encoder`), or keras-hub `AlbertBackbone`
                                           (or a keras-hub task holding one)
``*.weights.h5`` file                      weights saved by `AlbertEncoder.save_weights`
``*.safetensors`` / ``*.npz`` /            Hugging Face ALBERT weights (bare `AlbertModel` or a
``*.safetensors.index.json``                task model's ``albert.*`` tensors)
checkpoint prefix, ``.index`` or           an original TF1 checkpoint (``bert/...`` names, also
``.data-*`` file                           TF-Hub's ``module/`` scope and our own exports), or a
                                           TF2 checkpoint of `run_pretraining` (object-based)
directory                                  a fine-tuning output (``COMPLETE`` + ``model.keras``),
                                           a pretraining output (``encoder.keras``, else its
                                           newest ``checkpoints/`` entry), a Hugging Face model
                                           directory, a keras-hub preset directory, an
                                           albert-tf TF Serving version (its
                                           ``assets/weights.json``), or a directory of a TF1
                                           checkpoint
=========================================  =====================================================

Only encoder weights are taken; pretraining or task heads in the source are ignored. Every
encoder variable must be found with the right shape, else `CheckpointError` lists what does not
fit (nothing is assigned then). `config_from_init(init_path)` reads the architecture stored with
a checkpoint, so a run can start from a checkpoint without naming its config.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
from typing import Optional

import numpy as np

from albert_tf.checkpoints.original import (
    CheckpointError,
    LoadReport,
    assign_original_weights,
    original_variable_map,
    resolve_checkpoint_prefix,
)
from albert_tf.config import AlbertConfig, ConfigError, load_config

# Modules whose Keras classes a saved `.keras` file may contain; imported before loading one.
# The task modules of other tasks are optional: a module that is not installed is passed over.
_SERIALIZABLE_MODULES = (
    "albert_tf.modeling",
    "albert_tf.pretrainer",
    "albert_tf.tasks.classification.head",
    "albert_tf.tasks.tagging.head",
    "albert_tf.tasks.squad.head",
    "albert_tf.tasks.multiple_choice.head",
    "albert_tf.tasks.classification.text_model",
    "albert_tf.tasks.tagging.text_model",
    "albert_tf.tasks.squad.text_model",
    "albert_tf.tasks.multiple_choice.text_model",
)
PRETRAINING_RUN_CONFIG = "run_config.json"
PRETRAINING_CHECKPOINTS = "checkpoints"
PRETRAINING_ENCODER = "encoder.keras"
FINETUNED_MODEL = "model.keras"
FINETUNED_MARKER = "COMPLETE"
ORIGINAL_CONFIG = "albert_config.json"


@dataclasses.dataclass
class InitResult:
    """What `init_encoder` loaded.

    Attributes:
        kind: "keras", "weights_h5", "huggingface", "keras_hub", "original", "pretraining_checkpoint",
            "export".
        source: The file or checkpoint prefix actually read.
        report: The `LoadReport` of the name-by-name assignment (None for kinds that load by
            structure: keras-hub and `.weights.h5`).
    """

    kind: str
    source: str
    report: Optional[LoadReport] = None


def register_saved_classes() -> None:
    """Imports the modules that register the Keras classes `.keras` files of this project use."""
    for name in _SERIALIZABLE_MODULES:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name != name:
                raise


def _check_report(report: LoadReport, source: str) -> LoadReport:
    """Every encoder variable must have been found; source variables beyond them (heads) are fine."""
    problems = [f"missing: {n}" for n in report.missing]
    problems += [f"shape mismatch: {n}: source {list(s)} vs encoder {list(d)}" for n, s, d in report.shape_mismatches]
    problems += [f"conflict: {n}: {r}" for n, r in report.conflicts]
    if problems:
        raise CheckpointError(
            f"{source} does not fit the encoder ({len(problems)} problem(s)); is --config the checkpoint's "
            f"architecture?\n  " + "\n  ".join(problems)
        )
    return report


def copy_encoder_weights(source_encoder, encoder, source: str = "source encoder") -> LoadReport:
    """Copies the weights of one `AlbertEncoder` into another of the same architecture (dropout,
    precision and name may differ). Variables are paired by their original checkpoint names."""
    values = {name: np.asarray(variable.numpy()) for name, variable in original_variable_map(source_encoder).items()}
    report = assign_original_weights(values, encoder, strict=False, source=source)
    return _check_report(report, source)


def _is_keras_hub_backbone(obj) -> bool:
    return type(obj).__name__ == "AlbertBackbone" and type(obj).__module__.startswith("keras_hub")


def _load_from_object(obj, encoder, source: str) -> InitResult:
    from albert_tf.checkpoints.keras_hub import load_keras_hub_backbone
    from albert_tf.modeling import AlbertEncoder

    if _is_keras_hub_backbone(obj) or _is_keras_hub_backbone(getattr(obj, "backbone", None)):
        backbone = obj if _is_keras_hub_backbone(obj) else obj.backbone
        load_keras_hub_backbone(encoder, backbone)
        return InitResult("keras_hub", source)
    candidate = obj if isinstance(obj, AlbertEncoder) else getattr(obj, "encoder", None)
    if not isinstance(candidate, AlbertEncoder):
        raise CheckpointError(
            f"{source} holds a {type(obj).__name__}, which is neither an AlbertEncoder nor a model with one"
        )
    return InitResult("keras", source, copy_encoder_weights(candidate, encoder, source))


def _load_keras_file(path: str, encoder) -> InitResult:
    import keras

    register_saved_classes()
    try:
        import keras_hub  # noqa: F401 - registers keras-hub classes for its .keras files
    except ImportError:
        pass
    try:
        obj = keras.saving.load_model(path, compile=False)
    except (ValueError, TypeError, OSError, KeyError) as e:
        raise CheckpointError(f"cannot load {path}: {type(e).__name__}: {e}") from None
    return _load_from_object(obj, encoder, path)


def _load_weights_h5(path: str, encoder) -> InitResult:
    try:
        encoder.load_weights(path)
    except (ValueError, OSError, KeyError) as e:
        raise CheckpointError(f"cannot load encoder weights {path}: {type(e).__name__}: {e}") from None
    return InitResult("weights_h5", path)


def _load_huggingface(path: str, encoder) -> InitResult:
    from albert_tf.checkpoints.huggingface import load_huggingface_weights

    report = load_huggingface_weights(path, encoder, strict=False)
    return InitResult("huggingface", path, _check_report(report, path))


def _is_keras_hub_preset(directory: str) -> bool:
    config_path = os.path.join(directory, "config.json")
    if not (os.path.isfile(config_path) and os.path.isfile(os.path.join(directory, "model.weights.h5"))):
        return False
    try:
        with open(config_path, encoding="utf-8") as f:
            config = json.load(f)
    except (OSError, ValueError):
        return False
    return isinstance(config, dict) and "keras_hub" in str(config.get("registered_name", ""))


def _load_keras_hub_preset(directory: str, encoder) -> InitResult:
    import keras_hub

    from albert_tf.checkpoints.keras_hub import load_keras_hub_backbone

    backbone = keras_hub.models.Backbone.from_preset(directory)
    if not _is_keras_hub_backbone(backbone):
        raise CheckpointError(f"{directory} is a keras-hub preset of a {type(backbone).__name__}, not an AlbertBackbone")
    load_keras_hub_backbone(encoder, backbone)
    return InitResult("keras_hub", directory)


def _checkpoint_names(prefix: str):
    import tensorflow as tf

    try:
        return tf.train.load_checkpoint(prefix).get_variable_to_shape_map()
    except Exception as e:  # TF raises several error types for unreadable checkpoints.
        raise CheckpointError(f"cannot read checkpoint {prefix}: {type(e).__name__}: {e}") from None


def _pretraining_config(run_dir: str, encoder) -> AlbertConfig:
    """The architecture of a pretraining run: its `run_config.json`, else the target's."""
    path = os.path.join(run_dir, PRETRAINING_RUN_CONFIG)
    if not os.path.isfile(path):
        return encoder.to_albert_config()
    try:
        with open(path, encoding="utf-8") as f:
            model_config = json.load(f)["model_config"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise CheckpointError(f"cannot read the model config of the pretraining run in {path}: {e}") from None
    try:
        if isinstance(model_config, dict):
            return AlbertConfig.from_dict(model_config)
        return load_config(str(model_config))
    except ConfigError as e:
        raise CheckpointError(f"{path}: {e}") from None


def _load_pretraining_checkpoint(prefix: str, encoder) -> InitResult:
    """Restores a `run_pretraining` TF2 checkpoint (the lists of model and optimizer variables)
    into a pretrainer of the run's architecture, then copies its encoder."""
    import tensorflow as tf

    from albert_tf.modeling import AlbertEncoder
    from albert_tf.pretrainer import AlbertPretrainer

    run_dir = os.path.dirname(os.path.dirname(os.path.abspath(prefix)))
    config = _pretraining_config(run_dir, encoder)
    sentence_task = "sop"
    run_config_path = os.path.join(run_dir, PRETRAINING_RUN_CONFIG)
    if os.path.isfile(run_config_path):
        with open(run_config_path, encoding="utf-8") as f:
            sentence_task = json.load(f).get("sentence_task", "sop")
    pretrainer = AlbertPretrainer(AlbertEncoder.from_albert_config(config), sentence_task=sentence_task)
    dummy = {
        "input_ids": np.zeros((1, 4), "int32"),
        "input_mask": np.ones((1, 4), "int32"),
        "segment_ids": np.zeros((1, 4), "int32"),
        "masked_lm_positions": np.zeros((1, 1), "int32"),
    }
    pretrainer(dummy, training=False)
    variables = list(pretrainer.variables)
    shapes = _checkpoint_names(prefix)
    for index, variable in enumerate(variables):
        key = f"model/{index}/.ATTRIBUTES/VARIABLE_VALUE"
        if key not in shapes:
            raise CheckpointError(
                f"{prefix} has no {key}: not a checkpoint of a pretraining run with this architecture "
                f"({len(variables)} model variables expected)"
            )
        if tuple(shapes[key]) != tuple(variable.shape):
            raise CheckpointError(
                f"{prefix}: model variable {index} ({variable.path}) has shape {list(shapes[key])} in the "
                f"checkpoint but {list(variable.shape)} in the run's architecture"
            )
    tf.train.Checkpoint(model=variables).read(prefix).expect_partial()
    report = copy_encoder_weights(pretrainer.encoder, encoder, prefix)
    return InitResult("pretraining_checkpoint", prefix, report)


def _load_checkpoint_prefix(prefix: str, encoder) -> InitResult:
    from albert_tf.checkpoints.original import load_original_checkpoint

    names = _checkpoint_names(prefix)
    if any(n.startswith("model/") and "/.ATTRIBUTES/" in n for n in names) and not any(
        n.startswith(("bert/", "module/bert/")) for n in names
    ):
        return _load_pretraining_checkpoint(prefix, encoder)
    report = load_original_checkpoint(prefix, encoder, strict=False)
    return InitResult("original", prefix, _check_report(report, prefix))


def _load_export(directory: str, encoder) -> InitResult:
    from albert_tf.weight_index import ENCODER, ExportWeightsError, load_export_weights

    try:
        loaded = load_export_weights(directory, encoder, ENCODER)
    except ExportWeightsError as e:
        raise CheckpointError(str(e)) from None
    # An encoder weight no signature reads (the pooler of a tagger) is not in the export.
    unread = [path for path in loaded["missing"] if "pooler" not in path]
    if unread:
        raise CheckpointError(f"{directory} lacks encoder weights: {', '.join(unread)}")
    return InitResult("export", directory, LoadReport(loaded=loaded["loaded"], missing=loaded["missing"]))


def is_tfhub_module(directory: str) -> bool:
    """Whether `directory` is a TF-Hub module (TF1 Hub format): its checkpoint is `variables/`,
    beside no checkpoint of its own, and it is no albert-tf export."""
    from albert_tf.weight_index import is_export

    return (
        os.path.isfile(os.path.join(directory, "variables", "variables.index"))
        and not any(n.endswith(".index") for n in os.listdir(directory))
        and not is_export(directory)
    )


def _load_directory(directory: str, encoder) -> InitResult:
    from albert_tf.weight_index import is_export

    if is_export(directory):
        return _load_export(directory, encoder)
    if is_tfhub_module(directory):
        return _load_checkpoint_prefix(os.path.join(directory, "variables", "variables"), encoder)
    if os.path.isfile(os.path.join(directory, FINETUNED_MARKER)) and os.path.isfile(os.path.join(directory, FINETUNED_MODEL)):
        return _load_keras_file(os.path.join(directory, FINETUNED_MODEL), encoder)
    if os.path.isfile(os.path.join(directory, PRETRAINING_ENCODER)):
        return _load_keras_file(os.path.join(directory, PRETRAINING_ENCODER), encoder)
    if os.path.isfile(os.path.join(directory, "model.safetensors")) or os.path.isfile(
        os.path.join(directory, "model.safetensors.index.json")
    ):
        return _load_huggingface(directory, encoder)
    if _is_keras_hub_preset(directory):
        return _load_keras_hub_preset(directory, encoder)
    checkpoints = os.path.join(directory, PRETRAINING_CHECKPOINTS)
    if os.path.isdir(checkpoints):
        return _load_checkpoint_prefix(resolve_checkpoint_prefix(checkpoints), encoder)
    try:
        prefix = resolve_checkpoint_prefix(directory)
    except CheckpointError:
        raise CheckpointError(
            f"{directory} holds no checkpoint this project reads: no fine-tuning output (COMPLETE, model.keras), "
            f"pretraining output (encoder.keras or checkpoints/), Hugging Face model.safetensors, keras-hub "
            f"preset (config.json + model.weights.h5), or TF checkpoint (*.index)"
        ) from None
    return _load_checkpoint_prefix(prefix, encoder)


def init_encoder(encoder, init_path: str) -> InitResult:
    """Loads the encoder weights of the checkpoint at `init_path` (any kind; see the module
    docstring) into `encoder`.

    Args:
        encoder: The `AlbertEncoder` to initialise; its architecture must be the checkpoint's.
        init_path: A file, checkpoint prefix or directory.

    Returns:
        An `InitResult` saying what was loaded.

    Raises:
        CheckpointError: Nothing loadable at `init_path`, or weights that do not fit the encoder.
    """
    path = os.fspath(init_path)
    if os.path.isdir(path):
        return _load_directory(path, encoder)
    if os.path.isfile(path):
        lowered = path.lower()
        if lowered.endswith(".keras"):
            return _load_keras_file(path, encoder)
        if lowered.endswith(".weights.h5"):
            return _load_weights_h5(path, encoder)
        if lowered.endswith((".safetensors", ".npz", ".safetensors.index.json")):
            return _load_huggingface(path, encoder)
        if lowered.endswith((".bin", ".pt", ".pth")):
            return _load_huggingface(path, encoder)  # raises the loader's explanation
    # A checkpoint prefix (no file of that exact name) or one of its files.
    try:
        prefix = resolve_checkpoint_prefix(path)
    except CheckpointError:
        if not os.path.exists(path):
            raise CheckpointError(f"init checkpoint not found: {path}") from None
        raise CheckpointError(
            f"{path} is not a checkpoint this project reads (.keras, .weights.h5, .safetensors, .npz, a TF "
            f"checkpoint prefix, or a directory of one)"
        ) from None
    return _load_checkpoint_prefix(prefix, encoder)


def config_from_init(init_path: str) -> Optional[AlbertConfig]:
    """The architecture stored with a checkpoint, or None when it does not carry one.

    Read from: a `.keras` encoder / model (its config), a fine-tuning or pretraining output
    directory, a Hugging Face `config.json`, a keras-hub preset, or the `albert_config.json` the
    original releases ship beside their checkpoint.
    """
    path = os.fspath(init_path)
    directory = path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        exported = os.path.join(path, "assets", ORIGINAL_CONFIG)
        if os.path.isfile(os.path.join(path, "saved_model.pb")) and os.path.isfile(exported):
            return AlbertConfig.from_json_file(exported)
        for name in (FINETUNED_MODEL, PRETRAINING_ENCODER):
            if os.path.isfile(os.path.join(path, name)) and (name != FINETUNED_MODEL or os.path.isfile(os.path.join(path, FINETUNED_MARKER))):
                return _config_of_keras_file(os.path.join(path, name))
        if os.path.isfile(os.path.join(path, PRETRAINING_RUN_CONFIG)):
            try:
                return _pretraining_config(path, None)
            except CheckpointError:
                pass
        if os.path.isfile(os.path.join(path, "tf1", ORIGINAL_CONFIG)):
            return AlbertConfig.from_json_file(os.path.join(path, "tf1", ORIGINAL_CONFIG))
        if _is_keras_hub_preset(path):
            from albert_tf.checkpoints.keras_hub import config_from_keras_hub
            import keras_hub

            return config_from_keras_hub(keras_hub.models.Backbone.from_preset(path, load_weights=False))
    elif path.lower().endswith(".keras") and os.path.isfile(path):
        return _config_of_keras_file(path)
    hf_config = os.path.join(directory, "config.json")
    if os.path.isfile(hf_config) and not _is_keras_hub_preset(directory):
        from albert_tf.checkpoints.huggingface import config_from_huggingface

        try:
            return config_from_huggingface(hf_config)
        except ConfigError:
            pass
    original = os.path.join(directory, ORIGINAL_CONFIG)
    if os.path.isfile(original):
        return AlbertConfig.from_json_file(original)
    return None


_ENCODER_ARGS_TO_CONFIG = {
    "vocab_size": "vocab_size",
    "embedding_size": "embedding_size",
    "hidden_size": "hidden_size",
    "num_layers": "num_hidden_layers",
    "num_heads": "num_attention_heads",
    "intermediate_size": "intermediate_size",
    "num_groups": "num_hidden_groups",
    "inner_group_num": "inner_group_num",
    "hidden_act": "hidden_act",
    "hidden_dropout": "hidden_dropout_prob",
    "attention_dropout": "attention_probs_dropout_prob",
    "max_position_embeddings": "max_position_embeddings",
    "type_vocab_size": "type_vocab_size",
    "initializer_range": "initializer_range",
    "sharing": "sharing",
}


def _find_encoder_config(node):
    """The constructor config of the first serialized `AlbertEncoder` in a `.keras` config tree."""
    if isinstance(node, dict):
        if node.get("class_name") == "AlbertEncoder" and isinstance(node.get("config"), dict):
            return node["config"]
        for value in node.values():
            found = _find_encoder_config(value)
            if found is not None:
                return found
    elif isinstance(node, list):
        for value in node:
            found = _find_encoder_config(value)
            if found is not None:
                return found
    return None


def _config_of_keras_file(path: str) -> Optional[AlbertConfig]:
    """The encoder architecture in a `.keras` file, read from its `config.json` without building
    the model (a keras-hub backbone is read by keras-hub)."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as archive:
            tree = json.loads(archive.read("config.json"))
    except (OSError, KeyError, ValueError, zipfile.BadZipFile) as e:
        raise CheckpointError(f"{path} is not a readable .keras file: {type(e).__name__}: {e}") from None
    encoder_config = _find_encoder_config(tree)
    if encoder_config is not None:
        values = {field: encoder_config[arg] for arg, field in _ENCODER_ARGS_TO_CONFIG.items() if arg in encoder_config}
        try:
            return AlbertConfig(**values)
        except (ConfigError, TypeError) as e:
            raise CheckpointError(f"{path}: the saved encoder config is not usable: {e}") from None
    if "AlbertBackbone" in json.dumps(tree.get("class_name", "")):
        import keras

        from albert_tf.checkpoints.keras_hub import config_from_keras_hub

        return config_from_keras_hub(keras.saving.load_model(path, compile=False))
    return None
