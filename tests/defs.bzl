"""`pytest_test`: a py_test that runs its test file through pytest (tests/bazel/pytest_runner.py)."""

_RUNNER = "//tests/bazel:pytest_runner.py"

def pytest_test(name, srcs, deps = [], data = [], **kwargs):
    """One Bazel test target running the pytest file(s) `srcs`.

    Args:
      name: target name.
      srcs: the test_*.py file(s) to run.
      deps: extra py_library deps; the albert_tf package and //tests:support are always in.
      data: extra runtime files.
      **kwargs: passed to py_test (size, tags, timeout, ...).
    """
    native.py_test(
        name = name,
        srcs = srcs + [_RUNNER],
        main = _RUNNER,
        args = ["$(rootpath %s)" % src for src in srcs],
        deps = deps + ["//:albert_tf", "//tests:support"],
        # pyproject.toml carries pytest's settings ([tool.pytest.ini_options]).
        data = data + ["//:pyproject.toml"],
        python_version = "PY3",
        # No empty __init__.py files added to the runfiles: pytest would then import tests/ as a
        # package and test files could no longer `import` their helper modules as they do
        # under plain `pytest`.
        legacy_create_init = False,
        **kwargs
    )
