"""TF Serving configuration files for an export base: `models.config`, `batching_parameters.txt` and
`serving.env`.

`models.config` is a `ModelServerConfig` text proto (`--model_config_file`) listing every model
directory of the export base that holds at least one integer version, with its path as the
server sees it (`container_base/<name>`, `/models` in the official image) and the "latest"
version policy. `batching_parameters.txt` is a `BatchingParameters` text proto
(`--enable_batching --batching_parameters_file`). `read_batching_parameters` parses the latter
for the local development server, so both servers batch with the same settings.

Settings only `albert-tf serve` has (`length_grouping`) are written as comment lines
`# albert_tf <name>: <value>`: TF Serving parses the file as the `BatchingParameters` text proto
and fails on an unknown field, and its `BatchingParameters` (session_bundle_config.proto) has no
field that groups requests by length, so a comment is the one form both servers read: TF
Serving skips it, `read_batching_parameters` takes it.

`serving.env` is the environment the server runs the base with (`env_file` of
`serving/docker-compose.yml`): `TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1` when the newest version of every
model is a bf16 export, else 0 (`albert_tf.export.onednn_weights`: the rule `albert-tf serve`
applies by itself).
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import Dict, List, Optional

from albert_tf import file_io

MODELS_CONFIG_FILE = "models.config"
BATCHING_FILE = "batching_parameters.txt"
SERVING_ENV_FILE = "serving.env"


@dataclasses.dataclass(frozen=True)
class BatchingConfig:
    """TF Serving's `BatchingParameters` (the fields this project sets).

    Attributes:
      max_batch_size: largest batch the server forms; a larger request is rejected.
      batch_timeout_micros: how long a batch waits for more requests before it runs.
      max_enqueued_batches: queue bound; beyond it requests fail with UNAVAILABLE.
      num_batch_threads: batches processed in parallel.
      pad_variable_length_inputs: merge requests whose inputs differ in a non-batch dimension
        by padding them to the largest (the length-aware `tokens` signatures take ids of any
        length); without it TF Serving fails such a merge.
    """

    max_batch_size: int = 32
    batch_timeout_micros: int = 2000
    max_enqueued_batches: int = 100
    num_batch_threads: int = 4
    pad_variable_length_inputs: bool = True
    length_grouping: bool = True

    def __post_init__(self):
        for field in dataclasses.fields(self):
            if field.type in (bool, "bool"):
                if not isinstance(getattr(self, field.name), bool):
                    raise ValueError(f"{field.name} must be a bool, got {getattr(self, field.name)!r}")
                continue
            value = getattr(self, field.name)
            minimum = 0 if field.name == "batch_timeout_micros" else 1
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise ValueError(f"{field.name} must be an integer >= {minimum}, got {value!r}")

    def to_text_proto(self) -> str:
        """The `BatchingParameters` text proto, with this project's own settings as comments."""
        lines = []
        for name in WRAPPED_FIELDS:
            lines.append(f"{name} {{ value: {getattr(self, name)} }}")
        # A plain proto3 bool in BatchingParameters, not a wrapper message.
        lines.append(f"pad_variable_length_inputs: {str(self.pad_variable_length_inputs).lower()}")
        lines.append("# For albert-tf serve only; a comment to TF Serving, whose BatchingParameters has no such field:")
        lines.append(f"{DIRECTIVE_PREFIX} length_grouping: {str(self.length_grouping).lower()}")
        return "\n".join(lines) + "\n"


# The BatchingParameters fields written as `google.protobuf.Int64Value` messages.
WRAPPED_FIELDS = ("max_batch_size", "batch_timeout_micros", "max_enqueued_batches", "num_batch_threads")
# The plain (not wrapper) scalar fields of BatchingParameters.
PLAIN_FIELDS = ("pad_variable_length_inputs", "allowed_batch_sizes")
# This project's settings TF Serving has no field for, written as comments (see the module doc).
DIRECTIVE_PREFIX = "# albert_tf"
DIRECTIVES = ("length_grouping",)


