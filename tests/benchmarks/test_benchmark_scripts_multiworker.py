"""`benchmarks/multiworker_training.py --quick` runs end to end: 1 worker x 2 cores, then 2
`MultiWorkerMirroredStrategy` workers x 1 core on loopback, a tiny model for about a second each.

Checks the exit status, the printed table and summary, and the JSON lines written to a file under
tmp_path (never into the repository). No timing is asserted. Skips where the script is absent (the
benchmarks are not part of the package) or where this process may use fewer than 2 cores.

    .venv/bin/python -m pytest -q tests/benchmarks/test_benchmark_scripts_multiworker.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "multiworker_training.py"


@pytest.mark.slow
def test_quick_run_prints_the_figures_and_appends_json_lines(tmp_path):
    if not SCRIPT.is_file():
        pytest.skip(f"{SCRIPT} is not here (the benchmarks are not part of the package)")
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs 2 cores")
    results = tmp_path / "multiworker.jsonl"
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    env.pop("TF_CONFIG", None)
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--results", str(results)],
        capture_output=True, text=True, env=env, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    assert "| case | repeat | step time median (s) | p10-p90 (s) | seq/s | vs 1x2 same repeat |" in out
    assert "| 1x2 (1 worker x 2 cores, default strategy) | 1 |" in out
    assert "| 2x1 (2 workers x 1 core, MultiWorkerMirroredStrategy) | 1 |" in out
    assert "scaling efficiency throughput(2x1) / throughput(1x2), same repeat: " in out
    assert "all-reduce payload: " in out

    records = [json.loads(line) for line in results.read_text().splitlines()]
    assert [r["case"] for r in records] == ["1x2", "2x1"]
    one, two = records
    assert (one["workers"], one["cores_per_worker"], two["workers"], two["cores_per_worker"]) == (1, 2, 2, 1)
    assert one["batch_size"] == two["batch_size"] == 2 * two["per_worker_batch"]
    for r in records:
        assert r["quick"] and r["date"] and len(r["loadavg_start"]) == len(r["loadavg_end"]) == 3
        assert r["timed_steps"] >= 3 and r["timed_s"] > 0
        assert 0 < r["step_s_p10"] <= r["step_s_median"] <= r["step_s_p90"]
        assert r["seq_per_s"] == pytest.approx(r["batch_size"] / r["step_s_median"])
        assert r["cpu_s_per_step"] > 0
    assert one["vs_1x2_same_repeat"] == 1.0
    assert two["vs_1x2_same_repeat"] == pytest.approx(two["seq_per_s"] / one["seq_per_s"])
    assert two["allreduce_bytes_per_step"] == 4 * two["params"] > 0
    assert two["communication"] == "auto" and one["allreduce_bytes_per_step"] == 0
