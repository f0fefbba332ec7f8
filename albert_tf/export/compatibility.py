"""The TF Serving compatibility check every export runs before it publishes a version.

Two parts:

* `check_ops(saved_model_dir)`: every op of the `serve` MetaGraphDef, in its graph and in every
  function of its library, must be one TF Serving 2.20 has: a core TensorFlow op (the op
  registry of this TensorFlow 2.20 build, `tf.raw_ops`, as the proxy, minus the ops that only
  work with a Python interpreter) or an op of the tensorflow-text op libraries (which the
  serving image must load, see serving/README.md). `PyFunc`/`EagerPyFunc` (they call back into
  Python, which the C++ server has not) and any `_XlaMustCompile` attribute (a serving build
  may lack the XLA JIT) are flagged too.
* `check_reload(saved_model_dir, inputs, expected)`: a FRESH Python process loads the SavedModel
  the way TF Serving does (`albert_tf.model_server.servable.SessionServable`: TF1 loader, restore,
  init op) and runs every signature on `inputs`; its outputs must reproduce `expected` (the
  in-memory outputs). A fresh process is the point: nothing already loaded or traced in the
  exporting process (op libraries, Python objects, resources) can hide a missing piece.

The child is `python -m albert_tf.model_server.reload_check --serve`, started by module name: the
loader belongs to the server, and the export layer imports nothing of it. It starts at a
process's first check and serves the next ones (`ReloadProcess`), since starting TensorFlow costs
about 5 s of CPU and a check itself well under one. Reuse keeps the check's point: the child
never sees the exporting process's state, and each check loads its SavedModel into a new graph
and session, so what an earlier check loaded cannot stand in for what this one lacks (a
SavedModel brings no op libraries; the child's come from its own imports, TF Serving's).
"""

from __future__ import annotations

import atexit
import collections
import dataclasses
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
from typing import Dict, List, Optional, Set

import numpy as np

# In the op registry of a TensorFlow build but useless in a C++ server: they run Python code.
PYTHON_ONLY_OPS = frozenset({"PyFunc", "PyFuncStateless", "EagerPyFunc"})
XLA_MUST_COMPILE_ATTR = "_XlaMustCompile"
RELOAD_TIMEOUT_S = 600
# A reload process with no check for this long ends (the next check starts another).
RELOAD_IDLE_S = 300
# Environment variables that change while nothing the child does would: pytest sets this one at
# every test phase, which replaced the child (about 5 s of CPU) at each test that exports.
_VOLATILE_ENVIRONMENT = frozenset({"PYTEST_CURRENT_TEST"})


class CompatibilityError(RuntimeError):
    """An export that TF Serving could not load or that would not reproduce the model's outputs."""


@dataclasses.dataclass
class CompatibilityReport:
    """What `check_ops` found.

    Attributes:
      ops: every op type used (graph and functions).
      text_ops: the subset provided by tensorflow-text's op libraries.
      problems: human-readable findings; empty when the model is servable.
    """

    ops: List[str]
    text_ops: List[str]
    problems: List[str]

    @property
    def ok(self) -> bool:
        return not self.problems


def _tensorflow_text_ops() -> Set[str]:
    """The op names registered by tensorflow-text's shared libraries (each library's OpList)."""
    import tensorflow_text
    from tensorflow.core.framework import op_def_pb2
    from tensorflow.python.client import pywrap_tf_session as py_tf

    names: Set[str] = set()
    root = os.path.dirname(tensorflow_text.__file__)
    for directory, _, files in os.walk(root):
        for name in files:
            if not (name.startswith("_") and name.endswith(".so")):
                continue
            # `tf.load_op_library` keeps no OpList; the C API it uses gives each library's.
            handle = py_tf.TF_LoadLibrary(os.path.join(directory, name))
            try:
                op_list = op_def_pb2.OpList.FromString(py_tf.TF_GetOpList(handle))
            finally:
                py_tf.TF_DeleteLibraryHandle(handle)
            names.update(op.name for op in op_list.op)
    return names


def _core_ops() -> Set[str]:
    import tensorflow as tf

    return set(dir(tf.raw_ops)) - PYTHON_ONLY_OPS


def read_meta_graph(saved_model_dir: str, tags=("serve",)):
    """The MetaGraphDef tagged `tags` of a SavedModel directory's `saved_model.pb`."""
    from tensorflow.core.protobuf import saved_model_pb2

    path = os.path.join(saved_model_dir, "saved_model.pb")
    saved_model = saved_model_pb2.SavedModel()
    with open(path, "rb") as f:
        saved_model.ParseFromString(f.read())
    for meta_graph in saved_model.meta_graphs:
        if set(tags) <= set(meta_graph.meta_info_def.tags):
            return meta_graph
    raise CompatibilityError(f"{path} has no MetaGraphDef tagged {list(tags)}")


