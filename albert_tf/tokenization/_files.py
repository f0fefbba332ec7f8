"""File helpers of the tokenization package: input globs, UTF-8 corpus lines, atomic writes.

Local paths use the standard library; paths with a scheme (`gs://...`) go through
`tf.io.gfile`, imported only then so the pure-Python tokenizers do not load TensorFlow.
"""

from __future__ import annotations

import glob
import os
import tempfile
from typing import Iterable, Iterator, List, Sequence, Tuple, Union

PathLike = Union[str, "os.PathLike[str]"]


def _is_remote(path: str) -> bool:
    return "://" in path


def _gfile():
    import tensorflow as tf  # noqa: PLC0415 - only for remote file systems

    return tf.io.gfile


def expand_inputs(patterns: Union[PathLike, Sequence[PathLike]]) -> List[str]:
    """Expands file names and glob patterns, keeping the given order and dropping duplicates.

    Args:
      patterns: one path or pattern, or a sequence of them.

    Raises:
      FileNotFoundError: when a plain name does not exist or a pattern matches no file.
    """
    if isinstance(patterns, (str, os.PathLike)):
        patterns = [patterns]
    files: List[str] = []
    for pattern in patterns:
        pattern = os.fspath(pattern)
        if _is_remote(pattern):
            matches = sorted(_gfile().glob(pattern))
        elif glob.has_magic(pattern):
            matches = sorted(glob.glob(pattern))
        else:
            matches = [pattern] if os.path.isfile(pattern) else []
        if not matches:
            raise FileNotFoundError(f"no input file matches {pattern!r}")
        files.extend(m for m in matches if m not in files)
    return files


def read_bytes(path: PathLike) -> bytes:
    """The whole content of `path` (local or remote)."""
    path = os.fspath(path)
    if _is_remote(path):
        with _gfile().GFile(path, "rb") as f:
            return f.read()
    with open(path, "rb") as f:
        return f.read()


def iter_lines(paths: Iterable[str]) -> Iterator[Tuple[str, int, str]]:
    """Yields `(path, line_number, line)` for every line of every file, decoded as strict UTF-8.

    Raises:
      ValueError: naming the file and line of the first invalid UTF-8 sequence. A training
        corpus in another encoding is a mistake to report, not text to repair.
    """
    for path in paths:
        handle = _gfile().GFile(path, "rb") if _is_remote(path) else open(path, "rb")
        with handle as f:
            for number, raw in enumerate(f, start=1):
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as e:
                    raise ValueError(
                        f"{path}:{number}: not valid UTF-8 (byte {e.start}: {raw[e.start:e.end]!r})"
                    ) from None
                yield path, number, line


def atomic_write_bytes(path: PathLike, data: bytes) -> None:
    """Writes `data` to `path` through a temporary file and a rename, so `path` is never partial."""
    path = os.fspath(path)
    if _is_remote(path):
        gfile = _gfile()
        tmp = f"{path}.tmp-{os.getpid()}"
        with gfile.GFile(tmp, "wb") as f:
            f.write(data)
        gfile.rename(tmp, path, overwrite=True)
        return
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        # mkstemp creates the file private (0600); the result is an ordinary shared file.
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
