"""Tests for albert_tf.training.strategies: names, errors, the XLA default, and real distributed
training: MirroredStrategy over 2 logical CPUs against one device on the same global batch, and
two MultiWorkerMirroredStrategy workers on 127.0.0.1 ending with identical weights."""

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import _pretrain_worker as worker  # noqa: E402

from albert_tf.training.pretraining import run_pretraining  # noqa: E402
from albert_tf.training.strategies import (  # noqa: E402
    StrategyError,
    default_jit_compile,
    get_strategy,
    is_chief,
    parse_tf_config,
    strategy_device_kind,
    task_info,
)

WORKER = str(Path(__file__).resolve().parents[1] / "_pretrain_worker.py")
TIMEOUT = 300
# Replicas sum their partial gradients in another order than one device's reduction, so
# float32 rounding differs: measured 1.2e-7 at most over the 4 steps (losses 6e-7 relative).
MIRRORED_ATOL = 1e-6
# Dropout masks depend on the per-replica batch shape, so the comparison runs without dropout.
DISTRIBUTED_OVERRIDES = {
    "dropout": 0.0,
    "num_train_steps": 4,
    "num_warmup_steps": 1,
    "checkpoint_every_n_steps": 2,
    "log_every": 0,
}


def test_default_jit_compile_is_xla_on_accelerators_and_plain_on_cpu():
    assert default_jit_compile("GPU", "float32") and default_jit_compile("gpu", "mixed_bfloat16")
    assert default_jit_compile("TPU", "mixed_bfloat16")
    assert not default_jit_compile("CPU", "float32")
    assert not default_jit_compile("CPU", "mixed_bfloat16")
    with pytest.raises(ValueError, match="device kind"):
        default_jit_compile("NPU", "float32")
    with pytest.raises(ValueError, match="precision"):
        default_jit_compile("GPU", "float16")


def test_single_process_strategies():
    default = get_strategy("default")
    assert default is tf.distribute.get_strategy()
    assert strategy_device_kind(default) == ("GPU" if tf.config.list_logical_devices("GPU") else "CPU")
    one = get_strategy("one_device")
    assert isinstance(one, tf.distribute.OneDeviceStrategy) and one.num_replicas_in_sync == 1
    mirrored = get_strategy("mirrored")
    assert isinstance(mirrored, tf.distribute.MirroredStrategy)
    for strategy in (default, one, mirrored):
        assert is_chief(strategy) and task_info(strategy) == (None, 0)
    with pytest.raises(StrategyError, match="unknown strategy 'horovod'"):
        get_strategy("horovod")


@pytest.mark.parametrize(
    "tf_config, message",
    [
        (None, "needs the TF_CONFIG environment variable"),
        ("{not json", "not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        ('{"task": {"type": "worker", "index": 0}}', "no 'cluster'"),
        ('{"cluster": {"worker": []}, "task": {"type": "worker", "index": 0}}', "non-empty list"),
        ('{"cluster": {"ps": ["a:1"]}, "task": {"type": "ps", "index": 0}}', "neither 'chief' nor 'worker'"),
        ('{"cluster": {"worker": ["a:1"]}}', "no 'task'"),
        ('{"cluster": {"worker": ["a:1"]}, "task": {"type": "chief", "index": 0}}', "not in the cluster"),
        ('{"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 2}}', "out of range"),
    ],
)
def test_multi_worker_rejects_a_missing_or_malformed_tf_config(monkeypatch, tf_config, message):
    if tf_config is None:
        monkeypatch.delenv("TF_CONFIG", raising=False)
    else:
        monkeypatch.setenv("TF_CONFIG", tf_config)
    with pytest.raises(StrategyError, match=message):
        get_strategy("multi_worker")


def test_parse_tf_config_accepts_a_worker_cluster():
    env = {"TF_CONFIG": json.dumps({"cluster": {"worker": ["h:1", "h:2"]}, "task": {"type": "worker", "index": 1}})}
    assert parse_tf_config(env)["task"] == {"type": "worker", "index": 1}


def test_tpu_strategy_without_a_tpu_is_a_clear_error(monkeypatch):
    if tf.config.list_physical_devices("TPU"):
        pytest.skip("this machine has a TPU")
    monkeypatch.delenv("TPU_NAME", raising=False)
    monkeypatch.delenv("TPU_CONFIG", raising=False)
    with pytest.raises(StrategyError, match="found no TPU"):
        get_strategy("tpu")
    with pytest.raises(StrategyError, match="no TPU devices"):
        get_strategy("tpu", tpu="local")


# --- distributed training in subprocesses ---------------------------------------------------------


def _env(**extra):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    env.pop("TF_CONFIG", None)
    env.update(extra)
    return env


def _free_ports(n):
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


@pytest.fixture(scope="module")
def distributed_runs(tmp_path_factory):
    """Starts, all at once, the subprocesses of the two distributed tests (bounded, killed at the end):
    a MirroredStrategy run over 2 logical CPUs, and 2 MultiWorkerMirroredStrategy workers."""
    tmp_path = tmp_path_factory.mktemp("distributed")
    overrides = json.dumps(DISTRIBUTED_OVERRIDES)
    ports = _free_ports(2)
    cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
    commands = {
        "mirrored": (
            ["--model-dir", str(tmp_path / "mirrored"), "--strategy", "mirrored", "--logical-cpus", "2"],
            _env(),
        )
    }
    for i in range(2):
        tf_config = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": i}})
        commands[f"worker{i}"] = (
            ["--model-dir", str(tmp_path / "multi_worker"), "--strategy", "multi_worker"],
            _env(TF_CONFIG=tf_config),
        )
    procs = {}
    for name, (args, env) in commands.items():
        log = open(tmp_path / f"{name}.log", "w")
        cmd = [
            sys.executable, WORKER, "--overrides", overrides,
            "--weights-out", str(tmp_path / f"{name}.npz"), "--result-out", str(tmp_path / f"{name}.json"), *args,
        ]
        procs[name] = (subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env), log)
    yield tmp_path, procs
    for proc, log in procs.values():
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()


