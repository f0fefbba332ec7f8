"""`model.tflite`: an export's token-ids function as a LiteRT (TFLite) model, and a runner for it.

`write_tflite(version_dir, module, mode)` converts the `tokens` computation of a `ServingModule`
(`input_ids`, `input_mask`, `segment_ids`, int32; the same outputs and names as the SavedModel's
`tokens` signature) with `tf.lite.TFLiteConverter` into `<version_dir>/model.tflite`, the file TF
Serving serves with `--prefer_tflite_model` (and `albert-tf serve --prefer-tflite-model`). Modes
(`MODES`):

* "dynamic-int8": dynamic-range quantization (`Optimize.DEFAULT`, no representative data): int8
  weights, activations quantized per batch at run time (XNNPACK's int8 matmuls); about 4x smaller.
* "float32": the float model as is.

Only TFLite's builtin ops are allowed (`supported_ops = [TFLITE_BUILTINS]`): TF Serving's TFLite
runtime registers no others, so a graph that needs one fails here with `TfliteExportError` naming
the op. The model's batch and sequence dimensions are variable (shape signature -1): a caller
resizes the inputs to each batch (`TfliteModel` does). Its one signature is keyed `tokens`, as the
SavedModel's: TF Serving replays `assets.extra/tf_serving_warmup_requests` on the TFLite model too,
so an export with a `model.tflite` warms up with its `tokens` request only, which both run (see
`albert_tf.export.saved_model`), and a client sends the same request to either. The id-range asserts of the SavedModel's
`tokens` are not in the TFLite graph (`Assert` is no builtin); `TfliteModel` checks the ids instead.

After writing, the file is loaded with the LiteRT interpreter (`ai_edge_litert`, else
`tf.lite.Interpreter`), its ops checked to be builtins, and its outputs compared on seeded random
token ids with the `tokens` signature's (`TOLERANCES`): float32 — every float output within
`1e-3 * max(1, max |reference|)` and integer and string outputs equal; dynamic-int8 — every float
output with cosine similarity >= 0.999 to the reference and probabilities within 0.05 (integer and
string outputs, argmaxes of nearly tied scores, are not compared). The mode, file size, inputs,
outputs and the measured agreement go into `export.json` under `tflite`.

`TfliteModel(path, num_threads=None, length_bucket=None)` runs a `model.tflite` in-process:
`model(features)` takes a dict of numpy token arrays and returns `{output name: array}`; with
`length_bucket=16` it first cuts the padding of the batch to its longest row rounded up to a
multiple of 16 (sequence-level outputs then have that length).
"""

from __future__ import annotations

import json
import os
import re
import threading
from typing import Any, Dict, List, Mapping, Optional

import numpy as np

from albert_tf.runtime_env import native_notices_dropped
from albert_tf.tokenization.packing import bucketed_width

TFLITE_FILE = "model.tflite"
MODE_DYNAMIC_INT8 = "dynamic-int8"
MODE_FLOAT32 = "float32"
MODES = (MODE_DYNAMIC_INT8, MODE_FLOAT32)
# The one signature of the TFLite model: the SavedModel's token-ids signature, same inputs and outputs.
SIGNATURE_KEY = "tokens"
TOLERANCES = {
    MODE_FLOAT32: {"relative_max_abs_diff": 1e-3},
    MODE_DYNAMIC_INT8: {"min_cosine": 0.999, "probabilities_max_abs_diff": 0.05},
}
CHECK_BATCH = 4
_PROBABILITY_OUTPUTS = ("probabilities", "scores", "sop_probabilities")
# What the converter and the LiteRT interpreter log on every conversion, whatever the settings:
# options the new converter ignores, and the CPU delegate it always creates.
CONVERTER_NOTICES = (
    re.compile(r"tf_tfl_flatbuffer_helpers\.cc:\d+\] Ignored (output_format|drop_control_dependency)\.$"),
    re.compile(r"^INFO: Created TensorFlow Lite XNNPACK delegate for CPU\.$"),
)
_NON_BUILTIN_OP = re.compile(r"'(tf\.[A-Za-z0-9_]+)' op is neither a custom op nor a flex op")


