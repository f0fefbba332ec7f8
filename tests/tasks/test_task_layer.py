"""The task layer as a library: `task_family` finds each family by task name, model directory
spec or model; `finetune(FinetuneSettings)` runs a tiny fine-tuning whose directory
`evaluate_model_dir` / `predict_model_dir` read; bad settings are one-line `TaskError`s."""

from __future__ import annotations

import csv
import json
import re

import pytest

from albert_tf.tasks import (
    ClassificationFamily,
    FinetuneSettings,
    MultipleChoiceFamily,
    SquadFamily,
    TaggingFamily,
    TaskError,
    evaluate_model_dir,
    finetune,
    predict_model_dir,
    task_family,
)
from albert_tf.tasks.family import task_names
from albert_tf.tasks.spec import TaskSpec

TOKENIZER = {"type": "sentencepiece", "file": "spiece.model", "lower_case": True}


@pytest.mark.parametrize("task, family", [
    ("sst-2", ClassificationFamily), ("STS-B", ClassificationFamily), ("classification", ClassificationFamily),
    ("regression", ClassificationFamily), ("conll", TaggingFamily), ("peoples-daily", TaggingFamily),
    ("squad-v1", SquadFamily), ("squad-v2", SquadFamily), ("race", MultipleChoiceFamily),
])
def test_task_family_by_name(task, family):
    found = task_family(task)
    assert type(found) is family and found.task == task.lower()


def test_every_task_has_a_family_and_specs_go_by_kind():
    assert {type(task_family(t)).__name__ for t in task_names()} == {
        "ClassificationFamily", "TaggingFamily", "SquadFamily", "MultipleChoiceFamily"
    }
    # The pipeline writes the generic task name; the kind decides.
    spec = TaskSpec("my-task", "regression", None, 16, ["pearson"], "pearson", TOKENIZER)
    assert type(task_family(spec)) is ClassificationFamily
    assert task_family(TaskSpec("race", "multiple_choice", ["A", "B"], 16, [], "accuracy", TOKENIZER)).reading


def test_task_family_refuses_unknown_names_and_kinds():
    with pytest.raises(TaskError, match="unknown task 'sst3'; tasks: cola, sst-2"):
        task_family("sst3")
    with pytest.raises(TaskError, match="unknown task kind 'ranking'"):
        task_family(TaskSpec("x", "ranking", None, 16, [], "", TOKENIZER))
    with pytest.raises(TaskError, match="task name or a TaskSpec"):
        task_family(3)


def test_export_arguments_and_kinds_come_from_the_family(tiny_encoder):
    from albert_tf.export.signatures import SERVING_CLASSES, model_kind
    from albert_tf.tasks.classification import build_task_model
    from albert_tf.tasks.tagging import AlbertForTagging

    tagging = TaskSpec("conll", "tagging", ["O", "B-LOC"], 16, [], "entity_f1", TOKENIZER)
    assert task_family(tagging).export_arguments(tagging) == dict(
        labels=["O", "B-LOC"], pair=False, qa_settings=None, task_settings={"token_unit": "word"}
    )
    squad = TaskSpec("squad-v2", "squad", None, 16, [], "f1", TOKENIZER, settings={"doc_stride": 8, "null_score_diff_threshold": None})
    assert task_family(squad).export_arguments(squad)["qa_settings"] == {"doc_stride": 8}
    assert model_kind(build_task_model(tiny_encoder, 2)) == "classification"
    assert model_kind(build_task_model(tiny_encoder, None)) == "regression"
    assert model_kind(AlbertForTagging(tiny_encoder, num_labels=3)) == "tagging"
    assert model_kind(tiny_encoder) == "encoder"
    assert {"classification", "regression", "tagging", "squad_v1", "squad_v2", "multiple_choice"} <= set(SERVING_CLASSES)


def _write_table(path, rows):
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f, delimiter="\t", lineterminator="\n")
        writer.writerow(["label", "text"])
        writer.writerows(rows)


