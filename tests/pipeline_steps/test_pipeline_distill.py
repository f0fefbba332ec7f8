"""The pipeline's optional Distiller: its settings, the Evaluator's teacher gate, the compiled
pipeline with and without it, and (slow) a run that pushes a student: the session's shared tiny
run with the Distiller added, its data and training steps taken from that run's cache."""

from __future__ import annotations

import dataclasses
import json
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _pipeline_helpers import fresh_serving_base, tiny_settings  # noqa: E402


def test_distill_settings_are_checked_and_off_by_default(tmp_path):
    from albert_tf.pipeline_steps.settings import PipelineSettings, SettingsError

    assert not PipelineSettings().distill_settings().enabled
    settings = PipelineSettings(distill={"enabled": True, "student": "shared:1", "teacher_margin": 0.05})
    assert settings.distill_settings().teacher_margin == 0.05
    for bad, message in (({"studnet": "tiny"}, "unknown setting(s) studnet"), ({"alpha": 2.0}, "distill.alpha"),
                         ({"transfer": "all"}, "distill.transfer"), ({"unlabeled_from_train": True}, "needs distill.max_labeled"),
                         ("shared:1", "must be a mapping")):
        with pytest.raises(SettingsError, match=message.replace("(", r"\(").replace(")", r"\)")):
            PipelineSettings(distill=bad)


def test_teacher_margin_gate():
    from albert_tf.evaluation import BlessingRule, decide, majority_class_baseline

    constant = majority_class_baseline([0, 1, 1, 0, 1], ["accuracy"], label_names=["a", "b"])
    rule = BlessingRule(metric="accuracy", confidence=0.0, teacher_margin=0.02)
    close = decide({"accuracy": 0.89}, constant, rule, examples=5, teacher={"accuracy": 0.90})
    assert close.blessed and close.checks[-1].name == "within the margin of the teacher"
    far = decide({"accuracy": 0.85}, constant, rule, examples=5, teacher={"accuracy": 0.90})
    assert not far.blessed and far.reason.startswith("within the margin of the teacher failed: accuracy 0.8500 vs the teacher's 0.9000")
    assert "teacher_margin" not in BlessingRule().to_dict()  # the rule without a teacher reads as before
    with pytest.raises(ValueError, match="no teacher"):
        decide({"accuracy": 0.9}, constant, rule, examples=5)


def test_compiled_pipeline_has_the_distiller_only_when_asked(tmp_path):
    import yaml

    from pipelines.albert_pipeline import compile_pipeline, pipeline_arguments

    settings = tiny_settings(tmp_path)
    plain = yaml.safe_load(open(compile_pipeline(settings, str(tmp_path / "plain.yaml"))))
    assert "distiller" not in plain["root"]["dag"]["tasks"] and "distill_json" not in plain["root"]["inputDefinitions"]["parameters"]
    distilling = dataclasses.replace(settings, distill={"enabled": True, "student": "shared:1"})
    spec = yaml.safe_load(open(compile_pipeline(distilling, str(tmp_path / "distill.yaml"))))
    tasks = spec["root"]["dag"]["tasks"]
    assert {"distiller", "distilled-evaluator"} <= set(tasks) and "evaluator" not in tasks
    assert set(spec["root"]["inputDefinitions"]["parameters"]) == set(pipeline_arguments(distilling))
    # The student, not the teacher, goes to the InfraValidator and the Pusher.
    for name in ("infra-validator", "pusher"):
        artifact = tasks[name]["inputs"]["artifacts"]["trained_model"]["taskOutputArtifact"]
        assert artifact == {"outputArtifactKey": "distilled_model", "producerTask": "distiller"}


@pytest.mark.slow
def test_pipeline_with_the_distiller_pushes_a_student(shared_pipeline_run, tmp_path, capsys):
    """Through `albert-tf pipeline run`, as a user runs it: the command lists the student among
    the artifacts, shows the teacher's metrics beside the candidate's, pushes and serves it."""
    from albert_tf.cli import main
    from albert_tf.pipeline_steps.staging import read_summary

    settings = dataclasses.replace(
        shared_pipeline_run.settings,
        distill={"enabled": True, "student": "shared:1", "epochs": 1.0, "alpha": 0.5, "teacher_margin": 0.05},
    )
    config = tmp_path / "distill.json"
    config.write_text(json.dumps(settings.to_dict()), encoding="utf-8")
    # The student is the first version of an empty serving base (the shared run's is put back).
    with fresh_serving_base(settings):
        capsys.readouterr()
        code = main(["pipeline", "run", "--config", str(config), "--pipeline-root", shared_pipeline_run.pipeline_root])
        out = capsys.readouterr().out
    assert code == 0, out
    listed = out.split("\nartifacts:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    artifacts = dict(line.strip().split(": ", 1) for line in listed)
    assert list(artifacts)[8:10] == ["trained_model", "distilled_model"]
    student = artifacts["distilled_model"]
    summary = read_summary(student)
    assert summary["distill"]["student"] == "shared:1"
    assert read_summary(os.path.join(student, "model", "..")) == summary
    # The Trainer's model came from the cache: the teacher is the shared run's.
    assert artifacts["trained_model"] == shared_pipeline_run.run.artifacts["trained_model"]
    teacher = read_summary(artifacts["blessing"])["teacher"]["metrics"]
    assert f"  teacher (Trainer):     accuracy {teacher['accuracy']:.4f}" in out
    assert "pushed version 1 ->" in out and "sample request of the eval split via the local server" in out
