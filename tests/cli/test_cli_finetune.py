"""Tests of the `finetune`, `evaluate` and `predict` subcommands (`albert_tf.cli.finetune`,
`albert_tf.cli.evaluate`, `albert_tf.cli.predict`) on tiny synthetic data."""

import json
import os
import re

import pytest

from _cli_helpers import WORDS, cli_runner, tiny_model_config, write_sentiment_tables, write_tiny_model_files

MODULES = ("albert_tf.cli.finetune", "albert_tf.cli.evaluate", "albert_tf.cli.predict")
# The tokenizer's size: `finetune` refuses a tokenizer that does not fit the model.
CONFIG = tiny_model_config(5 + len(WORDS))
cli = cli_runner(MODULES)


@pytest.fixture(scope="module")
def assets(tmp_path_factory):
    root = tmp_path_factory.mktemp("assets")
    write_tiny_model_files(root, WORDS)
    # Every word carries the sentiment: a randomly initialised encoder learns it in a few dozen steps.
    write_sentiment_tables(root / "sentiment", {"train": 96, "dev": 32, "test": 16})
    return root


@pytest.mark.slow
def test_classification_then_glue_from_the_finetuned_model(assets, tmp_path, capsys):
    out = tmp_path / "sentiment_model"
    status, error = cli([
        "finetune", "--task", "classification", "--data", assets / "sentiment", "--text-column", "text",
        "--label-column", "label", "--config", assets / "config.json", "--vocab-file", assets / "vocab.txt",
        "--model-dir", out, "--max-seq-length", 12, "--batch-size", 16, "--num-train-steps", 60,
        "--eval-every", 30, "--learning-rate", 3e-3, "--quiet",
    ])
    assert (status, error) == (0, "")
    for name in ("COMPLETE", "model.keras", "albert_config.json", "vocab.txt", "task.json", "eval_results.json", "finetuning.json"):
        assert (out / name).is_file(), name
    spec = json.loads((out / "task.json").read_text())
    assert spec["labels"] == ["neg", "pos"] and spec["kind"] == "classification" and spec["max_seq_length"] == 12
    results = json.loads((out / "eval_results.json").read_text())
    assert set(results) == {"dev", "test"} and results["dev"]["accuracy"] > 0.9  # an easy task
    capsys.readouterr()

    status, _ = cli(["evaluate", "--model-dir", out, "--data", assets / "sentiment", "--split", "dev"])
    assert status == 0
    evaluated = json.loads(capsys.readouterr().out)
    assert evaluated["dev"]["accuracy"] == pytest.approx(results["dev"]["accuracy"])
    assert evaluated["dev"]["num_examples"] == 32

    status, _ = cli(["predict", "--model-dir", out, "great good fine", "dull bad awful"])
    assert status == 0
    predictions = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [p["label"] for p in predictions] == ["pos", "neg"]
    assert sum(predictions[0]["probabilities"].values()) == pytest.approx(1.0)
    status, _ = cli(["predict", "--model-dir", out, "--input", assets / "sentiment" / "test.tsv", "--output", tmp_path / "p.jsonl"])
    assert status == 0 and len((tmp_path / "p.jsonl").read_text().splitlines()) == 16

    # A GLUE layout, initialised from the fine-tuned directory: architecture and tokenizer come with it.
    glue = tmp_path / "MRPC"
    glue.mkdir()
    header = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
    pair = lambda i: f"{i % 2}\t{i}\t{i + 1}\tthe film is good\t{'the movie is great' if i % 2 else 'i live in paris'}\n"
    (glue / "train.tsv").write_text(header + "".join(pair(i) for i in range(16)), encoding="utf-8")
    (glue / "dev.tsv").write_text(header + "".join(pair(i) for i in range(8)), encoding="utf-8")
    (glue / "test.tsv").write_text("index\t#1 ID\t#2 ID\t#1 String\t#2 String\n0\t1\t2\tthe plot\ta film\n", encoding="utf-8")
    status, error = cli([
        "finetune", "--task", "mrpc", "--data", glue, "--init", out, "--model-dir", tmp_path / "mrpc_model",
        "--max-seq-length", 16, "--batch-size", 8, "--num-train-steps", 2, "--quiet",
    ])
    assert (status, error) == (0, "")
    mrpc = tmp_path / "mrpc_model"
    assert json.loads((mrpc / "task.json").read_text())["metrics"] == ["accuracy", "f1"]
    assert json.loads((mrpc / "finetuning.json").read_text())["metadata"]["init"]["kind"] == "keras"
    assert (mrpc / "predictions_test.tsv").read_text().splitlines()[1].split("\t")[0] == "0"
    status, error = cli(["predict", "--model-dir", mrpc, "the film"])
    assert status == 2 and "sentence-pair task" in error


