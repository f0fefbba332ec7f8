"""The OpenVINO target of an export: raw text in, as the SavedModel's `serving_default`, as an IR model.

`export_saved_model(..., openvino="int8"|"bf16"|"f32")` writes, beside the SavedModel version
`<export_base>/<model_name>/<version>/`, the OpenVINO IR of the same version in the layout OpenVINO
Model Server reads: `<export_base>/openvino/<model_name>/<version>/model.xml` + `model.bin`
(`OPENVINO_BASE`; a model repository of its own, so TF Serving's `models.config`, which lists the
export base's directories with integer versions, never lists it, and OVMS never has to choose
between the SavedModel and the IR of one version folder). `openvino/config.json` is OVMS's
multi-model configuration for every model there (`write_ovms_config`).

The IR is one model from strings to answers:

* the tokenizer: `openvino_tokenizers`' `SentencepieceTokenizer` op on the vocabulary of the
  export, after the same preprocessing as `AlbertTokenizerLayer` (whitespace runs collapsed and
  stripped, NFKD and deletion of combining characters unless accents are kept, lower-casing),
  packed as `[CLS] pieces [SEP]`, truncated to `sequence_length`. The layer's digit-comma rule
  only acts on pieces that end in a digit and ",": a vocabulary with such pieces, WordPiece
  vocabularies and sentence pairs are refused (one line);
* the `tokens` computation (`albert_tf.export.tflite.token_function`), converted by
  `openvino.convert_model`; for int8 quantized by NNCF (`nncf.quantize`, transformer model type)
  on token ids of calibration texts (the task's training texts).

Outputs have the names of the SavedModel's text signature (`probabilities`, `logits`, `label_id`,
`label` for a classifier, `score` for a regressor). The precision a compiled model runs in is its
inference precision hint, which a plain `Core.compile_model` leaves at the CPU plugin's default (bf16
on AMX / AVX512_BF16 CPUs): f32 and bf16 set it (`compile_options`, from the mode the IR records in
its rt_info `albert_tf/mode`; OVMS from config.json's `plugin_config`); int8 keeps the plugin's
default for the ops NNCF left in float. The export compiles the written IR afresh, lists the precision each
op runs in (`runtime_precisions`), compares its answers with the SavedModel's on check texts at
`TOLERANCES[mode]`, optionally checks accuracy (`albert_tf.export.accuracy_check`), and records all
of it in `export.json`'s `openvino`; a miss refuses the export (nothing is published).

`openvino`, `nncf` and `openvino-tokenizers` are the optional extra `[openvino]`, imported here
lazily (`require_openvino`).
"""

from __future__ import annotations

import collections
import contextlib
import os
from typing import Any, Dict, Iterator, List, Optional, Sequence

import numpy as np

MODE_INT8 = "int8"
MODE_BF16 = "bf16"
MODE_F32 = "f32"
MODES = (MODE_INT8, MODE_BF16, MODE_F32)
# The CPU plugin's INFERENCE_PRECISION_HINT per mode; int8 keeps the plugin's default (bf16 on
# AMX/AVX512_BF16 CPUs) for what NNCF leaves in float.
PRECISION_HINTS = {MODE_F32: "f32", MODE_BF16: "bf16", MODE_INT8: None}
OPENVINO_BASE = "openvino"
MODEL_XML = "model.xml"
MODEL_BIN = "model.bin"
OVMS_CONFIG_FILE = "config.json"
SUPPORTED_KINDS = ("classification", "regression")
INSTALL_HINT = "pip install -e '.[openvino]'"
# f32: same answers up to float rounding; bf16 / int8: close scores and the same argmax on
# (almost) every check text. `probabilities_max_abs_diff` bounds the probability shift.
TOLERANCES = {
    MODE_F32: {"relative_max_abs_diff": 1e-3, "min_argmax_agreement": 1.0},
    MODE_BF16: {"min_cosine": 0.99, "probabilities_max_abs_diff": 0.05, "min_argmax_agreement": 0.9},
    MODE_INT8: {"min_cosine": 0.95, "probabilities_max_abs_diff": 0.15, "min_argmax_agreement": 0.9},
}
# NNCF's default calibration subset; more texts are not read.
CALIBRATION_SIZE = 300
CALIBRATION_BATCH = 16
CHECK_TEXTS_FROM_CALIBRATION = 64


