"""Tests of the repository's own promises: the README's commands, CI running them, the CLI entry point."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def readme_commands():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.findall(r"```bash\n(.+?)\n```", text, flags=re.S)


def test_readme_opens_with_the_main_job_and_the_test_command():
    commands = readme_commands()
    assert len(commands) >= 2
    main_job, tests = commands[0].strip(), commands[1].strip()
    assert "albert-tf" in main_job and "pip install" in main_job
    assert "pytest" in tests and "pip install" in tests


def test_ci_runs_exactly_the_readme_test_command():
    test_command = readme_commands()[1].strip()
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert test_command in [line.strip() for line in ci]
    assert "set -euo pipefail" in ci[1] or any("set -euo pipefail" in line for line in ci)


def test_cli_help_lists_every_subcommand():
    from albert_tf.cli import SUBCOMMAND_MODULES

    out = subprocess.run([sys.executable, "-m", "albert_tf", "--help"], capture_output=True, text=True, check=True)
    for module in SUBCOMMAND_MODULES:
        name = __import__(module, fromlist=["NAME"]).NAME
        assert name in out.stdout


def test_cli_info_and_its_errors():
    out = subprocess.run(
        [sys.executable, "-m", "albert_tf", "info", "--config", "base-v2"], capture_output=True, text=True, check=True
    )
    assert "11,683,584" in out.stdout
    bad = subprocess.run([sys.executable, "-m", "albert_tf", "info", "--config", "nope"], capture_output=True, text=True)
    assert bad.returncode == 2 and "neither a preset" in bad.stderr