@pytest.mark.slow
def test_a_run_that_learns_nothing_is_reported_loudly(assets, tmp_path, capsys):
    """No learning (a negligible learning rate): the run completes, prints the constant answer
    beside its result and warns that the model collapsed; finetuning.json records the verdict."""
    out = tmp_path / "stuck"
    status, error = cli([
        "finetune", "--task", "classification", "--data", assets / "sentiment", "--text-column", "text",
        "--label-column", "label", "--config", assets / "config.json", "--vocab-file", assets / "vocab.txt",
        "--model-dir", out, "--max-seq-length", 12, "--batch-size", 16, "--num-train-steps", 4, "--learning-rate", 1e-9, "--pooling", "cls", "--quiet",
    ])
    assert (status, error) == (0, "")
    printed = capsys.readouterr().out
    # The resolved configuration comes first, one line a section.
    assert "config task: classification, pooling cls," in printed and "bias-corrected AdamW" in printed
    assert "best constant answer: accuracy=0.5000" in printed
    assert "WARNING: the model collapsed:" in printed
    assert json.loads((out / "finetuning.json").read_text())["collapse"]["collapsed"] is True


@pytest.mark.slow
def test_conll_tagging(assets, tmp_path, capsys):
    data = tmp_path / "conll"
    data.mkdir()
    sentences = []
    for i in range(48):
        city = ["paris", "london"][i % 2]
        sentences.append(f"i O\nlive O\nin O\n{city} B-LOC\n" if i % 3 else f"{city} B-LOC\nis O\nbig O\n")
    (data / "train.txt").write_text("-DOCSTART- O\n\n" + "\n".join(sentences), encoding="utf-8")
    (data / "dev.txt").write_text("\n".join(sentences[:12]), encoding="utf-8")
    out = tmp_path / "ner"
    status, error = cli([
        "finetune", "--task", "conll", "--data", data, "--config", assets / "config.json", "--vocab-file",
        assets / "vocab.txt", "--model-dir", out, "--max-seq-length", 10, "--batch-size", 16, "--num-train-steps", 40,
        "--learning-rate", 5e-3, "--quiet",
    ])
    assert (status, error) == (0, "")
    results = json.loads((out / "eval_results.json").read_text())
    assert results["dev"]["entity_f1"] > 0.9
    capsys.readouterr()
    status, _ = cli(["predict", "--model-dir", out, "i live in london"])
    record = json.loads(capsys.readouterr().out)
    assert status == 0 and record["tags"] == ["O", "O", "O", "B-LOC"]
    # The record `model.predict` and the served model give: character offsets in the text, and a score.
    (entity,) = record["entities"]
    assert {k: v for k, v in entity.items() if k != "score"} == {"label": "LOC", "text": "london", "start": 10, "end": 16}
    assert 0.5 < entity["score"] <= 1.0


def test_user_errors_leave_nothing_behind(assets, tmp_path):
    data = assets / "sentiment"
    base = ["finetune", "--config", assets / "config.json", "--vocab-file", assets / "vocab.txt", "--max-seq-length", 16, "--quiet"]
    out = tmp_path / "never"

    status, error = cli(base + ["--task", "classification", "--data", data, "--text-column", "review", "--label-column", "label", "--model-dir", out])
    assert status == 2 and "no column 'review'" in error and "train.tsv:1" in error

    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "train.tsv").write_text("label\ttext\npos\tgood\nneg\tbad\n", encoding="utf-8")
    (bad / "dev.tsv").write_text("label\ttext\npos\tgood\nmeh\tfine\n", encoding="utf-8")
    status, error = cli(base + ["--task", "classification", "--data", bad, "--text-column", "text", "--label-column", "label", "--model-dir", out])
    assert status == 2 and f"{bad / 'dev.tsv'}:3: unknown label 'meh'" in error

    status, error = cli(base + ["--task", "classification", "--data", data, "--model-dir", out])
    assert status == 2 and "--text-column and --label-column" in error
    status, error = cli(["finetune", "--task", "sst-2", "--data", data, "--model-dir", out, "--config", "base-v2"])
    assert status == 2 and "no tokenizer" in error
    status, error = cli(base + ["--task", "sst-2", "--data", data, "--model-dir", out, "--init", tmp_path / "missing.ckpt"])
    assert status == 2 and "--init not found" in error
    assert not out.exists() and not [n for n in os.listdir(tmp_path) if ".partial-" in n]

    status, error = cli(["evaluate", "--model-dir", tmp_path / "bad", "--data", data])
    assert status == 2 and "not a completed fine-tuning directory" in error


