"""A new user's first hour, played as a script on the shipped sample (issue 25): the install check,
the README's blocks in order, pretraining with the defaults, wrong paths, a wrong port, and a
fine-tune killed and rerun. What the user does next with the main job's models (the quickstart on
the pushed model, fine-tuning from the pipeline's pretrained encoder) is
`tests/test_first_hour_main_job.py`, beside the pipeline's own tests that share its run.

Every step either works or exits non-zero with exactly one line on stderr; no traceback appears
anywhere, and a step that works prints nothing on stderr but the runtime's start-up notices and
the package's own progress lines (`_quiet.unexpected_stderr`). The tests share one folder and run
in file order.
"""

from __future__ import annotations

import http.server
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

from _first_hour import REPO, SAMPLE, TIMEOUT_S, _env, albert_tf, make_work, refused, works  # noqa: E402


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """The user's folder: `albert-tf` on the PATH, and the README's relative sample paths."""
    return make_work(tmp_path_factory.mktemp("first_hour"))


pytestmark = pytest.mark.slow


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
    # Every model directory written so far loads with `from_pretrained`: a pretraining run gets a new head.
    from albert_tf import AlbertTextClassifier

    for path in (work / "pretrained", work / "rt" / "model"):
        model = AlbertTextClassifier.from_pretrained(str(path), num_classes=2, sequence_length=24)
        assert model.predict(["a moving film"], verbose=0).shape == (1, 2)


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
