"""`export_saved_model`: a model + its in-graph tokenizer as a TF Serving SavedModel version.

The layout is TF Serving's: `<export_base>/<model_name>/<version>/` with

* `saved_model.pb` + `variables/`: the signatures of `albert_tf.export.signatures` (raw text in,
  tokenization in the graph), with TF Serving's method names on `classify` / `regress` (TF2's
  `tf.saved_model.save` writes `tensorflow/serving/predict` on every signature, so the
  SignatureDefs are rewritten after saving);
* `assets/`: the vocabulary (`spiece.model` or `vocab.txt`), `albert_config.json`,
  `export.json` (kind, labels, sequence length, tokenizer settings), for provenance, and
  `weights.json` (`albert_tf.weight_index`: which Keras weight each checkpointed variable
  is, so that `from_pretrained`, `--init` and the pipeline's warm start read a version back);
* `assets.extra/tf_serving_warmup_requests`: one warmup request per signature, and for a
  length-aware export without `tflite=` (`length_bucket`, default 16) one per length bucket of each text signature.
  With a `model.tflite` only the `tokens` request, which TF Serving replays on it too;
* with `tflite=`, `model.tflite`: the `tokens` computation as a LiteRT model with builtin ops
  only, for TF Serving's `--prefer_tflite_model` (`albert_tf.export.tflite`), checked against the
  `tokens` signature and described in `export.json`'s `tflite`;
* with `openvino=`, the same version as an OpenVINO IR (raw text in) in OVMS's layout,
  `<export_base>/openvino/<model_name>/<version>/` (`albert_tf.export.openvino`), checked against
  the SavedModel and described in `export.json`'s `openvino`, and OVMS's `openvino/config.json`.

A bf16 export (`precision="mixed_bfloat16"`, `albert_tf.export.precision.export_form`) stores its
dense weights as bf16 variables; with `check_data` (a classifier's labelled texts) its reloaded
`serving_default` must score within half a point of the float32 graph's accuracy
(`albert_tf.export.accuracy_check`, recorded in `export.json`'s `accuracy_check`), else the export
is refused; without, it is compared with float32 at the reload only, at bf16's tolerance.

A version is written into a hidden temporary directory inside `<export_base>/<model_name>/` (not
an integer name, so TF Serving never loads it), checked (`albert_tf.export.compatibility`: ops,
and a fresh-process reload that must reproduce the in-memory outputs), and only then renamed to
its version number; a crash leaves no half version. `models.config` and
`batching_parameters.txt` for the export base are (re)written last.

The task-specific arguments of a fine-tuned model directory (`task.json`) come from the task
layer: `albert_tf.tasks.family.export_arguments`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import shutil
from typing import Any, Dict, List, Optional, Sequence, Union

import numpy as np

from albert_tf import file_io, weight_index
from albert_tf.export import accuracy_check, compatibility, serving_config, signatures, tflite as tflite_export, warmup
from albert_tf.export import openvino as openvino_export
from albert_tf.export import precision as export_precision
from albert_tf.tokenization.in_graph import DEFAULT_LENGTH_BUCKET

logger = logging.getLogger(__name__)

EXPORT_INFO_FILE = "export.json"
CONFIG_ASSET = "albert_config.json"
SENTENCEPIECE_ASSET = "spiece.model"
WORDPIECE_ASSET = "vocab.txt"
TEMP_PREFIX = ".tmp-export-"
# `albert_tf.tasks.classification.CLASSIFICATION`, the kind the accuracy check scores (the export
# imports no task module).
CLASSIFICATION = "classification"


class ExportError(ValueError):
    """An export that cannot be written as asked (bad name, existing version, failed check)."""


@dataclasses.dataclass
class ExportResult:
    """What `export_saved_model` wrote.

    Attributes:
      path: the version directory.
      version: its integer version.
      signatures: `{signature key: method name}`.
      ops_report: the op check's report.
      serving_configs: paths of `models.config`, `batching_parameters.txt` and `serving.env`.
      tflite: `export.json`'s `tflite` entry when a `model.tflite` was written, else None.
      openvino: `export.json`'s `openvino` entry when an OpenVINO IR was written, else None.
      accuracy_check: `export.json`'s `accuracy_check` entry when `check_data` was scored, else None.
    """

    path: str
    version: int
    signatures: Dict[str, str]
    ops_report: compatibility.CompatibilityReport
    serving_configs: Dict[str, str]
    tflite: Optional[Dict[str, Any]] = None
    openvino: Optional[Dict[str, Any]] = None
    accuracy_check: Optional[Dict[str, Any]] = None


def _check_name(model_name: str) -> None:
    if not model_name or not all(c.isalnum() or c in "-_." for c in model_name) or model_name.startswith("."):
        raise ExportError(f"model_name must be letters, digits, '-', '_' or '.', not starting with '.', got {model_name!r}")


def next_version(model_dir: str) -> int:
    """One more than the largest integer version in `model_dir` (1 for none)."""
    versions = serving_config.model_versions(model_dir)
    return versions[-1] + 1 if versions else 1


def set_method_names(saved_model_dir: str, method_names: Dict[str, str]) -> None:
    """Rewrites the SignatureDefs' method names in `saved_model.pb` (atomically)."""
    from tensorflow.core.protobuf import saved_model_pb2

    path = os.path.join(saved_model_dir, "saved_model.pb")
    saved_model = saved_model_pb2.SavedModel()
    with open(path, "rb") as f:
        saved_model.ParseFromString(f.read())
    for meta_graph in saved_model.meta_graphs:
        for key, method in method_names.items():
            if key not in meta_graph.signature_def:
                raise ExportError(f"signature {key!r} is not in {path}")
            meta_graph.signature_def[key].method_name = method
    file_io.atomic_write_bytes(path, saved_model.SerializeToString(deterministic=True))


