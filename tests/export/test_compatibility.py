"""Tests of `albert_tf.export.compatibility`: the op check (TF core + tensorflow-text ops; PyFunc and
`_XlaMustCompile` flagged) and the fresh-process reload that must reproduce the in-memory outputs."""

import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import _serving_helpers as helpers  # noqa: E402

from albert_tf.export import compatibility  # noqa: E402


def _save(module, path, signatures):
    tf.saved_model.save(module, str(path), signatures=signatures)
    return str(path)


class _Scale(tf.Module):
    def __init__(self):
        super().__init__()
        self.weight = tf.Variable([2.0, 3.0])

    @tf.function(input_signature=[tf.TensorSpec([None, 2], tf.float32, name="x")])
    def scale(self, x):
        return {"y": x * self.weight}

    @tf.function(input_signature=[tf.TensorSpec([None, 2], tf.float32, name="x")])
    def shift(self, x):
        return {"y": x + self.weight}


@pytest.mark.slow
def test_exported_classifier_passes_and_lists_text_ops(tmp_path_factory):
    base = helpers.export_base(tmp_path_factory)  # exported with check=True: the reload passed
    report = compatibility.check_ops(str(base / "cls" / "1"))
    assert report.ok, report.problems
    assert "TFText>FastSentencepieceTokenize" in report.text_ops and "NormalizeUTF8" in report.text_ops
    assert {"StatefulPartitionedCall", "MatMul", "HashTableV2"} <= set(report.ops)
    assert {"StaticRegexReplace", "RegexReplace"} & set(report.ops)


def test_py_function_and_jit_compile_are_flagged(tmp_path):
    class Python(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.float32)])
        def call(self, x):
            return tf.py_function(lambda v: v * 2, [x], tf.float32)

    class Jit(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.float32)], jit_compile=True)
        def call(self, x):
            return x * 2

    python = Python()
    report = compatibility.check_ops(_save(python, tmp_path / "py", {"serving_default": python.call.get_concrete_function()}))
    assert not report.ok and any("EagerPyFunc" in p and "calls Python" in p for p in report.problems)
    jit = Jit()
    report = compatibility.check_ops(_save(jit, tmp_path / "jit", {"serving_default": jit.call.get_concrete_function()}))
    assert not report.ok and any("_XlaMustCompile" in p for p in report.problems)


def test_unknown_op_is_flagged(tmp_path):
    from tensorflow.core.protobuf import saved_model_pb2

    module = _Scale()
    path = _save(module, tmp_path / "m", {"serving_default": module.scale.get_concrete_function()})
    proto = saved_model_pb2.SavedModel()
    proto.ParseFromString(Path(path, "saved_model.pb").read_bytes())
    proto.meta_graphs[0].graph_def.library.function[0].node_def[0].op = "MyCustomOp"
    Path(path, "saved_model.pb").write_bytes(proto.SerializeToString())
    report = compatibility.check_ops(path)
    assert any("MyCustomOp" in p and "neither TensorFlow 2.20 nor tensorflow-text" in p for p in report.problems)


@pytest.mark.slow
def test_fresh_process_reload_detects_a_mismatch(tmp_path):
    module = _Scale()
    path = _save(module, tmp_path / "m", {"serving_default": module.scale.get_concrete_function(), "shift": module.shift.get_concrete_function()})
    x = np.array([[1.0, 1.0]], np.float32)
    inputs = {"serving_default": {"x": x}, "shift": {"x": x}}
    expected = {"serving_default": {"y": np.array([[2.0, 3.0]], np.float32)}, "shift": {"y": np.array([[3.0, 4.5]], np.float32)}}
    with pytest.raises(compatibility.CompatibilityError) as info:
        compatibility.check_reload(path, inputs, expected)
    message = str(info.value)
    assert "shift/y: reloaded output differs" in message and "serving_default" not in message.split("model: ", 1)[1]


@pytest.mark.slow
def test_one_reload_process_serves_the_checks_and_a_stuck_or_dead_one_is_replaced(tmp_path, monkeypatch):
    import os
    import signal

    module = _Scale()
    path = _save(module, tmp_path / "m", {"serving_default": module.scale.get_concrete_function()})
    inputs = {"serving_default": {"x": np.array([[1.0, 1.0]], np.float32)}}
    expected = {"serving_default": {"y": np.array([[2.0, 3.0]], np.float32)}}
    compatibility.check_reload(path, inputs, expected)
    first = compatibility.ReloadProcess._current
    assert first is not None and first.process.poll() is None
    # The environment the child inherits decides whether it still serves; pytest's per-test
    # variable does not (it replaced the child at every test that exports).
    monkeypatch.setenv("ALBERT_TF_RELOAD_TEST", "1")
    assert not first.usable()
    monkeypatch.delenv("ALBERT_TF_RELOAD_TEST")
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "another test (call)")
    assert first.usable()
    # A SavedModel that does not load: the child's traceback names it, and the child stays.
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "saved_model.pb").write_bytes(b"not a SavedModel")
    with pytest.raises(compatibility.CompatibilityError, match="could not load and run .*broken") as info:
        compatibility.check_reload(str(broken), inputs, expected)
    assert "Failed to load SavedModel" in str(info.value)
    compatibility.check_reload(path, inputs, expected)
    assert compatibility.ReloadProcess._current is first and first.process.poll() is None
    # A child that stops answering is killed at the timeout; the next check starts another.
    os.kill(first.process.pid, signal.SIGSTOP)
    monkeypatch.setattr(compatibility, "RELOAD_TIMEOUT_S", 0.5)
    with pytest.raises(compatibility.CompatibilityError, match="took over 0.5s"):
        compatibility.check_reload(path, inputs, expected)
    assert first.process.poll() is not None and compatibility.ReloadProcess._current is None
    monkeypatch.undo()
    compatibility.check_reload(path, inputs, expected)
    second = compatibility.ReloadProcess._current
    assert second is not first
    # One that died between checks is replaced too.
    second.process.kill()
    second.process.wait()
    compatibility.check_reload(path, inputs, expected)
    assert compatibility.ReloadProcess._current not in (first, second)
