"""`albert_tf.file_io`: atomic writes, the durable append and staged directories, local and remote
(TensorFlow's in-memory ``ram://`` filesystem stands in for GCS)."""

from __future__ import annotations

import json
import os
import stat
import uuid

import pytest

from albert_tf import file_io


def names(directory):
    return sorted(os.listdir(directory))


def count_fsyncs(monkeypatch):
    calls = {"file": 0, "directory": 0}
    real = os.fsync

    def fsync(fd):
        calls["directory" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file"] += 1
        return real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return calls


# --- atomic writes ------------------------------------------------------------------------------


def test_atomic_write_replaces_and_syncs_file_and_directory(tmp_path, monkeypatch):
    path = tmp_path / "out.txt"
    path.write_text("old")
    calls = count_fsyncs(monkeypatch)
    file_io.atomic_write_text(path, "new\n")
    assert path.read_text() == "new\n" and names(tmp_path) == ["out.txt"]
    assert calls == {"file": 1, "directory": 1}
    assert stat.S_IMODE(path.stat().st_mode) & 0o044  # not mkstemp's private 0600


def test_a_failed_replace_keeps_the_old_file_and_leaves_no_temp(tmp_path, monkeypatch):
    path = tmp_path / "out.json"
    path.write_text("old")

    def failing_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError, match="disk full"):
        file_io.atomic_write_json(path, {"a": 1})
    assert path.read_text() == "old" and names(tmp_path) == ["out.json"]


def test_a_write_interrupted_midway_keeps_the_old_file(tmp_path):
    path = tmp_path / "out.txt"
    path.write_text("old")
    with pytest.raises(RuntimeError, match="interrupted"):
        with file_io.open_atomic(path, "w") as f:
            f.write("half of the new")
            assert path.read_text() == "old"  # nothing visible before the end
            raise RuntimeError("interrupted")
    assert path.read_text() == "old" and names(tmp_path) == ["out.txt"]


def test_atomic_output_for_writers_that_take_a_path(tmp_path):
    path = tmp_path / "weights.bin"
    with file_io.atomic_output(path, suffix=".bin") as tmp:
        assert tmp.endswith(".bin") and os.path.basename(tmp).startswith(".weights.bin.tmp-")
        with open(tmp, "wb") as f:
            f.write(b"\x00\x01")
    assert path.read_bytes() == b"\x00\x01"
    with pytest.raises(ValueError):
        with file_io.atomic_output(path) as tmp:
            open(tmp, "wb").close()
            raise ValueError("writer failed")
    assert path.read_bytes() == b"\x00\x01" and names(tmp_path) == ["weights.bin"]


def test_json_round_trip_and_mode_check(tmp_path):
    value = {"b": [1, 2.5, None], "a": "Café ✓"}
    file_io.atomic_write_json(tmp_path / "v.json", value)
    text = (tmp_path / "v.json").read_text(encoding="utf-8")
    assert json.loads(text) == value and text.endswith("\n") and "Café" in text
    assert text.index('"a"') < text.index('"b"')  # sorted keys
    with pytest.raises(ValueError, match="mode must be 'w' or 'wb'"):
        with file_io.open_atomic(tmp_path / "x", "a"):
            pass
    with pytest.raises(FileNotFoundError):
        file_io.atomic_write_json(tmp_path / "new" / "v.json", value)
    file_io.atomic_write_json(tmp_path / "new" / "v.json", value, makedirs=True)
    assert names(tmp_path / "new") == ["v.json"]


# --- the durable append ---------------------------------------------------------------------------


def test_append_line_syncs_and_repairs_a_cut_last_line(tmp_path, monkeypatch):
    path = tmp_path / "log.jsonl"
    calls = count_fsyncs(monkeypatch)
    file_io.append_line(path, '{"step": 1}')
    assert calls == {"file": 1, "directory": 1}  # a new file: its directory entry too
    file_io.append_line(path, '{"step": 2}\n')
    assert calls == {"file": 2, "directory": 1}
    with open(path, "ab") as f:
        f.write(b'{"ste')  # a crash in the middle of a line
    file_io.append_line(path, '{"step": 3}')
    assert path.read_text().splitlines() == ['{"step": 1}', '{"step": 2}', '{"ste', '{"step": 3}']
    with pytest.raises(ValueError, match="one line"):
        file_io.append_line(path, "a\nb")


# --- staged directories ---------------------------------------------------------------------------


def test_staged_directory_creates_refuses_and_replaces(tmp_path):
    final = tmp_path / "out"
    with file_io.staged_directory(final) as staging:
        assert os.path.basename(staging).startswith(".out.partial-") and os.path.dirname(staging) == str(tmp_path)
        (tmp_path / os.path.basename(staging) / "a").write_text("1")
    assert names(final) == ["a"] and names(tmp_path) == ["out"]

    with pytest.raises(FileExistsError, match="is not empty; pass overwrite=True to replace it"):
        with file_io.staged_directory(final) as staging:
            open(os.path.join(staging, "b"), "w").close()
    assert names(final) == ["a"] and names(tmp_path) == ["out"]

    with file_io.staged_directory(final, overwrite=True) as staging:
        open(os.path.join(staging, "b"), "w").close()
    assert names(final) == ["b"] and names(tmp_path) == ["out"]

    (tmp_path / "empty").mkdir()  # orchestrators create output folders ahead of time
    with file_io.staged_directory(tmp_path / "empty") as staging:
        open(os.path.join(staging, "c"), "w").close()
    assert names(tmp_path / "empty") == ["c"]

    (tmp_path / "file").write_text("x")
    with pytest.raises(FileExistsError, match="exists and is not a directory"):
        with file_io.staged_directory(tmp_path / "file", overwrite=True):
            pass
    assert names(tmp_path) == ["empty", "file", "out"]


