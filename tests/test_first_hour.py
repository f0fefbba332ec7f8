"""A new user's first hour, played as a script on the shipped sample (issue 25): the install check,
the README's blocks in order, pretraining with the defaults, fine-tuning from the pipeline's
pretrained model, wrong paths, a wrong port, and a fine-tune killed and rerun.

Every step either works or exits non-zero with exactly one line on stderr; no traceback appears
anywhere, and a step that works prints nothing on stderr but the runtime's start-up notices and
the package's own progress lines (`_quiet.unexpected_stderr`). The tests share one folder and run
in file order.
"""

from __future__ import annotations

import http.server
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from concurrent import futures
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS))
from _quiet import unexpected_stderr  # noqa: E402

pytestmark = pytest.mark.slow

REPO = TESTS.parent
SAMPLE = REPO / "albert_tf" / "resources" / "sample"
TIMEOUT_S = 600


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """The user's folder: `albert-tf` on the PATH, and the README's relative sample paths."""
    root = tmp_path_factory.mktemp("first_hour")
    (root / "bin").mkdir()
    shim = root / "bin" / "albert-tf"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m albert_tf "$@"\n', encoding="utf-8")
    shim.chmod(0o755)
    # The README's paths are relative to a clone: albert_tf/resources/sample/...
    (root / "albert_tf").mkdir()
    (root / "albert_tf" / "resources").symlink_to(REPO / "albert_tf" / "resources")
    return root


def _env(work):
    return dict(os.environ, PYTHONPATH=str(REPO), PATH=f"{work / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}")


def albert_tf(work, *args, cwd=None):
    return subprocess.run([sys.executable, "-m", "albert_tf", *map(str, args)], cwd=cwd or work, env=_env(work),
                          capture_output=True, text=True, timeout=TIMEOUT_S)


def works(proc):
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    assert "Traceback" not in proc.stdout + proc.stderr
    assert unexpected_stderr(proc.stderr) == []
    return proc.stdout


def refused(proc, *expected):
    """Exit status 2 and one line on stderr holding every `expected` text."""
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr[-4000:]
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr[-4000:]
    for text in expected:
        assert text in lines[0]
    return lines[0]


def test_install_check(work):
    assert "finetune" in works(albert_tf(work, "--help"))
    assert "small" in works(albert_tf(work, "info", "--list"))


def test_readme_blocks_run_in_order_as_written(work):
    """The README's command-line block, then its Python call of the same run, in one folder."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    cli = re.search(r"```bash\n(albert-tf train-tokenizer .*?)```", text, flags=re.S).group(1)
    python = re.search(r"```python\n(from albert_tf.tasks import FinetuneSettings.*?)```", text, flags=re.S).group(1)
    api = re.search(r"```python\n(from albert_tf import AlbertTextClassifier\n\nmodel = AlbertTextClassifier"
                    r"\.from_pretrained\(\"rt/model\"\).*?)```", text, flags=re.S).group(1)
    shell = subprocess.run(["bash", "-euo", "pipefail", "-c", cli], cwd=work, env=_env(work), capture_output=True,
                           text=True, timeout=TIMEOUT_S)
    works(shell)
    for block in (python, api):
        call = subprocess.run([sys.executable, "-c", block], cwd=work, env=_env(work), capture_output=True, text=True,
                              timeout=TIMEOUT_S)
        works(call)
    assert (work / "rt" / "model" / "COMPLETE").is_file() and (work / "rt" / "py-model" / "COMPLETE").is_file()
    assert (work / "rt" / "keras-run" / "task.json").is_file()


def test_the_quickstart_runs_on_what_the_main_job_pushed(work, shared_pipeline_run, tmp_path):
    """The README's Keras quickstart, as written, in a folder where the main job pushed its model."""
    import shutil

    text = (REPO / "README.md").read_text(encoding="utf-8")
    quickstart = re.search(r"## Quickstart \(Keras\).*?```python\n(.*?)```", text, flags=re.S).group(1)
    pushed = Path(shared_pipeline_run.settings.serving_base) / shared_pipeline_run.settings.model_name
    shutil.copytree(max(pushed.iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else -1),
                    tmp_path / "albert-tf-pipeline" / "serving" / "albert_classifier" / "1")
    call = subprocess.run([sys.executable, "-c", quickstart], cwd=tmp_path, env=_env(work), capture_output=True,
                          text=True, timeout=TIMEOUT_S)
    works(call)
    assert (tmp_path / "sentiment.keras").is_file() and (tmp_path / "serving" / "sentiment" / "1" / "saved_model.pb").is_file()


def test_pretrain_with_the_defaults_fits_and_the_paper_recipe_is_refused(work):
    works(albert_tf(work, "make-pretraining-data", "--input", *sorted(SAMPLE.glob("sotu/201[01]_*.txt")),
                    "--output-dir", "pretraining-data", "--spm-model", "rt/spm.model", "--max-seq-length", 128,
                    "--dupe-factor", 1, "--input-format", "paragraphs"))
    # The defaults on a machine without an accelerator: the CPU size and its run settings (two
    # steps of them here: the point is that they start within this machine's memory).
    proc = albert_tf(work, "pretrain", "--data", "pretraining-data", "--model-dir", "pretrained", "--steps", 2,
                     "--verbose", 0, "--log-every", 0)
    assert "no --config: small" in works(proc) and "batch 32" in proc.stdout
    assert re.search(r"peak memory: about [\d.]+ GiB .* of [\d.]+ GiB free", proc.stderr)
    line = refused(albert_tf(work, "pretrain", "--data", "pretraining-data", "--model-dir", "paper", "--config",
                             "base-v2"), "at batch 4096", "GiB is free", "--config small", "--batch-size")
    assert "--grad-accum" in line
    assert not (work / "paper").exists()


