"""Tests of SQuAD v1/v2 and RACE through the `finetune`, `evaluate` and `predict` subcommands
(`albert_tf.cli.finetune`, `albert_tf.cli.evaluate`, `albert_tf.cli.predict`), with a tiny
SentencePiece model, a tiny encoder and handmade data files."""

import json
import re

import pytest

from _cli_helpers import cli_runner, write_config
from albert_tf.tokenization import SentencePieceTokenizer

MODULES = ("albert_tf.cli.finetune", "albert_tf.cli.evaluate", "albert_tf.cli.predict")
CONTEXT = (
    "The Normans were the people who gave their name to Normandy, a region in France. "
    "Albert Einstein was born in Ulm in 1879."
)
QUESTIONS = [
    ("q1", "Who gave their name to Normandy?", "The Normans"),
    ("q2", "Where is Normandy?", "France"),
    ("q3", "Where was Einstein born?", "Ulm"),
    ("q4", "When was Einstein born?", "1879"),
]
UNANSWERABLE = ("n1", "Who is the king of Ulm?")
SQUAD_LENGTHS = ["--max-seq-length", 64, "--doc-stride", 32, "--max-query-length", 10]
TRAINING = ["--batch-size", 4, "--num-train-steps", 4, "--eval-every", 4, "--learning-rate", 1e-3, "--quiet"]
ARTICLES = [
    {
        "id": "middle1.txt",
        "article": "The Normans gave their name to Normandy, a region in France.",
        "questions": ["Where is Normandy?", "The Normans gave their name to _ ."],
        "options": [["France", "Denmark", "Norway", "Iceland"], ["Paris", "Normandy", "Ulm", "the Seine"]],
        "answers": ["A", "B"],
    },
    {
        "id": "high7.txt",
        "article": "Albert Einstein was born in Ulm in 1879.",
        "questions": ["Where was Einstein born?"],
        "options": [["Paris", "Ulm", "France", "Norway"]],
        "answers": ["B"],
    },
]


cli = cli_runner(MODULES)


def squad_json(with_unanswerable):
    qas = [{"id": q, "question": text, "answers": [{"text": a, "answer_start": CONTEXT.index(a)}]} for q, text, a in QUESTIONS]
    if with_unanswerable:
        qas.append({"id": UNANSWERABLE[0], "question": UNANSWERABLE[1], "answers": [], "is_impossible": True})
    return json.dumps({"version": "test", "data": [{"title": "t", "paragraphs": [{"context": CONTEXT, "qas": qas}]}]})


@pytest.fixture(scope="module")
def assets(tmp_path_factory, squad_spm_model):
    root = tmp_path_factory.mktemp("qa_assets")
    # The committed model of the SQuAD / RACE test texts (tests/fixtures/squad_spm.model), as sp.model.
    spm = root / "sp.model"
    spm.write_bytes(open(squad_spm_model, "rb").read())
    # The tokenizer's size: `finetune` refuses a tokenizer that does not fit the model.
    write_config(root / "config.json", SentencePieceTokenizer(str(spm)).vocab_size, max_position_embeddings=64)
    for version, names, negative in (("v1", ("train-v1.1.json", "dev-v1.1.json"), False), ("v2", ("train-v2.0.json", "dev-v2.0.json"), True)):
        directory = root / f"squad_{version}"
        directory.mkdir()
        for name in names:
            (directory / name).write_text(squad_json(negative), encoding="utf-8")
    race = root / "RACE"
    for split in ("train", "dev", "test"):
        for level, article in zip(("middle", "high"), ARTICLES):
            (race / split / level).mkdir(parents=True)
            record = dict(article)
            if split == "test":
                del record["answers"]  # an unlabelled test split gets prediction files
            (race / split / level / "1.txt").write_text(json.dumps(record), encoding="utf-8")
    return {"root": root, "spm": str(spm), "config": root / "config.json"}


def finetune(assets, task, data, out, *extra):
    return cli([
        "finetune", "--task", task, "--data", data, "--config", assets["config"], "--spm-model", assets["spm"],
        "--model-dir", out, *TRAINING, *extra,
    ])


