"""`ModelManager`: the versions of the served models, their loading, polling and request batching.

It mirrors what TF Serving's model manager does for a `model_config_list`:

* the base directory of each model is polled (`poll_interval_s`, TF Serving's
  `--file_system_poll_wait_seconds`) and its version policy (`model_config.VersionPolicy`:
  `latest N`, default 1; `specific`; `all`) names the versions to serve; a new one is loaded
  (`SessionServable`), its `assets.extra/tf_serving_warmup_requests` replayed, and only then
  does it become AVAILABLE; versions the policy no longer names are unloaded once one it names
  is AVAILABLE (TF Serving's availability-preserving policy), so a new version goes live
  without a restart and without a gap;
* a version that fails to load or to warm up ends in state END with its error, and the
  previous version keeps serving;
* every load (or failed load) and every unload is logged once, with the model and version;
* requests name the version as TF Serving does: latest, a specific version, or a label;
* `apply_config` switches to a new model list (a re-read `--model_config_file`): its version
  labels are checked first, as TF Serving's `ServerCore` does (a label must name a version
  AVAILABLE now; with `allow_version_labels_for_unavailable_models`, a label not already on
  another version may name any version), else the whole config is refused and the previous
  one stays; then models it drops are unloaded and the others polled;
* a request whose batch is empty (0 rows) is refused, over gRPC and REST alike, as TF
  Serving's REST API refuses an empty `instances` list;
* with `prefer_tflite_model` (TF Serving's `--prefer_tflite_model`), a version directory holding
  a `model.tflite` is served from that file (`TfliteServable`) instead of its SavedModel;
* with `prefer_openvino_model`, a version with an OpenVINO IR beside it (`albert-tf export
  --openvino`) is served from the IR (`OpenVinoServable`, raw text in, `serving_default` only;
  `openvino_threads` its inference threads); `prefer_tflite_model` wins where both apply;
* each loaded version batches concurrent requests of the same signature and input shapes into
  one session run, like the server's `--enable_batching` (`batching.Batcher`, arrival order); on a
  length-aware export with `length_grouping` (the default) requests queue by length bucket and a
  batch holds one bucket (`length_batching.LengthGroupingBatcher`).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from albert_tf.export.serving_config import BatchingConfig, model_versions
from albert_tf.model_server.batching import Batcher
from albert_tf.model_server.length_batching import make_batcher
from albert_tf.model_server.model_config import LATEST, ModelConfigError, ModelEntry, VersionPolicy
from albert_tf.model_server.servable import (
    FAILED_PRECONDITION,
    INVALID_ARGUMENT,
    NOT_FOUND,
    ServingError,
    SessionServable,
)

logger = logging.getLogger(__name__)

START, LOADING, AVAILABLE, UNLOADING, END = "START", "LOADING", "AVAILABLE", "UNLOADING", "END"


@dataclasses.dataclass
class VersionState:
    """One version's lifecycle: `state`, and the load error (code, message) of a failed one."""

    version: int
    state: str = START
    error_code: str = "OK"
    error_message: str = ""
    servable: Optional[SessionServable] = None
    batcher: Optional[Batcher] = None


def replay_warmup(servable: SessionServable, logs) -> int:
    """Runs a SavedModel's warmup `PredictionLog`s; returns how many ran.

    Raises:
      ServingError: a warmup request failed (the version must not serve then).
    """
    import tensorflow as tf

    count = 0
    own_only = getattr(servable, "replays_own_signatures_only", False)
    for log in logs:
        kind = log.WhichOneof("log_type")
        if own_only and kind in ("predict_log", "classify_log", "regress_log"):
            signature = getattr(log, kind).request.model_spec.signature_name or "serving_default"
            if signature not in servable.signature_defs:
                continue
        if kind == "predict_log":
            request = log.predict_log.request
            inputs = {name: tf.make_ndarray(proto) for name, proto in request.inputs.items()}
            servable.run(request.model_spec.signature_name, inputs, request.output_filter)
        elif kind in ("classify_log", "regress_log"):
            request = getattr(log, kind).request
            servable.run(request.model_spec.signature_name, {"inputs": serialized_examples(request.input)})
        else:
            raise ServingError(INVALID_ARGUMENT, f"Unsupported log_type for warmup: {kind}")
        count += 1
    return count