def check_ops(saved_model_dir: str) -> CompatibilityReport:
    """Checks every op (graph + function library) of a SavedModel against TF Serving 2.20's set."""
    meta_graph = read_meta_graph(saved_model_dir)
    graph_def = meta_graph.graph_def
    nodes = [("graph", node) for node in graph_def.node]
    for function in graph_def.library.function:
        nodes.extend((f"function {function.signature.name}", node) for node in function.node_def)
        if XLA_MUST_COMPILE_ATTR in function.attr and function.attr[XLA_MUST_COMPILE_ATTR].b:
            nodes.append((f"function {function.signature.name}", None))
    core, text = _core_ops(), _tensorflow_text_ops()
    used: Set[str] = set()
    problems: List[str] = []
    for where, node in nodes:
        if node is None:
            problems.append(f"{where} has {XLA_MUST_COMPILE_ATTR}=true (jit_compile): the serving build may lack XLA")
            continue
        used.add(node.op)
        if node.op in PYTHON_ONLY_OPS:
            problems.append(f"{where}: node {node.name} is {node.op}, which calls Python: TF Serving cannot run it")
        elif node.op not in core and node.op not in text:
            problems.append(f"{where}: node {node.name} uses op {node.op}, in neither TensorFlow 2.20 nor tensorflow-text")
        if XLA_MUST_COMPILE_ATTR in node.attr and node.attr[XLA_MUST_COMPILE_ATTR].b:
            problems.append(f"{where}: node {node.name} has {XLA_MUST_COMPILE_ATTR}=true (jit_compile)")
    return CompatibilityReport(sorted(used), sorted(used & text), problems)


# The child process of `check_reload` (a module of the server, run by name), and the prefix of its
# reply lines (anything else it prints is not a reply).
RELOAD_CHILD = "albert_tf.model_server.reload_check"
REPLY_PREFIX = "albert-reload-check: "
# Lines of the child's stderr kept for a failure's message.
_STDERR_TAIL = 15


class ReloadProcess:
    """The fresh interpreter that runs this process's reload checks, one at a time.

    `for_this_process()` starts it at the first check and reuses it while it lives, in this process
    (not in a fork of it) and with the same environment (`_VOLATILE_ENVIRONMENT` aside); a check
    that fails to load a model keeps it, a check that times out or kills it replaces it at the next
    check. It ends at exit, or after `RELOAD_IDLE_S` seconds without a check.
    """

    _current: Optional["ReloadProcess"] = None

    def __init__(self):
        self.owner = os.getpid()
        self.environment = _environment()
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES=os.environ.get("CUDA_VISIBLE_DEVICES", ""))
        self.process = subprocess.Popen(
            [sys.executable, "-m", RELOAD_CHILD, "--serve", str(RELOAD_IDLE_S)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, env=env,
        )
        self.replies: "queue.Queue[Optional[dict]]" = queue.Queue()
        self.stderr: "collections.deque[str]" = collections.deque(maxlen=_STDERR_TAIL)
        # Both pipes are drained all the time: a child blocked on a full stderr pipe would hang.
        threading.Thread(target=self._read_replies, daemon=True).start()
        self._stderr_reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._stderr_reader.start()

    @classmethod
    def for_this_process(cls) -> "ReloadProcess":
        current = cls._current
        if current is None or not current.usable():
            if current is not None:
                current.close()
            cls._current = current = cls()
        return current

    def usable(self) -> bool:
        return self.owner == os.getpid() and self.process.poll() is None and self.environment == _environment()

    def _read_replies(self) -> None:
        for line in self.process.stdout:
            if line.startswith(REPLY_PREFIX):
                self.replies.put(json.loads(line[len(REPLY_PREFIX):]))
        self.replies.put(None)

    def _read_stderr(self) -> None:
        for line in self.process.stderr:
            self.stderr.append(line.rstrip("\n"))

    def check(self, saved_model_dir: str, inputs_path: str, outputs_path: str, timeout: float = None) -> None:
        """Has the child load `saved_model_dir` and write the outputs of `inputs_path` to `outputs_path`.

        Raises:
          CompatibilityError: the child could not load or run it, died, or took over `timeout`
            seconds (default `RELOAD_TIMEOUT_S`).
        """
        timeout = RELOAD_TIMEOUT_S if timeout is None else timeout
        self.stderr.clear()
        request = [os.path.abspath(p) for p in (saved_model_dir, inputs_path, outputs_path)]
        try:
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
            reply = self.replies.get(timeout=timeout)
        except (BrokenPipeError, OSError):
            reply = None
        except queue.Empty:
            self.close(kill=True)
            raise CompatibilityError(f"reloading {saved_model_dir} in a fresh process took over {timeout:g}s") from None
        if reply is None:  # the child died: its stderr says why
            self.close()
            self._stderr_reader.join(timeout=10)
            if self.process.returncode == 0:
                raise _IdleExit()
            raise _reload_failed(saved_model_dir, list(self.stderr) or [f"the process ended with status {self.process.returncode}"])
        if not reply.get("ok"):
            raise _reload_failed(saved_model_dir, reply.get("error", "").strip().splitlines()[-_STDERR_TAIL:])

    def close(self, kill: bool = False) -> None:
        """Ends the child: at the end of its stdin, or killed (`kill`, or after 10 s)."""
        if self.process.poll() is None:
            try:
                if kill:
                    raise OSError("killed")
                self.process.stdin.close()
                self.process.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait()
        if ReloadProcess._current is self:
            ReloadProcess._current = None


def _environment() -> Dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in _VOLATILE_ENVIRONMENT}