def _write_assets(directory: str, module: signatures.ServingModule, extra_assets: Sequence[str],
                  task_spec: Optional[Dict] = None) -> None:
    assets = os.path.join(directory, "assets")
    os.makedirs(assets, exist_ok=True)
    tokenizer = module.tokenizer
    config = tokenizer.get_config()
    if tokenizer.is_sentencepiece:
        vocab_file = SENTENCEPIECE_ASSET
        with open(os.path.join(assets, vocab_file), "wb") as f:
            f.write(tokenizer.model_proto)
    else:
        vocab_file = WORDPIECE_ASSET
        with open(os.path.join(assets, vocab_file), "w", encoding="utf-8") as f:
            f.write("\n".join(config["wordpiece_vocab"]) + "\n")
    encoder = module.encoder
    encoder.to_albert_config().to_json_file(os.path.join(assets, CONFIG_ASSET))
    info = {
        "kind": module.kind,
        "labels": module.labels,
        "pair": module.pair,
        "sequence_length": module.sequence_length,
        "length_bucket": module.length_bucket,
        "length_chunk": module.length_chunk,
        "tokenizer": {
            "type": "sentencepiece" if tokenizer.is_sentencepiece else "wordpiece",
            "file": vocab_file,
            "lower_case": tokenizer.lower_case,
            "keep_accents": tokenizer.keep_accents,
            "normalize_quotes": tokenizer.normalize_quotes,
        },
        "signatures": module.signatures_keys(),
        "qa": module.qa_settings,
        "dtype_policy": export_precision.model_precision(module.model),
        "precision": export_precision.model_precision(module.model),
        # What the SavedModel's variables hold: a bf16 export stores its dense weights in bf16.
        "variable_dtypes": export_precision.variable_dtypes(module.exported_variables),
    }
    if module.task_settings is not None:  # token classifiers and multiple choice only
        info["task_settings"] = module.task_settings
    with open(os.path.join(assets, EXPORT_INFO_FILE), "w", encoding="utf-8") as f:
        json.dump(info, f, indent=2, sort_keys=True, ensure_ascii=False)
        f.write("\n")
    weight_index.write_weight_index(assets, module.exported_variables, module.model, encoder)
    if task_spec is not None:
        file_io.atomic_write_json(os.path.join(assets, "task.json"), task_spec)
    for path in extra_assets:
        shutil.copyfile(path, os.path.join(assets, os.path.basename(path)))


def _in_memory_outputs(module: signatures.ServingModule, inputs: Dict[str, Dict[str, np.ndarray]]) -> Dict[str, Dict[str, np.ndarray]]:
    import tensorflow as tf

    functions = module.signatures()
    outputs = {}
    for key, values in inputs.items():
        result = functions[key](**{k: tf.constant(v) for k, v in values.items()})
        outputs[key] = {k: v.numpy() for k, v in result.items()}
    return outputs


