"""Bulk inference (`albert_tf.inference.bulk`, `albert-tf bulk-infer`): the answers are `predict`'s,
the PredictionLogs parse and hold them, a killed run resumes without scoring a shard twice, a Dask
cluster of two workers gives the same answers, and bad input is one line."""

from __future__ import annotations

import csv
import json
import os
import sys

import numpy as np
import pytest

from albert_tf.data.pipeline_output import PipelineError
from albert_tf.inference import bulk
from albert_tf.inference.prediction_logs import log_text, read_prediction_logs
from albert_tf.tasks import FinetuneSettings, TaskError, finetune, predict_model_dir

TEXTS = [
    "the film was good fun", "a dull and long film", "good", "dull dull dull film that was long and dull",
    "fun", "the film", "a long film was good fun and good", "bad", "a good and fun film", "long",
]


def _write_table(path, header, rows):
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f, delimiter="\t", lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)


@pytest.fixture(scope="module")
def classifier(tmp_path_factory, tiny_spm_model, tiny_config, tiny_encoder):
    """A tiny classifier fine-tuned for two steps (its answers need not be good, only definite)."""
    root = tmp_path_factory.mktemp("bulk-model")
    data = root / "data"
    data.mkdir()
    rows = [("pos", "the film was good fun"), ("neg", "a dull and long film")] * 8
    _write_table(data / "train.tsv", ["label", "text"], rows)
    _write_table(data / "dev.tsv", ["label", "text"], rows[:4])
    config = root / "albert_config.json"
    tiny_config.to_json_file(str(config))
    init = root / "encoder.keras"
    tiny_encoder.save(str(init))
    finetune(FinetuneSettings(
        task="classification", data=str(data), model_dir=str(root / "model"), text_column="text", label_column="label",
        config=str(config), spm_model=tiny_spm_model, init=str(init), max_seq_length=16, batch_size=4,
        num_train_steps=2, quiet=True,
    ))
    return str(root / "model")


@pytest.fixture()
def texts_file(tmp_path):
    path = tmp_path / "texts.txt"
    # A blank line is skipped, as `albert-tf predict --input` skips it.
    path.write_text("\n".join(TEXTS[:3] + [""] + TEXTS[3:]) + "\n", encoding="utf-8")
    return str(path)


def _jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def _same_answers(got, want):
    assert [r["label"] for r in got] == [r["label"] for r in want]
    for g, w in zip(got, want):
        assert g["probabilities"].keys() == w["probabilities"].keys()
        np.testing.assert_allclose(list(g["probabilities"].values()), list(w["probabilities"].values()), atol=1e-5)


def test_answers_equal_predict_and_the_logs_hold_them(classifier, texts_file, tmp_path):
    summary = bulk.bulk_infer(classifier, [texts_file], str(tmp_path / "out"), answers_format="jsonl", shard_size=4,
                              batch_size=3)
    want = predict_model_dir(classifier, input=texts_file).records
    _same_answers(_jsonl(summary.answers), want)
    assert summary.num_texts == len(TEXTS) and summary.num_shards == 3 and summary.shards_scored == [0, 1, 2]
    assert summary.texts_scored == len(TEXTS)
    assert sorted(os.listdir(tmp_path / "out")) == [
        "answers.jsonl", "metadata.json", "prediction_logs-00000-of-00003.gz", "prediction_logs-00001-of-00003.gz",
        "prediction_logs-00002-of-00003.gz",
    ]
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".")]  # the staging directory is gone

    logs = read_prediction_logs(summary.files)
    assert [log.WhichOneof("log_type") for log in logs] == ["classify_log"] * len(TEXTS)
    assert [log_text(log) for log in logs] == TEXTS
    for log, record in zip(logs, want):
        assert log.classify_log.request.model_spec.name == "model"
        assert log.classify_log.request.model_spec.signature_name == "classify"
        classes = log.classify_log.response.result.classifications[0].classes
        assert [c.label for c in classes] == list(record["probabilities"])
        np.testing.assert_allclose([c.score for c in classes], list(record["probabilities"].values()), atol=1e-5)
    metadata = json.loads((tmp_path / "out" / "metadata.json").read_text())
    assert metadata["prediction_log"] == "classify_log" and metadata["num_texts"] == len(TEXTS)

    # The TSV answers are predict's `index<TAB>prediction` file.
    tsv = bulk.bulk_infer(classifier, [texts_file], str(tmp_path / "tsv"), answers_format="tsv", shard_size=4)
    predict_model_dir(classifier, input=texts_file, output=str(tmp_path / "predict.tsv"))
    assert open(tsv.answers).read() == (tmp_path / "predict.tsv").read_text()