@pytest.fixture(scope="module")
def squad_v1_model(assets, tmp_path_factory):
    out = tmp_path_factory.mktemp("v1") / "model"
    assert finetune(assets, "squad-v1", assets["root"] / "squad_v1", out, *SQUAD_LENGTHS) == (0, "")
    return out


@pytest.mark.slow
def test_squad_v1_finetune_evaluate_predict(assets, squad_v1_model, tmp_path, capsys):
    out = squad_v1_model
    for name in ("COMPLETE", "model.keras", "albert_config.json", "sp.model", "task.json", "eval_results.json",
                 "finetuning.json", "predictions_dev/predictions.json", "predictions_dev/nbest_predictions.json"):
        assert (out / name).is_file(), name
    assert not (out / "predictions_dev" / "null_odds.json").exists()
    spec = json.loads((out / "task.json").read_text())
    assert (spec["kind"], spec["best_metric"], spec["max_seq_length"], spec["tokenizer"]["type"]) == ("squad", "f1", 64, "sentencepiece")
    assert spec["settings"] == {
        "version": "v1", "max_seq_length": 64, "doc_stride": 32, "max_query_length": 10, "n_best_size": 20, "max_answer_length": 30,
    }
    results = json.loads((out / "eval_results.json").read_text())
    assert set(results) == {"dev"} and set(results["dev"]) == {"exact_match", "f1"}
    assert 0.0 <= results["dev"]["exact_match"] <= results["dev"]["f1"] <= 100.0
    dev_predictions = json.loads((out / "predictions_dev" / "predictions.json").read_text())
    assert set(dev_predictions) == {q for q, _, _ in QUESTIONS}
    assert all(answer and answer in CONTEXT for answer in dev_predictions.values())
    capsys.readouterr()

    status, error = cli(["evaluate", "--model-dir", out, "--data", assets["root"] / "squad_v1", "--predictions-dir", tmp_path / "ev"])
    assert (status, error) == (0, "")
    evaluated = json.loads(capsys.readouterr().out)
    assert evaluated["dev"]["f1"] == pytest.approx(results["dev"]["f1"])
    assert evaluated["dev"]["exact_match"] == pytest.approx(results["dev"]["exact_match"])
    assert evaluated["dev"]["num_examples"] == 4
    assert json.loads((tmp_path / "ev" / "predictions.json").read_text()) == dev_predictions

    # A SQuAD file given directly is its own split.
    status, _ = cli(["evaluate", "--model-dir", out, "--data", assets["root"] / "squad_v1" / "dev-v1.1.json", "--output", tmp_path / "m.json"])
    assert status == 0
    assert json.loads((tmp_path / "m.json").read_text())["dev-v1.1.json"]["f1"] == pytest.approx(results["dev"]["f1"])
    capsys.readouterr()

    status, error = cli(["predict", "--model-dir", out, "--input", assets["root"] / "squad_v1" / "dev-v1.1.json"])
    assert (status, error) == (0, "")
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {p["id"]: p["answer"] for p in printed} == dev_predictions
    status, error = cli(["predict", "--model-dir", out, "--data", assets["root"] / "squad_v1", "--output", tmp_path / "pred"])
    assert (status, error) == (0, "")
    assert json.loads((tmp_path / "pred" / "predictions.json").read_text()) == dev_predictions
    assert len(json.loads((tmp_path / "pred" / "nbest_predictions.json").read_text())["q1"]) <= 20

    status, error = cli(["predict", "--model-dir", out, "Who gave their name to Normandy?"])
    assert status == 2 and "--input" in error
    status, error = cli(["predict", "--model-dir", out, "--input", tmp_path / "missing.json"])
    assert status == 2 and "missing.json" in error and "does not exist" in error


