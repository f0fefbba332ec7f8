"""Tests of how `albert-tf finetune`, `evaluate`, `predict` and `export` answer input that does not
fit: a tokenizer of another size than the model's vocabulary, a table of another layout or format
than the model was trained on, an `--init` that is no checkpoint; and that the README's
fine-tuning example fits the shipped sample."""

import argparse
import json
import re
import shlex
import shutil
from pathlib import Path

import pytest

from _cli_helpers import SPECIAL, cli_runner, write_config, write_sentiment_tables, write_vocab
from albert_tf.data.tables import detect_file_format
from albert_tf.tokenization.tokenizers import VocabSizeMismatch, check_vocab_size

REPO = Path(__file__).resolve().parents[2]
MODULES = ("albert_tf.cli.finetune", "albert_tf.cli.evaluate", "albert_tf.cli.predict", "albert_tf.cli.export")
WORDS = ["good", "great", "fine", "bad", "awful", "dull", "film", "movie", "a", "the"]
TOKENS = len(SPECIAL) + len(WORDS)
ROWS = {"train": 32, "dev": 8, "test": 8}
cli = cli_runner(MODULES)


@pytest.fixture(scope="module")
def assets(tmp_path_factory):
    root = tmp_path_factory.mktemp("bad_input")
    assert write_vocab(root / "vocab.txt", WORDS) == TOKENS
    assert write_vocab(root / "small_vocab.txt", WORDS[:6]) == TOKENS - 4
    for name, size in (("config.json", TOKENS), ("bigger.json", TOKENS + 16), ("smaller.json", TOKENS - 4)):
        write_config(root / name, size)
    # The same rows as a TSV table and as JSON lines.
    write_sentiment_tables(root / "tsv", ROWS, formats=("tsv",))
    write_sentiment_tables(root / "jsonl", ROWS, formats=("jsonl",))
    return root


def finetune_args(assets, data, model_dir, *extra):
    return [
        "finetune", "--task", "classification", "--data", data, "--text-column", "text", "--label-column", "label",
        "--vocab-file", assets / "vocab.txt", "--model-dir", model_dir, "--max-seq-length", 8, "--batch-size", 8,
        "--num-train-steps", 2, "--quiet", *extra,
    ]


@pytest.fixture(scope="module")
def trained(assets, tmp_path_factory):
    """A model fine-tuned (2 steps) on the TSV tables; its task.json records no format."""
    model_dir = tmp_path_factory.mktemp("trained") / "model"
    status, error = cli(finetune_args(assets, assets / "tsv", model_dir, "--config", assets / "config.json"))
    assert (status, error) == (0, "")
    return model_dir


def with_recorded_format(model_dir: Path, target: Path, table_format) -> Path:
    shutil.copytree(model_dir, target)
    spec = json.loads((target / "task.json").read_text())
    spec["columns"]["format"] = table_format
    (target / "task.json").write_text(json.dumps(spec), encoding="utf-8")
    return target


# --- the tokenizer and the model's vocabulary ----------------------------------------------------


def test_check_vocab_size():
    assert check_vocab_size(30, 30) is None
    with pytest.raises(VocabSizeMismatch, match=r"^tok has 20 tokens but cfg has vocab_size 30: 10 embedding rows .*; say so$"):
        check_vocab_size(20, 30, tokenizer_source="tok", model_source="cfg", allow_hint="say so")
    warning = check_vocab_size(20, 30, allow_smaller=True)
    assert warning == "the tokenizer has 20 tokens but the model has vocab_size 30: 10 embedding rows stay unused"
    # A larger tokenizer would index past the embedding table: never allowed.
    with pytest.raises(VocabSizeMismatch, match="token ids 30 and up would index past the embedding table"):
        check_vocab_size(40, 30, allow_smaller=True)


def test_finetune_refuses_a_tokenizer_of_another_size(assets, tmp_path):
    out = tmp_path / "never"
    status, error = cli(finetune_args(assets, assets / "tsv", out, "--config", assets / "bigger.json"))
    assert status == 2 and "\n" not in error
    assert error.startswith(f"the tokenizer {assets / 'vocab.txt'} has {TOKENS} tokens but the model config "
                            f"{assets / 'bigger.json'} has vocab_size {TOKENS + 16}: 16 embedding rows would never be used")
    assert error.endswith("pass --allow-vocab-mismatch to use it anyway")
    for extra in ([], ["--allow-vocab-mismatch"]):
        status, error = cli(finetune_args(assets, assets / "tsv", out, "--config", assets / "smaller.json", *extra))
        assert status == 2 and f"has {TOKENS} tokens but" in error and "index past the embedding table" in error
    assert not out.exists()