def test_tables_and_tfrecords_are_scored_alike(classifier, texts_file, tmp_path):
    import tensorflow as tf

    table = tmp_path / "reviews.tsv"
    _write_table(table, ["id", "review"], [(str(i), t) for i, t in enumerate(TEXTS)])
    records = tmp_path / "texts.tfrecord.gz"
    with tf.io.TFRecordWriter(str(records), options="GZIP") as writer:
        for text in TEXTS:
            feature = {"text": tf.train.Feature(bytes_list=tf.train.BytesList(value=[text.encode()]))}
            writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    want = _jsonl(bulk.bulk_infer(classifier, [texts_file], str(tmp_path / "a"), answers_format="jsonl").answers)
    from_table = bulk.bulk_infer(classifier, [str(table)], str(tmp_path / "b"), answers_format="jsonl",
                                 text_column="review")
    from_records = bulk.bulk_infer(classifier, [str(records)], str(tmp_path / "c"), answers_format="jsonl")
    _same_answers(_jsonl(from_table.answers), want)
    _same_answers(_jsonl(from_records.answers), want)
    # Several inputs are scored in the order given.
    both = bulk.bulk_infer(classifier, [texts_file, str(records)], str(tmp_path / "d"), answers_format="jsonl")
    _same_answers(_jsonl(both.answers), want + want)


def test_a_killed_run_resumes_without_scoring_a_shard_twice(classifier, texts_file, tmp_path, monkeypatch):
    output = str(tmp_path / "out")
    real = bulk.score_shard
    scored = []

    def killed_at_shard_3(job, model, index, texts):
        if index == 3:
            raise RuntimeError("killed")
        scored.append(index)
        return real(job, model, index, texts)

    monkeypatch.setattr(bulk, "score_shard", killed_at_shard_3)
    with pytest.raises(PipelineError, match=r"bulk inference failed \(3 of 5 shards complete, kept for the next run\)"):
        bulk.bulk_infer(classifier, [texts_file], output, answers_format="jsonl", shard_size=2)
    assert scored == [0, 1, 2] and not os.path.exists(output)
    staging = bulk.staging_dir(output)
    assert bulk.complete_shards(staging, 5) == [0, 1, 2]
    # A file left half-written, and a shard's output lost: neither counts as complete.
    with open(os.path.join(staging, ".prediction_logs-00003-of-00005.gz.tmp-0123abcd"), "wb") as f:
        f.write(b"half")
    os.remove(os.path.join(staging, "prediction_logs-00001-of-00005.gz"))
    kept = os.stat(os.path.join(staging, "prediction_logs-00000-of-00005.gz")).st_mtime_ns

    scored.clear()

    def counting(job, model, index, texts):
        scored.append(index)
        return real(job, model, index, texts)

    monkeypatch.setattr(bulk, "score_shard", counting)
    summary = bulk.bulk_infer(classifier, [texts_file], output, answers_format="jsonl", shard_size=2)
    assert scored == [1, 3, 4] and summary.shards_scored == [1, 3, 4] and summary.texts_scored == 6
    assert os.stat(os.path.join(output, "prediction_logs-00000-of-00005.gz")).st_mtime_ns == kept
    assert not os.path.exists(staging) and not [n for n in os.listdir(output) if n.startswith(".")]
    _same_answers(_jsonl(summary.answers), predict_model_dir(classifier, input=texts_file).records)
    assert [log_text(log) for log in read_prediction_logs(summary.files)] == TEXTS


@pytest.mark.slow
def test_a_local_dask_cluster_of_two_workers_gives_the_same_answers(classifier, texts_file, tmp_path):
    direct = bulk.bulk_infer(classifier, [texts_file], str(tmp_path / "direct"), answers_format="jsonl", shard_size=3)
    dask = bulk.bulk_infer(classifier, [texts_file], str(tmp_path / "dask"), answers_format="jsonl", shard_size=3,
                           num_workers=2)
    assert dask.shards_scored == [0, 1, 2, 3] and dask.texts_scored == len(TEXTS)
    _same_answers(_jsonl(dask.answers), _jsonl(direct.answers))
    assert [log_text(log) for log in read_prediction_logs(dask.files)] == TEXTS


def _cli(argv, capsys):
    from albert_tf.cli import main

    code = main(["bulk-infer", *argv])
    return code, capsys.readouterr()


def _bad_inputs(tmp_path):
    (tmp_path / "latin1.txt").write_bytes("caf\xe9 au lait\n".encode("latin-1"))
    (tmp_path / "empty.txt").write_text("\n\n", encoding="utf-8")
    _write_table(tmp_path / "reviews.tsv", ["id", "review"], [("1", "good")])
    return {
        "missing": ([str(tmp_path / "nope.txt")], [], "input not found: "),
        "not UTF-8": ([str(tmp_path / "latin1.txt")], [], "latin1.txt:1: not valid UTF-8"),
        "empty": ([str(tmp_path / "empty.txt")], [], "has no text"),
        "missing column": ([str(tmp_path / "reviews.tsv")], ["--text-column", "body"], "no column 'body'"),
    }