class OpenVinoExportError(ValueError):
    """An OpenVINO model that cannot be written or that fails its check (one-line message)."""


def require_openvino():
    """The `openvino` module (and `openvino_tokenizers`' ops registered), else a one-line error."""
    try:
        import openvino
        import openvino_tokenizers  # noqa: F401  (registers the tokenizer ops with the runtime)
    except ImportError as e:
        raise OpenVinoExportError(f"the OpenVINO target needs {e.name or 'openvino'}: {INSTALL_HINT}") from None
    return openvino


def _require_nncf():
    try:
        import nncf
    except ImportError:
        raise OpenVinoExportError(f"the OpenVINO int8 target needs nncf: {INSTALL_HINT}") from None
    return nncf


def version_dir(export_base: str, model_name: str, version: int) -> str:
    """Where the IR of `<export_base>/<model_name>/<version>` goes (OVMS's `<base>/<version>/`)."""
    return os.path.join(export_base, OPENVINO_BASE, model_name, str(version))


def beside(saved_model_version_dir: str) -> str:
    """The IR directory of a SavedModel version directory `<export_base>/<model_name>/<version>`."""
    path = os.path.abspath(saved_model_version_dir)
    model_dir, version = os.path.split(path)
    export_base, model_name = os.path.split(model_dir)
    return os.path.join(export_base, OPENVINO_BASE, model_name, version)


def _digit_comma_pieces(tokenizer) -> List[str]:
    pieces = [p.decode("utf-8", "replace") for p in tokenizer.pieces.numpy().tolist()]
    return [p for p in pieces if len(p) > 1 and p.endswith(",") and p[-2].isdigit()]


def check_mode(mode: str, calibration_texts: Optional[Sequence[str]]) -> None:
    """Refuses, in one line, a bad mode, int8 without calibration texts, or a missing package."""
    if mode not in MODES:
        raise OpenVinoExportError(f"openvino must be one of {', '.join(MODES)}, got {mode!r}")
    if mode == MODE_INT8 and not calibration_texts:
        raise OpenVinoExportError(
            "int8 needs calibration texts (the task's training texts): pass --openvino-calibration DATA_DIR or a file of texts"
        )
    require_openvino()
    if mode == MODE_INT8:
        _require_nncf()


def check_request(module, mode: str, calibration_texts: Optional[Sequence[str]]) -> None:
    """Refuses, in one line, what the OpenVINO target cannot export (before anything is written)."""
    check_mode(mode, calibration_texts)
    if module.kind not in SUPPORTED_KINDS:
        raise OpenVinoExportError(
            f"the OpenVINO target exports {' and '.join(SUPPORTED_KINDS)} models, not {module.kind} models"
        )
    if module.pair:
        raise OpenVinoExportError("the OpenVINO target takes one text per row; sentence-pair models are not supported")
    if not module.tokenizer.is_sentencepiece:
        raise OpenVinoExportError("the OpenVINO target's in-model tokenizer needs a SentencePiece vocabulary, not WordPiece")
    bad = _digit_comma_pieces(module.tokenizer)
    if bad:
        raise OpenVinoExportError(
            f"the vocabulary has pieces ending in a digit and ',' ({bad[0]!r}, ...) that the tokenizer's digit-comma rule "
            "splits; openvino_tokenizers has no such rule, so the OpenVINO model would tokenize differently"
        )