@pytest.fixture()
def table(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    rows = [("pos", "the film was good fun"), ("neg", "a dull and long film")] * 8
    _write_table(data / "train.tsv", rows)
    _write_table(data / "dev.tsv", rows[:4])
    with open(data / "test.tsv", "w", encoding="utf-8") as f:
        f.write("text\nthe film was good\na dull film\n")
    return data


def _settings(tmp_path, data, tiny_spm_model, tiny_config, **overrides):
    config = tmp_path / "albert_config.json"
    tiny_config.to_json_file(str(config))
    values = dict(
        task="classification", data=str(data), model_dir=str(tmp_path / "model"), text_column="text",
        label_column="label", config=str(config), spm_model=tiny_spm_model, max_seq_length=16, batch_size=4,
        num_train_steps=2, quiet=True,
    )
    values.update(overrides)
    return FinetuneSettings(**values)


@pytest.mark.slow
def test_finetune_evaluate_and_predict_as_a_library(tmp_path, table, tiny_spm_model, tiny_config, tiny_encoder, capsys):
    init = tmp_path / "encoder.keras"
    tiny_encoder.save(str(init))
    settings = _settings(tmp_path, table, tiny_spm_model, tiny_config, init=str(init))
    outcome = finetune(settings)
    printed = capsys.readouterr().out
    assert settings.lower_case is None  # the caller's settings are left as given
    assert "fine-tuning classification: 16 train / 4 dev examples" in printed
    assert "config optimization: 2 steps (warmup 0)," in printed
    assert f"wrote {outcome.model_dir}" in printed and outcome.num_train_steps == 2
    spec = TaskSpec.read(outcome.model_dir)
    assert spec == outcome.spec and spec.labels == ["neg", "pos"] and spec.metrics == ["accuracy", "f1"]
    model_dir = tmp_path / "model"
    assert json.loads((model_dir / "finetuning.json").read_text())["metadata"]["init"]["kind"] == "keras"
    assert (model_dir / "predictions_test.tsv").read_text().splitlines()[0] == "index\tprediction"

    results = evaluate_model_dir(outcome.model_dir, str(table), splits=["dev"], batch_size=2)
    assert set(results) == {"dev"} and results["dev"]["num_examples"] == 4
    assert results["dev"]["accuracy"] == json.loads((model_dir / "eval_results.json").read_text())["dev"]["accuracy"]
    predictions = predict_model_dir(outcome.model_dir, texts=["good fun", "dull"])
    assert predictions.written is None and [set(r) for r in predictions.records] == [{"label", "probabilities"}] * 2
    output = tmp_path / "predictions.jsonl"
    assert predict_model_dir(outcome.model_dir, input=str(table / "dev.tsv"), output=str(output)).written == str(output)
    assert len(output.read_text().splitlines()) == 4
    with pytest.raises(TaskError, match="has no labels to evaluate against"):
        evaluate_model_dir(outcome.model_dir, str(table), splits=["test"])
    with pytest.raises(TaskError, match="give exactly one of"):
        predict_model_dir(outcome.model_dir)


@pytest.mark.parametrize("overrides, message", [
    (dict(task="sst3"), "--task must be one of cola, sst-2"),
    (dict(text_column=None), "--task classification needs --text-column and --label-column"),
    (dict(task="sst-2"), "--text-column/--text-b-column/--label-column are for --task classification or regression, not sst-2"),
    (dict(pooling="max"), "--pooling must be one of mean, cls, got 'max'"),
    (dict(batch_size=0), "--batch-size must be >= 1, got 0"),
    (dict(doc_stride=64), "--doc-stride is for --task squad-v1 / squad-v2, not classification"),
    (dict(warmup_proportion=2.0), r"--warmup-proportion must be in \[0, 1\], got 2.0"),
    (dict(num_train_steps=2, warmup_steps=5), r"--warmup-steps \(5\) exceeds the number of training steps \(2\)"),
    (dict(init="missing.ckpt"), "--init not found: missing.ckpt"),
    (dict(spm_model="x.model", vocab_file="vocab.txt"), "pass --spm-model or --vocab-file, not both"),
    (dict(max_seq_length=64), "--max-seq-length 64 exceeds the max_position_embeddings"),
])
def test_bad_settings_are_task_errors(tmp_path, table, tiny_spm_model, tiny_config, overrides, message):
    settings = _settings(tmp_path, table, tiny_spm_model, tiny_config, **overrides)
    with pytest.raises(TaskError) as raised:
        finetune(settings)
    # The command line's flags; the Python caller reads the same message with its argument names.
    assert re.search(message, raised.value.cli_message)
    assert "--" not in str(raised.value) and "\n" not in str(raised.value)
    assert not (tmp_path / "model").exists()


def test_an_existing_model_dir_is_kept_without_overwrite(tmp_path, table, tiny_spm_model, tiny_config):
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "notes.txt").write_text("mine")
    with pytest.raises(TaskError, match="model_dir .* is not empty; pass overwrite=True to replace it") as raised:
        finetune(_settings(tmp_path, table, tiny_spm_model, tiny_config))
    assert raised.value.cli_message.startswith("--model-dir ") and "pass --overwrite to" in raised.value.cli_message
    assert (tmp_path / "model" / "notes.txt").read_text() == "mine"
