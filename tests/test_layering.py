"""The CLI calls the library, never the reverse: no module of `albert_tf` outside `albert_tf/cli`
(and the `python -m albert_tf` entry point) imports `albert_tf.cli`, function-local imports included."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "albert_tf"


def imported_modules(path: Path):
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            yield node.module, node.lineno
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno


def test_library_modules_do_not_import_the_cli():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        if relative.parts[0] == "cli" or relative.name == "__main__.py":
            continue
        for module, line in imported_modules(path):
            if module == "albert_tf.cli" or module.startswith("albert_tf.cli."):
                offenders.append(f"albert_tf/{relative}:{line} imports {module}")
    assert offenders == []
