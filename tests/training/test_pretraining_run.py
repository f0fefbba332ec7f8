"""Tests for albert_tf.training.pretraining: checkpoints, exact resume after SIGKILL, corrupt
checkpoints, metrics and TensorBoard logs, the exported models, config validation, and the
`albert-tf pretrain` command (TFRecords, mixed precision, user errors).

One tiny reference run (vocab 64, H 16, L 2, seq 16, batch 8, 10 steps, dropout 0.1, gradient
accumulation 2, 2 steps per execution, a checkpoint every 3 steps so the last interval is
shorter, 3 kept) is trained in-process; the other tests resume copies of it, or resume a run
that a SIGKILL stopped in a subprocess started at the beginning of the module.
"""

import argparse
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
import keras

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import _pretrain_worker as worker  # noqa: E402

from albert_tf.checkpoints.original import read_original_variables  # noqa: E402
from albert_tf.config import AlbertConfig  # noqa: E402
from albert_tf.training.pretraining import (  # noqa: E402
    interval_groups,
    run_pretraining,
)
from albert_tf.training.schedules import WarmupPolynomialDecay  # noqa: E402

WORKER = str(Path(__file__).resolve().parents[1] / "_pretrain_worker.py")
LOSS_KEYS = ("loss", "mlm_loss", "sop_loss", "mlm_accuracy", "sop_accuracy", "mlm_perplexity", "lr")
SUBPROCESS_TIMEOUT = 300


def read_metrics(model_dir):
    with open(Path(model_dir) / "metrics.jsonl") as f:
        return [json.loads(line) for line in f]


def losses(records):
    return [{k: r[k] for k in ("step",) + LOSS_KEYS} for r in records]


def assert_same_weights(a, b):
    assert list(a) == list(b)
    for name in a:
        assert np.array_equal(a[name], b[name]), f"{name} differs by {np.abs(a[name] - b[name]).max()}"


KILL_AT_STEP = 4  # after ckpt-3 is written, in the middle of the second interval


