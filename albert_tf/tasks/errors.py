"""`TaskError`: what the task layer raises for bad settings, data or model directories."""

from __future__ import annotations

from albert_tf.errors import ParameterError, param

__all__ = ["TaskError", "param"]


class TaskError(ParameterError):
    """A one-line, user-facing problem with the task's settings, data or model directory.

    The message names what to fix (a setting, a file and line); settings are marked with
    `albert_tf.errors.param`, so a Python caller reads ``overwrite=True`` where the command
    line reports ``--overwrite``.
    """
