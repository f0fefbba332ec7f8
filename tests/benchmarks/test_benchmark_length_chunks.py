"""`benchmarks/length_chunks.py --quick` runs end to end: a tiny classifier exported with the batch
at once and in chunks of 3 rows (each chunk's width rounded to 16 and to 4), all served through `SessionServable` in a process of their own,
answering alike. No timing is asserted. Skips where the script is absent."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "length_chunks.py"


@pytest.mark.slow
def test_quick_run_times_the_whole_batch_and_the_chunks_and_they_answer_alike(tmp_path):
    if not SCRIPT.is_file():
        pytest.skip(f"{SCRIPT} is not here (the benchmarks are not part of the package)")
    out = tmp_path / "chunks.json"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--precision", "fp32", "--json", str(out)],
                          capture_output=True, text=True, timeout=600, cwd=str(REPO))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = [line.split("|")[1:-1] for line in proc.stdout.splitlines() if line.startswith("| whole") or line.startswith("| 3 ")]
    assert [(r[0].strip(), r[1].strip()) for r in rows] == [("whole batch", "-"), ("3", "16"), ("3", "4")]
    for row in rows:
        assert float(row[5]) < 1e-4 and float(row[6]) == 1.0  # the whole batch's answers
    assert "ISA: " in proc.stdout
    cases = json.loads(out.read_text(encoding="utf-8"))["cases"]
    assert sorted(cases) == ["0", "3/16", "3/4"] and all(case["texts_per_s"] > 0 for case in cases.values())
    bad = subprocess.run([sys.executable, str(SCRIPT), "--chunks", "8,4"], capture_output=True, text=True, timeout=120,
                         cwd=str(REPO))
    assert bad.returncode == 2 and "--chunks must include 0" in bad.stderr.strip().splitlines()[-1]
    bad = subprocess.run([sys.executable, str(SCRIPT), "--chunk-widths", "8,0"], capture_output=True, text=True,
                         timeout=120, cwd=str(REPO))
    assert bad.returncode == 2 and "--chunk-widths must be integers >= 1" in bad.stderr.strip().splitlines()[-1]
