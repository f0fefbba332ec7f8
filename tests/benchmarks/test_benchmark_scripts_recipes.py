"""`benchmarks/finetune_recipes.py` end to end on a few rows of each real set (skipped without
`../shared/data`): every run is recorded with its constant answer and collapse verdict, an
interrupted sweep resumes, and the summary table has one row per cell."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data"


def load_script():
    path = ROOT / "benchmarks" / "finetune_recipes.py"
    if not path.is_file():
        pytest.skip(f"{path} is not here (the benchmarks are not part of the package)")
    spec = importlib.util.spec_from_file_location("benchmark_finetune_recipes", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(not (DATA / "en" / "rotten_tomatoes").is_dir() or not (DATA / "zh").is_dir(),
                    reason="needs ../shared/data (Rotten Tomatoes and People's Daily)")
def test_matrix_runs_and_resumes(tmp_path, capsys):
    script = load_script()
    out = tmp_path / "runs.jsonl"
    args = ["--part", "matrix", "--sets", "rt,ner", "--sizes", "tiny", "--inits", "random,pretrained", "--seeds", "1",
            "--max-train", "32", "--max-dev", "32", "--epochs", "1", "--work", str(tmp_path / "work"), "--out", str(out)]
    assert script.main(args) == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["set"], r["init"]) for r in records] == [("rt", "random"), ("ner", "random")]  # no --pretrained: skipped
    rt, ner = records
    assert rt["metric"] == "accuracy" and 0.5 <= rt["constant"] <= 1 and isinstance(rt["collapsed"], bool)
    assert set(rt["cosines"]) == {"cls", "mean"}
    assert ner["metric"] == "entity_f1" and ner["constant"] == 0.0
    printed = capsys.readouterr().out
    assert "no --pretrained en:tiny" in printed and "| rt | 32 | tiny | random | default | 1 | 1 |" in printed
    # A second call finds every run done and only prints the table.
    assert script.main(args) == 0
    assert len(out.read_text().splitlines()) == 2