def token_model(module):
    """The `tokens` computation of `module` as an `openvino.Model` (token ids in, `[-1, -1]`)."""
    from albert_tf.export.tflite import token_function

    from albert_tf import fused_ops

    ov = require_openvino()
    with fused_ops.openvino_form():  # LayerNorms as MVN, dense layers on 3-D tensors
        function = token_function(module)
    try:
        model = ov.convert_model(function)
    except Exception as e:  # the frontend raises OpConversionFailure and plain RuntimeErrors
        first = next((line for line in str(e).splitlines() if line.strip()), type(e).__name__)
        raise OpenVinoExportError(f"OpenVINO conversion of the {module.kind} model failed: {first}") from None
    _name_outputs(model, function)
    if module.labels is not None:
        _fix_label_table(model, module.labels)
    return model


def _name_outputs(model, function) -> None:
    """Names the converted outputs as the SavedModel's signature names them. The frontend names an
    output after its tensor, and a tensor that is also an op's output (`logits`, the classifier's
    MatMul once its bias is folded) can come out named after the op, so the names are set from
    the function's structured outputs (the converted outputs are in their flattened order)."""
    keys = sorted(function.structured_outputs)  # tf.nest flattens a dict by sorted key
    if len(keys) != len(model.outputs):
        raise OpenVinoExportError(f"the converted model has {len(model.outputs)} outputs, the signature {len(keys)}")
    for key, output in zip(keys, model.outputs):
        output.get_tensor().set_names({key})


def _fix_label_table(model, labels: Sequence[str]) -> None:
    """Puts the labels back into the converted label table: the TF frontend writes each string
    constant's Python repr (`b'pos'` for `pos`)."""
    import openvino as ov

    for node in model.get_ops():
        if node.get_type_name() == "Constant" and node.get_output_element_type(0) == ov.Type.string:
            values = [str(v) for v in node.get_value_strings()]
            if values in ([repr(label.encode("utf-8")) for label in labels], list(labels)):
                # A Constant of a string Tensor (opset's `constant` of a str array crashes).
                node.output(0).replace(ov.op.Constant(ov.Tensor(np.array(list(labels), dtype=str))).output(0))
                return
    raise OpenVinoExportError("the converted classifier has no label table (OpenVINO's TF frontend changed)")


def _regex(outputs, pattern: str, replacement: str):
    from openvino_tokenizers.tokenizer_pipeline import RegexNormalizationStep

    return RegexNormalizationStep(pattern, replacement).get_ov_subgraph(outputs)


def _pieces(tokenizer, text):
    """`(dense ids [B, L], lengths [B])` of the SentencePiece pieces of the string tensor `text`."""
    from openvino import opset15 as ops
    from openvino_tokenizers import _get_factory
    from openvino_tokenizers.tokenizer_pipeline import CaseFoldStep, NormalizeUnicode

    from albert_tf.tokenization import unicode_classes

    # The preprocessing of `AlbertTokenizerLayer._sentencepiece_preprocess`, step by step.
    unpacked = _get_factory().create("StringTensorUnpack", [text]).outputs()
    unpacked = _regex(unpacked, unicode_classes.re2_class("isspace") + "+", " ")
    unpacked = _regex(unpacked, "^ | $", "")
    if tokenizer.normalize_quotes:
        unpacked = _regex(_regex(unpacked, "``", '"'), "''", '"')
    if not tokenizer.keep_accents:
        unpacked = NormalizeUnicode("NFKD").get_ov_subgraph(unpacked)
        unpacked = _regex(unpacked, unicode_classes.re2_class("combining"), "")
    if tokenizer.lower_case:
        unpacked = CaseFoldStep().get_ov_subgraph(unpacked)
    proto = ops.constant(np.frombuffer(tokenizer.model_proto, dtype=np.uint8))
    sparse = _get_factory().create(
        "SentencepieceTokenizer", [proto.output(0), *unpacked],
        {"add_bos": False, "add_eos": False, "reverse": False, "alpha": 1.0, "nbest_size": 1},
    )
    indices, values, dense_shape = sparse.outputs()
    zeros = ops.broadcast(ops.constant(np.int32(tokenizer.pad_id)), dense_shape)
    ids = ops.scatter_nd_update(zeros, indices, values)
    ones = ops.broadcast(ops.constant(np.int32(1)), ops.shape_of(values))
    present = ops.scatter_nd_update(ops.broadcast(ops.constant(np.int32(0)), dense_shape), indices, ones)
    lengths = ops.reduce_sum(present, ops.constant(np.int64(1)), keep_dims=False)
    return ids, lengths


