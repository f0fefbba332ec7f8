"""`albert-tf export`: a fine-tuned model directory or a pretrained encoder as a TF Serving SavedModel.

`--model-dir` takes the output of `albert-tf finetune` (classification / regression, SQuAD
v1/v2, tagging, multiple choice): its `model.keras`, tokenizer file and `task.json` give the model, the in-graph tokenizer
(same preprocessing and sequence length as training), the labels and whether inputs are pairs;
for SQuAD the conversion and post-processing settings (`doc_stride`, `max_query_length`,
`n_best_size`, `max_answer_length` and v2's tuned `null_score_diff_threshold`, 0 when none was
stored), so that `serving_default` answers `question` + `context` (`albert_tf.tasks.squad.serving`); for
tagging the tags and `token_unit` (entities with character spans, `albert_tf.tasks.tagging.serving`);
for multiple choice `max_qa_length` (`text`, `question`, `choices` in, `albert_tf.tasks.multiple_choice.serving`).
`--init` takes a pretrained encoder (any checkpoint `albert_tf.checkpoints.any_format` reads) with
`--config`, `--spm-model`/`--vocab-file` and `--sequence-length`, exported with the TF-Hub-style
`tokens` signature; a tokenizer whose size is not the encoder's `vocab_size` is refused (a smaller
one is accepted with `--allow-vocab-mismatch`). The version goes to
`<export-base>/<model-name>/<version>/`, atomically, after the TF Serving compatibility check;
`models.config`, `batching_parameters.txt` and `serving.env` (TF Serving's environment:
`TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1` when every model is a bf16 export) are written for the export
base. `--length-bucket N`
(default 16) exports length-aware signatures (a batch padded to its longest text rounded up to a
multiple of N); `--length-bucket 0` the fixed-length ones. `--length-chunk N|0|auto` (default auto:
8 for a model with enough work per token) makes a length-aware classifier's or regressor's text
signatures compute a batch in length-sorted chunks of N rows, each padded to its own longest
(`albert_tf.export.signatures`); 0 computes the batch at once. `--no-length-grouping` records in
`batching_parameters.txt` that `albert-tf serve` batches in arrival order rather than by length
bucket (`albert_tf.model_server.length_batching`). `--tflite
dynamic-int8` (or `float32`) also writes `model.tflite`, the token-ids model for TF Serving's
`--prefer_tflite_model` and in-process LiteRT (`albert_tf.export.tflite`). `--openvino int8|bf16|f32`
also writes the OpenVINO IR (raw text in) to `<export-base>/openvino/<model-name>/<version>/` with
OVMS's `openvino/config.json` (`albert_tf.export.openvino`); int8 is calibrated on
`--openvino-calibration` (a task data directory, whose train split is read, or a file of texts;
default: the training data `finetuning.json` records).

`--precision mixed_bfloat16` writes bf16 dense weights read without casts, LayerNorm and softmax in
float32 (`albert_tf.export.precision`), checked at the reload at bf16's tolerance. With
`--check-data DIR` (a classifier's `--model-dir`) the labelled `--check-split` (default dev) of the
task's data is scored by each lower-precision graph (bf16, OpenVINO) and the float32 one; more than
half a point of accuracy lost refuses the export (`albert_tf.export.accuracy_check`). The output's
`accuracy_check` says which check a bf16 export had.
"""

from __future__ import annotations

import argparse
import json
import os

from albert_tf.cli import CommandError, library_errors