@pytest.fixture(scope="module")
def killed_worker(tmp_path_factory):
    """A subprocess running the reference config that blocks at `KILL_AT_STEP` (to be killed).

    Started before the reference run so that the two train side by side.
    """
    model_dir = tmp_path_factory.mktemp("killed")
    log_path = model_dir.parent / "killed-worker.log"
    log = open(log_path, "w")
    proc = subprocess.Popen(
        [sys.executable, WORKER, "--model-dir", str(model_dir), "--block-at-step", str(KILL_AT_STEP)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=worker_env(),
    )
    yield {"proc": proc, "dir": model_dir, "log": log_path}
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    log.close()


@pytest.fixture(scope="module")
def reference(tmp_path_factory, killed_worker):
    model_dir = tmp_path_factory.mktemp("reference")
    result = run_pretraining(worker.tiny_run_config(model_dir), worker.dataset_fn())
    return {
        "dir": model_dir,
        "result": result,
        "weights": worker.model_weights(result.model),
        "metrics": read_metrics(model_dir),
    }


def copy_run(reference, tmp_path, name):
    target = tmp_path / name
    shutil.copytree(reference["dir"], target)
    return target


def worker_env():
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    env.pop("TF_CONFIG", None)
    return env


# --- the reference run -------------------------------------------------------------------------


def test_interval_groups_cover_the_run_in_checkpoint_intervals():
    assert interval_groups(0, 10, 4) == [(0, 2, 4), (2, 3, 2)]
    assert interval_groups(4, 10, 4) == [(1, 2, 4), (2, 3, 2)]
    assert interval_groups(8, 10, 4) == [(2, 3, 2)]
    assert interval_groups(10, 10, 4) == []
    assert interval_groups(0, 12, 4) == [(0, 3, 4)]
    # A checkpoint from a run with another interval: first up to the next boundary.
    assert interval_groups(6, 12, 4) == [(1, 2, 2), (2, 3, 4)]


@pytest.mark.slow
def test_metrics_log_has_one_line_per_interval_with_the_schedule(reference):
    records = reference["metrics"]
    assert [r["step"] for r in records] == [3, 6, 9, 10]
    assert [r["step"] for r in reference["result"].history] == [3, 6, 9, 10]
    schedule = WarmupPolynomialDecay(num_train_steps=10, num_warmup_steps=2, peak_learning_rate=0.01)
    for record in records:
        assert set(LOSS_KEYS) <= set(record)
        # `lr` is the rate of the next update, as Keras's TensorBoard callback logs it.
        np.testing.assert_allclose(record["lr"], float(schedule(record["step"])), rtol=1e-6)
        np.testing.assert_allclose(record["loss"], record["mlm_loss"] + record["sop_loss"], rtol=1e-5)
        np.testing.assert_allclose(record["mlm_perplexity"], np.exp(record["mlm_loss"]), rtol=1e-4)
        assert 0.0 <= record["mlm_accuracy"] <= 1.0
    assert records[-1]["lr"] == 0.0
    result = reference["result"]
    assert (result.initial_step, result.final_step, result.restored_from) == (0, 10, None)


@pytest.mark.slow
def test_checkpoints_hold_every_variable_and_keep_the_last_k(reference):
    ckpt_dir = Path(reference["dir"]) / "checkpoints"
    # keep_checkpoints=3: ckpt-3 was deleted.
    assert sorted(p.name for p in ckpt_dir.glob("*.index")) == ["ckpt-10.index", "ckpt-6.index", "ckpt-9.index"]
    assert tf.train.latest_checkpoint(str(ckpt_dir)) == str(ckpt_dir / "ckpt-10")
    assert reference["result"].checkpoint == str(ckpt_dir / "ckpt-10")
    reader = tf.train.load_checkpoint(str(ckpt_dir / "ckpt-10"))
    model = reference["result"].model
    # Model variables include the dropout layers' seed-generator states, which must be in the
    # checkpoint for dropout masks to continue identically after a resume.
    seed_states = [i for i, v in enumerate(model.variables) if "seed_generator_state" in v.path]
    assert seed_states, "the tiny model has dropout, so it must have seed generators"
    for i, variable in enumerate(model.variables):
        np.testing.assert_array_equal(reader.get_tensor(f"model/{i}/.ATTRIBUTES/VARIABLE_VALUE"), variable.numpy())
    optimizer = model.optimizer
    names = [v.path for v in optimizer.variables]
    assert any("iteration" in n for n in names) and any("gradient_accumulator" in n for n in names)
    for i, variable in enumerate(optimizer.variables):
        np.testing.assert_array_equal(reader.get_tensor(f"optimizer/{i}/.ATTRIBUTES/VARIABLE_VALUE"), variable.numpy())
    # 10 updates of 2 accumulated batches each.
    assert int(optimizer.iterations.numpy()) == 10


@pytest.mark.slow
def test_exported_models_and_tf1_checkpoint(reference):
    model_dir = Path(reference["dir"])
    result = reference["result"]
    model = result.model
    assert result.artifacts["pretrainer"] == str(model_dir / "pretrainer.keras")
    batch = next(iter(worker.dataset_fn()()))
    expected = model(batch, training=False)

    loaded = keras.saving.load_model(model_dir / "pretrainer.keras")
    # The .keras format stores the weights (not the dropout seed states: it is for inference
    # and fine-tuning; resuming uses the checkpoints).
    assert len(loaded.trainable_variables) == len(model.trainable_variables)
    for a, b in zip(loaded.trainable_variables, model.trainable_variables):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    np.testing.assert_allclose(
        loaded(batch, training=False)["mlm_logits"], expected["mlm_logits"], rtol=1e-6, atol=1e-6
    )

    encoder = keras.saving.load_model(model_dir / "encoder.keras")
    inputs = {k: batch[k] for k in ("input_ids", "input_mask", "segment_ids")}
    np.testing.assert_allclose(
        encoder(inputs)["pooled_output"], model.encoder(inputs)["pooled_output"], rtol=1e-6, atol=1e-6
    )

    tf1 = read_original_variables(str(model_dir / "tf1" / "model.ckpt"))
    np.testing.assert_array_equal(
        tf1["bert/embeddings/word_embeddings"], model.encoder.embeddings.word_embeddings.numpy()
    )
    assert any(name.startswith("cls/predictions/") for name in tf1)
    assert any(name.startswith("cls/seq_relationship/") for name in tf1)
    assert AlbertConfig.from_json_file(model_dir / "tf1" / "albert_config.json") == worker.tiny_albert_config()
    leftovers = [p for p in model_dir.rglob("*") if ".tmp-" in p.name]
    assert not leftovers, f"temporary files left behind: {leftovers}"


@pytest.mark.slow
def test_tensorboard_logs_use_the_optimizer_step(reference):
    scalars = {}
    for path in (Path(reference["dir"]) / "logs" / "train").glob("events.out.tfevents.*"):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            for value in event.summary.value:
                scalars.setdefault(value.tag, []).append(event.step)
    assert sorted(scalars["epoch_loss"]) == [3, 6, 9, 10]
    assert sorted(scalars["epoch_learning_rate"]) == [3, 6, 9, 10]
    # log_every=4: running metrics at steps 4 and 8.
    assert sorted(scalars["batch_loss"]) == [4, 8]


# --- resume -------------------------------------------------------------------------------------


@pytest.mark.slow
def test_sigkilled_run_resumes_to_identical_weights_and_losses(reference, killed_worker):
    proc, model_dir = killed_worker["proc"], killed_worker["dir"]
    deadline = time.time() + SUBPROCESS_TIMEOUT
    while not (model_dir / f".blocked-{KILL_AT_STEP}").exists():
        if proc.poll() is not None:
            pytest.fail(f"worker exited with {proc.returncode}: {killed_worker['log'].read_text()[-3000:]}")
        if time.time() > deadline:
            pytest.fail(f"worker did not reach step {KILL_AT_STEP} in {SUBPROCESS_TIMEOUT}s")
        time.sleep(0.5)
    assert (model_dir / "checkpoints" / "ckpt-3.index").exists()
    assert not (model_dir / "checkpoints" / "ckpt-6.index").exists()
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert [r["step"] for r in read_metrics(model_dir)] == [3]

    # The restart (here in the test process: any process other than the killed one will do).
    result = run_pretraining(worker.tiny_run_config(model_dir), worker.dataset_fn())
    assert result.initial_step == 3 and result.restored_from == str(model_dir / "checkpoints" / "ckpt-3")
    assert [r["step"] for r in result.history] == [6, 9, 10]
    # Bit-identical: same kernels, same data position, the same dropout masks from restored seeds.
    assert_same_weights(worker.model_weights(result.model), reference["weights"])
    assert losses(read_metrics(model_dir)) == losses(reference["metrics"])


def test_checkpoints_of_a_relative_model_dir_are_found_once(tmp_path, monkeypatch, caplog):
    from albert_tf.training.checkpointing import _checkpoint_candidates, restore_newest_readable

    monkeypatch.chdir(tmp_path)
    variable = tf.Variable(1.0)
    manager = tf.train.CheckpointManager(
        tf.train.Checkpoint(v=variable), "run/checkpoints", max_to_keep=3, checkpoint_name="ckpt"
    )
    manager.save(checkpoint_number=2)
    variable.assign(5.0)
    manager.save(checkpoint_number=4)
    variable.assign(0.0)
    assert _checkpoint_candidates("run/checkpoints") == ["run/checkpoints/ckpt-4", "run/checkpoints/ckpt-2"]
    with caplog.at_level(logging.WARNING, logger="albert_tf.training.pretraining"):
        restored, skipped = restore_newest_readable(tf.train.Checkpoint(v=variable), "run/checkpoints")
    assert (restored, skipped, float(variable.numpy())) == ("run/checkpoints/ckpt-4", [], 5.0)
    assert not caplog.records  # no checkpoint reported unreadable


@pytest.mark.slow
def test_unreadable_checkpoints_fall_back_to_the_newest_readable_one(reference, tmp_path, caplog):
    model_dir = copy_run(reference, tmp_path, "damaged")
    ckpt_dir = model_dir / "checkpoints"
    data = ckpt_dir / "ckpt-10.data-00000-of-00001"
    data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])  # a partial write
    (ckpt_dir / "ckpt-9.index").unlink()  # a checkpoint without its index
    with caplog.at_level(logging.WARNING, logger="albert_tf.training.pretraining"):
        result = run_pretraining(worker.tiny_run_config(model_dir), worker.dataset_fn())
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    for bad in ("ckpt-10", "ckpt-9"):
        assert any(str(ckpt_dir / bad) in w and "unreadable" in w for w in warnings), warnings
    assert result.skipped_checkpoints == [str(ckpt_dir / "ckpt-10"), str(ckpt_dir / "ckpt-9")]
    assert result.restored_from == str(ckpt_dir / "ckpt-6") and result.initial_step == 6
    assert [r["step"] for r in result.history] == [9, 10]
    assert_same_weights(worker.model_weights(result.model), reference["weights"])
    # The metrics lines of steps 9 and 10 were dropped on restore and written again.
    assert losses(read_metrics(model_dir)) == losses(reference["metrics"])
    # The damaged checkpoints were overwritten by good ones, equal to the reference run's.
    for good in ("ckpt-9", "ckpt-10"):
        written = tf.train.load_checkpoint(str(ckpt_dir / good))
        expected = tf.train.load_checkpoint(str(Path(reference["dir"]) / "checkpoints" / good))
        def tensor_names(reader):
            return sorted(n for n in reader.get_variable_to_shape_map() if n != "_CHECKPOINTABLE_OBJECT_GRAPH")

        names = tensor_names(expected)
        assert names == tensor_names(written)
        for name in names:
            np.testing.assert_array_equal(written.get_tensor(name), expected.get_tensor(name), err_msg=f"{good} {name}")