def tokenizer_outputs(tokenizer, text) -> Dict[str, Any]:
    """`input_ids`, `input_mask`, `segment_ids` (int32 `[B, W]`) of the string tensor `text`, packed as
    `AlbertTokenizerLayer` packs one text: `[CLS]`, at most `sequence_length - 2` pieces, `[SEP]`."""
    from openvino import opset15 as ops

    ids, lengths = _pieces(tokenizer, text)
    room = tokenizer.sequence_length - 2
    ids = ops.slice(ids, ops.constant(np.int64([0])), ops.constant(np.int64([room])), ops.constant(np.int64([1])), ops.constant(np.int64([1])))
    lengths = ops.minimum(lengths, ops.constant(np.int32(room)))
    batch = ops.gather(ops.shape_of(ids, "i64"), ops.constant(np.int64([0])), ops.constant(np.int64(0)))
    column = ops.concat([batch, ops.constant(np.int64([1]))], 0)
    cls = ops.broadcast(ops.constant(np.int32(tokenizer.cls_id)), column)
    pad = ops.broadcast(ops.constant(np.int32(tokenizer.pad_id)), column)
    packed = ops.concat([cls, ids, pad], 1)
    width = ops.gather(ops.shape_of(packed, "i32"), ops.constant(np.int32(1)), ops.constant(np.int32(0)))
    positions = ops.unsqueeze(ops.range(ops.constant(np.int32(0)), width, ops.constant(np.int32(1)), "i32"), ops.constant(np.int64(0)))
    ends = ops.unsqueeze(ops.add(lengths, ops.constant(np.int32(1))), ops.constant(np.int64(1)))
    input_ids = ops.select(ops.equal(positions, ends), ops.constant(np.int32(tokenizer.sep_id)), packed)
    input_mask = ops.convert(ops.less_equal(positions, ends), "i32")
    return {"input_ids": input_ids.output(0), "input_mask": input_mask.output(0),
            "segment_ids": ops.multiply(input_mask, ops.constant(np.int32(0))).output(0)}


def tokenizer_model(tokenizer):
    """An `openvino.Model` from `text` (string `[-1]`) to the packed token ids (for checks and clients)."""
    ov = require_openvino()
    text = ov.opset15.parameter([-1], ov.Type.string, name="text")
    outputs = tokenizer_outputs(tokenizer, text.output(0))
    results = []
    for name, output in outputs.items():
        result = ov.opset15.result(output)
        result.output(0).set_names({name})
        results.append(result)
    return ov.Model(results, [text], "albert_tokenizer")


def text_model(tokenizer, ids_model):
    """`ids_model` (token ids in) behind the in-model tokenizer: one model taking `text`."""
    ov = require_openvino()
    text = ov.opset15.parameter([-1], ov.Type.string, name="text")
    text.output(0).set_names({"text"})
    outputs = tokenizer_outputs(tokenizer, text.output(0))
    for parameter in ids_model.get_parameters():
        source = outputs[parameter.output(0).get_any_name()]
        for target in parameter.output(0).get_target_inputs():
            target.replace_source_output(source)
    model = ov.Model(ids_model.get_results(), [text], "albert_text")
    model.validate_nodes_and_infer_types()
    return model


# --- calibration texts --------------------------------------------------------------------------


