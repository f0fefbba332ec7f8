"""A push or a staged step output killed mid-copy: SIGTERM cleans up, SIGKILL leftovers are swept."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from albert_tf.pipeline_steps import pusher, staging

REPO = Path(__file__).resolve().parents[2]

# The child copies one file, says so, then waits for the test's signal: the kill always lands
# mid-copy, however fast the disk is.
_PAUSED_COPY = r'''
import shutil, sys, time

real_copytree = shutil.copytree


def copy_then_wait(src, dst, **kwargs):
    shutil.copy2(src, dst, **kwargs)
    print("mid-copy", flush=True)
    time.sleep(600)


def copytree(src, dst, *args, **kwargs):
    # Nested calls (shutil recurses through this name) pass the copy function on themselves.
    return real_copytree(src, dst, *args, **kwargs) if args or kwargs else real_copytree(src, dst, copy_function=copy_then_wait)


shutil.copytree = copytree
'''

CHILD_PUSH = _PAUSED_COPY + r'''
from albert_tf.pipeline_steps import pusher

pusher.push(sys.argv[1], sys.argv[2], "m")
'''

CHILD_STAGED = r'''
import os, sys, time

from albert_tf.pipeline_steps.staging import staged_directory

with staged_directory(sys.argv[1]) as directory:
    open(os.path.join(directory, "half"), "w").close()
    print("mid-copy", flush=True)
    time.sleep(600)
'''


def fake_saved_model(directory: Path, weights: bytes) -> str:
    (directory / "variables").mkdir(parents=True)
    (directory / "saved_model.pb").write_bytes(b"graph")
    (directory / "variables" / "variables.data-00000-of-00001").write_bytes(weights)
    return str(directory)


def start_paused(script: str, *args: str) -> subprocess.Popen:
    """Starts `script` in a fresh interpreter and returns once it is paused mid-copy."""
    proc = subprocess.Popen([sys.executable, "-c", script, *args], cwd=REPO, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if line.strip() != "mid-copy":
        proc.kill()
        proc.wait()
        pytest.fail(f"the child did not reach the copy (exit status {proc.returncode}, said {line!r})")
    return proc


def hidden(directory: Path):
    return sorted(n for n in os.listdir(directory) if n.startswith("."))


@pytest.mark.slow
def test_push_killed_with_sigkill_is_swept_by_the_next_push(tmp_path):
    base = tmp_path / "serving"
    model_dir = base / "m"
    proc = start_paused(CHILD_PUSH, fake_saved_model(tmp_path / "a", b"w1"), str(base))
    try:
        [left] = hidden(model_dir)
        # A push still in progress is never taken for a stale one.
        assert staging.sweep_stale(str(model_dir), pusher.PUSH_PREFIX) == [] and hidden(model_dir) == [left]
    finally:
        proc.kill()
        proc.wait(timeout=60)
    assert hidden(model_dir) == [left]  # SIGKILL leaves it; nothing published
    assert not any(n.isdigit() for n in os.listdir(model_dir))

    result = pusher.push(fake_saved_model(tmp_path / "b", b"w2"), str(base), "m")
    assert result["pushed"] and result["version"] == 1 and result["swept"] == [left]
    assert os.listdir(model_dir) == ["1"]


@pytest.mark.slow
def test_push_sent_sigterm_removes_its_staging_dir(tmp_path):
    base = tmp_path / "serving"
    proc = start_paused(CHILD_PUSH, fake_saved_model(tmp_path / "a", b"w1"), str(base))
    try:
        assert len(hidden(base / "m")) == 1
        proc.terminate()
        code = proc.wait(timeout=60)
    finally:
        proc.kill()
    assert code == -signal.SIGTERM  # it still ends as SIGTERM ends a process
    assert os.listdir(base / "m") == []


def test_staged_output_killed_is_cleaned_up_or_swept(tmp_path):
    out = tmp_path / "step" / "output"
    proc = start_paused(CHILD_STAGED, str(out))
    proc.terminate()
    assert proc.wait(timeout=60) == -signal.SIGTERM
    assert os.listdir(out.parent) == []

    proc = start_paused(CHILD_STAGED, str(out))
    proc.kill()
    proc.wait(timeout=60)
    [left] = hidden(out.parent)
    assert left.startswith(".output.partial-")
    with staging.staged_directory(str(out)) as directory:
        open(os.path.join(directory, "done"), "w").close()
    assert os.listdir(out.parent) == ["output"] and os.listdir(out) == ["done"]


def test_sigterm_handler_is_restored_and_the_previous_one_runs(tmp_path, monkeypatch):
    """In this process: the previous handler is back after a push, and a SIGTERM during one
    removes the staging directory, then reaches the previous handler."""
    base = tmp_path / "serving"
    calls = []

    def previous(signum, frame):
        calls.append(signum)
        raise RuntimeError("the previous handler ran")

    real_copytree = pusher.shutil.copytree

    def copytree_then_sigterm(src, dst, *args, **kwargs):
        real_copytree(src, dst, *args, **kwargs)
        signal.raise_signal(signal.SIGTERM)

    saved = signal.signal(signal.SIGTERM, previous)
    try:
        pusher.push(fake_saved_model(tmp_path / "a", b"w1"), str(base), "m")
        assert signal.getsignal(signal.SIGTERM) is previous and calls == []
        monkeypatch.setattr(pusher.shutil, "copytree", copytree_then_sigterm)
        with pytest.raises(RuntimeError, match="the previous handler ran"):
            pusher.push(fake_saved_model(tmp_path / "b", b"w2"), str(base), "m")
        assert calls == [signal.SIGTERM] and signal.getsignal(signal.SIGTERM) is previous
    finally:
        signal.signal(signal.SIGTERM, saved)
    assert os.listdir(base / "m") == ["1"]


def test_staging_dirs_of_other_hosts_and_old_names_go_by_age(tmp_path):
    day_and_more = time.time() - staging.STALE_AGE_S - 60
    names = {
        ".push-2-123@another-host-0a1b2c3d": True,  # another host, untouched for a day: stale
        ".push-2-456@another-host-4e5f6a7b": False,  # another host, recent: may be live
        ".push-1-3f2a9c1b": True,  # an older version's name (no owner), old
        ".push-1-9c8b7a6d": False,  # same, recent
    }
    for name, old in names.items():
        (tmp_path / name).mkdir()
        if old:
            os.utime(tmp_path / name, (day_and_more, day_and_more))
    (tmp_path / "1").mkdir()
    swept = staging.sweep_stale(str(tmp_path), pusher.PUSH_PREFIX)
    assert swept == sorted(n for n, old in names.items() if old)
    assert sorted(os.listdir(tmp_path)) == sorted(["1"] + [n for n, old in names.items() if not old])