@pytest.mark.slow
def test_restarting_a_finished_run_trains_nothing(reference, tmp_path):
    model_dir = copy_run(reference, tmp_path, "finished")
    (model_dir / "pretrainer.keras").unlink()
    result = run_pretraining(worker.tiny_run_config(model_dir), worker.dataset_fn())
    assert (result.initial_step, result.final_step, result.history) == (10, 10, [])
    assert_same_weights(worker.model_weights(result.model), reference["weights"])
    assert (model_dir / "pretrainer.keras").exists()
    assert losses(read_metrics(model_dir)) == losses(reference["metrics"])


# --- precision and validation --------------------------------------------------------------------


def test_config_validation_names_the_problem(tmp_path):
    with pytest.raises(ValueError, match="steps_per_execution"):
        worker.tiny_run_config(tmp_path, steps_per_execution=3)
    with pytest.raises(ValueError, match="num_warmup_steps"):
        worker.tiny_run_config(tmp_path, num_warmup_steps=11)
    with pytest.raises(ValueError, match="precision"):
        worker.tiny_run_config(tmp_path, precision="float16")
    with pytest.raises(ValueError, match="strategy"):
        worker.tiny_run_config(tmp_path, strategy="horovod")
    with pytest.raises(ValueError, match="max_predictions_per_seq"):
        worker.tiny_run_config(tmp_path, max_predictions_per_seq=17)
    with pytest.raises(ValueError, match="max_position_embeddings"):
        worker.tiny_run_config(tmp_path, max_seq_length=32).albert_config()