@contextlib.contextmanager
def _openvino_beside(staging, module, mode, export_base, model_name, version, calibration, check_data):
    """Writes and checks the OpenVINO IR of the staged version (`albert_tf.export.openvino`) and
    records it in the staged `export.json`; the IR is published when the block exits cleanly."""
    from albert_tf.export.warmup import WARMUP_TEXTS

    try:
        with openvino_export.staged_version(export_base, model_name, version) as directory:
            info = openvino_export.write_openvino(
                directory, module, mode, calibration_texts=calibration, check_texts=WARMUP_TEXTS, check_data=check_data)
            info["dir"] = f"{openvino_export.OPENVINO_BASE}/{model_name}/{version}"
            _add_export_info(staging, openvino=info)
            yield info
    except openvino_export.OpenVinoExportError as e:
        raise ExportError(str(e)) from None


def export_saved_model(
    model,
    tokenizer_layer,
    export_base: str,
    model_name: str,
    version: Optional[int] = None,
    labels: Optional[Sequence[str]] = None,
    *,
    pair: bool = False,
    qa_settings: Optional[Dict] = None,
    task_settings: Optional[Dict] = None,
    extra_assets: Sequence[str] = (),
    task_spec: Optional[Dict] = None,
    precision: Optional[str] = None,
    check: bool = True,
    batching: Optional[serving_config.BatchingConfig] = None,
    container_base: str = "/models",
    length_bucket: Optional[int] = DEFAULT_LENGTH_BUCKET,
    length_chunk: Union[int, str, None] = signatures.AUTO,
    tflite: Optional[str] = None,
    openvino: Optional[str] = None,
    openvino_calibration: Optional[Sequence[str]] = None,
    check_data: Optional[accuracy_check.LabelledTexts] = None,
) -> ExportResult:
    """Exports `model` with in-graph tokenization as `<export_base>/<model_name>/<version>/`.

    Args:
      model: an `AlbertForClassification`, `AlbertForRegression`, `AlbertEncoder`, `AlbertPretrainer`,
        `AlbertForSquadV1`, `AlbertForSquadV2`, `AlbertForTagging` or `AlbertForMultipleChoice`
        (built; its weights are what is exported). The signatures follow the model's kind
        (`albert_tf.export.signatures`).
      tokenizer_layer: the `AlbertTokenizerLayer` of the training preprocessing (vocabulary,
        casing, sequence length).
      export_base: the TF Serving model base directory (local path).
      model_name: the served model name (the directory under `export_base`).
      version: the integer version; default one more than the largest existing one.
      labels: class labels in id order (classifiers); the tags in id order (token
        classifiers, required).
      pair: text signatures take `text` and `text_b` (sentence-pair tasks).
      qa_settings: SQuAD models: the conversion and post-processing settings (task.json's
        `settings`: `doc_stride`, `max_query_length`, `n_best_size`, `max_answer_length`,
        `null_score_diff_threshold`); see `albert_tf.tasks.squad.serving`.
      task_settings: token classifiers: `token_unit` ("word" / "char", see
        `albert_tf.tasks.tagging.serving`); multiple-choice models: `max_qa_length` (see
        `albert_tf.tasks.multiple_choice.serving`).
      extra_assets: more files to copy into `assets/` (e.g. a model directory's `task.json`).
      precision: the graph's precision, "float32" or "mixed_bfloat16" (`albert_tf.export.precision`),
        whatever the model was trained in; default the model's. "mixed_bfloat16" exports bf16
        dense weights read without casts, LayerNorm and softmax in float32
        (`precision.export_form`). Recorded in export.json (`precision`, and `variable_dtypes`:
        the saved variables by dtype), and the reload check compares at its tolerance.
      task_spec: the `task.json` to write into `assets/` (a `TaskSpec` as a dict) when no
        `extra_assets` file brings one: what `from_pretrained` rebuilds the whole model from.
      check: run the compatibility check (ops + fresh-process reload); on by default, as TF
        Serving would otherwise be the first to find a broken export.
      batching: the `batching_parameters.txt` settings.
      container_base: where the server mounts `export_base` (for `models.config`).
      length_bucket: length-aware packing: the text signatures pad a batch to its longest row
        rounded up to a multiple of this (same answers, less work for short texts) and the
        `tokens` signatures take ids of any length up to the sequence length; None exports the
        fixed-length graphs (every row padded to the sequence length). Recorded in export.json.
      length_chunk: a length-aware classifier's or regressor's text signatures compute a batch in
        length-sorted chunks of this many rows, each padded to its own longest (same answers,
        less padding; `albert_tf.export.signatures`); None: the batch at once; "auto" (default):
        8 for a model with enough work per token (`signatures.auto_length_chunk`), else None.
        Recorded in export.json (null where it does not apply).
      tflite: also write `model.tflite` of the token-ids function, in this mode
        ("dynamic-int8" or "float32", `albert_tf.export.tflite`), checked against `tokens`. A bf16
        export's is converted from (and checked against) the float32 graph of the same weights:
        LiteRT's builtins have no bfloat16.
      check_data: for a bf16 export of a classifier, labelled texts (class ids) that the exported
        `serving_default` (reloaded, as served) and the float32 graph both score; the export is
        refused when its accuracy is more than half a point below float32's
        (`albert_tf.export.accuracy_check`), else the record goes into export.json's
        `accuracy_check`. Without it a bf16 export is checked only at the reload tolerance
        (`precision.TOLERANCES`). Not run for a float32 export (it is the reference).

    Returns:
      An `ExportResult`.

    Raises:
      ExportError: a bad name or version, an existing version, a failed check, or a TFLite or
        OpenVINO model that cannot be written or misses its tolerance (nothing is published then).
      TypeError: an unsupported model.
    """

    _check_name(model_name)
    model_dir = os.path.join(export_base, model_name)
    os.makedirs(model_dir, exist_ok=True)
    if version is None:
        version = next_version(model_dir)
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        raise ExportError(f"version must be a non-negative integer, got {version!r}")
    final = os.path.join(model_dir, str(version))
    if os.path.exists(final):
        raise ExportError(f"{final} exists: a served version is never overwritten; pick another version")
    try:
        exported = export_precision.export_form(model, precision)
        if openvino is not None:
            openvino_export.check_mode(openvino, openvino_calibration)
    except ValueError as e:  # OpenVinoExportError is one
        raise ExportError(str(e)) from None
    module_kwargs = dict(labels=labels, pair=pair, qa_settings=qa_settings, task_settings=task_settings,
                         length_bucket=length_bucket, length_chunk=length_chunk)
    module = signatures.ServingModule(exported, tokenizer_layer, **module_kwargs)
    lower_precision = export_precision.model_precision(exported) != export_precision.FLOAT32
    if check_data is not None and lower_precision and module.kind != CLASSIFICATION:
        raise ExportError(f"the accuracy check (check_data) is for classification models, not a {module.kind} export")
    # The float32 graph of the same weights: the accuracy check's reference, and what LiteRT converts
    # (its builtins have no bfloat16).
    reference = None
    if lower_precision and (tflite is not None or openvino is not None or check_data is not None):
        reference = signatures.ServingModule(export_precision.with_precision(model, export_precision.FLOAT32),
                                             tokenizer_layer, **module_kwargs)
    if tflite is not None:
        try:
            tflite_export.check_request(module, tflite)
        except tflite_export.TfliteExportError as e:
            raise ExportError(str(e)) from None
    if openvino is not None:
        try:
            openvino_export.check_request(module, openvino, openvino_calibration)
        except openvino_export.OpenVinoExportError as e:
            raise ExportError(str(e)) from None
    tflite_info = accuracy = openvino_info = None
    # Staged under a name that is no integer, so TF Serving never loads a half-written version.
    with contextlib.ExitStack() as stack:
        staging = stack.enter_context(file_io.staged_directory(final, prefix=f"{TEMP_PREFIX}{version}-", create=False))
        report = _write_and_check(staging, module, model_name, pair, extra_assets, task_spec, tflite, check)
        if check_data is not None and reference is not None:
            accuracy = _check_accuracy(staging, reference, check_data, pair)
            _add_export_info(staging, accuracy_check=accuracy)
        if tflite is not None:
            try:
                tflite_info = tflite_export.write_tflite(staging, reference or module, tflite)
            except tflite_export.TfliteExportError as e:
                raise ExportError(str(e)) from None
            _add_export_info(staging, tflite=tflite_info)
        if openvino is not None:
            # Entered last: the IR is published only after every check passed, just before the
            # SavedModel. It is converted from the float32 graph: OpenVINO applies its own precision.
            openvino_info = stack.enter_context(_openvino_beside(
                staging, reference or module, openvino, export_base, model_name, version, openvino_calibration,
                check_data))
    configs = serving_config.write_serving_configs(export_base, container_base, batching)
    if openvino is not None:
        configs["ovms_config"] = openvino_export.write_ovms_config(export_base, container_base)
    non_predict = module.method_names()
    method_names = {key: non_predict.get(key, signatures.PREDICT_METHOD) for key in module.signatures_keys()}
    logger.info("exported %s version %d to %s (signatures %s)", model_name, version, final, ", ".join(method_names))
    return ExportResult(final, version, method_names, report, configs, tflite_info, openvino_info, accuracy)