def read_calibration_texts(path: str, read_directory=None) -> List[str]:
    """The calibration texts at `path`: a file of texts, one per line, or a task data directory
    read by `read_directory(path)` (the caller's task family: its training texts). At most
    `CALIBRATION_SIZE` are kept.

    Raises:
      OpenVinoExportError: a missing path, a directory without a reader, or no text in it.
    """
    if os.path.isdir(path):
        if read_directory is None:
            raise OpenVinoExportError(f"{path} is a directory: calibration from a data directory needs the model directory's task")
        try:
            texts = [t for t in read_directory(path) if t]
        except (OSError, ValueError) as e:
            raise OpenVinoExportError(f"cannot read calibration texts from {path}: {str(e).splitlines()[0]}") from None
    elif os.path.isfile(path):
        with open(path, encoding="utf-8", errors="replace") as f:
            texts = [line.strip() for line in f if line.strip()]
    else:
        raise OpenVinoExportError(f"calibration texts: {path} does not exist")
    if not texts:
        raise OpenVinoExportError(f"calibration texts: {path} holds no text")
    return texts[:CALIBRATION_SIZE]


def default_calibration_path(model_dir: str) -> Optional[str]:
    """The training data directory a model directory records (`finetuning.json`'s `metadata.data`,
    written by `albert-tf finetune`), when it still exists; else None."""
    import json

    try:
        with open(os.path.join(model_dir, "finetuning.json"), encoding="utf-8") as f:
            data = json.load(f).get("metadata", {}).get("data")
    except (OSError, ValueError, AttributeError):
        return None
    return data if isinstance(data, str) and os.path.isdir(data) else None


def _token_batches(tokenizer, texts: Sequence[str], batch: int) -> List[Dict[str, np.ndarray]]:
    import tensorflow as tf

    batches = []
    for start in range(0, len(texts), batch):
        packed = tokenizer.tokenize_and_pack(tf.constant(list(texts[start:start + batch])))
        batches.append({k: v.numpy().astype(np.int32) for k, v in packed.items()})
    return batches


def quantize(ids_model, tokenizer, texts: Sequence[str]):
    """`ids_model` quantized to int8 by NNCF (transformer preset) on the token ids of `texts`.

    Without SmoothQuant: its activation scales, folded into the weights of the converted
    TensorFlow graph, leave the CPU plugin a scale per input channel that its int8 FullyConnected
    kernel does not take, and it runs those matmuls in its slower legacy quantized form (ALBERT-base,
    one 48-piece text on 2 AMX cores: FullyConnected 7.8 -> 4.7 ms, the request 10.4 -> 7.8 ms)."""
    nncf = _require_nncf()
    batches = _token_batches(tokenizer, texts, CALIBRATION_BATCH)
    no_smooth_quant = nncf.AdvancedQuantizationParameters(
        smooth_quant_alphas=nncf.AdvancedSmoothQuantParameters(matmul=-1))
    try:
        return nncf.quantize(
            ids_model, nncf.Dataset(batches), model_type=nncf.ModelType.TRANSFORMER,
            subset_size=len(batches), preset=nncf.QuantizationPreset.MIXED, advanced_parameters=no_smooth_quant,
        )
    except Exception as e:  # NNCF raises its own error types and RuntimeErrors alike
        first = next((line for line in str(e).splitlines() if line.strip()), type(e).__name__)
        raise OpenVinoExportError(f"NNCF int8 quantization failed: {first}") from None


# --- running and checking -------------------------------------------------------------------------


def compile_options(mode: Optional[str], num_threads: Optional[int] = None) -> Dict[str, str]:
    """The CPU plugin properties of a mode (`PRECISION_HINTS`) and a thread count."""
    options = {}
    hint = PRECISION_HINTS.get(mode) if mode else None
    if hint:
        options["INFERENCE_PRECISION_HINT"] = hint
    if num_threads:
        options["INFERENCE_NUM_THREADS"] = str(int(num_threads))
    return options