@pytest.mark.slow
def test_squad_v2_stores_the_tuned_threshold(assets, tmp_path, capsys):
    out = tmp_path / "v2"
    assert finetune(assets, "squad-v2", assets["root"] / "squad_v2", out, *SQUAD_LENGTHS, "--n-best-size", 5) == (0, "")
    spec = json.loads((out / "task.json").read_text())
    results = json.loads((out / "eval_results.json").read_text())["dev"]
    threshold = spec["settings"]["null_score_diff_threshold"]
    assert isinstance(threshold, float) and spec["settings"]["version"] == "v2" and spec["settings"]["n_best_size"] == 5
    assert threshold == results["null_score_diff_threshold"]
    # The tuned threshold is the official search's, or below every null score when answering
    # nothing is best (the search's start state); either way the final F1 is the best F1.
    assert threshold == results["best_f1_thresh"] or threshold < 0
    assert results["f1"] == results["best_f1"]
    assert {"exact", "f1", "best_f1", "HasAns_f1", "NoAns_f1"} <= set(results)
    assert (out / "predictions_dev" / "null_odds.json").is_file()
    capsys.readouterr()

    status, error = cli(["evaluate", "--model-dir", out, "--data", assets["root"] / "squad_v2", "--split", "dev"])
    assert (status, error) == (0, "")
    evaluated = json.loads(capsys.readouterr().out)["dev"]
    # Scored with the stored threshold, which was tuned on this very file.
    assert evaluated["null_score_diff_threshold"] == pytest.approx(threshold)
    assert evaluated["f1"] == pytest.approx(results["f1"])
    assert evaluated["num_examples"] == 5

    status, error = cli(["predict", "--model-dir", out, "--input", assets["root"] / "squad_v2" / "dev-v2.0.json", "--output", tmp_path / "pred"])
    assert (status, error) == (0, "")
    predictions = json.loads((tmp_path / "pred" / "predictions.json").read_text())
    null_odds = json.loads((tmp_path / "pred" / "null_odds.json").read_text())
    assert set(predictions) == set(null_odds) == {q for q, _, _ in QUESTIONS} | {UNANSWERABLE[0]}
    # "No answer" exactly where the null score beats the stored threshold.
    assert all((predictions[q] == "") == (null_odds[q] > threshold) for q in predictions)
    assert predictions == json.loads((out / "predictions_dev" / "predictions.json").read_text())


@pytest.mark.slow
def test_race_finetune_evaluate_predict(assets, tmp_path, capsys):
    out = tmp_path / "race"
    race = assets["root"] / "RACE"
    status, error = finetune(assets, "race", race, out, "--max-seq-length", 48, "--max-qa-length", 16)
    assert (status, error) == (0, "")
    spec = json.loads((out / "task.json").read_text())
    assert (spec["kind"], spec["labels"], spec["best_metric"]) == ("multiple_choice", ["A", "B", "C", "D"], "accuracy")
    assert spec["settings"] == {"max_seq_length": 48, "max_qa_length": 16, "levels": ["middle", "high"]}
    results = json.loads((out / "eval_results.json").read_text())
    assert set(results) == {"dev"} and results["dev"]["num_examples"] == 3
    assert results["dev"]["accuracy"] in (0.0, 1 / 3, 2 / 3, 1.0)
    test_records = [json.loads(line) for line in (out / "predictions_test.jsonl").read_text().splitlines()]
    assert [(r["id"], r["question_index"]) for r in test_records] == [("middle1.txt", 0), ("middle1.txt", 1), ("high7.txt", 0)]
    assert all(r["prediction"] in "ABCD" and "answer" not in r for r in test_records)
    assert all(sum(r["probabilities"]) == pytest.approx(1.0) and len(r["probabilities"]) == 4 for r in test_records)
    capsys.readouterr()

    # The unlabelled test split is left out of the default evaluation.
    status, error = cli(["evaluate", "--model-dir", out, "--data", race])
    assert (status, error) == (0, "")
    evaluated = json.loads(capsys.readouterr().out)
    assert set(evaluated) == {"dev"} and evaluated["dev"]["accuracy"] == pytest.approx(results["dev"]["accuracy"])
    status, error = cli(["evaluate", "--model-dir", out, "--data", race, "--split", "test"])
    assert status == 2 and "no answers" in error

    status, error = cli(["predict", "--model-dir", out, "--data", race, "--split", "dev", "--output", tmp_path / "dev.jsonl"])
    assert (status, error) == (0, "")
    records = [json.loads(line) for line in (tmp_path / "dev.jsonl").read_text().splitlines()]
    assert [r["answer"] for r in records] == ["A", "B", "B"]
    accuracy = sum(r["prediction"] == r["answer"] for r in records) / 3
    assert accuracy == pytest.approx(results["dev"]["accuracy"])
    status, error = cli(["predict", "--model-dir", out, "--input", race / "test" / "high" / "1.txt"])
    assert (status, error) == (0, "")
    assert json.loads(capsys.readouterr().out)["prediction"] == test_records[2]["prediction"]