@pytest.mark.slow
def test_allow_vocab_mismatch_accepts_a_smaller_tokenizer(assets, tmp_path, capsys):
    out = tmp_path / "allowed"
    status, error = cli(finetune_args(assets, assets / "tsv", out, "--config", assets / "bigger.json", "--allow-vocab-mismatch"))
    assert (status, error) == (0, "")
    assert f"has vocab_size {TOKENS + 16}: 16 embedding rows stay unused" in capsys.readouterr().err
    assert json.loads((out / "albert_config.json").read_text())["vocab_size"] == TOKENS + 16


@pytest.mark.slow
def test_export_init_refuses_a_tokenizer_of_another_size(assets, trained, tmp_path):
    base = ["export", "--init", trained, "--export-base", tmp_path / "base", "--model-name", "m", "--vocab-file"]
    status, error = cli(base + [assets / "small_vocab.txt"])
    assert status == 2 and error.startswith(
        f"the tokenizer {assets / 'small_vocab.txt'} has {TOKENS - 4} tokens but the model of --init {trained} "
        f"has vocab_size {TOKENS}"
    )
    assert "--allow-vocab-mismatch" in error
    status, error = cli(base + [assets / "vocab.txt", "--config", assets / "smaller.json", "--allow-vocab-mismatch"])
    assert status == 2 and "index past the embedding table" in error
    assert not (tmp_path / "base").exists()


# --- tables of another layout ---------------------------------------------------------------------


def test_a_missing_column_names_the_columns_there_are(assets, tmp_path):
    common = ["--config", assets / "config.json", "--vocab-file", assets / "vocab.txt", "--model-dir", tmp_path / "x",
              "--max-seq-length", 8]
    status, error = cli(["finetune", "--task", "sst-2", "--data", assets / "tsv", *common])
    assert status == 2
    assert f"{assets / 'tsv' / 'train.tsv'}:1: no column 'sentence' (the file has: label, text)" in error
    assert "not the GLUE sst-2 layout; for any other table use --task classification" in error
    status, error = cli(["finetune", "--task", "classification", "--data", assets / "jsonl", "--text-column", "review",
                         "--label-column", "label", *common])
    assert status == 2 and "train.jsonl:1: no key 'review' (the file has: label, text)" in error


def test_a_preset_sequence_length_beyond_the_model_says_what_to_pass(assets, tmp_path):
    status, error = cli(["finetune", "--task", "sst-2", "--data", assets / "tsv", "--config", assets / "config.json",
                         "--vocab-file", assets / "vocab.txt", "--model-dir", tmp_path / "x"])
    assert status == 2 and error == (
        f"--max-seq-length 512 (the sst-2 default) exceeds the max_position_embeddings of the model config "
        f"{assets / 'config.json'} (32); pass --max-seq-length 32 or less"
    )