def compile_model(path: str, mode: Optional[str] = None, num_threads: Optional[int] = None):
    """A fresh `Core().compile_model` of the IR at `path` on CPU (mode: the IR's own when None)."""
    ov = require_openvino()
    core = ov.Core()
    model = core.read_model(path)
    if mode is None and model.has_rt_info(["albert_tf", "mode"]):
        mode = model.get_rt_info(["albert_tf", "mode"]).astype(str)
    return core.compile_model(model, "CPU", compile_options(mode, num_threads))


def runtime_precisions(compiled) -> Dict[str, Any]:
    """What precision the compiled model's ops actually run in: `{"ops": {precision: count},
    "matmuls": {precision: count}}` (matmuls: the `FullyConnected` / `MatMul` layers)."""
    ops, matmuls = collections.Counter(), collections.Counter()
    for op in compiled.get_runtime_model().get_ops():
        info = op.get_rt_info()
        if "runtimePrecision" not in info:
            continue
        precision = info["runtimePrecision"].astype(str)
        layer = info["layerType"].astype(str) if "layerType" in info else op.get_type_name()
        ops[precision] += 1
        if layer in ("FullyConnected", "MatMul"):
            matmuls[precision] += 1
    return {"ops": dict(sorted(ops.items())), "matmuls": dict(sorted(matmuls.items()))}


def run_text(compiled, texts: Sequence[str]) -> Dict[str, np.ndarray]:
    """`{output name: array}` of a compiled text model on `texts`."""
    # OpenVINO takes str arrays (not object ones); bytes are decoded as the SavedModel decodes them.
    strings = [t.decode("utf-8", "replace") if isinstance(t, bytes) else str(t) for t in texts]
    result = compiled({"text": np.array(strings, dtype=str)})
    return {output.get_any_name(): np.asarray(result[output]) for output in compiled.outputs}


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    norms = np.linalg.norm(a) * np.linalg.norm(b)
    if norms == 0:
        return 1.0 if not a.any() and not b.any() else 0.0
    return float(a @ b / norms)


def compare_outputs(reference: Dict[str, np.ndarray], got: Dict[str, np.ndarray], mode: str) -> Dict[str, Any]:
    """Per float output `max_abs_diff` and `cosine`, and `argmax_agreement` (classifiers), checked
    against `TOLERANCES[mode]`.

    Raises:
      OpenVinoExportError: an output is missing or has another shape, or the tolerance is missed.
    """
    tolerance = TOLERANCES[mode]
    stats: Dict[str, Any] = {}
    for name, ref in sorted(reference.items()):
        if name not in got:
            raise OpenVinoExportError(f"the OpenVINO model has no output {name!r} (it has {sorted(got)})")
        value = got[name]
        if ref.shape != value.shape:
            raise OpenVinoExportError(f"OpenVINO output {name} has shape {list(value.shape)}, the SavedModel's {list(ref.shape)}")
        if ref.dtype.kind != "f":
            continue
        diff = float(np.max(np.abs(ref - value))) if ref.size else 0.0
        stats[name] = {"max_abs_diff": diff, "cosine": _cosine(ref, value)}
        if "relative_max_abs_diff" in tolerance:
            scale = max(1.0, float(np.max(np.abs(ref))) if ref.size else 1.0)
            if not diff <= tolerance["relative_max_abs_diff"] * scale:
                raise OpenVinoExportError(f"OpenVINO {mode} output {name} differs by {diff:.3g} from the SavedModel's")
        else:
            if not stats[name]["cosine"] >= tolerance["min_cosine"]:
                raise OpenVinoExportError(
                    f"OpenVINO {mode} output {name} has cosine {stats[name]['cosine']:.5f} to the SavedModel's "
                    f"(< {tolerance['min_cosine']})"
                )
            if name == "probabilities" and not diff <= tolerance["probabilities_max_abs_diff"]:
                raise OpenVinoExportError(f"OpenVINO {mode} output {name} differs by {diff:.3g} from the SavedModel's")
    if "label_id" in reference:
        agreement = float(np.mean(reference["label_id"] == got["label_id"])) if reference["label_id"].size else 1.0
        stats["argmax_agreement"] = agreement
        if agreement < tolerance["min_argmax_agreement"]:
            raise OpenVinoExportError(
                f"OpenVINO {mode} model picks the SavedModel's class on {agreement:.1%} of the check texts "
                f"(< {tolerance['min_argmax_agreement']:.0%})"
            )
    return stats