NAME = "export"
HELP = "Export a fine-tuned model or an encoder as a TF Serving SavedModel (raw text in, tokenized in the graph)."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--model-dir", help="output directory of `albert-tf finetune` (any task)")
    source.add_argument("--init", help="pretrained encoder checkpoint (exports the encoder)")
    parser.add_argument("--export-base", required=True, help="TF Serving model base directory")
    parser.add_argument("--model-name", required=True, help="served model name")
    parser.add_argument("--version", type=int, help="integer version (default: next free)")
    parser.add_argument("--config", help="encoder architecture for --init (preset or albert_config.json)")
    parser.add_argument("--spm-model", help="SentencePiece model for --init")
    parser.add_argument("--vocab-file", help="WordPiece vocab.txt for --init")
    parser.add_argument("--no-lower-case", action="store_true", help="for --init: the vocabulary is cased")
    parser.add_argument("--sequence-length", type=int, default=128, help="for --init: packed input length (default 128)")
    parser.add_argument(
        "--allow-vocab-mismatch", action="store_true",
        help="for --init: accept a tokenizer with fewer tokens than the encoder's vocab_size (a larger one is always refused)",
    )
    parser.add_argument("--max-batch-size", type=int, default=32, help="batching_parameters.txt max_batch_size")
    parser.add_argument("--batch-timeout-micros", type=int, default=2000, help="batching_parameters.txt batch_timeout_micros")
    parser.add_argument(
        "--no-length-grouping", action="store_true",
        help="batching_parameters.txt: albert-tf serve batches in arrival order instead of by length bucket",
    )
    parser.add_argument("--container-base", default="/models", help="where the server mounts --export-base (models.config)")
    parser.add_argument(
        "--length-bucket", type=int, default=16,
        help="pad each batch to its longest text rounded up to a multiple of N (default 16); 0: always to the sequence length",
    )
    parser.add_argument(
        "--length-chunk", default="auto", metavar="N|0|auto",
        help="classifiers and regressors, length-aware: compute a batch in length-sorted chunks of N rows, each padded "
        "to its own longest (default auto: 8 where the model has enough work per token); 0: the batch at once",
    )
    parser.add_argument(
        "--tflite", choices=("dynamic-int8", "float32"),
        help="also write model.tflite (token ids in; builtin ops; dynamic-int8: int8 weights, ~4x smaller)",
    )
    parser.add_argument(
        "--openvino", choices=("int8", "bf16", "f32"),
        help="also write the OpenVINO IR (raw text in) for OpenVINO Model Server and serve --prefer-openvino-model "
        "(int8: NNCF-quantized on --openvino-calibration)",
    )
    parser.add_argument(
        "--openvino-calibration", metavar="PATH",
        help="int8 calibration texts: a task data directory (its train split) or a file of texts, one per line "
        "(default: the training data the model directory records)",
    )
    parser.add_argument(
        "--precision", choices=("float32", "mixed_bfloat16"),
        help="the graph's precision, whatever the model was trained in (default: the model's); mixed_bfloat16 "
        "computes in bf16 (fastest on CPUs with AVX512_BF16 or AMX), its answers checked at bf16's tolerance",
    )
    parser.add_argument(
        "--check-data",
        metavar="DIR",
        help="for a bf16 or OpenVINO export of a classifier (--model-dir): the task's data directory; each "
        "lower-precision graph's accuracy on --check-split may be at most 0.5 point below float32's, else nothing "
        "is exported",
    )
    parser.add_argument("--check-split", default="dev", help="the labelled split of --check-data to score (default dev)")
    parser.add_argument("--skip-check", action="store_true", help="skip the compatibility check (not recommended)")


def _from_model_dir(args):
    from albert_tf.tasks.family import export_arguments
    from albert_tf.tasks.resources import load_model, tokenizer_layer_from_model_dir
    from albert_tf.tasks.spec import TaskSpec

    spec = TaskSpec.read(args.model_dir)
    try:
        arguments = export_arguments(spec)
    except ValueError as e:
        raise CommandError(f"{args.model_dir}: {e}") from None
    model = load_model(args.model_dir)
    layer = tokenizer_layer_from_model_dir(args.model_dir, spec)
    return model, layer, arguments, [os.path.join(args.model_dir, "task.json")]


def _check_data(args):
    """The labelled `--check-split` of `--check-data`, read as `albert-tf evaluate` reads a split."""
    from albert_tf.export.accuracy_check import AccuracyCheckError, LabelledTexts
    from albert_tf.tasks.family import task_family
    from albert_tf.tasks.spec import TaskSpec

    if not args.model_dir:
        raise CommandError("--check-data is for a classifier's --model-dir, not --init")
    if not os.path.isdir(args.check_data):
        raise CommandError(f"--check-data not found: {args.check_data}")
    spec = TaskSpec.read(args.model_dir)
    if spec.kind != "classification":
        raise CommandError(f"--check-data scores classifiers; {args.model_dir} is a {spec.kind} model")
    examples = task_family(spec).read_split(spec, args.check_data, args.check_split)
    ids = {label: i for i, label in enumerate(spec.labels)}
    for example in examples:
        if example.label not in ids:
            where = f"{example.source}:{example.line}"
            what = "no label" if example.label is None else f"label {example.label!r}, not one of the model's"
            raise CommandError(f"--check-split {args.check_split}: {where} has {what}")
    pair = any(example.text_b is not None for example in examples)
    try:
        return LabelledTexts([e.text_a for e in examples], [ids[e.label] for e in examples],
                             [e.text_b or "" for e in examples] if pair else None)
    except AccuracyCheckError as e:
        raise CommandError(f"--check-split {args.check_split}: {e}") from None


