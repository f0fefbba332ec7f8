"""Durable file I/O: atomic file writes, a durable line append, and staged directory publishing.

Every output that a crash must never leave half-written goes through here:

* `atomic_write_bytes`, `atomic_write_text`, `atomic_write_json`, and `open_atomic` (a file
  object) write a hidden temporary file beside the target and move it into place; `atomic_output`
  does the same for writers that take a path (`model.save`, `SaveV2`, `save_file`, ...). Locally
  the file is fsync'ed before `os.replace` and its directory after it, so after a crash the path
  holds either the old or the new content, never a mix or nothing. Any failure leaves the old file
  intact and removes the temporary one.
* `append_line` appends one line durably (fsync'ed); filesystems without append get the file
  rewritten atomically.
* `staged_directory` (or `make_staging_dir` / `staging_name` with `publish_directory`) builds a
  directory under a hidden ``.NAME.partial-XXXXXXXX`` name and publishes it whole, replacing an
  existing non-empty directory only with ``overwrite=True``, and removes the staging directory on
  an exception. A process killed outright leaves only the hidden staging directory.

Paths with a scheme (``gs://``, ``ram://``, ...) are remote (`is_remote`) and go through
`tf.io.gfile`; TensorFlow is imported only then, so local writers (tokenizers, Beam workers) do
not pay for it.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import shutil
import tempfile
import uuid
from typing import Any, Callable, Iterator, List, Optional, Union

PathLike = Union[str, "os.PathLike[str]"]

logger = logging.getLogger(__name__)

# Filesystems that cannot fsync a directory (or open one) answer with these; the rename itself
# has happened, so the write is not failed for them.
_DIRECTORY_SYNC_UNSUPPORTED = {errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EBADF, errno.EACCES, errno.EPERM}


def is_remote(path: PathLike) -> bool:
    """Whether `path` names a file of a non-local filesystem (it has a ``scheme://``)."""
    return "://" in os.fspath(path)


def _gfile():
    import tensorflow as tf  # noqa: PLC0415 - only remote paths need TensorFlow

    return tf.io.gfile


def _split(path: str):
    stripped = path.rstrip("/") or path
    if is_remote(stripped):
        parent, _, name = stripped.rpartition("/")
        return parent, name
    return os.path.split(os.path.abspath(stripped))


def _join(directory: str, name: str) -> str:
    if is_remote(directory):
        return f"{directory.rstrip('/')}/{name}"
    return os.path.join(directory, name)


def temp_path(path: PathLike, suffix: str = "") -> str:
    """A fresh hidden name beside `path` for its temporary copy: ``.NAME.tmp-<hex><suffix>``."""
    path = os.fspath(path)
    if is_remote(path):
        directory, _, name = path.rpartition("/")
        return f"{directory}/.{name}.tmp-{uuid.uuid4().hex}{suffix}"
    directory, name = os.path.split(path)
    return os.path.join(directory, f".{name}.tmp-{uuid.uuid4().hex}{suffix}")


def fsync_directory(directory: PathLike) -> None:
    """Makes the entries of local `directory` (a rename, a new file) durable."""
    try:
        fd = os.open(os.fspath(directory) or ".", os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError as e:
        if e.errno in _DIRECTORY_SYNC_UNSUPPORTED:
            return
        raise
    try:
        os.fsync(fd)
    except OSError as e:
        if e.errno not in _DIRECTORY_SYNC_UNSUPPORTED:
            raise
    finally:
        os.close(fd)


def _fsync_file(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _discard(path: str) -> None:
    """Removes a temporary file if it is there; never raises (it runs while another error unwinds)."""
    try:
        if is_remote(path):
            gfile = _gfile()
            if gfile.exists(path):
                gfile.remove(path)
        elif os.path.lexists(path):
            os.remove(path)
    except Exception as e:  # noqa: BLE001 - cleanup must not hide the error being raised
        logger.warning("could not remove the temporary file %s: %s", path, e)


def commit(tmp: PathLike, path: PathLike) -> None:
    """Moves the finished temporary file `tmp` (made beside `path`) onto `path`, durably.

    Locally `tmp` is fsync'ed, renamed over `path` with `os.replace`, and the directory fsync'ed.
    Remotely it is `tf.io.gfile.rename` (on GCS a server-side copy: the object appears whole).
    """
    tmp, path = os.fspath(tmp), os.fspath(path)
    if is_remote(path):
        _gfile().rename(tmp, path, overwrite=True)
        return
    _fsync_file(tmp)
    os.replace(tmp, path)
    fsync_directory(os.path.dirname(os.path.abspath(path)))


@contextlib.contextmanager
def atomic_output(path: PathLike, suffix: str = "") -> Iterator[str]:
    """Yields a temporary file path beside `path`; `commit`s it onto `path` when the block succeeds.

    For writers that take a path instead of a file object (`model.save`, `save_weights`,
    TFRecord writers); `suffix` satisfies writers that check the extension (".keras"). On any
    exception the temporary file is removed and `path` keeps its old content.
    """
    tmp = temp_path(path, suffix)
    try:
        yield tmp
        commit(tmp, path)
    finally:
        _discard(tmp)


def _make_parent(path: str) -> None:
    if is_remote(path):
        _gfile().makedirs(path.rpartition("/")[0])
    else:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)


@contextlib.contextmanager
def open_atomic(path: PathLike, mode: str = "w", *, encoding: str = "utf-8", makedirs: bool = False) -> Iterator[Any]:
    """Yields a file object (mode "w" or "wb") whose content replaces `path` when the block succeeds.

    Nothing is visible at `path` before the block ends; on an exception the temporary file is
    removed and `path` is left as it was. `makedirs` creates a missing parent directory first.
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"open_atomic writes a whole new file: mode must be 'w' or 'wb', got {mode!r}")
    path = os.fspath(path)
    if makedirs:
        _make_parent(path)
    tmp = temp_path(path)
    try:
        if is_remote(path):
            gfile = _gfile()
            # A GCS object appears only when its upload is closed, but other gfile filesystems
            # (HDFS, file://, ram://) show a file while it is written: a temporary name, then a
            # rename (server-side on GCS), keeps a half-written file invisible on all of them.
            with gfile.GFile(tmp, mode) as f:
                yield f
            gfile.rename(tmp, path, overwrite=True)
        else:
            # Exclusive creation: the name is fresh, and it gets the usual umask permissions
            # (mkstemp's would be 0600).
            with open(tmp, mode.replace("w", "x"), encoding=None if "b" in mode else encoding) as f:
                yield f
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
            fsync_directory(os.path.dirname(os.path.abspath(path)))
    finally:
        _discard(tmp)


def atomic_write_bytes(path: PathLike, data: bytes, *, makedirs: bool = False) -> None:
    """Writes `data` to `path` atomically and durably (see `open_atomic`)."""
    with open_atomic(path, "wb", makedirs=makedirs) as f:
        f.write(data)


def atomic_write_text(path: PathLike, text: str, *, encoding: str = "utf-8", makedirs: bool = False) -> None:
    """Writes `text` to `path` atomically and durably (see `open_atomic`)."""
    atomic_write_bytes(path, text.encode(encoding), makedirs=makedirs)


def atomic_write_json(
    path: PathLike,
    value: Any,
    *,
    indent: Optional[int] = 2,
    sort_keys: bool = True,
    ensure_ascii: bool = False,
    makedirs: bool = False,
) -> None:
    """Writes `value` as JSON (indented, then a newline) to `path` atomically and durably."""
    text = json.dumps(value, indent=indent, sort_keys=sort_keys, ensure_ascii=ensure_ascii) + "\n"
    atomic_write_text(path, text, makedirs=makedirs)


def _write_all(fd: int, data: bytes) -> None:
    while data:
        written = os.write(fd, data)
        data = data[written:]


def append_line(path: PathLike, line: str) -> None:
    """Appends `line` (a newline is added if missing) to `path`, durably.

    Locally the line goes in one `write` on an ``O_APPEND`` descriptor and is fsync'ed, so a crash
    loses at most the line being written; a last line cut short by an earlier crash is ended
    first, so the new line stays whole. Filesystems without append (GCS) get the file rewritten
    atomically with the line added.
    """
    path = os.fspath(path)
    text = line if line.endswith("\n") else line + "\n"
    if "\n" in text[:-1]:
        raise ValueError("append_line appends one line; the text has a line break inside")
    payload = text.encode("utf-8")
    if is_remote(path):
        gfile = _gfile()
        old = b""
        if gfile.exists(path):
            with gfile.GFile(path, "rb") as f:
                old = f.read()
        if old and not old.endswith(b"\n"):
            old += b"\n"
        atomic_write_bytes(path, old + payload)
        return
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            payload = b"\n" + payload
        _write_all(fd, payload)
        os.fsync(fd)
    finally:
        os.close(fd)
    if size == 0:
        # A new file's directory entry must survive a crash as well as its content.
        fsync_directory(os.path.dirname(os.path.abspath(path)))


# --- staged directories -----------------------------------------------------------------------


def _staging_parent(final: str) -> str:
    # A remote output is built locally (h5py, SentencePiece and friends write only local files)
    # and copied up when published.
    return tempfile.gettempdir() if is_remote(final) else _split(final)[0]


def _staging_prefix(final: str, prefix: Optional[str]) -> str:
    return prefix if prefix is not None else f".{_split(final)[1]}.partial-"


def staging_name(final: PathLike, prefix: Optional[str] = None, *, beside: bool = False) -> str:
    """A fresh staging path for `final`, not created: ``.NAME.partial-<8 hex>`` beside a local
    `final` (same filesystem, so publishing is a rename), in the local temporary directory for a
    remote one unless `beside` (for writers on other machines, such as Beam workers). `prefix`
    replaces ``.NAME.partial-``."""
    final = os.fspath(final)
    parent = _split(final)[0] if beside else _staging_parent(final)
    return _join(parent, _staging_prefix(final, prefix) + uuid.uuid4().hex[:8])


def make_staging_dir(final: PathLike, prefix: Optional[str] = None) -> str:
    """Creates and returns a fresh staging directory for `final` (named as `staging_name` says)."""
    final = os.fspath(final)
    parent = _staging_parent(final)
    os.makedirs(parent, exist_ok=True)
    return tempfile.mkdtemp(prefix=_staging_prefix(final, prefix), dir=parent)


def remove_tree(path: PathLike) -> None:
    """Removes the directory tree `path` if it is there; never raises (it runs during cleanup)."""
    path = os.fspath(path)
    if not is_remote(path):
        shutil.rmtree(path, ignore_errors=True)
        return
    try:
        gfile = _gfile()
        if gfile.exists(path):
            gfile.rmtree(path)
    except Exception as e:  # noqa: BLE001 - cleanup must not hide the error being raised
        logger.warning("could not remove %s: %s", path, e)


def _walk_files(source: str):
    """(relative directories, relative files) of the tree `source`, with "/" separators."""
    walk = _gfile().walk(source) if is_remote(source) else os.walk(source)
    directories: List[str] = []
    files: List[str] = []
    base = source.rstrip("/")
    for root, dirs, names in walk:
        root = root.rstrip("/")
        rel_root = "" if root == base else root[len(base) + 1 :].replace(os.sep, "/")
        for name in dirs:
            directories.append(f"{rel_root}/{name.rstrip('/')}" if rel_root else name.rstrip("/"))
        for name in names:
            files.append(f"{rel_root}/{name}" if rel_root else name)
    return sorted(directories), sorted(files)


def copy_tree(source: PathLike, target: PathLike, *, order: Optional[Callable[[str], Any]] = None) -> None:
    """Copies every file of the tree `source` into `target` (created if needed), local or remote.

    Files are copied in name order, then stably sorted by `order(relative_path)` when given, so a
    marker file (``COMPLETE``, a checkpoint's ``.index``) can go last: a reader of a remote tree,
    which is never swapped in atomically, sees the marker only once every other file is there.
    """
    source, target = os.fspath(source), os.fspath(target)
    remote = is_remote(source) or is_remote(target)
    directories, files = _walk_files(source)
    if order is not None:
        files.sort(key=order)
    makedirs = _gfile().makedirs if remote else (lambda d: os.makedirs(d, exist_ok=True))
    makedirs(target)
    for rel in directories:
        makedirs(_join(target, rel) if is_remote(target) else os.path.join(target, *rel.split("/")))
    for rel in files:
        src = _join(source, rel) if is_remote(source) else os.path.join(source, *rel.split("/"))
        dst = _join(target, rel) if is_remote(target) else os.path.join(target, *rel.split("/"))
        if remote:
            _gfile().copy(src, dst, overwrite=True)
        else:
            shutil.copy2(src, dst)


def _refuse_existing(final: str, listdir, isdir, overwrite: bool) -> None:
    if not isdir(final):
        raise FileExistsError(f"{final} exists and is not a directory")
    if not overwrite and listdir(final):
        raise FileExistsError(f"{final} is not empty; pass overwrite=True to replace it")


def publish_directory(
    staging: PathLike, final: PathLike, *, overwrite: bool = False, order: Optional[Callable[[str], Any]] = None
) -> None:
    """Makes the finished directory `staging` the directory `final`.

    An existing empty `final` is replaced; a non-empty one only with `overwrite`, else
    `FileExistsError`. Locally `staging` is renamed to `final` (an old `final` is moved aside first
    and moved back if the rename fails, then removed). Remotely there is no directory rename: an
    old `final` is removed, `staging` copied up (`copy_tree`, with `order`), then removed.
    """
    staging, final = os.fspath(staging), os.fspath(final)
    if is_remote(final) or is_remote(staging):
        gfile = _gfile()
        if gfile.exists(final):
            _refuse_existing(final, gfile.listdir, gfile.isdir, overwrite)
            gfile.rmtree(final)
        copy_tree(staging, final, order=order)
        remove_tree(staging)
        return
    final = os.path.abspath(final)
    parent, name = os.path.split(final)
    old = None
    if os.path.exists(final):
        _refuse_existing(final, os.listdir, os.path.isdir, overwrite)
        # Moved aside rather than deleted first, so that it can come back if the rename fails.
        old = os.path.join(parent, f".{name}.old-{uuid.uuid4().hex}")
        os.rename(final, old)
    try:
        os.rename(staging, final)
    except BaseException:
        if old is not None:
            os.rename(old, final)
        raise
    fsync_directory(parent)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


@contextlib.contextmanager
def staged_directory(
    final: PathLike,
    *,
    overwrite: bool = False,
    prefix: Optional[str] = None,
    create: bool = True,
    order: Optional[Callable[[str], Any]] = None,
) -> Iterator[str]:
    """Yields a fresh staging directory that `publish_directory` makes `final` when the block succeeds.

    On any exception (publishing included) the staging directory is removed and `final` is left
    as it was. With ``create=False`` the path is yielded uncreated, for writers that create their
    output directory themselves (`shutil.copytree`, `tf.saved_model.save`). `prefix` and `order`:
    see `staging_name` and `copy_tree`.
    """
    final = os.fspath(final)
    staging = make_staging_dir(final, prefix) if create else staging_name(final, prefix)
    try:
        yield staging
        publish_directory(staging, final, overwrite=overwrite, order=order)
    except BaseException:
        remove_tree(staging)
        raise