# --- writing ----------------------------------------------------------------------------------------


def _reference(module, texts: Sequence[str]) -> Dict[str, np.ndarray]:
    """The SavedModel's `tokens` answers on our tokenizer's ids of `texts`."""
    import tensorflow as tf

    tokens = module.signatures()["tokens"]
    packed = module.tokenizer.tokenize_and_pack(tf.constant(list(texts)))
    return {k: v.numpy() for k, v in tokens(**{k: packed[k] for k in module.token_keys}).items()}


def _tensor_info(ports) -> Dict[str, Dict[str, Any]]:
    return {
        port.get_any_name(): {"dtype": port.get_element_type().get_type_name(),
                              "shape": [d.get_length() if d.is_static else -1 for d in port.get_partial_shape()]}
        for port in sorted(ports, key=lambda p: p.get_any_name())
    }


def _accuracy(module, compiled, check_data) -> Dict[str, Any]:
    import tensorflow as tf

    from albert_tf.export.accuracy_check import AccuracyCheckError, check_accuracy

    text_function = module.signatures()["serving_default"]

    def reference(texts, _texts_b):
        return text_function(text=tf.constant(list(texts)))["probabilities"].numpy()

    def candidate(texts, _texts_b):
        return run_text(compiled, texts)["probabilities"]

    try:
        return check_accuracy(reference, candidate, check_data, what="OpenVINO model")
    except AccuracyCheckError as e:
        raise OpenVinoExportError(str(e)) from None


def write_openvino(directory: str, module, mode: str, *, calibration_texts: Optional[Sequence[str]] = None,
                   check_texts: Sequence[str] = (), check_data=None) -> Dict[str, Any]:
    """Writes `<directory>/model.xml` + `model.bin` (the text model of `module` in `mode`), reloads
    and checks it (module docstring).

    Args:
      directory: the (staged) IR version directory; created.
      module: the `ServingModule` of the export.
      mode: "int8", "bf16" or "f32".
      calibration_texts: int8: NNCF's calibration texts (required); the first ones are check texts too.
      check_texts: texts the answers are compared on (with the first calibration texts).
      check_data: `LabelledTexts` for the accuracy check (classifiers), or None.

    Returns:
      `export.json`'s `openvino` entry.

    Raises:
      OpenVinoExportError: a refused request (`check_request`), a failed conversion or quantization,
        or a missed tolerance or accuracy.
    """
    check_request(module, mode, calibration_texts)
    ov = require_openvino()
    ids_model = token_model(module)
    if mode == MODE_INT8:
        ids_model = quantize(ids_model, module.tokenizer, calibration_texts)
    model = text_model(module.tokenizer, ids_model)
    # The mode travels in the IR: `compile_model` (and so the servable) sets its precision hint from
    # it, as OVMS's config.json does; a plain `Core.compile_model` would run f32 as bf16 on AMX CPUs.
    model.set_rt_info(mode, ["albert_tf", "mode"])
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, MODEL_XML)
    # f32 weights: compressing to f16 would be a second, unrecorded rounding.
    ov.save_model(model, path, compress_to_fp16=False)
    compiled = compile_model(path, mode)
    texts = list(check_texts) + list((calibration_texts or [])[:CHECK_TEXTS_FROM_CALIBRATION])
    stats = compare_outputs(_reference(module, texts), run_text(compiled, texts), mode) if texts else {}
    info = {
        "dir": f"{OPENVINO_BASE}/<model_name>/<version>",
        "files": [MODEL_XML, MODEL_BIN],
        "mode": mode,
        "inference_precision_hint": compiled.get_property("INFERENCE_PRECISION_HINT").to_string()
        if hasattr(compiled.get_property("INFERENCE_PRECISION_HINT"), "to_string") else str(compiled.get_property("INFERENCE_PRECISION_HINT")),
        "runtime_precisions": runtime_precisions(compiled),
        "openvino_version": ov.get_version(),
        "inputs": _tensor_info(compiled.inputs),
        "outputs": _tensor_info(compiled.outputs),
        "tolerance": TOLERANCES[mode],
        "check": {"texts": len(texts), **stats},
        "bytes": {name: os.path.getsize(os.path.join(directory, name)) for name in (MODEL_XML, MODEL_BIN)},
    }
    if mode == MODE_INT8:
        info["calibration"] = {"texts": len(calibration_texts), "model_type": "transformer", "preset": "mixed",
                               "smooth_quant": False}
    if check_data is not None and module.kind == "classification":
        info["accuracy"] = _accuracy(module, compiled, check_data)
    return info