def _results(distributed_runs, names):
    """Waits (bounded) for the named processes and loads their weights and summaries."""
    tmp_path, procs = distributed_runs
    deadline = time.time() + TIMEOUT
    for name in names:
        proc = procs[name][0]
        try:
            proc.wait(timeout=max(1.0, deadline - time.time()))
        except subprocess.TimeoutExpired:
            for other in names:
                procs[other][0].kill()
            pytest.fail(f"{name} did not finish in {TIMEOUT}s: {(tmp_path / f'{name}.log').read_text()[-3000:]}")
        if proc.returncode != 0:
            for other in names:
                procs[other][0].kill()
            pytest.fail(f"{name} exited with {proc.returncode}: {(tmp_path / f'{name}.log').read_text()[-3000:]}")
    results = {}
    for name in names:
        with np.load(tmp_path / f"{name}.npz") as weights:
            results[name] = (dict(weights), json.loads((tmp_path / f"{name}.json").read_text()))
    return results


def test_mirrored_over_two_cpus_matches_one_device_on_the_same_global_batch(distributed_runs, tmp_path):
    # The one-device run, here, while the subprocess trains: same config, same global batches.
    single_run = run_pretraining(worker.tiny_run_config(tmp_path, **DISTRIBUTED_OVERRIDES), worker.dataset_fn())
    single = worker.model_weights(single_run.model)
    mirrored, mirrored_info = _results(distributed_runs, ["mirrored"])["mirrored"]
    assert single_run.strategy.num_replicas_in_sync == 1 and mirrored_info["replicas"] == 2
    # Equal losses from the first interval on also show that no batch is skipped under a
    # strategy (Keras takes one for its symbolic build unless prevented), and that dividing the
    # loss by the replica count makes the summed gradients the global-batch mean.
    assert [r["step"] for r in mirrored_info["history"]] == [r["step"] for r in single_run.history] == [2, 4]
    for a, b in zip(single_run.history, mirrored_info["history"]):
        for key in ("loss", "mlm_loss", "sop_loss"):
            np.testing.assert_allclose(b[key], a[key], rtol=1e-5, err_msg=f"{key} at step {a['step']}")
    assert list(single) == list(mirrored)
    changed = 0
    for key in single:
        np.testing.assert_allclose(mirrored[key], single[key], rtol=0, atol=MIRRORED_ATOL, err_msg=key)
        changed += not np.array_equal(single[key], mirrored[key])
    assert changed, "two replicas reproduced one device bit for bit: was the run really distributed?"


@pytest.mark.slow
def test_two_multi_worker_processes_train_to_identical_weights(distributed_runs):
    tmp_path, _ = distributed_runs
    results = _results(distributed_runs, ["worker0", "worker1"])
    (w0, info0), (w1, info1) = results["worker0"], results["worker1"]
    assert info0["replicas"] == info1["replicas"] == 2
    assert info0["final_step"] == info1["final_step"] == 4
    assert list(w0) == list(w1)
    for key in w0:
        np.testing.assert_array_equal(w0[key], w1[key], err_msg=key)
    assert [r["step"] for r in info0["history"]] == [2, 4] and np.isfinite(info0["history"][-1]["loss"])
    # The chief (worker 0) wrote the shared outputs; worker 1's private copies are gone.
    model_dir = tmp_path / "multi_worker"
    assert (model_dir / "checkpoints" / "ckpt-4.index").exists()
    assert (model_dir / "pretrainer.keras").exists() and (model_dir / "tf1" / "model.ckpt.index").exists()
    assert [json.loads(line)["step"] for line in (model_dir / "metrics.jsonl").read_text().splitlines()] == [2, 4]
    assert not list(model_dir.glob(".tmp-*"))