def _reload_failed(saved_model_dir: str, lines: List[str]) -> CompatibilityError:
    return CompatibilityError(f"a fresh process could not load and run {saved_model_dir}:\n" + "\n".join(lines))


class _IdleExit(Exception):
    """The reload process ended idle (status 0) instead of answering."""


_RELOAD_LOCK = threading.Lock()


@atexit.register
def _close_reload_process() -> None:
    current = ReloadProcess._current
    if current is not None and current.owner == os.getpid():
        current.close()


def save_arrays(path: str, arrays: Dict[str, Dict[str, np.ndarray]]) -> None:
    """`{signature: {name: array}}` as one `.npz` (the reload check's inputs and outputs)."""
    flat = {f"{sig}/{name}": value for sig, values in arrays.items() for name, value in values.items()}
    np.savez(path, **flat)


def load_arrays(path: str) -> Dict[str, Dict[str, np.ndarray]]:
    """The arrays `save_arrays` wrote."""
    result: Dict[str, Dict[str, np.ndarray]] = {}
    with np.load(path, allow_pickle=True) as data:
        for key in data.files:
            signature, name = key.split("/", 1)
            result.setdefault(signature, {})[name] = data[key]
    return result


def _same(a: np.ndarray, b: np.ndarray, rtol: float, atol: float) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return False
    if a.dtype == object or b.dtype == object or a.dtype.kind in "SUb" or b.dtype.kind in "SUb":
        return a.tolist() == b.tolist()
    if a.dtype.kind in "iu":
        return bool(np.array_equal(a, b))
    return bool(np.allclose(a, b, rtol=rtol, atol=atol))


def check_reload(
    saved_model_dir: str,
    inputs: Dict[str, Dict[str, np.ndarray]],
    expected: Dict[str, Dict[str, np.ndarray]],
    rtol: float = 1e-4,
    atol: float = 1e-5,
) -> None:
    """Reloads the SavedModel in a fresh process, TF Serving's way, and compares every output.

    Args:
      saved_model_dir: the version directory.
      inputs: `{signature: {input: array}}`.
      expected: `{signature: {output: array}}`, the in-memory outputs for `inputs`.
      rtol, atol: float tolerance (integers and strings must match exactly).

    Raises:
      CompatibilityError: the child failed to load or run it, or an output differs.
    """
    with tempfile.TemporaryDirectory(prefix="albert-reload-") as tmp:
        inputs_path, outputs_path = os.path.join(tmp, "inputs.npz"), os.path.join(tmp, "outputs.npz")
        save_arrays(inputs_path, inputs)
        with _RELOAD_LOCK:
            try:
                ReloadProcess.for_this_process().check(saved_model_dir, inputs_path, outputs_path)
            except _IdleExit:  # it ended idle as the request went out: once more, with a new one
                try:
                    ReloadProcess.for_this_process().check(saved_model_dir, inputs_path, outputs_path)
                except _IdleExit:
                    raise CompatibilityError(
                        f"a fresh process could not load and run {saved_model_dir}: it ended without answering"
                    ) from None
        reloaded = load_arrays(outputs_path)
    problems = []
    for signature, outputs in expected.items():
        for name, value in outputs.items():
            got = reloaded.get(signature, {}).get(name)
            if got is None:
                problems.append(f"{signature}/{name}: missing after reload")
            elif not _same(value, got, rtol, atol):
                problems.append(f"{signature}/{name}: reloaded output differs from the in-memory one")
    if problems:
        raise CompatibilityError(f"{saved_model_dir} does not reproduce the model: " + "; ".join(problems))
