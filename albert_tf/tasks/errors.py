"""`TaskError`: what the task layer raises for bad settings, data or model directories."""

from __future__ import annotations


class TaskError(ValueError):
    """A one-line, user-facing problem with the task's settings, data or model directory.

    The message names what to fix (a setting, a file and line); the command line reports it
    as its own one-line error.
    """