class TfliteExportError(ValueError):
    """A TFLite export that cannot be written: a bad mode or model, a non-builtin op, a failed check."""


def check_request(module, mode: Optional[str]) -> None:
    """Refuses an unknown `mode`, or a serving module whose `tokens` computation does not convert
    with builtin ops only (its class's `no_tflite` says why), before any work."""
    if mode not in MODES:
        raise TfliteExportError(f"tflite must be one of {', '.join(MODES)}, got {mode!r}")
    if module.no_tflite:
        raise TfliteExportError(f"a {module.kind} export has no TFLite model ({module.no_tflite})")


def _token_specs(module) -> list:
    import tensorflow as tf

    # Every dimension variable: the converter writes -1 into the shape signature, so one file
    # serves any batch and sequence length.
    return [tf.TensorSpec([None] * len(s.shape), tf.int32, name=s.name) for s in module.serve_tokens.input_signature]


def token_function(module):
    """The concrete function the TFLite model is converted from: the module's `tokens` outputs
    (`_token_outputs`) on int32 token inputs of any batch and sequence length."""
    import tensorflow as tf

    from albert_tf import fused_ops

    specs = _token_specs(module)
    names = [s.name for s in specs]

    def tokens(*args):
        return module._token_outputs(dict(zip(names, args)))

    # The inference LayerNorm is written for Grappler's oneDNN fusion (FusedBatchNormV3 in
    # training mode), which TFLite has no builtin for; the plain Keras ops convert to builtins.
    was_enabled = fused_ops.enabled()
    fused_ops.set_enabled(False)
    try:
        return tf.function(tokens, input_signature=specs, autograph=False).get_concrete_function()
    finally:
        fused_ops.set_enabled(was_enabled)


def convert(module, mode: str) -> bytes:
    """The `model.tflite` bytes of `module`'s token-ids function in `mode` (builtin ops only).

    Raises:
      TfliteExportError: a bad mode, or ops outside TFLite's builtins (named).
    """
    import tensorflow as tf

    if mode not in MODES:
        raise TfliteExportError(f"tflite must be one of {', '.join(MODES)}, got {mode!r}")
    import tempfile

    function = token_function(module)
    # Only the variables the function reads: tracking the whole module would pull the
    # tokenizer's lookup tables (HashTableV2, no builtin) into the converted graph.
    holder = tf.Module()
    holder.variables_read = list(function.variables)
    try:
        with tempfile.TemporaryDirectory(prefix="albert-tflite-") as directory:
            # Through a SavedModel (as `from_concrete_functions` does internally) to name the signature.
            tf.saved_model.save(holder, directory, signatures={SIGNATURE_KEY: function})
            converter = tf.lite.TFLiteConverter.from_saved_model(directory, signature_keys=[SIGNATURE_KEY])
            converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
            if mode == MODE_DYNAMIC_INT8:
                converter.optimizations = [tf.lite.Optimize.DEFAULT]
            return converter.convert()
    except Exception as e:  # the converter raises ConverterError and plain exceptions alike
        ops = sorted(set(_NON_BUILTIN_OP.findall(str(e))))
        if ops:
            raise TfliteExportError(
                f"the {module.kind} model needs ops outside TFLite's builtins ({', '.join(ops)}); "
                "TF Serving's TFLite runtime registers builtins only"
            ) from None
        first = next((line for line in str(e).splitlines() if line.strip()), type(e).__name__)
        raise TfliteExportError(f"TFLite conversion of the {module.kind} model failed: {first}") from None


def _interpreter_class():
    try:
        from ai_edge_litert.interpreter import Interpreter
    except ImportError:  # the LiteRT package is optional; TensorFlow ships the same interpreter
        import tensorflow as tf

        Interpreter = tf.lite.Interpreter
    return Interpreter


