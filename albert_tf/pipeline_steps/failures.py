"""How a pipeline step's failure reaches the user: one line naming the step and the cause in the
cause's own words, and an exit status that says what kind of failure it was.

A component runs its step inside `reported_failure()`. When the step raises, that prints one
marker line (`STEP_FAILURE_MARKER` and a JSON object: the kind of failure and the message) into
the step's log before the exception goes on as usual (kfp marks the task failed, the traceback
stays in the log). `albert-tf pipeline run` reads the marker from the streamed log
(`parse_marker`) and shows only `StepFailure.line()`: on Kubeflow or Vertex the same marker line
is in the step's log, above its traceback.

Exit statuses of `albert-tf pipeline run` (`EXIT_CODES`, also in the README and the command's
help):

    0  the model was pushed (or was already the pushed one)
    1  internal error: a step failed for a reason other than its input (a bug, the environment)
    2  usage: bad command line or settings, a place the run cannot write
    3  the Evaluator refused the model (not pushed)
    4  the data or a setting was refused by a step: bad input rows, a missing file or column,
       data validation anomalies, a vocabulary the settings cannot make
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import sys
import traceback
from typing import Iterator, Optional, Sequence

EXIT_INTERNAL = 1
EXIT_USAGE = 2
EXIT_MODEL_REFUSED = 3
EXIT_DATA_REFUSED = 4

EXIT_CODES = (
    (0, "the model was pushed (or is already the pushed one)"),
    (EXIT_INTERNAL, "internal error: a step failed for a reason other than its input (see the log file)"),
    (EXIT_USAGE, "usage: bad command line or settings file, or a place the run cannot write"),
    (EXIT_MODEL_REFUSED, "the Evaluator refused the model: it was not pushed"),
    (EXIT_DATA_REFUSED, "the data or a setting was refused: bad input file or rows, a missing file or column, "
                        "a data validation anomaly, a vocabulary the settings cannot make"),
)

# The kinds of a step's failure.
REFUSED = "refused"    # the step refused its input or a setting: the user can fix it
INTERNAL = "internal"  # anything else

STEP_FAILURE_MARKER = "ALBERT-TF STEP FAILURE: "

# kfp task names -> the steps' names (the components' display names).
STEP_NAMES = {
    "example-gen": "ExampleGen", "vocab-gen": "VocabGen", "statistics-gen": "StatisticsGen", "schema-gen": "SchemaGen",
    "example-validator": "ExampleValidator", "transform": "Transform", "pretrainer": "Pretrainer", "trainer": "Trainer",
    "distiller": "Distiller", "evaluator": "Evaluator", "distilled-evaluator": "Evaluator",
    "infra-validator": "InfraValidator", "pusher": "Pusher", "bulk-inferrer": "BulkInferrer",
}

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def step_name(task: str) -> str:
    """The step's name of a kfp task (`example-gen` -> `ExampleGen`); an unknown task as it is."""
    return STEP_NAMES.get(task, task)


def _raised_in_package(error: BaseException) -> bool:
    frames = traceback.extract_tb(error.__traceback__)
    return bool(frames) and os.path.abspath(frames[-1].filename).startswith(_PACKAGE_DIR + os.sep)


def failure_kind(error: BaseException) -> str:
    """`REFUSED` for an error that refuses the step's input or settings (the package's own
    `ValueError`s, a `ParameterError`, a missing file), else `INTERNAL`.

    A `ValueError` or `FileNotFoundError` counts as a refusal when albert-tf defines its class
    (`DataFormatError`, `DataValidationError`, ...) or raised it (its innermost frame is in the
    package): a `ValueError` from deep inside TensorFlow or NumPy is an internal error, not
    something the input can fix.
    """
    from albert_tf.errors import ParameterError

    if isinstance(error, ParameterError):
        return REFUSED
    if isinstance(error, (ValueError, FileNotFoundError)) and (
            type(error).__module__.startswith("albert_tf.") or _raised_in_package(error)):
        return REFUSED
    return INTERNAL


def one_line(message: str) -> str:
    """A message of several lines as one: a line ending in ':' runs on, the others are joined by '; '."""
    lines = [line.strip() for line in str(message).splitlines() if line.strip()]
    text = ""
    for line in lines:
        text = line if not text else text + (" " if text.endswith(":") else "; ") + line
    return text


def describe(error: BaseException) -> str:
    """The error's message as one line; its type's name where it has none."""
    return one_line(str(error)) or type(error).__name__


@contextlib.contextmanager
def reported_failure() -> Iterator[None]:
    """Runs a step; if it raises, prints the marker line of the failure (kind and one-line message)
    to stdout, then lets the exception go on unchanged."""
    try:
        yield
    except Exception as e:
        record = {"kind": failure_kind(e), "message": describe(e), "type": type(e).__name__}
        print(STEP_FAILURE_MARKER + json.dumps(record, ensure_ascii=False), flush=True)
        sys.stdout.flush()
        raise


@dataclasses.dataclass
class StepFailure:
    """A failed step as the run reports it: its kfp task, the kind, the cause in one line."""

    task: str
    kind: str
    message: str

    @property
    def step(self) -> str:
        return step_name(self.task)

    @property
    def exit_code(self) -> int:
        return EXIT_DATA_REFUSED if self.kind == REFUSED else EXIT_INTERNAL

    def line(self, log_file: str = "") -> str:
        """`<Step>: <cause> (full log: <file>)`; an internal error says so."""
        where = f"full log: {log_file}" if log_file else "see the step's log"
        if self.kind == REFUSED:
            return f"{self.step}: {self.message} ({where})"
        return f"{self.step} failed (internal error): {self.message} ({where})"


def parse_marker(line: str) -> Optional[dict]:
    """The record of a marker line (`{"kind": ..., "message": ...}`), or None for any other line."""
    at = line.find(STEP_FAILURE_MARKER)
    if at < 0:
        return None
    try:
        record = json.loads(line[at + len(STEP_FAILURE_MARKER):])
    except ValueError:
        return None
    if not isinstance(record, dict) or "message" not in record:
        return None
    return {"kind": record.get("kind") if record.get("kind") in (REFUSED, INTERNAL) else INTERNAL,
            "message": str(record["message"])}


_EXCEPTION_LINE = re.compile(r"^\s*(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)|Killed)\b:?\s*(?P<message>.*)$")


def cause_from_log(lines: Sequence[str]) -> str:
    """The cause of a failure that left no marker line (a step outside `reported_failure`, an
    import error, a killed process): the last exception line of its log, else its last line."""
    kept = [line.strip() for line in lines if line.strip()]
    for line in reversed(kept):
        match = _EXCEPTION_LINE.match(line)
        if match:
            return match.group("message") or match.group("type")
    return kept[-1] if kept else "the step ended without a message"
