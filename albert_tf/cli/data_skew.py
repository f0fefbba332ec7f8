"""`albert-tf data-skew`: the served requests' text statistics against the training statistics.

    albert-tf serve --export-base serving --request-logging-config logging.pbtxt   # logs a sample
    albert-tf data-skew --requests /var/log/albert/requests \\
        --statistics RUN/statistics-gen/statistics --schema RUN/schema-gen/schema \\
        --vocabulary RUN/vocab-gen/vocabulary --output skew/

Reads the `PredictionLog` TFRecords (TF Serving's request-logging format), describes the requests'
texts like a training split, and writes `Anomalies` (`SchemaDiff.pb` + `.pbtxt`) and the serving
statistics (`FeatureStats.pb`) into `--output`; prints one line per anomaly. Exit 1 when an anomaly
is of error severity.
"""

from __future__ import annotations

NAME = "data-skew"
HELP = "Compare logged requests (TF Serving PredictionLog files) with the training statistics."


def add_arguments(parser):
    parser.add_argument("--requests", required=True, help="request log: filename_prefix, a glob or a file")
    parser.add_argument("--statistics", required=True,
                        help="training statistics: a StatisticsGen output, a Split-* folder or a FeatureStats.pb")
    parser.add_argument("--split", default="train", help="the split of a StatisticsGen output to compare with")
    parser.add_argument("--schema", required=True, help="schema.pbtxt (or the SchemaGen output holding it)")
    parser.add_argument("--vocabulary", help="VocabGen output whose tokenizer counts pieces (as in training)")
    parser.add_argument("--output", help="directory for SchemaDiff.pb(.pbtxt) and the serving FeatureStats.pb")


def run(args) -> int:
    import os

    from google.protobuf import text_format

    from albert_tf import file_io
    from albert_tf.cli import CommandError
    from albert_tf.data_validation.schema import SchemaError, load_schema
    from albert_tf.data_validation.skew import serving_statistics, skew_anomalies
    from albert_tf.data_validation.statistics import STATS_FILE, load_statistics
    from albert_tf.data_validation.validation import ERROR, anomaly_lines, severity_name
    from albert_tf.model_server.request_log import read_prediction_logs, request_texts

    path = args.statistics
    if os.path.isdir(os.path.join(path, f"Split-{args.split}")):
        path = os.path.join(path, f"Split-{args.split}")
    try:
        training = load_statistics(path).datasets[0]
        schema = load_schema(args.schema)
        tokenizer = None
        if args.vocabulary:
            from albert_tf.pipeline_steps.vocab_gen import load_tokenizer

            tokenizer = load_tokenizer(args.vocabulary)
        rows = [row for log in read_prediction_logs(args.requests) for row in request_texts(log)]
    except (OSError, SchemaError) as e:
        raise CommandError(str(e)) from None
    serving = serving_statistics(rows, tokenizer=tokenizer)
    anomalies = skew_anomalies(serving, training, schema)
    lines = anomaly_lines(anomalies)
    if args.output:
        from tensorflow_metadata.proto.v0 import statistics_pb2

        file_io.atomic_write_bytes(os.path.join(args.output, "SchemaDiff.pb"), anomalies.SerializeToString(), makedirs=True)
        file_io.atomic_write_text(os.path.join(args.output, "SchemaDiff.pbtxt"), text_format.MessageToString(anomalies))
        stats = statistics_pb2.DatasetFeatureStatisticsList(datasets=[serving])
        file_io.atomic_write_bytes(os.path.join(args.output, STATS_FILE), stats.SerializeToString())
    skews = [(d.path.step[0], m) for d in anomalies.drift_skew_info for m in d.skew_measurements]
    print(f"{serving.num_examples} logged rows against {training.name} ({training.num_examples} examples): "
          + ("; ".join(f"{name} {m.value:.3f} (threshold {m.threshold:g})" for name, m in skews) or "nothing to compare"))
    for severity, line in lines:
        print(f"{severity_name(severity)}: {line}")
    if not lines:
        print("no skew")
    return 1 if any(severity == ERROR for severity, _ in lines) else 0
