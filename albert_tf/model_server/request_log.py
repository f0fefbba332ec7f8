"""TF Serving's request logging: a sample of requests as `PredictionLog` records in TFRecord files.

Configured as TF Serving's `logging_config` (a `tensorflow.serving.LoggingConfig` in text format)::

    log_collector_config { type: "tfrecord" filename_prefix: "/var/log/albert/requests" }
    sampling_config { sampling_rate: 0.05 }

Each sampled request (with its response) becomes one `PredictionLog` (`predict_log`, or
`classify_log` / `regress_log` for those APIs), with `log_metadata` naming the model, version,
signature and the sampling config, appended to `<filename_prefix>-<pid>-<start time>.tfrecord`
(one file per server process; TF Serving's file collectors likewise add a suffix). A record is
written whole under a lock, so a reader sees complete records only (the last may be cut if the
server is killed mid-write; `read_prediction_logs` stops there).

`read_prediction_logs` and `request_texts` read them back (for `albert-tf data-skew`).
"""

from __future__ import annotations

import glob
import os
import random
import struct
import threading
import time
from typing import Dict, Iterator, List, Optional

import numpy as np

COLLECTOR_TYPES = ("tfrecord", "")


class LoggingConfigError(ValueError):
    """A logging config that cannot be used."""


def load_logging_config(path: str):
    """A `tensorflow.serving.LoggingConfig` from its text format; `LoggingConfigError` naming the problem."""
    from google.protobuf import text_format
    from tensorflow_serving.config import logging_config_pb2

    try:
        with open(path, encoding="utf-8") as f:
            config = text_format.Parse(f.read(), logging_config_pb2.LoggingConfig())
    except OSError as e:
        raise LoggingConfigError(f"cannot read the logging config {path}: {e.strerror}") from None
    except text_format.ParseError as e:
        raise LoggingConfigError(f"{path} is not a TF Serving LoggingConfig in text format: {e}") from None
    if not config.log_collector_config.filename_prefix:
        raise LoggingConfigError(f"{path}: log_collector_config.filename_prefix is required")
    if config.log_collector_config.type not in COLLECTOR_TYPES:
        raise LoggingConfigError(f"{path}: log_collector_config.type must be 'tfrecord', got {config.log_collector_config.type!r}")
    if not 0 <= config.sampling_config.sampling_rate <= 1:
        raise LoggingConfigError(f"{path}: sampling_config.sampling_rate must be in [0, 1], got {config.sampling_config.sampling_rate}")
    return config


class RequestLogger:
    """Writes a `sampling_rate` share of the requests it is shown as `PredictionLog` records."""

    def __init__(self, config, seed: Optional[int] = None):
        from albert_tf.data.tfrecords import frame_record

        self.config = config
        self.rate = config.sampling_config.sampling_rate
        prefix = config.log_collector_config.filename_prefix
        os.makedirs(os.path.dirname(os.path.abspath(prefix)), exist_ok=True)
        self.path = f"{prefix}-{os.getpid()}-{int(time.time())}.tfrecord"
        self._frame = frame_record
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        self._file = None
        self.logged = 0

    def log(self, model_name: str, version: int, signature: str, inputs: Dict[str, np.ndarray],
            outputs: Dict[str, np.ndarray]) -> bool:
        """Logs one Predict request with its response if sampled; returns whether it was."""
        with self._lock:
            if self._random.random() >= self.rate:
                return False
        import tensorflow as tf
        from tensorflow_serving.apis import prediction_log_pb2

        record = prediction_log_pb2.PredictionLog()
        metadata = record.log_metadata
        metadata.model_spec.name = model_name
        metadata.model_spec.version.value = version
        metadata.model_spec.signature_name = signature
        metadata.sampling_config.CopyFrom(self.config.sampling_config)
        metadata.timestamp_secs = int(time.time())
        request, response = record.predict_log.request, record.predict_log.response
        request.model_spec.CopyFrom(metadata.model_spec)
        response.model_spec.CopyFrom(metadata.model_spec)
        for name, value in inputs.items():
            request.inputs[name].CopyFrom(tf.make_tensor_proto(value))
        for name, value in outputs.items():
            response.outputs[name].CopyFrom(tf.make_tensor_proto(value))
        data = self._frame(record.SerializeToString())
        with self._lock:
            if self._file is None:
                self._file = open(self.path, "ab")
            self._file.write(data)
            self._file.flush()
            self.logged += 1
        return True

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None


def _records(path: str) -> Iterator[bytes]:
    with open(path, "rb") as f:
        while True:
            header = f.read(12)
            if len(header) < 12:
                return
            (length,) = struct.unpack("<Q", header[:8])
            data = f.read(length)
            if len(data) < length or len(f.read(4)) < 4:
                return  # a record cut by a server killed mid-write
            yield data


def read_prediction_logs(pattern: str) -> Iterator[object]:
    """The `PredictionLog` records of the TFRecord files matching `pattern` (a prefix, a glob or a file)."""
    from tensorflow_serving.apis import prediction_log_pb2

    files = sorted(glob.glob(pattern)) or sorted(glob.glob(pattern + "*.tfrecord"))
    if not files:
        raise FileNotFoundError(f"no request log matches {pattern!r}")
    for path in files:
        for data in _records(path):
            yield prediction_log_pb2.PredictionLog.FromString(data)


def request_texts(log) -> List[Dict[str, bytes]]:
    """The rows of string inputs of one logged request, `{input name: bytes}` per row."""
    rows: List[Dict[str, bytes]] = []
    kind = log.WhichOneof("log_type")
    if kind == "predict_log":
        columns = {name: list(t.string_val) for name, t in log.predict_log.request.inputs.items() if t.string_val}
        count = max((len(v) for v in columns.values()), default=0)
        for i in range(count):
            rows.append({name: values[i] for name, values in columns.items() if i < len(values)})
    elif kind in ("classify_log", "regress_log"):
        examples = getattr(log, kind).request.input.example_list.examples
        for example in examples:
            rows.append({name: f.bytes_list.value[0] for name, f in example.features.feature.items() if f.bytes_list.value})
    return rows
