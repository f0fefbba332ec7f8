"""Tests of `albert-tf pretrain` around the training run, and of `albert-tf info`'s presets.

Damaged record files (one error line naming the file, record and byte offset, exit status 2),
`metadata.json` of a `make-pretraining-data` output (lengths and vocabulary taken from it, a
contradicting flag refused), the tokenizer carried into the outputs (`tokenizer_of_run`), failed
runs that leave no trace in the model directory, the CPU presets, and the command's stderr (each
log line once, no CUDA probing error on a machine without a GPU). Subprocess runs go through
`albert_tf.cli.main`, as the `albert-tf` command does.
"""

import argparse
import collections
import dataclasses
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import _pretrain_worker as worker  # noqa: E402

from albert_tf import cli  # noqa: E402
from albert_tf.cli import CommandError, info, pretrain  # noqa: E402

SAMPLE = Path(__file__).resolve().parents[2] / "albert_tf" / "resources" / "sample" / "sotu"
SUBPROCESS_TIMEOUT = 600
DATA_SEQ, DATA_PREDICTIONS, DATA_VOCAB = 32, 5, 300


def _pretrain(argv):
    parser = argparse.ArgumentParser()
    pretrain.add_arguments(parser)
    return pretrain.run(parser.parse_args(argv))


def _albert_tf(args, cwd, prelude=""):
    """`albert-tf ARGS` in a fresh process, with the environment a user's shell would have."""
    env = {k: v for k, v in os.environ.items() if k not in ("TF_ENABLED_DEVICE_TYPES", "TF_CPP_MIN_LOG_LEVEL")}
    code = f"{prelude}\nimport sys\nfrom albert_tf.cli import main\nsys.exit(main(sys.argv[1:]))"
    return subprocess.run(
        [sys.executable, "-c", code, *map(str, args)],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT,
    )


def _tree(root):
    """Every path under `root` with its bytes' digest and modification time."""
    out = {}
    for path in sorted(Path(root).rglob("*")):
        stat = path.stat()
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir"
        out[str(path.relative_to(root))] = (digest, stat.st_mtime_ns)
    return out


def _record_starts(path):
    """Byte offsets of the records of a TFRecord file (length, its CRC, data, its CRC)."""
    data, starts, offset = Path(path).read_bytes(), [], 0
    while offset < len(data):
        starts.append(offset)
        (length,) = struct.unpack("<Q", data[offset : offset + 8])
        offset += 8 + 4 + length + 4
    return starts


@pytest.fixture(scope="module")
def sample_data(tmp_path_factory):
    """A `make-pretraining-data` output (two shards and metadata.json) and its SentencePiece model."""
    from albert_tf.data.beam_pipeline import PipelineConfig, TokenizerSpec, make_pretraining_data
    from albert_tf.data.pretraining_instances import InstanceConfig
    from albert_tf.tokenization import train_sentencepiece

    work = tmp_path_factory.mktemp("sample_data")
    inputs = sorted(str(p) for p in SAMPLE.glob("201[01]_*.txt"))
    train_sentencepiece(inputs, str(work / "spm"), DATA_VOCAB, seed=1)
    make_pretraining_data(
        inputs,
        str(work / "data"),
        PipelineConfig(
            instance=InstanceConfig(max_seq_length=DATA_SEQ, max_predictions_per_seq=DATA_PREDICTIONS),
            tokenizer=TokenizerSpec(spm_model=str(work / "spm.model")),
            dupe_factor=1,
            input_format="paragraphs",
            num_shards=2,
        ),
    )
    return work / "data", work / "spm.model"


@pytest.fixture(scope="module")
def pretrained(sample_data, tmp_path_factory):
    """`albert-tf pretrain --data DIR --config tiny` for 2 steps, in a process whose root logger
    already has a handler (as after importing Apache Beam, which the sample run does)."""
    data, spm = sample_data
    work = tmp_path_factory.mktemp("pretrained")
    proc = _albert_tf(
        ["pretrain", "--data", data, "--config", "tiny", "--model-dir", work / "run", "--spm-model", spm,
         "--steps", "2", "--batch-size", "8", "--checkpoint-every", "1", "--log-every", "0", "--verbose", "0"],
        cwd=work,
        prelude="import logging\nlogging.basicConfig()",
    )
    return proc, work / "run"