def test_dataset_that_does_not_match_the_config_is_rejected(tmp_path):
    config = worker.tiny_run_config(tmp_path, num_train_steps=2, checkpoint_every_n_steps=2, num_warmup_steps=0)

    def without_labels():
        features = {k: v for k, v in worker.synthetic_features().items() if k != "next_sentence_labels"}
        return tf.data.Dataset.from_tensor_slices(features).repeat().batch(8, drop_remainder=True)

    with pytest.raises(ValueError, match="next_sentence_labels"):
        run_pretraining(config, without_labels)

    def wrong_length():
        features = {k: v[:, :8] if v.shape[1] == 16 else v for k, v in worker.synthetic_features().items()}
        return tf.data.Dataset.from_tensor_slices(features).repeat().batch(8, drop_remainder=True)

    with pytest.raises(ValueError, match="input_ids.*length 8"):
        run_pretraining(config, wrong_length)
    with pytest.raises(ValueError, match="batch_size"):
        run_pretraining(config, worker.dataset_fn(batch_size=4))


@pytest.mark.slow
def test_checkpoint_of_another_model_is_an_error_not_a_fallback(reference, tmp_path):
    model_dir = copy_run(reference, tmp_path, "other_model")
    config = worker.tiny_run_config(model_dir, model_config=worker.tiny_albert_config().replace(intermediate_size=24))
    with pytest.raises(ValueError, match="does not match this model"):
        run_pretraining(config, worker.dataset_fn())


# --- the `albert-tf pretrain` command ------------------------------------------------------------


def _pretrain_cli(argv):
    from albert_tf.cli import pretrain

    parser = argparse.ArgumentParser()
    pretrain.add_arguments(parser)
    return pretrain.run(parser.parse_args(argv))


