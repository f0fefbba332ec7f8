"""`benchmarks/onednn_frozen_weights.py --quick` runs end to end: both exports in both modes, each in a
worker that really saw the variable as asked (the script refuses otherwise), every case answering as
the fp32 export does. No timing is asserted. Skips where the script is absent."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "onednn_frozen_weights.py"


@pytest.mark.slow
def test_quick_run_times_both_modes_and_every_case_answers_as_fp32(tmp_path):
    if not SCRIPT.is_file():
        pytest.skip(f"{SCRIPT} is not here (the benchmarks are not part of the package)")
    env = {k: v for k, v in os.environ.items() if k != "TF_ONEDNN_ASSUME_FROZEN_WEIGHTS"}
    proc = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--json", str(tmp_path / "f.json")],
                          capture_output=True, text=True, env=env, timeout=600, cwd=str(REPO))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = [line.split("|")[1:-1] for line in proc.stdout.splitlines() if line.startswith("| fp32") or line.startswith("| bf16")]
    assert [(r[0].strip(), r[1].strip()) for r in rows] == [("fp32", "off"), ("fp32", "on"), ("bf16", "off"), ("bf16", "on")]
    for row in rows:
        assert float(row[8]) == 1.0  # the same class for every text as the fp32 export, mode off
        assert float(row[9]) < (2e-2 if row[0].strip() == "bf16" else 1e-4)
    assert "ISA: " in proc.stdout and (tmp_path / "f.json").is_file()
