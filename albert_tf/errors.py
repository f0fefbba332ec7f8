"""Errors that name the caller's parameters: `param` marks a parameter in a message, and
`ParameterError` shows it the way the caller spells it.

A library message is written once, with `param("overwrite", True)` where it names an argument.
Raised through the Python API, ``str(error)`` reads ``overwrite=True``; the command line's
`albert_tf.cli.library_errors` prints `ParameterError.cli_message`, where the same mark reads
``--overwrite`` (``--max-seq-length 128``, ``--no-lower-case``). Parameter names are the Python
ones; a flag is the name with dashes, as `argparse` derives the attribute from it.
"""

from __future__ import annotations

import ast
import re

# Control characters cannot occur in a path or value a user typed into a message.
_MARK = re.compile("\x02([A-Za-z_][A-Za-z0-9_]*)(?:\x03(.*?))?\x04", re.S)
_NO_VALUE = object()


def param(name: str, value=_NO_VALUE) -> str:
    """The mark of parameter `name` (with `value`: the parameter set to it) inside a message."""
    if value is _NO_VALUE:
        return f"\x02{name}\x04"
    return f"\x02{name}\x03{value!r}\x04"


def as_python(message: str) -> str:
    """`message` with its marks as Python arguments: ``overwrite=True``, ``model_dir``."""
    return _MARK.sub(lambda m: m.group(1) if m.group(2) is None else f"{m.group(1)}={m.group(2)}", message)


def _flag(match, aliases) -> str:
    name = aliases.get(match.group(1), match.group(1))
    flag = "--" + name.replace("_", "-")
    if match.group(2) is None:
        return flag
    try:
        value = ast.literal_eval(match.group(2))
    except (ValueError, SyntaxError):
        return f"{flag} {match.group(2)}"
    if value is True:
        return flag
    if value is False:
        return "--no-" + flag[2:]
    return f"{flag} {value}"


def as_flags(message: str, aliases=None) -> str:
    """`message` with its marks as command-line flags: ``--overwrite``, ``--model-dir``;
    `aliases` maps a parameter to a flag of another name (``{"model_config": "config"}``)."""
    aliases = aliases or {}
    return _MARK.sub(lambda m: _flag(m, aliases), message)


def rename_params(message: str, names) -> str:
    """`message` with the parameters it marks renamed as `names` maps them (``{"model_config":
    "config"}``), still marked: for a caller whose parameters are named otherwise."""
    return _MARK.sub(lambda m: m.group(0).replace(m.group(1), names.get(m.group(1), m.group(1)), 1), message)


class ParameterError(ValueError):
    """A user error whose message may name parameters with `param`; ``str()`` shows them as
    Python arguments and `cli_message` as flags."""

    def __str__(self) -> str:
        return as_python(super().__str__())

    @property
    def cli_message(self) -> str:
        return as_flags(super().__str__())

    def for_cli(self, aliases=None) -> str:
        """The message as a command whose flags are named as in `aliases` reports it."""
        return as_flags(super().__str__(), aliases)


def raw_message(error: BaseException) -> str:
    """The message of `error` with its marks kept, for re-raising it as another `ParameterError`."""
    if isinstance(error, ParameterError) and error.args:
        return str(error.args[0])
    return str(error)


def describe_error(error: BaseException) -> str:
    """One line for an error from a third-party library: its message, or its type's name where it
    has none (a bare `AssertionError` from Dask would otherwise read as nothing)."""
    text = " ".join(str(error).split())
    return text or type(error).__name__
