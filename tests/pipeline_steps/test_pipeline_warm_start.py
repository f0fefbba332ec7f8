"""The continuous-training loop, end to end: a first span trains from scratch and is pushed (the
session's shared pipeline run); a second span arrives, passes data validation, and warm-starts
from the pushed model (its vocabulary, its encoder through the Pretrainer, its classifier head in
the Trainer); the Evaluator compares the candidate with that model and the Pusher publishes the
next version. Every pushed version loads with `from_pretrained`."""

import dataclasses
import json
import os
import shutil

import pytest

from _pipeline_helpers import write_span

pytestmark = pytest.mark.slow


def test_with_nothing_pushed_a_warm_start_trains_from_scratch(shared_pipeline_run, tmp_path):
    from albert_tf.pipeline_steps.staging import read_summary
    from albert_tf.pipeline_steps.vocab_gen import run_vocab_gen

    settings, artifacts = shared_pipeline_run.settings, shared_pipeline_run.run.artifacts
    summary = run_vocab_gen(artifacts["corpus_splits"], artifacts["example_splits"], str(tmp_path / "vocabulary"),
                            vocab_size=settings.vocab_size, seed=settings.seed, warm_start=True,
                            serving_base=str(tmp_path / "serving"), model_name=settings.model_name)
    assert summary["warm_start"] is None
    assert read_summary(str(tmp_path / "vocabulary"))["warm_start"] is None
    assert os.path.isfile(tmp_path / "vocabulary" / "spm.model")


def test_a_new_span_warm_starts_from_the_pushed_model(shared_pipeline_run, tmp_path, capsys):
    from albert_tf import AlbertTextClassifier
    from albert_tf.cli import main
    from albert_tf.pipeline_steps.staging import read_summary

    # Span 1 and its pushed version 1 are the shared run's; this test's copy of its serving base
    # and statistics store (span 1's statistics, the drift baseline) gets version 2.
    shared = shared_pipeline_run.settings
    assert shared_pipeline_run.run.push["pushed"] and shared_pipeline_run.run.push["version"] == 1
    shutil.copytree(shared.serving_base, tmp_path / "serving", symlinks=True)
    shutil.copytree(shared.statistics_store_path(), tmp_path / "data_validation")
    shutil.copytree(shared.task_data.replace("{SPAN}", "1"), tmp_path / "span-1")
    write_span(tmp_path / "span-2", seed=2)
    settings = dataclasses.replace(shared, task_data=str(tmp_path / "span-{SPAN}"), serving_base=str(tmp_path / "serving"),
                                   warm_start=True)
    v1 = os.path.join(settings.serving_base, "tiny", "1")

    # The CLI's run: one line says where it started from.
    config = tmp_path / "settings.json"
    config.write_text(json.dumps(settings.to_dict()), encoding="utf-8")
    code = main(["pipeline", "run", "--config", str(config), "--pipeline-root", str(tmp_path / "runs"),
                 "--no-sample-request"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert f"warm start: from {os.path.abspath(v1)}" in out
    # No drift and no error; the one warning is the share of texts longer than the tiny run's 24 pieces.
    assert "data validation: span 2 (" in out and "drift vs span 1): 0 errors, 1 warnings" in out
    assert "are longer than max_seq_length 24 pieces" in out
    [run_dir] = [d for d in sorted(os.listdir(tmp_path / "runs")) if d.startswith("albert-tf-pipeline-")][-1:]
    second = lambda step, name: os.path.join(tmp_path / "runs", run_dir, step, name)  # noqa: E731
    vocabulary = read_summary(second("vocab-gen", "vocabulary"))
    assert vocabulary["warm_start"]["path"] == os.path.abspath(v1)
    with open(os.path.join(second("vocab-gen", "vocabulary"), "spm.model"), "rb") as a, \
            open(os.path.join(v1, "assets", "spiece.model"), "rb") as b:
        assert a.read() == b.read()  # the base's vocabulary, as it is
    assert read_summary(second("pretrainer", "pretrained_model"))["warm_start"] == os.path.abspath(v1)
    trained = read_summary(second("trainer", "trained_model"))
    assert trained["init"]["warm_start"] == os.path.abspath(v1)
    evaluation = read_summary(second("evaluator", "blessing"))
    assert evaluation["baseline"] is not None  # compared with the model it started from
    assert evaluation["candidate"]["metrics"]["mcc"] > 0.3
    assert evaluation["blessed"], evaluation["reason"]
    assert sorted(os.listdir(os.path.join(settings.serving_base, "tiny"))) == ["1", "2"]

    # Every pushed version is a checkpoint for the package's own API.
    for version in ("1", "2"):
        model = AlbertTextClassifier.from_pretrained(os.path.join(settings.serving_base, "tiny", version),
                                                     num_classes=2, sequence_length=24)
        assert model.predict(["a good film"], verbose=0).shape == (1, 2)
