"""The package's import graph, function-local imports included: no cycles among the modules of
`albert_tf`, the command line (`albert_tf.cli`) imported by nothing of the library (only by
the CLI's own modules and the `python -m albert_tf` entry point), and no module reading another
module's private names."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, List, Set

PACKAGE = Path(__file__).resolve().parents[1] / "albert_tf"


def package_modules() -> Dict[str, Path]:
    """Dotted module name -> file, for every module of the package (a package is its `__init__`)."""
    modules = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = ("albert_tf",) + path.relative_to(PACKAGE).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def _innermost(name: str, modules: Dict[str, Path]) -> str:
    """`name` if it is a module of the package, else the nearest enclosing one ("" outside)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name


def _from_module(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The absolute name of the module a `from ... import` in `module` reads from."""
    base = node.module or ""
    if node.level:
        anchor = module if is_package else module.rpartition(".")[0]
        for _ in range(node.level - 1):
            anchor = anchor.rpartition(".")[0]
        base = f"{anchor}.{base}" if base else anchor
    return base


def imported_modules(module: str, path: Path, modules: Dict[str, Path]) -> Dict[str, int]:
    """The package modules `module` imports anywhere in its file -> the first line that does.

    Relative imports are resolved against the module's package, and `from package import name`
    counts as importing the submodule `package.name` where there is one.
    """
    is_package = path.name == "__init__.py"
    found: Dict[str, int] = {}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        names: List[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _from_module(node, module, is_package)
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
        for name in names:
            target = _innermost(name, modules)
            # A module's own package is already being imported when the module runs.
            if target and target != module and not module.startswith(target + "."):
                found.setdefault(target, node.lineno)
    return found


def import_graph() -> Dict[str, Dict[str, int]]:
    modules = package_modules()
    return {module: imported_modules(module, path, modules) for module, path in modules.items()}


def cycles(graph: Dict[str, Dict[str, int]]) -> List[List[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    found: List[List[str]] = []

    def visit(start: str) -> None:
        # Iterative, so that a long import chain cannot hit the recursion limit.
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            advanced = False
            for target in edges:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                    advanced = True
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def test_the_graph_sees_function_local_relative_and_from_imports():
    graph = import_graph()
    # `from albert_tf.cli import main` in the entry point; function-local imports in the CLI.
    assert "albert_tf.cli" in graph["albert_tf.__main__"]
    assert "albert_tf.tasks.runner" in graph["albert_tf.cli.finetune"]
    # `from albert_tf.pipeline_steps import example_gen, transform, vocab_gen` names three modules.
    assert {"albert_tf.pipeline_steps.example_gen", "albert_tf.pipeline_steps.vocab_gen"} <= set(graph["albert_tf.pipeline_steps.trainer"])
    assert cycles({"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "d": {"a": 1}}) == [["a", "b", "c"]]


def test_no_import_cycles():
    graph = import_graph()
    found = cycles(graph)
    report = []
    for component in found:
        members = set(component)
        edges = [f"{m} -> {t} (line {line})" for m in component for t, line in sorted(graph[m].items()) if t in members]
        report.append(f"cycle among {', '.join(component)}: " + "; ".join(edges))
    assert not found, "\n".join(report)


def test_only_the_command_line_imports_the_command_line():
    offenders = []
    for module, targets in sorted(import_graph().items()):
        if module == "albert_tf.cli" or module.startswith("albert_tf.cli.") or module == "albert_tf.__main__":
            continue
        for target, line in sorted(targets.items()):
            if target == "albert_tf.cli" or target.startswith("albert_tf.cli."):
                offenders.append(f"{module} (line {line}) imports {target}")
    assert not offenders, "\n".join(offenders)


def _subpackage(module: str) -> str:
    return ".".join(module.split(".")[:2])


def test_no_cycles_between_subpackages():
    """Each subpackage (`albert_tf.export`, `albert_tf.tasks`, ...) is a layer: no chain of
    imports, function-local ones included, leads from one back to itself."""
    graph: Dict[str, Dict[str, int]] = {}
    for module, targets in import_graph().items():
        for target, line in targets.items():
            if _subpackage(module) != _subpackage(target):
                graph.setdefault(_subpackage(module), {}).setdefault(_subpackage(target), line)
    for node in {t for targets in graph.values() for t in targets}:
        graph.setdefault(node, {})
    assert cycles(graph) == []


def test_lower_layers_import_no_higher_ones():
    """Subpackage edges that once made cycles and must not come back: the export imports no task
    module (a task model says its own `export_kind`; `export_arguments` is the task layer's) and
    nothing of the server (its reload check starts the server's loader by module name);
    checkpoints nothing of the export (the weight index is its own module); tokenization nothing
    of training (the Keras internals are their own module)."""
    forbidden = {
        ("albert_tf.export", "albert_tf.tasks"),
        ("albert_tf.export", "albert_tf.model_server"),
        ("albert_tf.checkpoints", "albert_tf.export"),
        ("albert_tf.tokenization", "albert_tf.training"),
    }
    found = [
        f"{module} imports {target} (line {line})"
        for module, targets in import_graph().items()
        for target, line in targets.items()
        if (_subpackage(module), _subpackage(target)) in forbidden
    ]
    assert found == []


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _may_read(module: str, owner: str) -> bool:
    """Whether `module` may use a private name of `owner` (a module, or the package holding a
    private module): only from inside it."""
    return module == owner or module.startswith(owner + ".")


def foreign_private_names(module: str, path: Path, modules: Dict[str, Path]) -> List[str]:
    """`line N: name` for each private name of another package module that `module` imports or
    reads off an imported module (`from albert_tf.x import _y`, `x._y`, a private module `_m`
    of another package). Attributes of objects are not seen: that needs types."""
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    aliases: Dict[str, str] = {}
    found: List[str] = []

    def check_module_path(name: str, line: int) -> None:
        parts = name.split(".")
        for i, part in enumerate(parts[1:], start=1):
            if _is_private(part) and not _may_read(module, ".".join(parts[:i])):
                found.append(f"line {line}: {'.'.join(parts[:i + 1])}")
                return

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "albert_tf":
                    check_module_path(alias.name, node.lineno)
                    if alias.asname:
                        aliases[alias.asname] = alias.name
        elif isinstance(node, ast.ImportFrom):
            base = _from_module(node, module, is_package)
            if base.split(".")[0] != "albert_tf":
                continue
            check_module_path(base, node.lineno)
            for alias in node.names:
                full = f"{base}.{alias.name}"
                if full in modules:
                    aliases[alias.asname or alias.name] = full
                    check_module_path(full, node.lineno)
                elif _is_private(alias.name) and not _may_read(module, base):
                    found.append(f"line {node.lineno}: {full}")
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
                and _is_private(node.attr)):
            owner = aliases[node.value.id]
            if not _may_read(module, owner):
                found.append(f"line {node.lineno}: {owner}.{node.attr}")
    return found


def test_the_private_name_check_sees_each_form(tmp_path):
    modules = {"albert_tf.a": tmp_path / "a.py", "albert_tf.a.b": tmp_path / "b.py", "albert_tf.a._c": tmp_path / "c.py",
               "albert_tf.d": tmp_path / "d.py", "albert_tf._e": tmp_path / "e.py"}
    source = tmp_path / "d.py"
    source.write_text(
        "from albert_tf.a import b, _c\nfrom albert_tf.a.b import _f, g\nimport albert_tf.a.b as h\n"
        "from albert_tf import _e\nb._x\nh._y\nh.z\n_e.w\n", encoding="utf-8",
    )
    assert foreign_private_names("albert_tf.d", source, modules) == [
        "line 1: albert_tf.a._c", "line 2: albert_tf.a.b._f", "line 5: albert_tf.a.b._x", "line 6: albert_tf.a.b._y",
    ]
    # Inside the owner, its private names are its own.
    assert foreign_private_names("albert_tf.a.b", source, modules) == []


def test_no_module_reads_another_modules_private_names():
    """A name with a leading underscore belongs to its module (a private module to its package):
    what another module needs is public, so that a change inside one module cannot break a
    caller it does not know about. The package's thin callers (the pipeline, the serving entry
    points, the benchmarks) hold to it too."""
    modules = package_modules()
    callers = {
        ".".join((folder,) + path.relative_to(PACKAGE.parent / folder).with_suffix("").parts): path
        for folder in ("pipelines", "serving", "benchmarks") for path in sorted((PACKAGE.parent / folder).rglob("*.py"))
    }
    offenders = [f"{module} {use}" for module, path in {**modules, **callers}.items()
                 for use in foreign_private_names(module, path, modules)]
    assert not offenders, "\n".join(offenders)