@pytest.mark.parametrize("case", ["missing", "not UTF-8", "empty", "missing column"])
def test_bad_input_is_one_line(classifier, tmp_path, capsys, case):
    inputs, extra, message = _bad_inputs(tmp_path)[case]
    code, out = _cli(["--model", classifier, "--input", *inputs, "--output", str(tmp_path / "out"), *extra], capsys)
    assert code == 2 and message in out.err and len(out.err.strip().splitlines()) == 1, out.err
    assert not os.path.exists(tmp_path / "out")


def test_bad_arguments_and_models_are_one_line(classifier, texts_file, tmp_path, capsys):
    code, out = _cli(["--model", str(tmp_path), "--input", texts_file, "--output", str(tmp_path / "o")], capsys)
    assert code == 2 and "no COMPLETE file" in out.err and len(out.err.strip().splitlines()) == 1
    code, out = _cli(["--model", classifier, "--input", texts_file, "--output", str(tmp_path / "o"),
                      "--batch-size", "0"], capsys)
    assert code == 2 and "--batch-size must be >= 1, got 0" in out.err
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    code, out = _cli(["--model", classifier, "--input", texts_file, "--output", str(tmp_path / "full")], capsys)
    assert code == 2 and "--output" in out.err and "is not empty (pass --overwrite)" in out.err
    with pytest.raises(TaskError, match="answers_format must be one of jsonl, tsv"):
        bulk.bulk_infer(classifier, [texts_file], str(tmp_path / "o"), answers_format="csv")


def test_the_cli_scores_and_says_what_it_did(classifier, texts_file, tmp_path, capsys):
    code, out = _cli(["--model", classifier, "--input", texts_file, "--output", str(tmp_path / "out"),
                      "--answers", "jsonl", "--shard-size", "4"], capsys)
    assert code == 0 and out.out.strip() == f"scored {len(TEXTS)} texts in 3 shards: {tmp_path / 'out'}"
    assert len(_jsonl(tmp_path / "out" / "answers.jsonl")) == len(TEXTS)


def test_the_pipeline_has_the_bulk_inferrer_only_when_asked(tmp_path):
    import dataclasses

    import yaml

    from pipelines.albert_pipeline import compile_pipeline, pipeline_arguments
    sys.path.insert(0, os.path.dirname(__file__))
    from _pipeline_helpers import tiny_settings

    settings = tiny_settings(tmp_path)
    assert settings.bulk_infer_input is None
    plain = yaml.safe_load(open(compile_pipeline(settings, str(tmp_path / "plain.yaml"))))
    assert "bulk-inferrer" not in plain["root"]["dag"]["tasks"]
    assert "bulk_infer_input" not in plain["root"]["inputDefinitions"]["parameters"]
    scoring = dataclasses.replace(settings, bulk_infer_input=str(tmp_path / "unlabelled.txt"))
    spec = yaml.safe_load(open(compile_pipeline(scoring, str(tmp_path / "bulk.yaml"))))
    task = spec["root"]["dag"]["tasks"]["bulk-inferrer"]
    assert task["inputs"]["artifacts"]["pushed_model"]["taskOutputArtifact"] == {
        "outputArtifactKey": "pushed_model", "producerTask": "pusher"}
    assert set(spec["root"]["inputDefinitions"]["parameters"]) == set(pipeline_arguments(scoring))
    assert "enableCache" not in task["cachingOptions"]  # it depends on what is pushed: never cached


def test_the_bulk_inferrer_step_scores_with_the_pushed_model(classifier, texts_file, tmp_path):
    from albert_tf.pipeline_steps.bulk_inferrer import run_bulk_inferrer
    from albert_tf.pipeline_steps.staging import read_summary, write_summary

    pushed = tmp_path / "pushed"
    pushed.mkdir()
    write_summary(str(pushed), {"pushed": True, "reason": "blessed", "version": 1, "path": classifier})
    result = run_bulk_inferrer(str(pushed), [texts_file], str(tmp_path / "result"))
    assert result["inferred"] and result["num_texts"] == len(TEXTS)
    assert read_summary(str(tmp_path / "result"))["num_texts"] == len(TEXTS)
    _same_answers(_jsonl(tmp_path / "result" / "answers.jsonl"), predict_model_dir(classifier, input=texts_file).records)
    unblessed = tmp_path / "unblessed"
    unblessed.mkdir()
    write_summary(str(unblessed), {"pushed": False, "reason": "the Evaluator did not bless the candidate"})
    skipped = run_bulk_inferrer(str(unblessed), [texts_file], str(tmp_path / "none"))
    assert skipped == {"inferred": False, "reason": "nothing served: the Evaluator did not bless the candidate"}
    assert os.listdir(tmp_path / "none") == ["summary.json"]