def test_staged_directory_removes_its_staging_dir_on_an_exception(tmp_path):
    final = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        with file_io.staged_directory(final) as staging:
            open(os.path.join(staging, "half"), "w").close()
            raise KeyboardInterrupt
    assert names(tmp_path) == []
    # Uncreated: the block's writer makes the directory itself.
    with file_io.staged_directory(final, create=False, prefix=".v-") as staging:
        assert not os.path.exists(staging) and os.path.basename(staging).startswith(".v-")
        os.makedirs(os.path.join(staging, "sub"))
    assert names(final) == ["sub"] and names(tmp_path) == ["out"]


def test_a_failed_swap_rolls_back_to_the_old_directory(tmp_path, monkeypatch):
    final = tmp_path / "out"
    final.mkdir()
    (final / "old").write_text("kept")
    real_rename = os.rename

    def rename(src, dst):
        if ".partial-" in os.path.basename(src):
            raise OSError("rename failed")
        return real_rename(src, dst)

    monkeypatch.setattr(os, "rename", rename)
    with pytest.raises(OSError, match="rename failed"):
        with file_io.staged_directory(final, overwrite=True) as staging:
            open(os.path.join(staging, "new"), "w").close()
    assert names(final) == ["old"] and (final / "old").read_text() == "kept"
    assert names(tmp_path) == ["out"]  # neither the staging nor the moved-aside directory is left


def test_copy_tree_copies_empty_directories_and_puts_the_marker_last(tmp_path, monkeypatch):
    source = tmp_path / "src"
    (source / "sub" / "deep").mkdir(parents=True)
    (source / "empty").mkdir()
    for rel in ("COMPLETE", "a.txt", "sub/b.txt", "sub/deep/c.txt"):
        (source / rel).write_text(rel)
    copied = []
    real_copy2 = file_io.shutil.copy2
    monkeypatch.setattr(file_io.shutil, "copy2", lambda s, d: copied.append(os.path.relpath(s, source)) or real_copy2(s, d))
    file_io.copy_tree(source, tmp_path / "dst", order=lambda rel: rel == "COMPLETE")
    assert copied[-1] == "COMPLETE" and len(copied) == 4
    assert (tmp_path / "dst" / "sub" / "deep" / "c.txt").read_text() == "sub/deep/c.txt"
    assert (tmp_path / "dst" / "empty").is_dir()


def test_is_remote():
    assert file_io.is_remote("gs://bucket/x") and file_io.is_remote("ram://x")
    assert not file_io.is_remote("/tmp/x") and not file_io.is_remote("relative/x")


# --- remote paths through tf.io.gfile -------------------------------------------------------------


@pytest.fixture
def ram():
    tf = pytest.importorskip("tensorflow")
    root = f"ram://file_io_test_{uuid.uuid4().hex}"
    tf.io.gfile.makedirs(root)
    yield root, tf.io.gfile
    if tf.io.gfile.exists(root):
        tf.io.gfile.rmtree(root)


def test_remote_atomic_write_and_append(ram, monkeypatch):
    root, gfile = ram
    path = f"{root}/v.json"
    file_io.atomic_write_json(path, {"x": 1})
    with gfile.GFile(path) as f:
        assert json.load(f) == {"x": 1}

    def failing_rename(src, dst, overwrite=False):
        raise OSError("network down")

    with monkeypatch.context() as m:
        m.setattr(gfile, "rename", failing_rename)
        with pytest.raises(OSError, match="network down"):
            file_io.atomic_write_text(path, "new")
    assert gfile.listdir(root) == ["v.json"]
    with gfile.GFile(path) as f:
        assert json.load(f) == {"x": 1}

    log = f"{root}/log.jsonl"
    file_io.append_line(log, "one")
    file_io.append_line(log, "two")
    with gfile.GFile(log) as f:
        assert f.read() == "one\ntwo\n"


def test_remote_staged_publish(ram, tmp_path, monkeypatch):
    root, gfile = ram
    final = f"{root}/model"
    monkeypatch.setattr(file_io.tempfile, "tempdir", str(tmp_path))  # the local build area
    with file_io.staged_directory(final, order=lambda rel: rel == "COMPLETE") as staging:
        assert not file_io.is_remote(staging) and os.path.dirname(staging) == str(tmp_path)
        os.makedirs(os.path.join(staging, "logs"))
        for rel in ("COMPLETE", "model.keras", "logs/events"):
            with open(os.path.join(staging, rel), "w") as f:
                f.write(rel)
    assert sorted(n.rstrip("/") for n in gfile.listdir(final)) == ["COMPLETE", "logs", "model.keras"]
    with gfile.GFile(f"{final}/logs/events") as f:
        assert f.read() == "logs/events"
    assert os.listdir(tmp_path) == []  # the local staging directory is gone

    with pytest.raises(FileExistsError, match="is not empty"):
        with file_io.staged_directory(final) as staging:
            open(os.path.join(staging, "other"), "w").close()
    assert os.listdir(tmp_path) == []
    with file_io.staged_directory(final, overwrite=True) as staging:
        open(os.path.join(staging, "other"), "w").close()
    assert gfile.listdir(final) == ["other"]