def serialized_examples(request_input) -> np.ndarray:
    """The serialized `tf.Example`s of a Classify/Regress `Input` (context merged into each)."""
    kind = request_input.WhichOneof("kind")
    if kind == "example_list":
        examples = list(request_input.example_list.examples)
    elif kind == "example_list_with_context":
        context = request_input.example_list_with_context.context
        examples = []
        for example in request_input.example_list_with_context.examples:
            merged = type(example)()
            merged.CopyFrom(context)
            merged.MergeFrom(example)
            examples.append(merged)
    else:
        examples = []
    if not examples:
        raise ServingError(INVALID_ARGUMENT, "Input is empty.")
    return np.array([e.SerializeToString() for e in examples], dtype=object)


class ModelManager:
    """Loads, polls and resolves the versions of models under their base paths.

    Args:
      models: `{model_name: base_path}` (the directory holding integer versions).
      batching: request batching settings (None: no batching).
      poll_interval_s: how often the base paths are polled for new versions (0: never).
      version_labels: `{model_name: {label: version}}`, taken as given (a model config file's
        labels go through `apply_config`, which checks them).
      prefer_tflite_model: serve a version's `model.tflite` when it has one (`TfliteServable`).
      version_policies: `{model_name: VersionPolicy}` (default: the newest version only).
      prefer_openvino_model: serve a version's OpenVINO IR when it has one (`OpenVinoServable`).
      openvino_threads: the OpenVINO servables' inference threads (None: OpenVINO's default).

    `request_logger` (a `request_log.RequestLogger`, None: off) sees every answered request.
    """

    request_logger = None

    def __init__(
        self,
        models: Dict[str, str],
        batching: Optional[BatchingConfig] = None,
        poll_interval_s: float = 1.0,
        version_labels: Optional[Dict[str, Dict[str, int]]] = None,
        prefer_tflite_model: bool = False,
        version_policies: Optional[Dict[str, VersionPolicy]] = None,
        prefer_openvino_model: bool = False,
        openvino_threads: Optional[int] = None,
    ):
        if not models:
            raise ValueError("no models to serve")
        self.models = dict(models)
        self.version_policies = dict(version_policies or {})
        self.batching = batching
        self.poll_interval_s = poll_interval_s
        self.prefer_tflite_model = bool(prefer_tflite_model)
        self.prefer_openvino_model = bool(prefer_openvino_model)
        self.openvino_threads = openvino_threads
        self.version_labels = {k: dict(v) for k, v in (version_labels or {}).items()}
        self._versions: Dict[str, Dict[int, VersionState]] = {name: {} for name in models}
        self._lock = threading.RLock()
        # Serializes polls and config changes (loads run under it; requests take `_lock` only).
        self._config_lock = threading.RLock()
        self._stopped = threading.Event()
        self._poller: Optional[threading.Thread] = None

    # --- lifecycle --------------------------------------------------------------------------------

    def start(self) -> None:
        """Loads the newest version of every model, then polls in the background."""
        self.poll_once()
        if self.poll_interval_s > 0:
            self._poller = threading.Thread(target=self._poll_loop, name="version-poller", daemon=True)
            self._poller.start()

    def _poll_loop(self) -> None:
        while not self._stopped.wait(self.poll_interval_s):
            try:
                self.poll_once()
            except Exception:  # a poll must never kill the poller: the next one retries
                logger.exception("polling the model base paths failed")

    def poll_once(self) -> None:
        """One poll: load the versions each model's policy names; unload those it no longer names."""
        with self._config_lock:
            for name, base in list(self.models.items()):
                self._poll_model(name, base)

    def _poll_model(self, name: str, base: str) -> None:
        versions = model_versions(base)
        aspired = self.version_policies.get(name, LATEST).aspired(versions)
        with self._lock:
            states = self._versions[name]
            for version, state in list(states.items()):
                if state.state == AVAILABLE and version not in versions:
                    self._unload(name, state)  # the directory is gone: TF Serving unloads it too
            # New versions, and ones unloaded earlier that the policy names again; a version that
            # failed to load is not retried (as TF Serving, until it is a new version number).
            to_load = [
                v for v in sorted(aspired, reverse=True)
                if v not in states or (states[v].state == END and states[v].error_code == "OK")
            ]
            for version in to_load:
                states[version] = VersionState(version, LOADING)
        for version in to_load:
            self._load(name, base, states[version])
            self._retire(name, aspired)
        self._retire(name, aspired)

    def _retire(self, name: str, aspired) -> None:
        """Unloads the AVAILABLE versions outside `aspired` once one in it is AVAILABLE; until
        then the newest of them keeps serving (TF Serving's availability-preserving policy)."""
        with self._lock:
            states = self._versions[name]
            available = {v for v, s in states.items() if s.state == AVAILABLE}
            stale = sorted(available - set(aspired))
            if stale and not available & set(aspired):
                stale = stale[:-1]
            for version in stale:
                self._unload(name, states[version])

    def runtime_of(self, path: str) -> str:
        """What serves a version directory: "tflite" (its `model.tflite`), "openvino" (its IR) or
        "tensorflow" (its SavedModel)."""
        from albert_tf.model_server.tflite_servable import has_tflite_model

        if self.prefer_tflite_model and has_tflite_model(path):
            return "tflite"
        if self.prefer_openvino_model:
            from albert_tf.model_server.openvino_servable import has_openvino_model

            if has_openvino_model(path):
                return "openvino"
        return "tensorflow"

    def tensorflow_version_dirs(self) -> List[str]:
        """The version directories the policies name now that TensorFlow itself will run (not
        served from a `model.tflite` or an OpenVINO IR)."""
        dirs = []
        for name, base in self.models.items():
            for version in sorted(self.version_policies.get(name, LATEST).aspired(model_versions(base))):
                path = os.path.join(base, str(version))
                if self.runtime_of(path) == "tensorflow":
                    dirs.append(path)
        return dirs

    def _servable(self, path: str) -> SessionServable:
        """The servable of a version directory: its `model.tflite`, its OpenVINO IR or its SavedModel."""
        runtime = self.runtime_of(path)
        if runtime == "tflite":
            from albert_tf.model_server.tflite_servable import TfliteServable

            return TfliteServable(path)
        if runtime == "openvino":
            from albert_tf.model_server.openvino_servable import OpenVinoServable

            return OpenVinoServable(path, num_threads=self.openvino_threads)
        return SessionServable(path)

    def _load(self, name: str, base: str, state: VersionState) -> None:
        from albert_tf.export.warmup import read_warmup_file

        path = os.path.join(base, str(state.version))
        try:
            servable = self._servable(path)
            try:
                count = replay_warmup(servable, read_warmup_file(path))
            except (ServingError, ValueError) as e:
                servable.close()
                message = e.message if isinstance(e, ServingError) else str(e)
                raise ServingError(FAILED_PRECONDITION, f"Failed to warm up {path}: {message}") from None
        except ServingError as e:
            logger.error("model %s version %d failed to load: %s", name, state.version, e.message)
            with self._lock:
                state.state, state.error_code, state.error_message = END, e.code, e.message
            return
        logger.info("loaded model %s version %d from %s (%d warmup requests)", name, state.version, path, count)
        with self._lock:
            state.servable, state.batcher = servable, make_batcher(servable, self.batching)
            state.state = AVAILABLE

    def _unload(self, name: str, state: VersionState) -> None:
        state.state = UNLOADING
        if state.batcher is not None:
            state.batcher.stop()
        if state.servable is not None:
            state.servable.close()
        state.servable = state.batcher = None
        state.state = END
        logger.info("unloaded model %s version %d", name, state.version)

    # --- a model config (`--model_config_file`) ---------------------------------------------------

    def check_labels(self, entries: Sequence[ModelEntry], allow_unavailable: bool = False) -> Dict[str, Dict[str, int]]:
        """The label map of `entries`, checked as TF Serving's `ServerCore` checks it.

        A label must name a version that is AVAILABLE now, before the config's own versions
        load. With `allow_unavailable` (`--allow_version_labels_for_unavailable_models`) a label
        may name a version not available yet, unless the label is already on another version.

        Raises:
          ModelConfigError: one line naming the label, version and model.
        """
        labels: Dict[str, Dict[str, int]] = {}
        with self._lock:
            for entry in entries:
                for label, version in entry.labels:
                    current = self.version_labels.get(entry.name, {}).get(label)
                    allowed = allow_unavailable and current in (None, version)
                    state = self._versions.get(entry.name, {}).get(version)
                    if not allowed and (state is None or state.state != AVAILABLE):
                        hint = "" if allow_unavailable else (
                            " (labels are checked before the config's versions load, as in TF Serving: add the "
                            "label once the version is AVAILABLE, or pass --allow_version_labels_for_unavailable_models)"
                        )
                        raise ModelConfigError(
                            f"Request to assign label {label} to version {version} of model {entry.name}, "
                            f"which is not currently available for inference{hint}"
                        )
                    labels.setdefault(entry.name, {})[label] = version
        return labels

    def apply_config(self, entries: Sequence[ModelEntry], allow_unavailable_labels: bool = False) -> None:
        """Serves the models of a (re-read) model config: its labels are checked first
        (`check_labels`; refused: nothing changes), then the models it drops are unloaded and the
        others polled (new versions loaded, versions their policy no longer names unloaded).

        Raises:
          ModelConfigError: a label `check_labels` refuses.
        """
        with self._config_lock:
            labels = self.check_labels(entries, allow_unavailable_labels)
            new_models = {e.name: e.base_path for e in entries}
            with self._lock:
                for name in [n for n in self.models if n not in new_models]:
                    for state in self._versions.pop(name, {}).values():
                        if state.state == AVAILABLE:
                            self._unload(name, state)
                    logger.info("model %s is no longer in the model config: removed", name)
                for name in new_models:
                    self._versions.setdefault(name, {})
                self.models = new_models
                self.version_policies = {e.name: e.policy for e in entries}
                self.version_labels = labels
            self.poll_once()

    def stop(self) -> None:
        self._stopped.set()
        if self._poller is not None:
            self._poller.join(timeout=10)
        with self._config_lock, self._lock:
            for name, states in self._versions.items():
                for state in states.values():
                    if state.state == AVAILABLE:
                        self._unload(name, state)

    # --- resolving requests -------------------------------------------------------------------

    def resolve(self, name: str, version: Optional[int] = None, label: Optional[str] = None) -> Tuple[int, VersionState]:
        """The serving `(version, state)` for a model spec, with TF Serving's errors."""
        with self._lock:
            if label:
                labels = self.version_labels.get(name, {})
                if label not in labels:
                    raise ServingError(INVALID_ARGUMENT, f"Unrecognized servable version label: {label}")
                version = labels[label]
            states = self._versions.get(name)
            if version is not None:
                state = (states or {}).get(version)
                if state is None or state.state != AVAILABLE:
                    raise ServingError(NOT_FOUND, f"Servable not found for request: Specific({name}, {version})")
                return version, state
            available = [v for v, s in (states or {}).items() if s.state == AVAILABLE]
            if not available:
                raise ServingError(NOT_FOUND, f"Servable not found for request: Latest({name})")
            return max(available), states[max(available)]

    def run(self, name: str, version: Optional[int], label: Optional[str], signature: str, inputs, output_filter=()):
        """Runs a signature on the resolved version; returns `(version, signature_key, outputs)`.

        Raises:
          ServingError: TF Serving's errors, and INVALID_ARGUMENT for an empty batch (0 rows).
        """
        number, state = self.resolve(name, version, label)
        key = signature or "serving_default"
        definition = state.servable.signature(key)
        for input_name, value in sorted(inputs.items()):
            info = definition.inputs.get(input_name)
            shape = info.tensor_shape if info is not None else None
            batch_major = shape is not None and not shape.unknown_rank and shape.dim and shape.dim[0].size == -1
            if batch_major and np.ndim(value) and np.shape(value)[0] == 0:
                # TF Serving's REST API refuses an empty 'instances' list while a 0-row tensor
                # would run; one answer for every path: an empty batch is a client error.
                raise ServingError(INVALID_ARGUMENT, f"input {input_name} is an empty batch (0 rows): a request needs at least one row")
        outputs = state.batcher.run(key, inputs, output_filter)
        if self.request_logger is not None:
            self.request_logger.log(name, number, key, inputs, outputs)
        return number, key, outputs

    def status(self, name: str, version: Optional[int] = None) -> List[VersionState]:
        """The version states of a model (all, or the one `version`), newest first."""
        with self._lock:
            states = self._versions.get(name)
            if not states:
                raise ServingError(NOT_FOUND, f"Could not find any versions of model {name}")
            if version is not None:
                if version not in states:
                    raise ServingError(NOT_FOUND, f"Could not find version {version} of model {name}")
                return [dataclasses.replace(states[version])]
            return [dataclasses.replace(s) for _, s in sorted(states.items(), reverse=True)]
