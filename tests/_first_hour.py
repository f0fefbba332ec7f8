"""What the first-hour tests share: the user's folder (`albert-tf` on the PATH, the README's
relative sample paths), running a command there, and the two verdicts: it works (nothing on stderr
but the runtime's notices and the package's own lines, `_quiet.unexpected_stderr`) or it is
refused with exactly one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from _quiet import unexpected_stderr

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "albert_tf" / "resources" / "sample"
TIMEOUT_S = 600


def make_work(root: Path) -> Path:
    """`root` made the user's folder: `albert-tf` on the PATH, and the README's relative sample paths."""
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
    unexpected = unexpected_stderr(proc.stderr)
    assert unexpected == [], unexpected
    return proc.stdout


def refused(proc, *expected):
    """Exit status 2 and one line on stderr holding every `expected` text."""
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr[-4000:]
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr[-4000:]
    for text in expected:
        assert text in lines[0]
    return lines[0]
