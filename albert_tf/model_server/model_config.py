"""TF Serving's `--model_config_file` for the local server: a `ModelServerConfig` text proto.

`read_model_config_file(path)` parses the file with TF Serving's own protos
(`tensorflow_serving.config.model_server_config_pb2`, `google.protobuf.text_format`) and returns
the models it lists (`ModelEntry`: name, base path, `VersionPolicy`, version labels). What the
local server supports of a `model_config_list { config { ... } }`:

* `name`, `base_path` (an absolute local directory, as TF Serving requires absolute paths),
  `model_platform: "tensorflow"` (or the deprecated `model_type: TENSORFLOW`);
* `model_version_policy`: `latest { num_versions }` (0 or unset: 1, TF Serving's default),
  `specific { versions }`, `all {}`; no policy is `latest` 1;
* `version_labels { key: "stable" value: 1 }`, checked by `ModelManager.apply_config`.

Everything else is refused with one line naming the field (`ModelConfigError`): a top-level
`custom_model_config`, a model's `logging_config` (the local server logs requests with
`--request-logging-config`), another platform, and any field a later proto adds. A file the text
parser refuses (a misspelt field, a missing brace) is one line naming the file, line and column.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Dict, FrozenSet, Iterable, List, Optional, Tuple

TENSORFLOW_PLATFORM = "tensorflow"

# The fields of a `ModelConfig` the local server acts on; any other field set is refused.
SUPPORTED_MODEL_FIELDS = ("name", "base_path", "model_type", "model_platform", "model_version_policy", "version_labels")


class ModelConfigError(ValueError):
    """A model config file the local server cannot serve as written (the message is one line)."""


@dataclasses.dataclass(frozen=True)
class VersionPolicy:
    """TF Serving's `ServableVersionPolicy`: which versions on disk are served.

    Attributes:
      kind: "latest", "specific" or "all".
      num_versions: how many of the newest versions ("latest").
      versions: the version numbers ("specific").
    """

    kind: str = "latest"
    num_versions: int = 1
    versions: FrozenSet[int] = frozenset()

    def aspired(self, on_disk: Iterable[int]) -> FrozenSet[int]:
        """The versions to serve among the version directories `on_disk`."""
        found = sorted(set(on_disk))
        if self.kind == "all":
            return frozenset(found)
        if self.kind == "specific":
            return frozenset(v for v in found if v in self.versions)
        return frozenset(found[-self.num_versions:]) if found else frozenset()

    def describe(self) -> str:
        if self.kind == "specific":
            return "specific " + ", ".join(str(v) for v in sorted(self.versions))
        if self.kind == "all":
            return "all"
        return f"latest {self.num_versions}"


LATEST = VersionPolicy()


@dataclasses.dataclass(frozen=True)
class ModelEntry:
    """One model of a model config file."""

    name: str
    base_path: str
    policy: VersionPolicy = LATEST
    labels: Tuple[Tuple[str, int], ...] = ()

    @property
    def label_map(self) -> Dict[str, int]:
        return dict(self.labels)


def _parse_error(path: str, error) -> ModelConfigError:
    line, column = error.GetLine(), error.GetColumn()
    message = str(error)
    # text_format prefixes "LINE:COLUMN : " to its message; the file, line and column lead here.
    prefix = f"{line}:{column} : "
    if message.startswith(prefix):
        message = message[len(prefix):]
    where = f"{path}:{line}:{column}" if line is not None and line > 0 else path
    return ModelConfigError(f"{where}: not a valid ModelServerConfig text proto: {' '.join(message.split())}")


def parse_model_config_text(text: str, path: str = "<model config>") -> Optional[List[ModelEntry]]:
    """The models of a `ModelServerConfig` text proto; None for an empty config (nothing set).

    Raises:
      ModelConfigError: a parse error, an unsupported field or value, or an invalid model list.
    """
    from google.protobuf import text_format
    from tensorflow_serving.config import model_server_config_pb2

    config = model_server_config_pb2.ModelServerConfig()
    try:
        text_format.Parse(text, config)
    except text_format.ParseError as e:
        raise _parse_error(path, e) from None
    choice = config.WhichOneof("config")
    if choice is None:
        return None
    if choice != "model_config_list":
        raise ModelConfigError(
            f"{path}: {choice} is not supported by the local server (it serves a model_config_list only)"
        )
    entries: List[ModelEntry] = []
    seen = set()
    for index, model in enumerate(config.model_config_list.config):
        where = f"{path}: model_config_list.config[{index}]" + (f" ({model.name})" if model.name else "")
        for field, _ in model.ListFields():
            if field.name not in SUPPORTED_MODEL_FIELDS:
                hint = " (log requests with --request-logging-config)" if field.name == "logging_config" else ""
                raise ModelConfigError(f"{where}: {field.name} is not supported by the local server{hint}")
        if not model.name:
            raise ModelConfigError(f"{where}: name is not set")
        if model.name in seen:
            # TF Serving's words.
            raise ModelConfigError(f"{path}: Illegal to list model {model.name} multiple times in config list")
        seen.add(model.name)
        _check_platform(model, where)
        entries.append(ModelEntry(model.name, _base_path(model, where), _policy(model, where), _labels(model)))
    return entries


def _check_platform(model, where: str) -> None:
    from tensorflow_serving.config import model_server_config_pb2

    if model.model_type != model_server_config_pb2.MODEL_TYPE_UNSPECIFIED:
        if model.model_platform:
            raise ModelConfigError(f"{where}: Illegal setting both model_type (deprecated) and model_platform")
        if model.model_type != model_server_config_pb2.TENSORFLOW:
            name = model_server_config_pb2.ModelType.Name(model.model_type)
            raise ModelConfigError(f"{where}: model_type {name} is not supported (only TENSORFLOW, i.e. model_platform \"tensorflow\")")
        return
    if not model.model_platform:
        raise ModelConfigError(
            f'{where}: model_platform is not set (TF Serving refuses that too: set model_platform: "tensorflow")'
        )
    if model.model_platform != TENSORFLOW_PLATFORM:
        raise ModelConfigError(f'{where}: model_platform "{model.model_platform}" is not supported (only "tensorflow")')


def _base_path(model, where: str) -> str:
    path = model.base_path
    if not path:
        raise ModelConfigError(f"{where}: base_path is not set")
    if "://" in path:
        raise ModelConfigError(f"{where}: base_path {path} is a URI; the local server reads local directories only")
    if not os.path.isabs(path):
        # TF Serving refuses relative base paths (without --model_config_list_root_dir).
        raise ModelConfigError(f"{where}: Expected model {model.name} to have an absolute path; got base_path {path}")
    if not os.path.isdir(path):
        raise ModelConfigError(
            f"{where}: base_path {path} is not a directory (an exported models.config names the serving "
            "container's paths, /models/<name>: point base_path at the local export to serve it here)"
        )
    return os.path.normpath(path)


def _policy(model, where: str) -> VersionPolicy:
    if not model.HasField("model_version_policy"):
        return LATEST
    policy = model.model_version_policy
    choice = policy.WhichOneof("policy_choice")
    if choice is None or choice == "latest":
        # `num_versions` 0 (unset) is TF Serving's default of 1.
        return VersionPolicy("latest", max(1, policy.latest.num_versions) if choice else 1)
    if choice == "all":
        return VersionPolicy("all")
    versions = frozenset(int(v) for v in policy.specific.versions)
    if not versions:
        raise ModelConfigError(f"{where}: model_version_policy specific {{}} lists no versions (nothing would be served)")
    if min(versions) < 0:
        raise ModelConfigError(f"{where}: model_version_policy specific lists a negative version {min(versions)}")
    return VersionPolicy("specific", versions=versions)


def _labels(model) -> Tuple[Tuple[str, int], ...]:
    return tuple(sorted((label, int(version)) for label, version in model.version_labels.items()))


def read_model_config_file(path: str) -> Tuple[str, Optional[List[ModelEntry]]]:
    """`(text, models)` of a model config file (models None: an empty config).

    Raises:
      ModelConfigError: the file cannot be read, or `parse_model_config_text` refuses it.
    """
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise ModelConfigError(f"cannot read the model config file {path}: {reason}") from None
    return text, parse_model_config_text(text, path)
