"""Fine-tuning resumes: a run SIGKILLed after a checkpoint and rerun gives the uninterrupted run's
final weights bit for bit; a rerun with another setting refuses, naming it; a finished run leaves
no resume files (`albert_tf.training.finetune_resume`)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import _finetune_worker as worker  # noqa: E402

from albert_tf.training import finetune_resume  # noqa: E402

WORKER = str(Path(__file__).resolve().parents[1] / "_finetune_worker.py")
KILL_AFTER_STEP = 4
TIMEOUT_S = 240


@pytest.mark.slow
def test_sigkilled_finetune_resumes_to_identical_weights(tmp_path):
    reference = worker.train(str(tmp_path / "reference"))
    assert not os.path.exists(finetune_resume.resume_dir(str(tmp_path / "reference")))
    expected = worker.weights(reference.model)

    model_dir = tmp_path / "run"
    log = open(tmp_path / "worker.log", "w")
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    proc = subprocess.Popen([sys.executable, WORKER, "--model-dir", str(model_dir), "--block-after-step",
                             str(KILL_AFTER_STEP)], stdout=log, stderr=subprocess.STDOUT, env=env)
    deadline = time.time() + TIMEOUT_S
    while not (tmp_path / f".blocked-{KILL_AFTER_STEP}").exists():
        if proc.poll() is not None:
            pytest.fail(f"worker exited with {proc.returncode}: {(tmp_path / 'worker.log').read_text()[-3000:]}")
        if time.time() > deadline:
            proc.kill()
            pytest.fail(f"worker did not reach step {KILL_AFTER_STEP} in {TIMEOUT_S}s")
        time.sleep(0.3)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    build_dir = finetune_resume.resume_dir(str(model_dir))
    state = finetune_resume.read_state(build_dir)
    assert state is not None and state.step == KILL_AFTER_STEP and not model_dir.exists()

    # Another setting: refused in one line naming it, the interrupted run left as it was.
    with pytest.raises(finetune_resume.ResumeSettingsDiffer) as refused:
        worker.train(str(model_dir), learning_rate=2e-3)
    message = str(refused.value)
    assert "learning_rate=0.001 (now 0.002)" in message and "overwrite=True" in message and "\n" not in message
    assert "--learning-rate 0.001" in refused.value.cli_message
    assert finetune_resume.read_state(build_dir).step == KILL_AFTER_STEP

    resumed = worker.train(str(model_dir))
    assert resumed.initial_step == KILL_AFTER_STEP and reference.initial_step == 0
    assert [r["step"] for r in resumed.history] == [2, 4, 6, 8]
    assert resumed.best_step == reference.best_step and resumed.best_metrics == reference.best_metrics
    got = worker.weights(resumed.model)
    assert len(got) == len(expected)
    for a, b in zip(got, expected):
        np.testing.assert_array_equal(a, b)
    assert not os.path.exists(build_dir)
    assert sorted(os.listdir(model_dir)) == sorted(os.listdir(tmp_path / "reference"))
