"""`benchmarks/onednn_frozen_weights.py --quick --precisions bf16` runs end to end: the bf16 export in
both modes, each in a worker that really saw the variable as asked (the script refuses otherwise),
answering alike. No timing is asserted. Skips where the script is absent."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "onednn_frozen_weights.py"


@pytest.mark.slow
def test_quick_run_times_both_modes_and_they_answer_alike(tmp_path):
    if not SCRIPT.is_file():
        pytest.skip(f"{SCRIPT} is not here (the benchmarks are not part of the package)")
    env = {k: v for k, v in os.environ.items() if k != "TF_ONEDNN_ASSUME_FROZEN_WEIGHTS"}
    proc = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--precisions", "bf16", "--json", str(tmp_path / "f.json")],
                          capture_output=True, text=True, env=env, timeout=600, cwd=str(REPO))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = [line.split("|")[1:-1] for line in proc.stdout.splitlines() if line.startswith("| fp32") or line.startswith("| bf16")]
    assert [(r[0].strip(), r[1].strip()) for r in rows] == [("bf16", "off"), ("bf16", "on")]
    for row in rows:
        assert float(row[8]) == 1.0  # the same class for every text as with the mode off
        assert float(row[9]) < 2e-2
    assert "ISA: " in proc.stdout and (tmp_path / "f.json").is_file()