@pytest.mark.slow
def test_a_data_directory_gives_lengths_vocabulary_and_tokenizer_to_a_tiny_run(pretrained, sample_data):
    from albert_tf.training.pretraining_tokenizer import tokenizer_of_run

    proc, run = pretrained
    assert proc.returncode == 0, proc.stderr
    data, spm = sample_data
    settings = f"length {DATA_SEQ}, {DATA_PREDICTIONS} predictions, batch 8, 2 steps (0 warmup), lamb lr 0.003"
    assert settings in proc.stdout
    run_config = json.loads((run / "run_config.json").read_text())
    assert (run_config["max_seq_length"], run_config["max_predictions_per_seq"]) == (DATA_SEQ, DATA_PREDICTIONS)
    assert run_config["learning_rate"] == 0.003  # the tiny preset's
    assert run_config["masking"] == {"mode": "offline"}
    model = json.loads((run / "tf1" / "albert_config.json").read_text())
    assert (model["embedding_size"], model["hidden_size"], model["num_hidden_layers"]) == (64, 128, 4)
    assert model["vocab_size"] == DATA_VOCAB  # the data's vocabulary, not the preset's 30000
    # The tokenizer travels with the run and its TF1 export.
    for where in (run, run / "tf1", run / "tf1" / "model.ckpt", run / "checkpoints"):
        found = tokenizer_of_run(str(where))
        assert found is not None, where
        assert (found.kind, found.lower_case) == ("sentencepiece", True)
        assert Path(found.path).read_bytes() == spm.read_bytes()
    assert tokenizer_of_run(str(data)) is None


@pytest.mark.slow
def test_the_library_run_writes_what_the_command_writes(pretrained, sample_data, tmp_path, capsys):
    """`pretrain(PretrainSettings(...))` from Python is the command's run: the same files, run
    settings, metrics and weights, and the same progress lines, with settings as Python arguments."""
    import tensorflow as tf

    from albert_tf.training.pretraining import PretrainingError
    from albert_tf.training.pretraining_runner import PretrainSettings, pretrain

    proc, command_run = pretrained
    assert proc.returncode == 0, proc.stderr
    data, spm = sample_data
    run = tmp_path / "run"
    settings = PretrainSettings(data=str(data), config="tiny", model_dir=str(run), spm_model=str(spm), steps=2,
                                batch_size=8, checkpoint_every=1, log_every=0, verbose=0)
    result = pretrain(settings)
    assert result.final_step == 2 and result.history[-1]["step"] == 2
    printed = capsys.readouterr().out.splitlines()
    # The progress lines the command prints before its summary, pointing at this run's directory.
    expected = [line.replace(str(command_run), str(run)) for line in proc.stdout.splitlines()[: len(printed)]]
    assert printed == expected and printed[-1].startswith("length ")

    def files(root):
        return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and "logs" not in p.parts)

    assert files(run) == files(command_run)
    assert (run / "spm.model").read_bytes() == (command_run / "spm.model").read_bytes()
    for name in ("run_config.json", "tokenizer.json", "tf1/albert_config.json"):
        ours, theirs = (run / name).read_text(), (command_run / name).read_text()
        assert ours.replace(str(run), str(command_run)) == theirs, name

    def metrics(root):  # without the timings
        rows = [json.loads(line) for line in (root / "metrics.jsonl").read_text().splitlines()]
        return [{k: v for k, v in row.items() if k not in ("seconds", "examples_per_second")} for row in rows]

    assert metrics(run) == metrics(command_run)
    ours, theirs = tf.train.load_checkpoint(str(run / "tf1" / "model.ckpt")), tf.train.load_checkpoint(
        str(command_run / "tf1" / "model.ckpt"))
    names = sorted(ours.get_variable_to_shape_map())
    assert names == sorted(theirs.get_variable_to_shape_map())
    for name in names:
        np.testing.assert_array_equal(ours.get_tensor(name), theirs.get_tensor(name), err_msg=name)

    # Errors name the Python arguments where the command names its flags.
    with pytest.raises(PretrainingError, match=r"^masked_lm_prob applies to masking='on-the-fly' \(offline"):
        pretrain(PretrainSettings(data=str(data), config="tiny", model_dir=str(tmp_path / "other"), masked_lm_prob=0.2))
    with pytest.raises(PretrainingError, match=r"^model_dir is required with data"):
        pretrain(PretrainSettings(data=str(data)))
    assert not (tmp_path / "other").exists()