def _write_and_check(staging, module, model_name, pair, extra_assets, task_spec, tflite, check):
    """Saves `module` with its assets and warmup into `staging` and checks it (ops, and a fresh-process
    reload at the precision's tolerance); returns the ops report."""
    import tensorflow as tf

    functions = module.signatures()
    tf.saved_model.save(module, staging, signatures=functions)
    set_method_names(staging, module.method_names())
    _write_assets(staging, module, extra_assets, task_spec)
    meta_graph = compatibility.read_meta_graph(staging)
    inputs = warmup.warmup_inputs(meta_graph.signature_def, pair, module.sequence_length)
    # TF Serving replays the warmup on a preferred model.tflite too, whose one signature is
    # `tokens`: then the `tokens` request is the one both can run.
    if tflite is not None:
        logs = warmup.prediction_logs(model_name, meta_graph.signature_def, {"tokens": inputs["tokens"]})
    else:
        per_bucket = warmup.bucket_warmup_inputs(meta_graph.signature_def, module, pair)
        logs = warmup.prediction_logs(model_name, meta_graph.signature_def, inputs, per_bucket)
    warmup.write_warmup_file(staging, logs)
    report = compatibility.check_ops(staging)
    if check:
        if not report.ok:
            raise ExportError("the export is not servable by TF Serving 2.20:\n  " + "\n  ".join(report.problems))
        tolerance = export_precision.TOLERANCES[export_precision.model_precision(module.model)]
        try:
            compatibility.check_reload(staging, inputs, _in_memory_outputs(module, inputs), **tolerance)
        except compatibility.CompatibilityError as e:
            raise ExportError(str(e)) from None
    return report