def model_ops(path: str) -> List[str]:
    """The op names of the TFLite model at `path` (loaded without delegates, so none is hidden)."""
    try:
        from ai_edge_litert.interpreter import Interpreter, OpResolverType
    except ImportError:
        import tensorflow as tf

        Interpreter, OpResolverType = tf.lite.Interpreter, tf.lite.experimental.OpResolverType
    interpreter = Interpreter(model_path=path, experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    try:
        interpreter.allocate_tensors()
    except RuntimeError as e:
        raise TfliteExportError(f"{path} does not load with TFLite's builtin ops only: {str(e).splitlines()[0]}") from None
    return sorted({op["op_name"] for op in interpreter._get_ops_details()})


def _non_builtin(ops: List[str]) -> List[str]:
    return [op for op in ops if op in ("CUSTOM", "DELEGATE") or op.startswith("Flex")]


class TfliteModel:
    """A `model.tflite` of an export, run in-process by the LiteRT interpreter (XNNPACK on CPU).

    Args:
      path: the `model.tflite` file.
      num_threads: interpreter threads (default: LiteRT's).
      length_bucket: cut each batch's padding to its longest row (from `input_mask`) rounded up
        to a multiple of this; None keeps the inputs' length.
      vocab_size: ids must be below it; default `export.json`'s `tflite.vocab_size` beside
        the file (`<version>/assets/export.json`), when there is one.

    Calling it is thread-safe (one interpreter, one call at a time).

    Raises:
      ValueError: the file does not load.
    """

    def __init__(self, path: str, num_threads: Optional[int] = None, length_bucket: Optional[int] = None,
                 vocab_size: Optional[int] = None):
        if length_bucket is not None and (isinstance(length_bucket, bool) or int(length_bucket) < 1):
            raise ValueError(f"length_bucket must be a positive integer, got {length_bucket!r}")
        self.path = path
        self.length_bucket = int(length_bucket) if length_bucket is not None else None
        Interpreter = _interpreter_class()
        try:
            self._interpreter = Interpreter(model_path=path, num_threads=num_threads)
        except (ValueError, RuntimeError) as e:
            raise ValueError(f"cannot load the TFLite model {path}: {str(e).splitlines()[0]}") from None
        signatures = self._interpreter.get_signature_list()
        self.signature_key = SIGNATURE_KEY if SIGNATURE_KEY in signatures else next(iter(signatures))
        self._runner = self._interpreter.get_signature_runner(self.signature_key)
        self.input_details = self._runner.get_input_details()
        self.output_details = self._runner.get_output_details()
        self.input_names = sorted(self.input_details)
        self.output_names = sorted(self.output_details)
        self.vocab_size = vocab_size if vocab_size is not None else _vocab_size_beside(path)
        self._lock = threading.Lock()

    def _checked(self, features: Mapping[str, Any]) -> Dict[str, np.ndarray]:
        sent, expected = set(features), set(self.input_names)
        if sent != expected:
            raise ValueError(
                f"the TFLite model takes {', '.join(self.input_names)}; missing {sorted(expected - sent)}, "
                f"extra {sorted(sent - expected)}"
            )
        arrays = {}
        for name in self.input_names:
            value = np.asarray(features[name])
            rank = len(self.input_details[name]["shape_signature"])
            if value.dtype.kind not in "iu":
                raise ValueError(f"{name} must be integer token ids, got dtype {value.dtype}")
            if value.ndim != rank:
                raise ValueError(f"{name} must have rank {rank}, got shape {list(value.shape)}")
            arrays[name] = value.astype(np.int32)
        shapes = {a.shape for a in arrays.values()}
        if len(shapes) != 1:
            raise ValueError(f"the token inputs must have one shape, got {sorted(shapes)}")
        ids = arrays.get("input_ids")
        if ids is not None and ids.size:
            if ids.min() < 0:
                raise ValueError("input_ids must be >= 0")
            if self.vocab_size is not None and ids.max() >= self.vocab_size:
                raise ValueError(f"input_ids must be < the vocabulary size {self.vocab_size}")
        if "segment_ids" in arrays and arrays["segment_ids"].size and arrays["segment_ids"].min() < 0:
            raise ValueError("segment_ids must be >= 0")
        return arrays

    def bucketed_length(self, input_mask: np.ndarray) -> int:
        """The sequence length a batch with this `input_mask` runs at (`length_bucket`)."""
        length = input_mask.shape[-1]
        if self.length_bucket is None or length == 0:
            return length
        rows = input_mask.reshape(-1, length) != 0
        longest = int(np.max(np.where(rows.any(axis=1), length - np.argmax(rows[:, ::-1], axis=1), 0)))
        return bucketed_width(longest, length, self.length_bucket)

    def __call__(self, features: Mapping[str, Any]) -> Dict[str, np.ndarray]:
        """`{output name: array}` for token `features` (`input_names`, integer arrays of one shape).

        Raises:
          ValueError: missing or extra inputs, non-integer or mismatched arrays, ids out of range,
            or a failed invocation (TFLite's message).
        """
        arrays = self._checked(features)
        if self.length_bucket is not None and "input_mask" in arrays:
            length = self.bucketed_length(arrays["input_mask"])
            arrays = {k: np.ascontiguousarray(v[..., :length]) for k, v in arrays.items()}
        with self._lock:
            try:
                outputs = self._runner(**arrays)
            except (RuntimeError, ValueError) as e:
                raise ValueError(f"the TFLite model failed: {str(e).splitlines()[0]}") from None
            # The runner's arrays are views of the interpreter's buffers, reused by the next call.
            return {k: np.array(v, copy=True) for k, v in outputs.items()}


def _vocab_size_beside(path: str) -> Optional[int]:
    info_path = os.path.join(os.path.dirname(os.path.abspath(path)), "assets", "export.json")
    try:
        with open(info_path, encoding="utf-8") as f:
            return int(json.load(f)["tflite"]["vocab_size"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def check_inputs(module, batch: int = CHECK_BATCH, seed: int = 0) -> Dict[str, np.ndarray]:
    """Seeded random token inputs of the `tokens` signature's shapes (real lengths vary per row)."""
    rng = np.random.default_rng(seed)
    seq = module.sequence_length
    shape = [batch] + [2] * (len(module.serve_tokens.input_signature[0].shape) - 2) + [seq]
    lengths = rng.integers(3, seq + 1, size=shape[:-1])
    lengths.reshape(-1)[0] = seq
    positions = np.arange(seq)
    mask = (positions < lengths[..., None]).astype(np.int32)
    ids = rng.integers(5, module.vocab_size, size=shape).astype(np.int32) * mask
    segments = ((positions >= (lengths[..., None] // 2)) * mask).astype(np.int32)
    inputs = {"input_ids": ids, "input_mask": mask, "segment_ids": segments}
    for spec in module.serve_tokens.input_signature:
        if spec.name not in inputs:  # SQuAD v2's p_mask: 1 where no answer can start (the padding)
            inputs[spec.name] = (1 - mask).astype(np.int32)
    return inputs


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    norms = np.linalg.norm(a) * np.linalg.norm(b)
    return 1.0 if norms == 0 and not a.any() and not b.any() else float(a @ b / norms) if norms else 0.0


def compare_outputs(reference: Dict[str, np.ndarray], got: Dict[str, np.ndarray], mode: str) -> Dict[str, Dict[str, float]]:
    """Per float output `max_abs_diff` and `cosine` of `got` vs `reference`, checked against
    `TOLERANCES[mode]` (see the module docstring).

    Raises:
      TfliteExportError: an output is missing or outside the tolerance.
    """
    tolerance = TOLERANCES[mode]
    stats = {}
    for name, ref in sorted(reference.items()):
        if name not in got:
            raise TfliteExportError(f"the TFLite model has no output {name!r} (it has {sorted(got)})")
        value = got[name]
        if ref.shape != value.shape:
            raise TfliteExportError(f"TFLite output {name} has shape {list(value.shape)}, the tokens signature's {list(ref.shape)}")
        if ref.dtype.kind != "f":
            if mode == MODE_FLOAT32 and not np.array_equal(ref, value):
                raise TfliteExportError(f"TFLite float32 output {name} differs from the tokens signature's")
            continue
        finite = np.isfinite(ref)
        if not np.array_equal(finite, np.isfinite(value)):
            raise TfliteExportError(f"TFLite output {name} has non-finite values where the tokens signature has none")
        diff = float(np.max(np.abs(ref[finite] - value[finite]))) if finite.any() else 0.0
        cosine = _cosine(ref[finite], value[finite])
        stats[name] = {"max_abs_diff": diff, "cosine": cosine}
        if mode == MODE_FLOAT32:
            scale = max(1.0, float(np.max(np.abs(ref[finite]))) if finite.any() else 1.0)
            if diff > tolerance["relative_max_abs_diff"] * scale:
                raise TfliteExportError(f"TFLite float32 output {name} differs by {diff:.3g} from the tokens signature's")
        else:
            if cosine < tolerance["min_cosine"]:
                raise TfliteExportError(
                    f"TFLite {mode} output {name} has cosine {cosine:.5f} to the tokens signature's "
                    f"(< {tolerance['min_cosine']}); export float32 instead"
                )
            if name in _PROBABILITY_OUTPUTS and diff > tolerance["probabilities_max_abs_diff"]:
                raise TfliteExportError(f"TFLite {mode} output {name} differs by {diff:.3g} from the tokens signature's")
    return stats


def _tensor_info(details: Dict[str, Dict]) -> Dict[str, Dict[str, Any]]:
    return {
        name: {"dtype": "string" if np.dtype(d["dtype"]).kind in "OSU" else np.dtype(d["dtype"]).name,
               "shape": [int(s) for s in d["shape_signature"]]}
        for name, d in sorted(details.items())
    }


def write_tflite(directory: str, module, mode: str) -> Dict[str, Any]:
    """Writes `<directory>/model.tflite` for `module` in `mode` and checks it (module docstring).

    Returns:
      The `tflite` entry of `export.json`: `file`, `mode`, `bytes`, `signature`, `inputs`,
      `outputs` (`{name: {"dtype", "shape"}}`), `vocab_size`, `tolerance` and `check` (the
      measured per-output `max_abs_diff` / `cosine`).

    Raises:
      TfliteExportError: a bad mode or kind, a non-builtin op, or a failed check.
    """
    import tensorflow as tf

    from albert_tf import file_io

    check_request(module, mode)
    path = os.path.join(directory, TFLITE_FILE)
    with native_notices_dropped(CONVERTER_NOTICES):
        file_io.atomic_write_bytes(path, convert(module, mode), makedirs=True)
        bad = _non_builtin(model_ops(path))
        if bad:
            raise TfliteExportError(f"{path} has non-builtin ops: {', '.join(bad)}")
        model = TfliteModel(path, vocab_size=module.vocab_size)
        inputs = check_inputs(module)
        tokens = module.signatures()["tokens"]
        reference = {k: v.numpy() for k, v in tokens(**{k: tf.constant(v) for k, v in inputs.items()}).items()}
        stats = compare_outputs(reference, model(inputs), mode)
    return {
        "file": TFLITE_FILE,
        "mode": mode,
        "bytes": os.path.getsize(path),
        "signature": model.signature_key,
        "inputs": _tensor_info(model.input_details),
        "outputs": _tensor_info(model.output_details),
        "vocab_size": int(module.vocab_size),
        "tolerance": TOLERANCES[mode],
        "check": stats,
    }