@pytest.mark.slow
def test_epochs_and_progress_as_printed(assets, tmp_path, capsys, monkeypatch):
    """`--num-epochs 2` on 40 examples at batch 16 (2 full batches an epoch) is 4 steps in two
    intervals, printed one plain line each with the evaluation after it; the best step reported
    is one of the evaluated steps. `evaluate` and `predict` show their progress on stderr."""
    out = tmp_path / "two_epochs"
    status, error = cli([
        "finetune", "--task", "classification", "--data", assets / "sentiment", "--text-column", "text",
        "--label-column", "label", "--config", assets / "config.json", "--vocab-file", assets / "vocab.txt",
        "--model-dir", out, "--max-seq-length", 12, "--batch-size", 16, "--num-epochs", 2, "--max-train-examples", 40,
        "--learning-rate", 3e-3,
    ])
    assert (status, error) == (0, "")
    printed = capsys.readouterr().out
    assert "config optimization: 4 steps (warmup 0)," in printed and "\r" not in printed and "\x1b[" not in printed
    assert re.search(r"^steps 1-2 of 4 \(epoch 1 of 2\): .*\neval at step 2: ", printed, flags=re.M)
    assert re.search(r"^steps 3-4 of 4 \(epoch 2 of 2\): .*\neval at step 4: ", printed, flags=re.M)
    evaluated = re.findall(r"^eval at step (\d+): ", printed, flags=re.M)
    assert evaluated == ["2", "4"]
    assert re.search(r"^best dev accuracy at step (\d+): ", printed, flags=re.M).group(1) in evaluated
    assert [h["step"] for h in json.loads((out / "finetuning.json").read_text())["history"]] == [2, 4]

    monkeypatch.setattr("albert_tf.training.progress.PROGRESS_DELAY_S", 0.0)
    monkeypatch.setattr("albert_tf.training.progress.PROGRESS_EVERY_S", 0.0)
    status, _ = cli(["evaluate", "--model-dir", out, "--data", assets / "sentiment", "--split", "dev", "--batch-size", 16])
    captured = capsys.readouterr()
    assert status == 0 and json.loads(captured.out)["dev"]["num_examples"] == 32
    assert "evaluating dev: 1/2 batches" in captured.err and "evaluating dev: 2/2 batches" in captured.err
    status, _ = cli(["predict", "--model-dir", out, "--input", assets / "sentiment" / "test.tsv", "--batch-size", 8])
    captured = capsys.readouterr()
    assert status == 0 and len(captured.out.splitlines()) == 16 and "predicting: 2/2 batches" in captured.err


@pytest.mark.slow
def test_init_from_a_pretraining_run_finds_its_tokenizer(assets, tmp_path):
    """`--init RUN/tf1/model.ckpt` of a pretraining output: the tokenizer and its casing come from
    the run's `tokenizer.json` (`albert_tf.training.pretraining_tokenizer.tokenizer_of_run`), no --vocab-file."""
    import numpy as np

    from albert_tf.checkpoints.original import save_original_checkpoint
    from albert_tf.config import AlbertConfig
    from albert_tf.modeling import AlbertEncoder

    run = tmp_path / "pretrained"
    (run / "tf1").mkdir(parents=True)
    config = AlbertConfig(**CONFIG)
    encoder = AlbertEncoder.from_albert_config(config)
    encoder({"input_ids": np.array([[2, 5, 3]], "int32"), "input_mask": np.ones((1, 3), "int32"),
             "segment_ids": np.zeros((1, 3), "int32")})
    save_original_checkpoint(str(run / "tf1" / "model.ckpt"), encoder)
    config.to_json_file(str(run / "tf1" / "albert_config.json"))
    (run / "vocab.txt").write_text((assets / "vocab.txt").read_text(encoding="utf-8"), encoding="utf-8")
    (run / "tokenizer.json").write_text(json.dumps({"type": "wordpiece", "file": "vocab.txt", "lower_case": False}), encoding="utf-8")

    out = tmp_path / "from_pretrained"
    status, error = cli([
        "finetune", "--task", "classification", "--data", assets / "sentiment", "--text-column", "text",
        "--label-column", "label", "--init", run / "tf1" / "model.ckpt", "--model-dir", out, "--max-seq-length", 12,
        "--batch-size", 16, "--num-train-steps", 2, "--quiet",
    ])
    assert (status, error) == (0, "")
    assert json.loads((out / "task.json").read_text())["tokenizer"] == {"type": "wordpiece", "file": "vocab.txt", "lower_case": False}
    assert json.loads((out / "finetuning.json").read_text())["metadata"]["init"]["kind"] == "original"