def _add_export_info(staging: str, **entries) -> None:
    info_path = os.path.join(staging, "assets", EXPORT_INFO_FILE)
    with open(info_path, encoding="utf-8") as f:
        info = json.load(f)
    info.update(entries)
    file_io.atomic_write_text(info_path, json.dumps(info, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def signature_scorer(function, pair: bool, output: str = "logits") -> accuracy_check.Scorer:
    """A text signature of a classifier (`text`, and `text_b` for pairs) as the accuracy check's scorer."""
    import tensorflow as tf

    def score(texts, texts_b=None):
        feeds = {signatures.TEXT_KEY: tf.constant(list(texts))}
        if pair:
            feeds[signatures.TEXT_B_KEY] = tf.constant(list(texts_b))
        return function(**feeds)[output].numpy()

    return score


def _check_accuracy(staging: str, reference: signatures.ServingModule, data: accuracy_check.LabelledTexts,
                    pair: bool) -> Dict[str, Any]:
    """The staged graph's `serving_default`, loaded as TF Serving loads it, against the float32 graph's."""
    import tensorflow as tf

    if pair != (data.texts_b is not None):
        raise ExportError(f"the accuracy check's texts are {'pairs' if data.texts_b is not None else 'single'}, "
                          f"the model takes {'pairs' if pair else 'single texts'}")
    key = tf.saved_model.DEFAULT_SERVING_SIGNATURE_DEF_KEY
    served = tf.saved_model.load(staging).signatures[key]
    try:
        return accuracy_check.check_accuracy(
            signature_scorer(reference.signatures()[key], pair), signature_scorer(served, pair), data,
            what="bf16 graph",
        )
    except accuracy_check.AccuracyCheckError as e:
        raise ExportError(str(e)) from None


def read_export_info(saved_model_dir: str) -> Dict:
    """The `assets/export.json` of an exported version (`albert_tf.weight_index.read_export_info`)."""
    from albert_tf.weight_index import read_export_info as read

    return read(saved_model_dir)


def list_exports(export_base: str) -> List[str]:
    """`<model>/<version>` of every published version under `export_base`."""
    result = []
    if os.path.isdir(export_base):
        for name in sorted(os.listdir(export_base)):
            for version in serving_config.model_versions(os.path.join(export_base, name)):
                result.append(f"{name}/{version}")
    return result