def _write_records(path, features):
    from albert_tf.data.tfrecords import encode_example

    n = len(features["input_ids"])
    with tf.io.TFRecordWriter(str(path)) as writer:
        for i in range(n):
            example = {k: features[k][i] for k in ("input_ids", "input_mask", "segment_ids")}
            example["token_boundary"] = np.ones_like(features["input_ids"][i])
            example.update({k: features[k][i] for k in ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights")})
            example["next_sentence_labels"] = features["next_sentence_labels"][i]
            writer.write(encode_example(example))


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    directory = tmp_path_factory.mktemp("records")
    features = worker.synthetic_features()
    for shard in range(2):
        _write_records(directory / f"part-{shard}.tfrecord", {k: v[shard::2] for k, v in features.items()})
    config_path = directory / "albert_config.json"
    worker.tiny_albert_config().to_json_file(config_path)
    return directory, config_path


@pytest.mark.slow
def test_pretrain_command_trains_on_tfrecords_in_mixed_bfloat16(records, tmp_path, capsys):
    directory, config_path = records
    argv = [
        "--data", str(directory / "part-*.tfrecord"), "--config", str(config_path), "--model-dir", str(tmp_path),
        "--steps", "2", "--batch-size", "8", "--max-seq-length", "16", "--max-predictions-per-seq", "3",
        "--checkpoint-every", "1", "--log-every", "0", "--verbose", "0", "--learning-rate", "0.01",
        "--precision", "mixed_bfloat16",
    ]
    policy = keras.mixed_precision.global_policy().name
    assert _pretrain_cli(argv) == 0
    # The precision policy was set for building the model only.
    assert keras.mixed_precision.global_policy().name == policy
    out = capsys.readouterr().out
    assert "pretraining on 2 file(s)" in out and "step 2: loss" in out
    logged = read_metrics(tmp_path)
    assert [r["step"] for r in logged] == [1, 2] and all(np.isfinite(r["loss"]) for r in logged)
    for name in ("pretrainer.keras", "encoder.keras", "tf1/model.ckpt.index", "tf1/albert_config.json"):
        assert (tmp_path / name).exists(), name
    run_config = json.loads((tmp_path / "run_config.json").read_text())
    assert run_config["num_warmup_steps"] == 0 and run_config["optimizer"] == "lamb"
    encoder = keras.saving.load_model(tmp_path / "encoder.keras")
    # bfloat16 compute, float32 variables.
    assert encoder.embeddings.dtype_policy.name == "mixed_bfloat16"
    assert all(v.dtype == "float32" for v in encoder.trainable_variables)


def test_pretrain_command_reports_user_errors_in_one_line(records, tmp_path):
    from albert_tf.cli import CommandError, pretrain
    from albert_tf.training import strategies

    assert pretrain.STRATEGY_NAMES == strategies.STRATEGY_NAMES and pretrain.PRECISIONS == strategies.PRECISIONS

    directory, config_path = records
    base = ["--config", str(config_path), "--model-dir", str(tmp_path), "--steps", "2", "--batch-size", "8",
            "--max-predictions-per-seq", "3", "--checkpoint-every", "1", "--verbose", "0"]
    # Without --data the command is the bundled sample run, which has its own model and lengths.
    with pytest.raises(CommandError, match="--config needs --data"):
        _pretrain_cli(base)
    with pytest.raises(CommandError, match="--max-predictions-per-seq need --data"):
        _pretrain_cli(base[2:])
    with pytest.raises(CommandError, match="no file matches"):
        _pretrain_cli(base + ["--data", str(tmp_path / "missing-*.tfrecord"), "--max-seq-length", "16"])
    with pytest.raises(CommandError, match="--model-dir is required"):
        _pretrain_cli(["--data", str(directory / "part-*.tfrecord")])
    with pytest.raises(CommandError, match="num_train_steps must be >= 1"):
        _pretrain_cli(base + ["--data", str(directory / "part-*.tfrecord"), "--max-seq-length", "16", "--steps", "0"])
    with pytest.raises(CommandError, match="16 input_ids per example, but --max-seq-length is 12"):
        _pretrain_cli(base + ["--data", str(directory / "part-*.tfrecord"), "--max-seq-length", "12"])
