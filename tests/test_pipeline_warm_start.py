"""The continuous-training loop, end to end: a first span trains from scratch and is pushed; a
second span arrives, passes data validation, and warm-starts from the pushed model (its
vocabulary, its encoder through the Pretrainer, its classifier head in the Trainer); the
Evaluator compares the candidate with that model and the Pusher publishes the next version.
Every pushed version loads with `from_pretrained`."""

import json
import os
import random
import shutil

import pytest

from _pipeline_helpers import tiny_inputs, tiny_settings, write_keyword_task

pytestmark = pytest.mark.slow


def write_span(directory, seed):
    """A span of the keyword task, drawn with its own seed. Its eval split is large enough (300
    rows) that the drift check sees two clean spans as the same."""
    write_keyword_task(directory, random.Random(seed), (("train", 240), ("dev", 300)))


def test_a_new_span_warm_starts_from_the_pushed_model(tmp_path, capsys):
    from albert_tf import AlbertTextClassifier
    from albert_tf.cli import main
    from albert_tf.pipeline_steps.staging import read_summary
    from pipelines.albert_pipeline import run_local

    _, task = tiny_inputs(tmp_path)
    shutil.rmtree(task)
    write_span(tmp_path / "span-1", seed=1)
    settings = tiny_settings(tmp_path, task_data=str(tmp_path / "span-{SPAN}"), warm_start=True)
    first = run_local(settings, str(tmp_path / "runs"))
    assert read_summary(first.artifacts["vocabulary"])["warm_start"] is None  # nothing pushed yet
    assert first.push["pushed"] and first.push["version"] == 1
    v1 = os.path.join(settings.serving_base, "tiny", "1")

    write_span(tmp_path / "span-2", seed=2)
    # The CLI's run: one line says where it started from.
    config = tmp_path / "settings.json"
    config.write_text(json.dumps(settings.to_dict()), encoding="utf-8")
    code = main(["pipeline", "run", "--config", str(config), "--pipeline-root", str(tmp_path / "runs"),
                 "--no-sample-request"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert f"warm start: from {os.path.abspath(v1)}" in out
    assert "data validation: span 2 (" in out and "drift vs span 1): no anomalies" in out
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
