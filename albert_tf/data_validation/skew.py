"""Training/serving skew: the logged requests' text statistics against the training statistics, as `Anomalies`.

The requests (`model_server.request_log`: TF Serving's `PredictionLog` records) are described like a
training split (`statistics`, with the run's tokenizer), and every feature they carry is checked
against the schema (domains such as the script; presence) and compared with the training split:
with the feature's `skew_comparator`, or its `drift_comparator` when it has none (L-infinity for
categorical features, Jensen-Shannon divergence for the lengths). Features requests never carry
(the label) are skipped, as TFDV's SERVING environment does.
"""

from __future__ import annotations

from typing import Dict, Iterable

from tensorflow_metadata.proto.v0 import anomalies_pb2

from albert_tf.data_validation.records import serialize_bytes_example
from albert_tf.data_validation.statistics import StatsOptions, feature_stats, statistics_from_records
from albert_tf.data_validation.validation import check_schema, compare

SERVING = "serving"


def serving_statistics(rows: Iterable[Dict[str, bytes]], options: StatsOptions = StatsOptions(), tokenizer=None):
    """The statistics of request rows (`{input name: text bytes}`), named "serving"."""
    records = (serialize_bytes_example({k: [v] for k, v in row.items() if k in options.text_features}) for row in rows)
    return statistics_from_records(SERVING, records, options, tokenizer)


def skew_anomalies(serving, training, schema):
    """The `Anomalies` of serving statistics against the training split's, under `schema`."""
    anomalies = anomalies_pb2.Anomalies(anomaly_name_format=anomalies_pb2.Anomalies.SERIALIZED_PATH)
    anomalies.baseline.CopyFrom(schema)
    if serving.num_examples == 0:
        anomalies.data_missing = True
        return anomalies
    for feature in schema.feature:
        stats = feature_stats(serving, feature.name)
        if stats is None:
            continue
        check_schema(anomalies, serving, schema, feature.name, feature, stats)
        comparator = feature.skew_comparator if feature.HasField("skew_comparator") else feature.drift_comparator
        old = feature_stats(training, feature.name)
        if old is not None and (feature.HasField("skew_comparator") or feature.HasField("drift_comparator")):
            compare(anomalies, feature.name, comparator, old, stats, "training/serving skew", skew=True)
    return anomalies
