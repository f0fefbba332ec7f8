"""`benchmarks/profile_encoder.py --token-rates` runs end to end on the tiny preset: the forward
pass's tokens/s at each shape, alone and taking turns, printed and written. No timing is asserted.
Skips where the script is absent."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "profile_encoder.py"


@pytest.mark.slow
def test_token_rates_are_printed_and_written_per_shape(tmp_path):
    if not SCRIPT.is_file():
        pytest.skip(f"{SCRIPT} is not here (the benchmarks are not part of the package)")
    out = tmp_path / "profile.json"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--preset", "tiny", "--precision", "export-bfloat16",
                           "--batch", "2", "--seq", "16", "--min-seconds", "0.1", "--trace-calls", "1",
                           "--token-rates", "1x8,2x16", "--json", str(out)],
                          capture_output=True, text=True, timeout=600, cwd=str(REPO))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "ISA: " in proc.stdout
    rows = [line.split("|")[1].strip() for line in proc.stdout.splitlines() if line.startswith("| 1 x 8 ")
            or line.startswith("| 2 x 16 ")]
    assert rows == ["1 x 8", "2 x 16"]
    rates = json.loads(out.read_text(encoding="utf-8"))["token_rates"]
    assert [r[:2] for r in rates] == [[1, 8], [2, 16]] and all(r[2] > 0 and r[3] > 0 for r in rates)
    for bad in ("8x", "0x16", "8x16x2"):
        proc = subprocess.run([sys.executable, str(SCRIPT), "--token-rates", bad], capture_output=True, text=True,
                              timeout=120, cwd=str(REPO))
        assert proc.returncode == 2 and "--token-rates must be" in proc.stderr.strip().splitlines()[-1]
