"""Data validation in TFDV's formats: every injected anomaly caught with its one-line message, a clean
second span of the sample without a false alarm, the protos round-trip, spans, and the pipeline stopped
before the Transform by an anomalous span."""

from __future__ import annotations

import os
import random
import sys

import pytest
from google.protobuf import text_format
from tensorflow_metadata.proto.v0 import anomalies_pb2, schema_pb2, statistics_pb2

from albert_tf.data_validation import drift
from albert_tf.data_validation.records import bytes_features, serialize_bytes_example
from albert_tf.data_validation.schema import infer_schema, load_schema, write_schema
from albert_tf.data_validation.statistics import (
    STATS_FILE,
    StatsOptions,
    generate_statistics,
    load_statistics,
    statistics_from_records,
)
from albert_tf.data_validation.validation import ERROR, anomaly_lines, validate_statistics

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "albert_tf", "resources", "sample",
                      "rotten_tomatoes", "train.tsv")
# Chinese reviews arriving in the English feed (the script changes; lengths too).
CHINESE = ["这本书写得非常好，我很喜欢。", "电影的情节太无聊了，演员也不好。", "服务态度很差，再也不来了。",
           "音乐很美，故事感人，值得一看。", "价格便宜，质量不错，推荐购买。"]
T = anomalies_pb2.AnomalyInfo


def sample_rows():
    lines = open(SAMPLE, encoding="utf-8").read().splitlines()[1:]
    rows = [tuple(line.split("\t", 1)) for line in lines]
    random.Random(0).shuffle(rows)
    return rows


def records(rows):
    return [serialize_bytes_example({"label": [label.encode()], "text": [text.encode()]}) for label, text in rows]


def stats(rows, name="train"):
    return statistics_from_records(name, records(rows))


