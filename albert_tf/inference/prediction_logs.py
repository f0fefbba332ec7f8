"""TF Serving's `PredictionLog` records of bulk inference, as TFX's BulkInferrer writes them.

TFX's BulkInferrer (tfx_bsl's RunInference) writes one `PredictionLog` per tf.Example, of the kind
the model's signature method names: a `classify` signature (TF Serving's Classify API) gives a
`classify_log`, a `regress` one a `regress_log`, a `predict` one a `predict_log`. An albert-tf
classifier exports `classify` (serialized tf.Examples with the feature `text` in, `classes` and
`scores` out) and a regressor `regress`; these are the signatures that take TFX's tf.Examples, so
a classifier's logs are `classify_log`s and a regressor's `regress_log`s:

* request: `model_spec` (name, signature, version of a pushed model) and the one tf.Example
  (`{"text": bytes}`) in `input.example_list`;
* response: the same `model_spec` and one classification (every label with its probability, in
  the label order of the export's `classes`) or one regression (`value`).

The files are GZIP-compressed TFRecords (`prediction_logs-SSSSS-of-NNNNN.gz`), TFX's layout;
`read_prediction_logs` reads them back.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Iterable, List, Optional, Sequence

from albert_tf.inference.inputs import TEXT_FEATURE

CLASSIFY_SIGNATURE = "classify"
REGRESS_SIGNATURE = "regress"
COMPRESSION = "GZIP"


@dataclasses.dataclass(frozen=True)
class ServedModel:
    """What a log's `model_spec` names: the model, its signature and (for a pushed version) its version."""

    name: str
    signature_name: str
    version: Optional[int] = None

    @classmethod
    def of_path(cls, path: str, signature_name: str) -> "ServedModel":
        """The model at `path`: a pushed version `<base>/<name>/<version>` is `name` at `version`;
        a model directory is its directory name."""
        path = os.path.abspath(path) if "://" not in path else path
        parent, name = os.path.split(path.rstrip("/"))
        if name.isdigit():
            return cls(os.path.basename(parent), signature_name, int(name))
        return cls(name, signature_name)

    def fill(self, spec) -> None:
        spec.name = self.name
        spec.signature_name = self.signature_name
        if self.version is not None:
            spec.version.value = self.version


def _example(text: str):
    import tensorflow as tf

    return tf.train.Example(features=tf.train.Features(feature={
        TEXT_FEATURE: tf.train.Feature(bytes_list=tf.train.BytesList(value=[text.encode("utf-8")]))
    }))


def classify_log(text: str, labels: Sequence[str], probabilities: Sequence[float], model: ServedModel):
    """The `PredictionLog` (`classify_log`) of one text: each label with its probability."""
    from tensorflow_serving.apis import classification_pb2, prediction_log_pb2

    request = classification_pb2.ClassificationRequest()
    model.fill(request.model_spec)
    request.input.example_list.examples.add().CopyFrom(_example(text))
    response = classification_pb2.ClassificationResponse()
    model.fill(response.model_spec)
    classification = response.result.classifications.add()
    for label, probability in zip(labels, probabilities):
        classification.classes.add(label=str(label), score=float(probability))
    return prediction_log_pb2.PredictionLog(classify_log=prediction_log_pb2.ClassifyLog(request=request, response=response))


def regress_log(text: str, value: float, model: ServedModel):
    """The `PredictionLog` (`regress_log`) of one text: its predicted value."""
    from tensorflow_serving.apis import prediction_log_pb2, regression_pb2

    request = regression_pb2.RegressionRequest()
    model.fill(request.model_spec)
    request.input.example_list.examples.add().CopyFrom(_example(text))
    response = regression_pb2.RegressionResponse()
    model.fill(response.model_spec)
    response.result.regressions.add(value=float(value))
    return prediction_log_pb2.PredictionLog(regress_log=prediction_log_pb2.RegressLog(request=request, response=response))


def write_prediction_logs(path: str, logs: Iterable) -> int:
    """Writes `logs` as a GZIP TFRecord file at `path` (not atomically: give a temporary path);
    returns how many."""
    import tensorflow as tf

    count = 0
    with tf.io.TFRecordWriter(path, options=COMPRESSION) as writer:
        for log in logs:
            writer.write(log.SerializeToString(deterministic=True))
            count += 1
    return count


def read_prediction_logs(paths: Sequence[str]) -> List:
    """The `PredictionLog`s of the files `paths`, in order."""
    import tensorflow as tf
    from tensorflow_serving.apis import prediction_log_pb2

    logs = []
    for path in paths:
        for serialized in tf.data.TFRecordDataset(path, compression_type=COMPRESSION).as_numpy_iterator():
            logs.append(prediction_log_pb2.PredictionLog.FromString(serialized))
    return logs


def log_text(log) -> str:
    """The text a log's request scored."""
    kind = log.WhichOneof("log_type")
    request = getattr(log, kind).request
    return request.input.example_list.examples[0].features.feature[TEXT_FEATURE].bytes_list.value[0].decode("utf-8")