def _accuracy_note(result, args) -> object:
    """The output's `accuracy_check`: the record, or which check a bf16 export had without one."""
    if result.accuracy_check is not None:
        return result.accuracy_check
    from albert_tf.export.precision import FLOAT32, TOLERANCES
    from albert_tf.export.saved_model import read_export_info

    precision = read_export_info(result.path).get("precision", FLOAT32)
    if precision == FLOAT32:
        return "not run: a float32 export is the reference" if args.check_data else None
    if args.skip_check:
        return f"not run (no --check-data, --skip-check): the {precision} graph was not compared with float32"
    tolerance = ", ".join(f"{k} {v:g}" for k, v in TOLERANCES[precision].items())
    return f"not run (no --check-data): the {precision} graph was checked only against float32 at the reload ({tolerance})"


def _from_init(args):
    from albert_tf.tasks.resources import encoder_with_tokenizer_layer

    encoder, layer = encoder_with_tokenizer_layer(
        args.init, args.config, args.spm_model, args.vocab_file, lower_case=not args.no_lower_case,
        sequence_length=args.sequence_length, allow_vocab_mismatch=args.allow_vocab_mismatch,
    )
    return encoder, layer, {}, []


def _train_texts(spec):
    """Reads a task data directory's training texts through the task family (None: no task)."""
    if spec is None:
        return None
    from albert_tf.tasks.family import task_family

    return lambda data: [e.text_a for e in task_family(spec).read_split(spec, data, "train")]


def _openvino_calibration(args):
    """The calibration texts of `--openvino int8` (None for other modes), one-line errors."""
    if args.openvino is None:
        if args.openvino_calibration:
            raise CommandError("--openvino-calibration goes with --openvino")
        return None
    from albert_tf.export.openvino import OpenVinoExportError, default_calibration_path, read_calibration_texts

    spec = None
    if args.model_dir:
        from albert_tf.tasks.spec import TaskSpec

        spec = TaskSpec.read(args.model_dir)
    path = args.openvino_calibration or (default_calibration_path(args.model_dir) if args.model_dir else None)
    if args.openvino == "int8" and not path:
        raise CommandError(
            "int8 needs calibration texts (the task's training texts): pass --openvino-calibration DATA_DIR or a file "
            "of texts (the model directory records no training data)"
        )
    try:
        return read_calibration_texts(path, _train_texts(spec)) if path and args.openvino == "int8" else None
    except (OpenVinoExportError, OSError, ValueError) as e:
        raise CommandError(str(e).splitlines()[0]) from None


def run(args) -> int:
    from albert_tf.export.saved_model import ExportError, export_saved_model
    from albert_tf.export.serving_config import BatchingConfig

    try:
        batching = BatchingConfig(
            max_batch_size=args.max_batch_size, batch_timeout_micros=args.batch_timeout_micros,
            length_grouping=not args.no_length_grouping,
        )
    except ValueError as e:
        raise CommandError(str(e)) from None
    if args.length_bucket < 0:
        raise CommandError(f"--length-bucket must be >= 0 (0: fixed length), got {args.length_bucket}")
    length_chunk = _length_chunk(args.length_chunk)
    with library_errors():
        calibration = _openvino_calibration(args)
        check_data = _check_data(args) if args.check_data else None
        model, layer, arguments, extra = _from_model_dir(args) if args.model_dir else _from_init(args)
    try:
        result = export_saved_model(
            model, layer, args.export_base, args.model_name, version=args.version, extra_assets=extra,
            check=not args.skip_check, batching=batching, container_base=args.container_base,
            length_bucket=args.length_bucket or None, length_chunk=length_chunk, tflite=args.tflite, precision=args.precision,
            openvino=args.openvino, openvino_calibration=calibration, check_data=check_data, **arguments,
        )
    except (ExportError, ValueError) as e:
        raise CommandError(str(e)) from None
    print(json.dumps({
        "path": result.path, "version": result.version, "signatures": result.signatures,
        "tensorflow_text_ops": result.ops_report.text_ops, **result.serving_configs,
        **({"tflite": {k: result.tflite[k] for k in ("file", "mode", "bytes")}} if result.tflite else {}),
        **({"openvino": {k: result.openvino[k] for k in ("dir", "mode", "inference_precision_hint", "runtime_precisions")}}
           if result.openvino else {}),
        **({"accuracy_check": note} if (note := _accuracy_note(result, args)) else {}),
    }, indent=2))
    return 0


def _length_chunk(value: str):
    """`--length-chunk`: "auto", 0 (None: the batch at once) or a positive row count."""
    if value == "auto":
        return value
    try:
        rows = int(value)
    except ValueError:
        rows = -1
    if rows < 0:
        raise CommandError(f"--length-chunk must be auto or an integer >= 0 (0: the batch at once), got {value!r}")
    return rows or None