# --- publishing and OVMS's configuration -----------------------------------------------------------


@contextlib.contextmanager
def staged_version(export_base: str, model_name: str, version: int) -> Iterator[str]:
    """A staging directory that becomes the IR version directory when the block succeeds (and is
    removed when it fails); an existing version is never overwritten."""
    from albert_tf import file_io

    if model_name == OPENVINO_BASE:
        raise OpenVinoExportError(f"a model named {OPENVINO_BASE!r} would be the OpenVINO model repository: pick another name")
    final = version_dir(export_base, model_name, version)
    if os.path.exists(final):
        raise OpenVinoExportError(f"{final} exists: a served version is never overwritten; pick another version")
    os.makedirs(os.path.dirname(final), exist_ok=True)
    with file_io.staged_directory(final, prefix=f".tmp-openvino-{version}-") as staging:
        yield staging


def _latest_mode(export_base: str, model_name: str, version: int) -> Optional[str]:
    """The OpenVINO mode export.json records for a SavedModel version, None without one."""
    import json

    path = os.path.join(export_base, model_name, str(version), "assets", "export.json")
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)["openvino"]["mode"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def ovms_config(export_base: str, container_base: str = "/models") -> Dict[str, Any]:
    """OVMS's multi-model configuration (`--config_path`) for every model of `<export_base>/openvino/`
    that has an integer version, served from `<container_base>/openvino/<model_name>` on CPU with the
    inference precision hint of its latest version (`PRECISION_HINTS`).

    Raises:
      OpenVinoExportError: no OpenVINO model under `export_base`.
    """
    from albert_tf.export.serving_config import model_versions

    root = os.path.join(export_base, OPENVINO_BASE)
    names = sorted(n for n in os.listdir(root) if not n.startswith(".") and model_versions(os.path.join(root, n))) \
        if os.path.isdir(root) else []
    if not names:
        raise OpenVinoExportError(f"{root} holds no OpenVINO model with an integer version directory")
    models = []
    for name in names:
        config: Dict[str, Any] = {
            "name": name,
            "base_path": f"{container_base.rstrip('/')}/{OPENVINO_BASE}/{name}",
            "target_device": "CPU",
            "model_version_policy": {"latest": {"num_versions": 1}},
        }
        hint = PRECISION_HINTS.get(_latest_mode(export_base, name, model_versions(os.path.join(root, name))[-1]))
        if hint:
            config["plugin_config"] = {"INFERENCE_PRECISION_HINT": hint}
        models.append({"config": config})
    return {"model_config_list": models}


def write_ovms_config(export_base: str, container_base: str = "/models") -> str:
    """Writes `<export_base>/openvino/config.json` (`ovms_config`) atomically; returns its path."""
    import json

    from albert_tf import file_io

    path = os.path.join(export_base, OPENVINO_BASE, OVMS_CONFIG_FILE)
    file_io.atomic_write_text(path, json.dumps(ovms_config(export_base, container_base), indent=2, sort_keys=True) + "\n")
    return path
