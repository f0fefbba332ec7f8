"""Atomic step outputs: build a directory beside its final name, rename it into place when done.

The build-and-publish itself is `albert_tf.file_io.staged_directory`; this module adds what a
pipeline step needs on top of it.

A staging directory's name carries its owner (`<pid>@<host>`), so a later run can tell a stale one
(its process is gone: killed with SIGKILL, or the machine went down) from one still being built,
and sweep it (`sweep_stale`). SIGTERM during a staged build removes the staging directory before
the process exits (`sigterm_unwinds`).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import threading
import time
from typing import Any, Dict, Iterator, List

from albert_tf import file_io

SUMMARY_FILE = "summary.json"
# How old a staging directory of another host (or of an unnamed owner) must be to count as stale.
STALE_AGE_S = 24 * 3600

_HOST = re.sub(r"[^A-Za-z0-9.-]", "_", socket.gethostname())[:64] or "localhost"
# `<pid>@<host>-<8 random characters>` at the end of a staging name (mkdtemp's or uuid hex).
_OWNER = re.compile(r"(?:.*-)?(?P<pid>\d+)@(?P<host>[^@/]+)-[a-z0-9_]{8}")


class Terminated(BaseException):
    """SIGTERM arrived while a staged output was being built (see `sigterm_unwinds`)."""


def staging_prefix(prefix: str) -> str:
    """`prefix` followed by this process's owner tag, `<pid>@<host>-`, which `sweep_stale` reads."""
    return f"{prefix}{os.getpid()}@{_HOST}-"


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    # A zombie has exited (only its parent has not reaped it yet): it writes nothing any more.
    return state not in ("Z", "X")


def is_stale(path: str) -> bool:
    """Whether the staging directory `path` belongs to no live process.

    Staging names made with `staging_prefix` name their owner. On this host the owner's pid is
    checked: a dead process is stale, a live one is not (a pid reused by an unrelated process only
    delays the sweep, never removes a live build). Pids mean nothing across hosts or containers
    (each has its own pid namespace), so a directory of another host, or one without an owner tag
    (named by an older version), is stale only once untouched for `STALE_AGE_S` (a day: no step
    builds its output that long without writing to it).
    """
    match = _OWNER.fullmatch(os.path.basename(path))
    if match and match.group("host") == _HOST:
        return not _alive(int(match.group("pid")))
    try:
        return time.time() - os.path.getmtime(path) > STALE_AGE_S
    except OSError:
        return False


def sweep_stale(parent: str, prefix: str) -> List[str]:
    """Removes the stale staging directories named `prefix...` in `parent`; returns their names."""
    swept = []
    try:
        names = sorted(os.listdir(parent))
    except FileNotFoundError:
        return swept
    for name in names:
        path = os.path.join(parent, name)
        if name.startswith(prefix) and os.path.isdir(path) and not os.path.islink(path) and is_stale(path):
            shutil.rmtree(path, ignore_errors=True)
            swept.append(name)
    return swept


@contextlib.contextmanager
def sigterm_unwinds() -> Iterator[None]:
    """Turns SIGTERM into a `Terminated` exception inside the block, so its cleanup runs.

    Once the exception has unwound the block (removing a staging directory on its way), the
    previous handler is restored and the signal delivered again: with the default action the
    process then ends as SIGTERM would have ended it. The previous handler is restored when the
    block ends in any way. Only the main thread receives signals, so elsewhere (and when SIGTERM
    is ignored) this does nothing.
    """
    previous = signal.getsignal(signal.SIGTERM)
    if threading.current_thread() is not threading.main_thread() or previous in (signal.SIG_IGN, None):
        yield
        return

    def handler(signum, frame):
        raise Terminated("terminated by SIGTERM")

    signal.signal(signal.SIGTERM, handler)
    try:
        yield
    except Terminated:
        signal.signal(signal.SIGTERM, previous)
        signal.raise_signal(signal.SIGTERM)
        raise  # the previous handler returned: the block still did not finish
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def staged_directory(output_dir: str) -> Iterator[str]:
    """Yields a fresh directory that becomes `output_dir` when the block finishes without error.

    The staging directory sits beside `output_dir` (same filesystem, so the rename is atomic); on
    an error or SIGTERM it is removed and `output_dir` is left as it was. Stale staging
    directories of earlier attempts at the same output (a process killed with SIGKILL) are swept
    first. An existing *empty* `output_dir` (orchestrators create artifact folders ahead of the
    step) is replaced; a non-empty one is refused, as it would be another run's output.
    """
    output_dir = os.path.abspath(output_dir)
    if os.path.isdir(output_dir) and os.listdir(output_dir):
        raise FileExistsError(f"output directory {output_dir} is not empty; a step never overwrites an output")
    parent, name = os.path.split(output_dir)
    os.makedirs(parent, exist_ok=True)
    prefix = f".{name}.partial-"
    sweep_stale(parent, prefix)
    with sigterm_unwinds():
        with file_io.staged_directory(output_dir, prefix=staging_prefix(prefix)) as staging:
            yield staging


def write_summary(directory: str, summary: Dict[str, Any]) -> None:
    """Writes `summary.json` (what the step did: counts, paths, metrics) into `directory`."""
    file_io.atomic_write_json(os.path.join(directory, SUMMARY_FILE), summary)


def read_summary(directory: str) -> Dict[str, Any]:
    """The `summary.json` a step wrote into `directory`.

    Raises:
        FileNotFoundError: `directory` is not a finished step output.
    """
    path = os.path.join(directory, SUMMARY_FILE)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{directory} is not a finished pipeline step output (no {SUMMARY_FILE})")
    with open(path, encoding="utf-8") as f:
        return json.load(f)