def test_the_settings_defaults_are_the_flags_defaults():
    from albert_tf.training.pretraining_runner import MASKING_MODES, PretrainSettings

    parser = argparse.ArgumentParser()
    pretrain.add_arguments(parser)
    defaults = vars(parser.parse_args([]))
    assert sorted(defaults) == sorted(f.name for f in dataclasses.fields(PretrainSettings))
    assert PretrainSettings.from_namespace(argparse.Namespace(**defaults)) == PretrainSettings()
    assert pretrain.MASKING_MODES == MASKING_MODES


@pytest.mark.slow
def test_each_log_line_is_printed_once_and_cuda_probing_logs_no_error(pretrained):
    proc, _ = pretrained
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if "albert_tf" in line]
    assert any(line.startswith("INFO albert_tf.training.pretraining: step 2:") for line in lines), proc.stderr
    assert [line for line, n in collections.Counter(lines).items() if n > 1] == []
    assert not any(line.startswith("INFO:albert_tf") for line in lines)  # the root logger's format
    assert "cuInit" not in proc.stderr


@pytest.mark.parametrize("damage", ["truncated to 60 %", "64 bytes corrupted"])
@pytest.mark.slow
def test_damaged_records_are_one_error_line_and_leave_no_model_dir(damage, sample_data, tmp_path):
    data, _ = sample_data
    copy = tmp_path / "data"
    shutil.copytree(data, copy)
    shard = sorted(copy.glob("*.tfrecord"))[1]
    starts = _record_starts(shard)
    size = shard.stat().st_size
    if damage.startswith("truncated"):
        cut = int(size * 0.6)
        index = max(i for i, start in enumerate(starts) if start < cut)
        where = "inside its header" if cut - starts[index] < 12 else "inside it"
        with open(shard, "r+b") as f:
            f.truncate(cut)
        expected = f"{shard}: truncated record {index} at byte {starts[index]}: the file ends ({cut} bytes) {where}"
    else:
        with open(shard, "r+b") as f:
            f.seek(size // 2)
            f.write(b"\xab" * 64)
        index = max(i for i, start in enumerate(starts) if start <= size // 2)
        expected = f"{shard}: corrupted record {index} at byte {starts[index]}: a checksum does not match"
    proc = _albert_tf(
        ["pretrain", "--data", copy, "--config", "tiny", "--model-dir", tmp_path / "run", "--steps", "2"], cwd=tmp_path
    )
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [f"albert-tf pretrain: error: {expected}"]
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_damaged_records_leave_an_existing_run_exactly_as_it_was(pretrained, sample_data, tmp_path):
    proc, run = pretrained
    assert proc.returncode == 0, proc.stderr
    data, spm = sample_data
    copy = tmp_path / "data"
    shutil.copytree(data, copy)
    shard = sorted(copy.glob("*.tfrecord"))[0]
    with open(shard, "r+b") as f:
        f.seek(shard.stat().st_size // 2)
        f.write(b"\xab" * 64)
    before = _tree(run)
    resumed = _albert_tf(
        ["pretrain", "--data", copy, "--config", "tiny", "--model-dir", run, "--spm-model", spm,
         "--steps", "4", "--batch-size", "8", "--checkpoint-every", "1", "--verbose", "0"],
        cwd=tmp_path,
    )
    assert resumed.returncode == 2
    assert len(resumed.stderr.splitlines()) == 1
    assert f"error: {shard}: corrupted record" in resumed.stderr
    assert _tree(run) == before


def test_a_flag_that_contradicts_the_metadata_is_one_error(sample_data, tmp_path):
    data, _ = sample_data
    base = ["--data", str(data), "--config", "tiny", "--model-dir", str(tmp_path / "run")]
    with pytest.raises(CommandError) as error:
        _pretrain(base + ["--max-seq-length", "512"])
    assert str(error.value) == (
        f"--max-seq-length 512 contradicts {data}/metadata.json: the records have max_seq_length {DATA_SEQ} "
        "(leave the flag out)"
    )
    with pytest.raises(CommandError, match=f"--max-predictions-per-seq 20 contradicts .* {DATA_PREDICTIONS} "):
        _pretrain(base + ["--max-predictions-per-seq", "20"])
    # Agreeing flags are fine up to the next check.
    with pytest.raises(CommandError, match="steps must be >= 1"):
        _pretrain(base + ["--max-seq-length", str(DATA_SEQ), "--steps", "0"])
    assert not (tmp_path / "run").exists()


def test_a_tokenizer_of_another_vocabulary_is_refused(sample_data, tmp_path):
    data, _ = sample_data
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b"]) + "\n")
    with pytest.raises(CommandError) as error:
        _pretrain(["--data", str(data), "--config", "tiny", "--model-dir", str(tmp_path / "run"),
                   "--vocab-file", str(vocab)])
    assert str(error.value) == (
        f"--vocab-file {vocab} has 7 tokens, but {data}/metadata.json says the records were made with {DATA_VOCAB}: "
        "it is not the data's tokenizer"
    )


def test_a_tokenizer_named_by_the_metadata_is_used(sample_data, tmp_path):
    data, spm = sample_data
    copy = tmp_path / "data"
    shutil.copytree(data, copy)
    metadata = json.loads((copy / "metadata.json").read_text())
    metadata["tokenizer"] = {"spm_model": str(spm), "vocab_file": None, "lower_case": False}
    (copy / "metadata.json").write_text(json.dumps(metadata))
    from albert_tf.data.tfrecords import find_pretraining_data

    from albert_tf.training.pretraining import PretrainingError
    from albert_tf.training.pretraining_runner import PretrainSettings, data_tokenizer

    settings = PretrainSettings()
    tokenizer, vocab_size = data_tokenizer(settings, find_pretraining_data(str(copy)))
    assert (tokenizer.kind, tokenizer.path, tokenizer.lower_case) == ("sentencepiece", str(spm), False)
    assert vocab_size == DATA_VOCAB
    metadata["tokenizer"]["spm_model"] = str(tmp_path / "gone.model")
    (copy / "metadata.json").write_text(json.dumps(metadata))
    # The library names its arguments, the command its flags.
    with pytest.raises(PretrainingError, match=r"gone.model, named by .*metadata.json, not found \(pass spm_model") as error:
        data_tokenizer(settings, find_pretraining_data(str(copy)))
    assert "not found (pass --spm-model or --vocab-file)" in error.value.cli_message
    with pytest.raises(CommandError, match=r"gone.model, named by .*metadata.json, not found \(pass --spm-model"):
        _pretrain(["--data", str(copy), "--config", "tiny", "--model-dir", str(tmp_path / "run")])


def _write_records(path, features):
    import tensorflow as tf

    from albert_tf.data.tfrecords import encode_example

    with tf.io.TFRecordWriter(str(path)) as writer:
        for i in range(len(features["input_ids"])):
            example = {k: features[k][i] for k in ("input_ids", "input_mask", "segment_ids")}
            example["token_boundary"] = np.ones_like(features["input_ids"][i])
            example.update({k: features[k][i] for k in ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights")})
            example["next_sentence_labels"] = features["next_sentence_labels"][i]
            writer.write(encode_example(example))


@pytest.fixture()
def records(tmp_path):
    """Two shards of the synthetic worker records (length 16, 3 predictions) and a tiny config."""
    directory = tmp_path / "records"
    directory.mkdir()
    features = worker.synthetic_features()
    for shard in range(2):
        _write_records(directory / f"part-{shard}.tfrecord", {k: v[shard::2] for k, v in features.items()})
    config = tmp_path / "albert_config.json"
    worker.tiny_albert_config().to_json_file(config)
    return directory, config


def test_a_wrong_sequence_length_leaves_no_model_folder(records, tmp_path):
    directory, config = records
    with pytest.raises(CommandError, match="16 input_ids per example, but --max-seq-length is 12"):
        _pretrain(["--data", str(directory / "part-*.tfrecord"), "--config", str(config), "--model-dir",
                   str(tmp_path / "run"), "--max-seq-length", "12"])
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_damage_found_while_training_names_the_file_and_removes_the_new_model_dir(records, tmp_path):
    directory, config = records
    shard = directory / "part-1.tfrecord"
    last = _record_starts(shard)[-1]
    with open(shard, "r+b") as f:
        f.seek(last + 20)
        f.write(b"\xab" * 8)
    with pytest.raises(CommandError) as error:
        _pretrain(["--data", str(directory), "--config", str(config), "--model-dir", str(tmp_path / "run"),
                   "--no-check-records", "--steps", "2", "--batch-size", "8", "--checkpoint-every", "1",
                   "--log-every", "0", "--verbose", "0"])
    assert str(error.value) == f"{shard}: corrupted record 31 at byte {last}: a checksum does not match"
    assert not (tmp_path / "run").exists()


def test_info_lists_the_presets_with_their_pretraining_settings(capsys):
    def run_info(**options):
        info.run(argparse.Namespace(**{"config": "base-v2", "build": False, "list": False, **options}))
        return capsys.readouterr().out

    listing = run_info(list=True).splitlines()
    tiny = next(line for line in listing if line.startswith("tiny "))
    assert tiny.split()[1:6] == ["64", "128", "4", "2", "512"]
    assert tiny.endswith("length 128, batch 32, 4,000 steps (400 warmup), LAMB lr 0.003")
    small = next(line for line in listing if line.startswith("small "))
    assert small.split()[1:6] == ["128", "256", "4", "4", "1024"]
    assert any(line.startswith("base-v2 ") and "length 512, batch 4096, 125,000 steps" in line for line in listing)
    out = run_info(config="small")
    assert "albert-tf pretrain --config small: length 128, batch 32, 4,000 steps (400 warmup), LAMB lr 0.005" in out


def test_tensorflow_keeps_every_device_where_a_cuda_driver_loads(monkeypatch):
    monkeypatch.delenv("TF_ENABLED_DEVICE_TYPES", raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    monkeypatch.setattr(cli, "_has_device_plugins", lambda: False)
    monkeypatch.setattr(cli, "_cuda_driver_present", lambda: True)
    cli.quiet_tensorflow_startup()
    assert "TF_ENABLED_DEVICE_TYPES" not in os.environ
    monkeypatch.setattr(cli, "_cuda_driver_present", lambda: False)
    cli.quiet_tensorflow_startup()
    assert os.environ["TF_ENABLED_DEVICE_TYPES"].split(",")[0] == "CPU"
    assert "GPU" not in os.environ["TF_ENABLED_DEVICE_TYPES"].split(",")
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "1"  # never changed
    # A user's own setting, or installed device plugins, are left alone.
    monkeypatch.setenv("TF_ENABLED_DEVICE_TYPES", "CPU,GPU")
    cli.quiet_tensorflow_startup()
    assert os.environ["TF_ENABLED_DEVICE_TYPES"] == "CPU,GPU"
    monkeypatch.delenv("TF_ENABLED_DEVICE_TYPES")
    monkeypatch.setattr(cli, "_has_device_plugins", lambda: True)
    cli.quiet_tensorflow_startup()
    assert "TF_ENABLED_DEVICE_TYPES" not in os.environ


def test_a_run_keeps_the_tokenizer_it_was_pretrained_with(tmp_path):
    from albert_tf.training.pretraining_config import PretrainingError, TokenizerFile
    from albert_tf.training.pretraining_tokenizer import check_tokenizer_of_run, install_tokenizer, tokenizer_of_run

    (tmp_path / "a.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\na\n")
    (tmp_path / "b.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nb\n")
    run = tmp_path / "run"
    (run / "tf1").mkdir(parents=True)
    first = TokenizerFile("wordpiece", str(tmp_path / "a.txt"), lower_case=False)
    assert install_tokenizer(str(run), first) == str(run / "vocab.txt")
    found = tokenizer_of_run(str(run / "tf1" / "model.ckpt"))  # tf1/ has none of its own: the run's
    assert (found.kind, found.path, found.lower_case) == ("wordpiece", str(run / "vocab.txt"), False)
    check_tokenizer_of_run(str(run), first)  # the same vocabulary resumes
    with pytest.raises(PretrainingError, match=r"was pretrained with the tokenizer in .*vocab.txt; .*b.txt is another"):
        check_tokenizer_of_run(str(run), TokenizerFile("wordpiece", str(tmp_path / "b.txt")))
    assert tokenizer_of_run(str(tmp_path)) is None