@pytest.fixture(scope="module")
def spans():
    """Two clean spans of the sample (its two halves), the first's statistics and schema."""
    rows = sample_rows()
    first, second = rows[: len(rows) // 2], rows[len(rows) // 2:]
    baseline = stats(first)
    return first, second, baseline, infer_schema(baseline)


def errors(anomalies):
    return [line for severity, line in anomaly_lines(anomalies) if severity == ERROR]


def reasons(anomalies):
    return {(name, r.type) for name, info in anomalies.anomaly_info.items() for r in info.reason}


def test_a_clean_second_span_raises_no_alarm(spans):
    first, second, baseline, schema = spans
    result = validate_statistics(stats(second), schema, baseline, "span 1")
    assert anomaly_lines(result) == []
    # Drift was measured (and is small) for the label, the lengths and the script.
    measured = {d.path.step[0]: d.drift_measurements[0].value for d in result.drift_skew_info}
    assert set(measured) == {"label", "text_char_length", "text_piece_length", "text_script"}
    assert max(measured.values()) < 0.05
    # The eval split of the same span, checked against the schema only, passes too.
    assert anomaly_lines(validate_statistics(stats(second[:300], "eval"), schema)) == []


def _inject(kind, rows):
    if kind == "new label":
        return [("2" if i % 10 == 0 else label, text) for i, (label, text) in enumerate(rows)]
    if kind == "30 % empty texts":
        return [(label, "" if i % 10 < 3 else text) for i, (label, text) in enumerate(rows)]
    if kind == "texts cut to 5 words":
        return [(label, " ".join(text.split()[:5])) for label, text in rows]
    if kind == "90/10 label flip":
        return [("0" if i % 10 == 0 else "1", text) for i, (_, text) in enumerate(rows)]
    if kind == "another script":
        return [(label, CHINESE[i % len(CHINESE)] + CHINESE[(i * 7) % len(CHINESE)]) for i, (label, _) in enumerate(rows)]
    raise AssertionError(kind)


@pytest.mark.parametrize("kind, feature, anomaly, message", [
    ("new label", "label", T.ENUM_TYPE_UNEXPECTED_STRING_VALUES,
     "train: label: expected values in {'0', '1'}, found '2' (10.0 %)."),
    ("30 % empty texts", "text", T.FEATURE_TYPE_LOW_FRACTION_PRESENT,
     "train: text: expected at most 1.0 % of the examples missing or empty (presence.min_fraction 0.99), "
     "found 30.0 % (600 of 2000)."),
    ("texts cut to 5 words", "text_piece_length", T.COMPARATOR_JENSEN_SHANNON_DIVERGENCE_HIGH,
     "train: text_piece_length: drift from span 1: expected a Jensen-Shannon divergence of at most 0.1, found "),
    ("90/10 label flip", "label", T.COMPARATOR_L_INFTY_HIGH,
     "train: label: drift from span 1: expected an L-infinity distance of at most 0.15, found "),
    ("another script", "text_script", T.ENUM_TYPE_UNEXPECTED_STRING_VALUES,
     "train: text_script: expected values in {'Latin'} (at most 1.0 % outside it), found 'Han' (100.0 %)."),
])
def test_each_injected_anomaly_is_caught_with_its_line(spans, kind, feature, anomaly, message):
    _, second, baseline, schema = spans
    result = validate_statistics(stats(_inject(kind, second)), schema, baseline, "span 1")
    assert (feature, anomaly) in reasons(result)
    assert result.anomaly_info[feature].severity == ERROR
    lines = [f"train: {line}" for line in errors(result)]
    assert any(line.startswith(message) for line in lines), lines
    assert all("\n" not in line for line in lines)


def test_schema_alone_catches_what_needs_no_baseline(spans):
    _, second, _, schema = spans
    for kind, feature in (("new label", "label"), ("30 % empty texts", "text"), ("another script", "text_script")):
        assert feature in validate_statistics(stats(_inject(kind, second)), schema).anomaly_info


def test_missing_and_new_features_and_an_empty_split(spans):
    _, second, _, schema = spans
    rows = [serialize_bytes_example({"text": [t.encode()], "text_b": [b"x"]}) for _, t in second[:50]]
    result = validate_statistics(statistics_from_records("train", rows), schema)
    assert ("label", T.SCHEMA_MISSING_COLUMN) in reasons(result) and ("text_b", T.SCHEMA_NEW_COLUMN) in reasons(result)
    empty = validate_statistics(statistics_from_records("eval", []), schema)
    assert empty.data_missing and empty.dataset_anomaly_info.reason[0].type == T.NO_DATA_IN_SPAN


def test_text_statistics(spans):
    dataset = statistics_from_records("train", records([("1", "Good\x07 film"), ("0", ""), ("1", "很好")]) +
                                      [serialize_bytes_example({"label": [b"1"], "text": [b"bad \xff bytes"]})])
    text = next(f for f in dataset.features if f.path.step[0] == "text")
    custom = {c.name: c for c in text.custom_stats}
    assert custom["empty_count"].num == 1 and custom["control_char_count"].num == 1
    assert custom["invalid_text_count"].num == 1 and text.string_stats.invalid_utf8_count == 1
    nl = statistics_pb2.NaturalLanguageStatistics()
    assert custom["nl_statistics"].any.Unpack(nl) and nl.max_sequence_length == 3
    script = next(f for f in dataset.features if f.path.step[0] == "text_script")
    assert {b.label: b.sample_count for b in script.string_stats.rank_histogram.buckets} == {"Latin": 2, "Han": 1}
    lengths = next(f for f in dataset.features if f.path.step[0] == "text_char_length")
    assert lengths.validation_derived_source.source_path[0].step == ["text"]
    assert (lengths.num_stats.min, lengths.num_stats.max, lengths.num_stats.num_zeros) == (0, 11, 1)  # "bad \ufffd bytes"


def test_drift_measures():
    assert drift.l_infinity({"a": 0.5, "b": 0.5}, {"a": 0.9, "b": 0.1}) == (pytest.approx(0.4), "a")
    same = [(0, 10, 5.0), (10, 20, 5.0)]
    assert drift.jensen_shannon(same, same) == pytest.approx(0.0)
    assert drift.jensen_shannon([(0, 1, 3.0)], [(5, 6, 3.0)]) == pytest.approx(1.0)
    # Different bucket boundaries over the same uniform data: no divergence.
    assert drift.jensen_shannon([(0, 10, 10.0)], [(0, 5, 5.0), (5, 10, 5.0)]) == pytest.approx(0.0, abs=1e-9)


def test_protos_round_trip_through_tensorflow_metadata(tmp_path, spans):
    _, second, baseline, schema = spans
    # Statistics: binary through Beam (the StatisticsGen path) equals the in-process computation.
    path = tmp_path / "part.tfrecord"
    from albert_tf.data.tfrecords import frame_record

    path.write_bytes(b"".join(frame_record(r) for r in records(second)))
    generate_statistics({"train": str(path)}, {"train": str(tmp_path / "Split-train")}, options=StatsOptions())
    from_beam = load_statistics(str(tmp_path / "Split-train"))
    assert from_beam.datasets[0] == stats(second)
    again = statistics_pb2.DatasetFeatureStatisticsList.FromString((tmp_path / "Split-train" / STATS_FILE).read_bytes())
    assert again == from_beam
    as_text = load_statistics(str(tmp_path / "Split-train" / "FeatureStats.pbtxt"))
    assert as_text == from_beam
    # Schema: text format, written and read back.
    written = write_schema(schema, str(tmp_path / "schema"))
    assert load_schema(written) == schema
    assert text_format.Parse(open(written).read(), schema_pb2.Schema()) == schema
    # Anomalies: binary and text.
    result = validate_statistics(stats(_inject("new label", second)), schema, baseline)
    assert anomalies_pb2.Anomalies.FromString(result.SerializeToString()) == result
    assert text_format.Parse(text_format.MessageToString(result), anomalies_pb2.Anomalies()) == result
    assert result.baseline == schema


def test_records_decode_without_tensorflow():
    record = serialize_bytes_example({"text": [b"a", b"b"], "label": [b"1"]})
    assert bytes_features(record) == {"text": [b"a", b"b"], "label": [b"1"]}


def test_spans(tmp_path):
    from albert_tf.pipeline_steps.spans import SpanError, resolve_span, resolve_spans

    for name in ("span-1", "span-2", "span-10-v1", "span-10-v3"):
        (tmp_path / name).mkdir()
    assert resolve_span(str(tmp_path / "span-1")).span == 0  # no {SPAN}: span 0
    versioned = resolve_span(str(tmp_path / "span-{SPAN}-v{VERSION}"))
    assert (versioned.span, versioned.version, versioned.path) == (10, 3, str(tmp_path / "span-10-v3"))
    assert resolve_span(str(tmp_path / "span-{SPAN}"), 2).path == str(tmp_path / "span-2")
    assert resolve_span(str(tmp_path / "span-{SPAN}")).span == 2  # span-10-v1 does not match this pattern
    with pytest.raises(SpanError, match=r"no span 5 .*spans found: 1, 2"):
        resolve_span(str(tmp_path / "span-{SPAN}"), 5)
    # A rolling range: the latest N spans that exist, oldest first.
    (tmp_path / "span-4").mkdir()
    assert [s.span for s in resolve_spans(str(tmp_path / "span-{SPAN}"), num_spans=3)] == [2, 4]
    assert [s.span for s in resolve_spans(str(tmp_path / "span-{SPAN}"), 2, num_spans=5)] == [1, 2]


def test_example_gen_reads_the_latest_span_or_a_range(tmp_path):
    from _pipeline_helpers import write_corpus, write_task
    from albert_tf.pipeline_steps.example_gen import read_split, run_example_gen
    from albert_tf.pipeline_steps.staging import read_summary

    corpus = write_corpus(tmp_path / "corpus", 3)
    for span, word in ((1, "old"), (2, "new")):
        write_task(tmp_path / f"task-{span}", [("1", f"{word} good"), ("0", f"{word} bad")], [("1", f"{word} fine")])
    pattern = str(tmp_path / "task-{SPAN}")
    run_example_gen(corpus, pattern, str(tmp_path / "c1"), str(tmp_path / "e1"))
    assert [r["text"] for r in read_split(str(tmp_path / "e1"), "train")] == ["new good", "new bad"]
    assert read_summary(str(tmp_path / "e1"))["span"] == 2
    run_example_gen(corpus, pattern, str(tmp_path / "c2"), str(tmp_path / "e2"), num_spans=2)
    assert [r["text"] for r in read_split(str(tmp_path / "e2"), "eval")] == ["old fine", "new fine"]
    assert read_summary(str(tmp_path / "e2"))["spans"] == [1, 2]


def _write_split_stats(root, span, rows_by_split):
    """A StatisticsGen output of `span` (statistics written as the step writes them)."""
    from albert_tf.data_validation.statistics import SplitAccumulator, _write_split
    from albert_tf.pipeline_steps.staging import write_summary

    for split, rows in rows_by_split.items():
        acc = SplitAccumulator()
        for record in records(rows):
            acc.add_record(record, StatsOptions())
        _write_split(acc, split, os.path.join(root, f"Split-{split}"), StatsOptions())
        _write_split(acc, split, os.path.join(root, "corpus", f"Split-{split}"), StatsOptions())
    write_summary(root, {"span": span, "examples": {s: len(r) for s, r in rows_by_split.items()}})
    return root


def test_validator_step_stores_spans_and_stops_on_errors(tmp_path, spans, capsys):
    from albert_tf.data_validation.validation import DataValidationError
    from albert_tf.pipeline_steps.example_validator import previous_span, run_example_validator
    from albert_tf.pipeline_steps.schema_gen import run_schema_gen
    from albert_tf.pipeline_steps.staging import read_summary

    first, second, _, _ = spans
    store = str(tmp_path / "store")
    one = _write_split_stats(str(tmp_path / "stats1"), 1, {"train": first[:1500], "eval": first[1500:]})
    assert run_schema_gen(one, str(tmp_path / "schema1"), store=store)["source"] == "inferred"
    summary = run_example_validator(one, str(tmp_path / "schema1"), str(tmp_path / "val1"), store=store)
    assert summary["passed"] and summary["previous_span"] is None and os.path.isfile(summary["report"])
    assert previous_span(store, 2) == 1
    # The next span is flipped 90/10: drift against span 1 stops it; it is not stored as a baseline.
    flipped = _inject("90/10 label flip", second)
    two = _write_split_stats(str(tmp_path / "stats2"), 2, {"train": flipped[:1500], "eval": second[1500:]})
    assert run_schema_gen(two, str(tmp_path / "schema2"), store=store)["source"] == "stored"
    with pytest.raises(DataValidationError) as caught:
        run_example_validator(two, str(tmp_path / "schema2"), str(tmp_path / "val2"), store=store)
    message = str(caught.value).splitlines()
    assert message[0].startswith("span 2: 1 anomaly of error severity (report: ")
    assert message[1].startswith("train: label: drift from span 1: expected an L-infinity distance of at most 0.15")
    out = capsys.readouterr().out
    assert "ERROR: data validation: train: label: drift from span 1" in out
    assert not read_summary(str(tmp_path / "val2"))["passed"]
    written = anomalies_pb2.Anomalies.FromString((tmp_path / "val2" / "Split-train" / "SchemaDiff.pb").read_bytes())
    assert "label" in written.anomaly_info
    assert "label: drift from span 1" in (tmp_path / "val2" / "report.html").read_text()
    assert previous_span(store, 3) == 1
    # A pinned schema is used as given.
    pinned = tmp_path / "pinned.pbtxt"
    pinned.write_text('feature { name: "label" type: BYTES }\n', encoding="utf-8")
    assert run_schema_gen(two, str(tmp_path / "schema3"), schema=str(pinned), store=store)["source"] == "pinned"
    assert [f.name for f in load_schema(str(tmp_path / "schema3")).feature] == ["label"]


@pytest.mark.slow
def test_an_anomalous_span_stops_the_pipeline_before_the_transform(tmp_path, capsys):
    """The latest span has a new label: the ExampleValidator fails the run (exit 4: the data
    refused) with the anomaly's line; nothing is transformed, trained or pushed."""
    import json

    from _pipeline_helpers import tiny_inputs, tiny_settings
    from albert_tf.cli import main
    from albert_tf.data_validation.statistics import statistics_from_records as from_records

    corpus, task = tiny_inputs(tmp_path)
    lines = open(os.path.join(task, "train.tsv"), encoding="utf-8").read().splitlines()[1:]
    clean = [tuple(line.split("\t", 1)) for line in lines]
    # The schema the team pinned after the first span.
    schema = write_schema(infer_schema(from_records("train", records(clean))), str(tmp_path / "pinned"))
    span = tmp_path / "task-2"
    span.mkdir()
    for name in ("train", "dev"):
        rows = open(os.path.join(task, f"{name}.tsv"), encoding="utf-8").read().splitlines()
        body = [("2\t" + r.split("\t", 1)[1]) if i % 5 == 0 else r for i, r in enumerate(rows[1:])]
        (span / f"{name}.tsv").write_text("\n".join([rows[0]] + body) + "\n", encoding="utf-8")
    settings = tiny_settings(tmp_path, task_data=str(tmp_path / "task-{SPAN}"), schema=schema)
    os.rename(task, tmp_path / "task-1")
    config = tmp_path / "run.json"
    config.write_text(json.dumps(settings.to_dict()), encoding="utf-8")
    code = main(["pipeline", "run", "--config", str(config), "--pipeline-root", str(tmp_path / "runs"),
                 "--no-sample-request"])
    out, err = capsys.readouterr()
    assert code == 4
    assert "ERROR: data validation: train: label: expected values in {'0', '1'}, found '2' (20.0 %)." in out
    assert err.startswith("albert-tf pipeline: error: ExampleValidator: ") and len(err.strip().splitlines()) == 1
    assert "transform        SUCCESS" not in out and "trainer          SUCCESS" not in out
    assert not glob_any(tmp_path / "runs", "transform") and not os.path.exists(settings.serving_base)


def glob_any(root, step):
    import glob

    return glob.glob(os.path.join(str(root), "*", step, "*"))


def test_request_log_round_trip_and_skew(tmp_path, spans):
    """Requests logged in TF Serving's format (sampled) and read back; English requests show no skew
    against the training statistics, Chinese ones do (the script), in the same `Anomalies` format."""
    import numpy as np

    from albert_tf.data_validation.skew import serving_statistics, skew_anomalies
    from albert_tf.model_server.request_log import (
        LoggingConfigError,
        RequestLogger,
        load_logging_config,
        read_prediction_logs,
        request_texts,
    )

    first, second, baseline, schema = spans
    config_file = tmp_path / "logging.pbtxt"
    config_file.write_text(f'log_collector_config {{ type: "tfrecord" filename_prefix: "{tmp_path}/logs/req" }}\n'
                           'sampling_config { sampling_rate: 0.5 }\n', encoding="utf-8")
    logger = RequestLogger(load_logging_config(str(config_file)), seed=0)
    texts = [t for _, t in second[:400]]
    sampled = sum(logger.log("m", 3, "serving_default", {"text": np.array([t.encode() for t in texts[i:i + 2]], dtype=object)},
                             {"probabilities": np.zeros((2, 2), np.float32)}) for i in range(0, 400, 2))
    logger.close()
    assert 70 < sampled < 130 and logger.logged == sampled
    logs = list(read_prediction_logs(str(tmp_path / "logs" / "req")))
    assert len(logs) == sampled and logs[0].log_metadata.model_spec.name == "m"
    assert logs[0].log_metadata.sampling_config.sampling_rate == 0.5
    assert logs[0].predict_log.response.outputs["probabilities"].tensor_shape.dim[0].size == 2
    rows = [row for log in logs for row in request_texts(log)]
    assert len(rows) == 2 * sampled and rows[0]["text"].decode() in texts
    clean = skew_anomalies(serving_statistics(rows), baseline, schema)
    assert anomaly_lines(clean) == [] and {d.path.step[0] for d in clean.drift_skew_info} >= {"text_char_length", "text_script"}
    assert not any(d.drift_measurements for d in clean.drift_skew_info)  # skew, not drift
    chinese = [{"text": CHINESE[i % 5].encode()} for i in range(100)]
    skewed = skew_anomalies(serving_statistics(chinese), baseline, schema)
    assert any(line.startswith("text_script: training/serving skew: expected an L-infinity distance")
               for _, line in anomaly_lines(skewed))
    config_file.write_text("sampling_config { sampling_rate: 2 }\n", encoding="utf-8")
    with pytest.raises(LoggingConfigError, match="filename_prefix is required"):
        load_logging_config(str(config_file))