def read_batching_parameters(path: str) -> BatchingConfig:
    """The `BatchingConfig` of a `batching_parameters.txt` text proto (unknown fields ignored),
    with the `# albert_tf name: value` settings; a setting not in the file takes its default.

    Raises:
      ValueError: a file that is not in the `name { value: N }` / `name: V` form, or an
        unknown `# albert_tf` setting.
    """
    with open(path, encoding="utf-8") as f:
        text = f.read()
    values: Dict[str, object] = {}
    directive = re.escape(DIRECTIVE_PREFIX) + r"\s+(\w+)\s*:\s*(\S+)[ \t]*$"
    for match in re.finditer(directive, text, flags=re.MULTILINE):
        name, value = match.group(1), match.group(2)
        if name not in DIRECTIVES:
            raise ValueError(f"{path}: unknown albert_tf setting {name!r} (known: {', '.join(DIRECTIVES)})")
        if value not in ("true", "false"):
            raise ValueError(f"{path}: albert_tf setting {name} must be true or false, got {value!r}")
        values[name] = value == "true"
    stripped = re.sub(r"#[^\n]*", "", text)
    # `name { value: N }` (the wrapper messages; also pad_variable_length_inputs as files written
    # before it was fixed have it) and `name: V` for the plain fields only, as TF Serving parses them.
    plain = "|".join(PLAIN_FIELDS)
    field = rf"(?:(\w+)\s*\{{\s*value\s*:\s*(-?\d+|true|false)\s*\}}|({plain})\s*:\s*(-?\d+|true|false)\b)"
    for match in re.finditer(field, stripped):
        name, value = (match.group(1), match.group(2)) if match.group(1) else (match.group(3), match.group(4))
        if name in DIRECTIVES:
            raise ValueError(f"{path}: {name} is no BatchingParameters field (TF Serving would refuse the file): "
                             f"write it as the comment `{DIRECTIVE_PREFIX} {name}: {value}`")
        values[name] = value == "true" if value in ("true", "false") else int(value)
    leftover = re.sub(field, "", stripped)
    if leftover.strip():
        raise ValueError(f"{path}: not a BatchingParameters text proto near {leftover.strip()[:40]!r}")
    names = {f.name for f in dataclasses.fields(BatchingConfig)}
    return BatchingConfig(**{k: v for k, v in values.items() if k in names})


def model_versions(model_dir: str) -> List[int]:
    """The integer version directories of a model directory, ascending (what TF Serving loads)."""
    if not os.path.isdir(model_dir):
        return []
    versions = []
    for name in os.listdir(model_dir):
        if name.isdigit() and os.path.isdir(os.path.join(model_dir, name)):
            versions.append(int(name))
    return sorted(versions)


def models_config_text(export_base: str, container_base: str = "/models", version_labels: Optional[Dict[str, Dict[str, int]]] = None) -> str:
    """The `ModelServerConfig` text proto for every model under `export_base`.

    Args:
      export_base: the directory holding `<model_name>/<version>/` SavedModels.
      container_base: where the server sees `export_base` (the Compose/Kubernetes mount point).
      version_labels: optional `{model_name: {label: version}}` (e.g. `stable`, `canary`).

    Raises:
      ValueError: no model with a version under `export_base`.
    """
    from google.protobuf import text_format
    from tensorflow_serving.config import model_server_config_pb2

    config = model_server_config_pb2.ModelServerConfig()
    for name in served_model_names(export_base):
        model = config.model_config_list.config.add()
        model.name = name
        model.base_path = f"{container_base.rstrip('/')}/{name}"
        model.model_platform = "tensorflow"
        model.model_version_policy.latest.num_versions = 1
        for label, version in sorted((version_labels or {}).get(name, {}).items()):
            model.version_labels[label] = int(version)
    return text_format.MessageToString(config)


def served_model_names(export_base: str) -> List[str]:
    """The model directories of `export_base` holding at least one integer version, sorted.

    Raises:
      ValueError: there is none.
    """
    names = sorted(
        n for n in os.listdir(export_base) if not n.startswith(".") and model_versions(os.path.join(export_base, n))
    ) if os.path.isdir(export_base) else []
    if not names:
        raise ValueError(f"{export_base} holds no model with an integer version directory")
    return names


def serving_env_text(export_base: str) -> str:
    """`serving.env` of `export_base`: oneDNN's frozen-weights mode by the newest version of each model."""
    from albert_tf.export.onednn_weights import ENV_VAR, frozen_weights_wanted

    newest = [os.path.join(export_base, n, str(model_versions(os.path.join(export_base, n))[-1]))
              for n in served_model_names(export_base)]
    on, why = frozen_weights_wanted("auto", newest)
    return (f"# Written by albert-tf export for TF Serving (serving/docker-compose.yml env_file): {why}.\n"
            f"{ENV_VAR}={1 if on else 0}\n")


def write_serving_configs(
    export_base: str,
    container_base: str = "/models",
    batching: Optional[BatchingConfig] = None,
    version_labels: Optional[Dict[str, Dict[str, int]]] = None,
) -> Dict[str, str]:
    """Writes `models.config`, `batching_parameters.txt` and `serving.env` into `export_base`, atomically.

    Returns:
      `{"models_config": path, "batching_parameters": path, "serving_env": path}`.
    """
    paths = {
        "models_config": os.path.join(export_base, MODELS_CONFIG_FILE),
        "batching_parameters": os.path.join(export_base, BATCHING_FILE),
        "serving_env": os.path.join(export_base, SERVING_ENV_FILE),
    }
    file_io.atomic_write_text(paths["models_config"], models_config_text(export_base, container_base, version_labels))
    file_io.atomic_write_text(paths["batching_parameters"], (batching or BatchingConfig()).to_text_proto())
    file_io.atomic_write_text(paths["serving_env"], serving_env_text(export_base))
    return paths