def test_finetune_from_the_pipelines_pretrained_model(work, shared_pipeline_run):
    """The pipeline's Pretrainer output alone (no tokenizer or config flags) starts a fine-tune,
    and every model directory written so far loads with `from_pretrained`."""
    from albert_tf import AlbertTextClassifier
    from albert_tf.tasks.pretrained import PretrainedNotFoundError

    pretrained = shared_pipeline_run.run.artifacts["pretrained_model"]
    assert json.loads((Path(pretrained) / "run_config.json").read_text())["tokenizer"] is not None

    task = shared_pipeline_run.settings.task_data.replace("{SPAN}", "1")
    works(albert_tf(work, "finetune", "--task", "classification", "--data", task, "--text-column", "text",
                    "--label-column", "label", "--init", pretrained, "--model-dir", "from-pipeline",
                    "--num-epochs", 8, "--batch-size", 16, "--learning-rate", 0.005,
                    "--max-seq-length", 24))
    for path in (pretrained, work / "from-pipeline", work / "pretrained", work / "rt" / "model"):
        model = AlbertTextClassifier.from_pretrained(str(path), num_classes=2, sequence_length=24)
        assert model.predict(["a moving film"], verbose=0).shape == (1, 2)
    with pytest.raises(PretrainedNotFoundError, match="albert_tf ships no weights") as raised:
        AlbertTextClassifier.from_pretrained("albert_base", num_classes=2)
    assert "tried " in str(raised.value) and "Hugging Face" in str(raised.value)


def test_wrong_paths_are_one_line_before_any_work(work):
    (work / "a-file").write_text("not a folder", encoding="utf-8")
    refused(albert_tf(work, "pipeline", "run", "--pipeline-root", work / "a-file" / "runs"), "--pipeline-root",
            "is a file, not a folder")
    refused(albert_tf(work, "pipeline", "run", "--pipeline-root", work / "runs", "--serving-base",
                      work / "a-file" / "serving"), "--serving-base")
    assert not (work / "runs").exists()
    table = ["--task", "classification", "--data", SAMPLE / "rotten_tomatoes", "--text-column", "text",
             "--label-column", "label"]
    refused(albert_tf(work, "finetune", *table, "--init", "albert_base", "--model-dir", "x"), "--init", "albert_base")
    refused(albert_tf(work, "finetune", *table, "--config", "rt/albert_config.json", "--spm-model", "rt/spm.model",
                      "--model-dir", "rt/model"), "--model-dir", "pass --overwrite")


class _Http(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - the handler's name
        self.send_error(404)

    do_POST = do_GET

    def log_message(self, *args):
        pass


def test_a_wrong_port_names_the_protocol_it_found(work):
    import grpc

    grpc_server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    grpc_port = grpc_server.add_insecure_port("127.0.0.1:0")
    grpc_server.start()
    rest_server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Http)
    threading.Thread(target=rest_server.serve_forever, daemon=True).start()
    try:
        refused(albert_tf(work, "predict", "--server", f"127.0.0.1:{grpc_port}", "--model", "m", "--protocol", "rest",
                          "good"), "speaks gRPC", "--protocol grpc")
        refused(albert_tf(work, "predict", "--server", f"127.0.0.1:{rest_server.server_port}", "--model", "m",
                          "--protocol", "grpc", "good"), "speaks REST", "--protocol rest")
    finally:
        grpc_server.stop(0)
        rest_server.shutdown()


def test_a_killed_finetune_continues_when_rerun(work):
    command = [sys.executable, "-m", "albert_tf", "finetune", "--task", "classification", "--data",
               str(SAMPLE / "rotten_tomatoes"), "--text-column", "text", "--label-column", "label", "--config",
               "rt/albert_config.json", "--spm-model", "rt/spm.model", "--max-seq-length", "64",
               "--num-train-steps", "40", "--eval-every", "10", "--max-eval-examples", "100", "--model-dir", "killed"]
    state = work / ".killed.resume" / "resume.json"
    proc = subprocess.Popen(command, cwd=work, env=_env(work), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + TIMEOUT_S
    while not state.exists():
        assert proc.poll() is None, "the run ended before its first checkpoint"
        assert time.time() < deadline
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    assert not (work / "killed").exists()

    changed = subprocess.run(command + ["--learning-rate", "0.002"], cwd=work, env=_env(work), capture_output=True,
                             text=True, timeout=TIMEOUT_S)
    refused(changed, "--learning-rate", "can resume there", "--overwrite")
    rerun = subprocess.run(command, cwd=work, env=_env(work), capture_output=True, text=True, timeout=TIMEOUT_S)
    assert "resuming from step " in works(rerun)
    assert (work / "killed" / "COMPLETE").is_file() and not (work / ".killed.resume").exists()
