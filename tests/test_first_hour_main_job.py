"""A new user's first hour, continued on what the main job wrote (the shared pipeline run): the
README's Keras quickstart on the pushed model, and a fine-tune from the pipeline's pretrained
encoder alone. The first steps are `tests/test_first_hour.py`; these run beside the pipeline's
own tests, on the worker that makes the run."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS))

from _first_hour import REPO, TIMEOUT_S, _env, albert_tf, make_work, works  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return make_work(tmp_path_factory.mktemp("first_hour_main_job"))


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
    # The shared run's vocabulary is the tiny one (60 pieces, not the main job's 2,000): `fit` says how
    # much of the quickstart's text it does not cover, in one line, and nothing else is printed.
    unknown = [line for line in call.stderr.splitlines() if "of the training texts' pieces are unknown" in line]
    assert len(unknown) == 1 and "(spiece.model, 60 pieces)" in unknown[0], call.stderr[-2000:]
    works(subprocess.CompletedProcess(call.args, call.returncode, call.stdout,
                                      "\n".join(line for line in call.stderr.splitlines() if line not in unknown)))
    assert (tmp_path / "sentiment.keras").is_file() and (tmp_path / "serving" / "sentiment" / "1" / "saved_model.pb").is_file()


def test_finetune_from_the_pipelines_pretrained_model(work, shared_pipeline_run):
    """The pipeline's Pretrainer output alone (no tokenizer or config flags) starts a fine-tune,
    and both load with `from_pretrained`."""
    from albert_tf import AlbertTextClassifier
    from albert_tf.tasks.pretrained import PretrainedNotFoundError

    pretrained = shared_pipeline_run.run.artifacts["pretrained_model"]
    assert json.loads((Path(pretrained) / "run_config.json").read_text())["tokenizer"] is not None

    task = shared_pipeline_run.settings.task_data.replace("{SPAN}", "1")
    works(albert_tf(work, "finetune", "--task", "classification", "--data", task, "--text-column", "text",
                    "--label-column", "label", "--init", pretrained, "--model-dir", "from-pipeline",
                    "--num-epochs", 8, "--batch-size", 16, "--learning-rate", 0.005,
                    "--max-seq-length", 24))
    for path in (pretrained, work / "from-pipeline"):
        model = AlbertTextClassifier.from_pretrained(str(path), num_classes=2, sequence_length=24)
        assert model.predict(["a moving film"], verbose=0).shape == (1, 2)
    with pytest.raises(PretrainedNotFoundError, match="albert_tf ships no weights") as raised:
        AlbertTextClassifier.from_pretrained("albert_base", num_classes=2)
    assert "tried " in str(raised.value) and "Hugging Face" in str(raised.value)