@pytest.mark.slow
def test_bad_input_names_the_file(assets, squad_v1_model, tmp_path):
    out = tmp_path / "never"
    squad = tmp_path / "squad"
    squad.mkdir()
    (squad / "train-v1.1.json").write_text(squad_json(False), encoding="utf-8")
    status, error = finetune(assets, "squad-v1", squad, out, *SQUAD_LENGTHS)
    assert status == 2 and str(squad / "dev-v1.1.json") in error and "does not exist" in error

    (squad / "dev-v1.1.json").write_text('{"data": [', encoding="utf-8")
    status, error = finetune(assets, "squad-v1", squad, out, *SQUAD_LENGTHS)
    assert status == 2 and str(squad / "dev-v1.1.json") in error and "not valid JSON" in error

    # An unanswerable question in a v1.1 run.
    (squad / "dev-v1.1.json").write_text(squad_json(True), encoding="utf-8")
    status, error = finetune(assets, "squad-v1", squad, out, *SQUAD_LENGTHS)
    assert status == 2 and "dev-v1.1.json" in error and "is_impossible" in error

    status, error = finetune(assets, "squad-v1", assets["root"] / "squad_v1", out, "--max-seq-length", 12, "--max-query-length", 10)
    assert status == 2 and "max_query_length" in error

    race = tmp_path / "RACE"
    (race / "train" / "middle").mkdir(parents=True)
    (race / "train" / "middle" / "1.txt").write_text(json.dumps(ARTICLES[0]), encoding="utf-8")
    status, error = finetune(assets, "race", race, out, "--max-seq-length", 48, "--max-qa-length", 16)
    assert status == 2 and str(race / "dev") in error
    (race / "dev" / "high").mkdir(parents=True)
    bad = dict(ARTICLES[1], answers=["E"])
    (race / "dev" / "high" / "9.txt").write_text(json.dumps(bad), encoding="utf-8")
    status, error = finetune(assets, "race", race, out, "--max-seq-length", 48, "--max-qa-length", 16)
    assert status == 2 and "9.txt" in error and "'E'" in error
    (race / "dev" / "high" / "9.txt").write_text("{not json", encoding="utf-8")
    status, error = finetune(assets, "race", race, out, "--max-seq-length", 48, "--max-qa-length", 16)
    assert status == 2 and "9.txt" in error and "not valid JSON" in error

    status, error = finetune(assets, "race", race, out, "--doc-stride", 16)
    assert status == 2 and "--doc-stride is for --task squad-v1 / squad-v2" in error
    status, error = finetune(assets, "squad-v1", squad, out, "--max-train-examples", 2)
    assert status == 2 and "not supported for squad-v1" in error
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\n", encoding="utf-8")
    status, error = cli([
        "finetune", "--task", "squad-v1", "--data", assets["root"] / "squad_v1", "--config", assets["config"],
        "--vocab-file", vocab, "--allow-vocab-mismatch", "--model-dir", out, *SQUAD_LENGTHS, *TRAINING,
    ])
    assert status == 2 and "SentencePiece" in error
    assert not out.exists()

    status, error = cli(["evaluate", "--model-dir", squad_v1_model, "--data", squad / "dev-v1.1.json"])
    assert status == 2 and "is_impossible" in error
    (tmp_path / "broken.json").write_text("[1, 2", encoding="utf-8")
    status, error = cli(["predict", "--model-dir", squad_v1_model, "--input", tmp_path / "broken.json"])
    assert status == 2 and "broken.json" in error and "not valid JSON" in error


