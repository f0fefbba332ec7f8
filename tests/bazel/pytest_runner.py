"""Entry point of every `pytest_test` target (tests/defs.bzl): runs the given test files through pytest.

Bazel runs it in the runfiles tree of the repository, so the `tests/test_*.py` paths it is given
(by `$(rootpath)`) are relative to the working directory.
"""

import os
import sys

import pytest


def main() -> int:
    args = sys.argv[1:] + ["-q", "-p", "no:cacheprovider"]
    # Per-test-case results for Bazel's test.xml.
    if os.environ.get("XML_OUTPUT_FILE"):
        args.append("--junitxml=" + os.environ["XML_OUTPUT_FILE"])
    # `bazel test --test_filter=EXPR` selects tests like `pytest -k EXPR`.
    if os.environ.get("TESTBRIDGE_TEST_ONLY"):
        args += ["-k", os.environ["TESTBRIDGE_TEST_ONLY"]]
    return int(pytest.main(args))


if __name__ == "__main__":
    sys.exit(main())