def test_readme_finetuning_example_fits_the_shipped_sample():
    """The README's commands, read as the shell would: the columns exist in the sample, the
    tokenizer's size is the config's vocab_size and the sequence length fits the config."""
    from albert_tf.cli import finetune

    text = (REPO / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```bash\n(albert-tf train-tokenizer .*?)```", text, flags=re.S).group(1)
    commands = shlex.split(block.replace("\\\n", " "), comments=True)
    # shlex keeps the words of all commands in one list: cut it at each "albert-tf".
    starts = [i for i, word in enumerate(commands) if word == "albert-tf"]
    by_name = {commands[i + 1]: commands[i + 2 : j] for i, j in zip(starts, starts[1:] + [len(commands)])}
    tokenizer = by_name["train-tokenizer"]
    config = json.loads(re.search(r"echo '(\{.*?\})'", block, flags=re.S).group(1))
    assert int(tokenizer[tokenizer.index("--vocab-size") + 1]) == config["vocab_size"]

    parser = argparse.ArgumentParser()
    finetune.add_arguments(parser)
    args = parser.parse_args(by_name["finetune"])
    header = (REPO / args.data / "train.tsv").read_text(encoding="utf-8").split("\n", 1)[0].split("\t")
    assert args.task == "classification" and {args.text_column, args.label_column} <= set(header)
    assert args.max_seq_length <= config["max_position_embeddings"]
    assert args.spm_model == tokenizer[tokenizer.index("--output-prefix") + 1] + ".model"
    assert "--task sst-2 --data DIR" not in text


# --- the format follows the file ------------------------------------------------------------------


def test_detect_file_format(tmp_path):
    (tmp_path / "a.txt").write_text('{"text": "x"}\n', encoding="utf-8")
    (tmp_path / "b.txt").write_text("label\ttext\n", encoding="utf-8")
    (tmp_path / "c").write_text("label,text\n", encoding="utf-8")
    assert detect_file_format(tmp_path / "dev.tsv", "jsonl") == "tsv"  # the extension decides
    assert detect_file_format(tmp_path / "dev.jsonl", "tsv") == "jsonl"
    assert detect_file_format(tmp_path / "dev.csv") == "csv"
    assert detect_file_format(tmp_path / "a.txt", "tsv") == "jsonl"  # else the first line
    assert detect_file_format(tmp_path / "b.txt") == "tsv"
    assert detect_file_format(tmp_path / "b.txt", "csv") == "csv"
    assert detect_file_format(tmp_path / "c") == "csv"


@pytest.mark.slow
def test_evaluate_and_predict_read_each_file_in_its_own_format(assets, trained, tmp_path, capsys):
    """task.json says JSONL (as the pipeline's does) and the data are TSV, and the reverse."""
    for recorded, data, suffix in (("jsonl", assets / "tsv", ".tsv"), ("tsv", assets / "jsonl", ".jsonl")):
        model = with_recorded_format(trained, tmp_path / f"model_{recorded}", recorded)
        capsys.readouterr()
        status, error = cli(["evaluate", "--model-dir", model, "--data", data])
        assert (status, error) == (0, "")
        results = json.loads(capsys.readouterr().out)
        assert {split: r["num_examples"] for split, r in results.items()} == {"dev": ROWS["dev"], "test": ROWS["test"]}
        status, error = cli(["predict", "--model-dir", model, "--data", data, "--split", "dev"])
        assert (status, error) == (0, "") and len(capsys.readouterr().out.splitlines()) == ROWS["dev"]
        status, error = cli(["predict", "--model-dir", model, "--input", data / f"test{suffix}"])
        assert (status, error) == (0, "") and len(capsys.readouterr().out.splitlines()) == ROWS["test"]


# --- --init that is no checkpoint -----------------------------------------------------------------


def test_init_that_is_no_checkpoint_says_what_it_takes(assets, tmp_path):
    import tensorflow as tf

    notes = tmp_path / "notes.txt"
    notes.write_text("not a checkpoint\n", encoding="utf-8")
    empty = tmp_path / "empty"
    empty.mkdir()
    for init in (notes, empty):
        status, error = cli(["finetune", "--task", "classification", "--data", assets / "tsv", "--text-column", "text",
                             "--label-column", "label", "--init", init, "--vocab-file", assets / "vocab.txt",
                             "--model-dir", tmp_path / "x"])
        assert status == 2 and error.startswith(
            f"--init {init} is not a checkpoint, a checkpoint directory, a Hugging Face dir or a keras-hub preset; "
            f"--init takes a .keras, .weights.h5, .safetensors or .npz file, a TF checkpoint prefix"
        )
        status, error = cli(["export", "--init", init, "--vocab-file", assets / "vocab.txt", "--export-base",
                             tmp_path / "base", "--model-name", "m"])
        assert status == 2 and error.startswith(f"--init {init} is not a checkpoint, a checkpoint directory")

    # A checkpoint without an architecture beside it: that is what --config is for.
    prefix = tf.train.Checkpoint(v=tf.Variable(1.0)).write(str(tmp_path / "ckpt" / "model.ckpt"))
    status, error = cli(["export", "--init", prefix, "--vocab-file", assets / "vocab.txt", "--export-base",
                         tmp_path / "base", "--model-name", "m"])
    assert status == 2 and error.startswith(f"--init {prefix} is a checkpoint without a stored architecture")
    assert error.endswith("pass --config (a preset such as base-v2, or an albert_config.json)")