def test_task_files_without_settings_stay_readable(tmp_path):
    from albert_tf.tasks.classification.family import ClassificationFamily
    from albert_tf.tasks.spec import TaskSpec
    from albert_tf.training.run_directory import COMPLETE_FILE

    # A task.json from before SQuAD/RACE: no "settings" field.
    legacy = {
        "task": "sst-2", "kind": "classification", "labels": ["0", "1"], "max_seq_length": 128, "metrics": ["accuracy"],
        "best_metric": "accuracy", "tokenizer": {"type": "sentencepiece", "file": "sp.model", "lower_case": True},
        "columns": {}, "token_unit": "word", "format_version": 1,
    }
    (tmp_path / "task.json").write_text(json.dumps(legacy), encoding="utf-8")
    (tmp_path / COMPLETE_FILE).write_text("", encoding="utf-8")
    spec = TaskSpec.read(str(tmp_path))
    assert spec.settings == {} and spec.labels == ["0", "1"] and not ClassificationFamily.is_pair(spec)
    spec.settings["version"] = "v1"
    spec.write(str(tmp_path))
    assert TaskSpec.read(str(tmp_path)).settings == {"version": "v1"}


class Captured(Exception):
    """Raised by the stand-in for `run_finetuning` once it has built the run's model."""


@pytest.mark.parametrize("task, data, model_class, head_class", [
    ("squad-v1", "squad_v1", "AlbertQuestionAnswerer", "AlbertForSquadV1"),
    ("squad-v2", "squad_v2", "AlbertQuestionAnswerer", "AlbertForSquadV2"),
    ("race", "RACE", "AlbertMultipleChoice", "AlbertForMultipleChoice"),
])
def test_finetune_trains_the_tasks_raw_text_model(assets, tmp_path, monkeypatch, task, data, model_class, head_class):
    """`finetune` builds the task's raw-text model on the run's tokenizer and keeps it whole in the model
    directory; its head has the name Keras gives its class (as when the command trained the head alone,
    so that exports keep their bytes), and the run's dev evaluation gets the head."""
    from albert_tf.tasks import FinetuneSettings
    from albert_tf.tasks.runner import finetune
    from albert_tf.training import finetuning

    seen = {}

    def run_finetuning(model, train_dataset, eval_dataset=None, config=None, *, eval_fn=None, saved_model=None, **objects):
        built = model()
        seen.update(model=built, kept=built if saved_model is None else saved_model(built), eval_fn=eval_fn)
        raise Captured

    monkeypatch.setattr(finetuning, "run_finetuning", run_finetuning)
    lengths = dict(max_seq_length=64, doc_stride=32, max_query_length=10) if task.startswith("squad") else dict(max_seq_length=64, max_qa_length=24)
    with pytest.raises(Captured):
        finetune(FinetuneSettings(task=task, data=str(assets["root"] / data), model_dir=str(tmp_path / "model"),
                                  config=str(assets["config"]), spm_model=assets["spm"], quiet=True, **lengths))
    model = seen["model"]
    assert type(model).__name__ == model_class and type(model.task_model).__name__ == head_class
    assert seen["kept"] is model  # the model directory keeps the whole raw-text model
    # Keras' name for the class (numbered after the first in a process), not the raw-text model's default.
    default = {"AlbertForSquadV1": "albert_for_squad_v1", "AlbertForSquadV2": "albert_for_squad_v2",
               "AlbertForMultipleChoice": "albert_for_multiple_choice"}[head_class]
    assert re.fullmatch(default + r"(_\d+)?", model.task_model.name), model.task_model.name
    assert model.preprocessor.sequence_length == 64
    if task == "squad-v2":
        assert model.version == "v2"
