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
`models.config` and `batching_parameters.txt` are written for the export base. `--length-bucket N`
(default 16) exports length-aware signatures (a batch padded to its longest text rounded up to a
multiple of N); `--length-bucket 0` the fixed-length ones. `--no-length-grouping` records in
`batching_parameters.txt` that `albert-tf serve` batches in arrival order rather than by length
bucket (`albert_tf.model_server.length_batching`). `--tflite
dynamic-int8` (or `float32`) also writes `model.tflite`, the token-ids model for TF Serving's
`--prefer_tflite_model` and in-process LiteRT (`albert_tf.export.tflite`).
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
        "--tflite", choices=("dynamic-int8", "float32"),
        help="also write model.tflite (token ids in; builtin ops; dynamic-int8: int8 weights, ~4x smaller)",
    )
    parser.add_argument(
        "--precision", choices=("float32", "mixed_bfloat16"),
        help="the graph's precision, whatever the model was trained in (default: the model's); mixed_bfloat16 "
        "computes in bf16 (fastest on CPUs with AVX512_BF16 or AMX), its answers checked at bf16's tolerance",
    )
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


def _from_init(args):
    from albert_tf.tasks.resources import encoder_with_tokenizer_layer

    encoder, layer = encoder_with_tokenizer_layer(
        args.init, args.config, args.spm_model, args.vocab_file, lower_case=not args.no_lower_case,
        sequence_length=args.sequence_length, allow_vocab_mismatch=args.allow_vocab_mismatch,
    )
    return encoder, layer, {}, []


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
    with library_errors():
        model, layer, arguments, extra = _from_model_dir(args) if args.model_dir else _from_init(args)
    try:
        result = export_saved_model(
            model, layer, args.export_base, args.model_name, version=args.version, extra_assets=extra,
            check=not args.skip_check, batching=batching, container_base=args.container_base,
            length_bucket=args.length_bucket or None, tflite=args.tflite, precision=args.precision, **arguments,
        )
    except (ExportError, ValueError) as e:
        raise CommandError(str(e)) from None
    print(json.dumps({
        "path": result.path, "version": result.version, "signatures": result.signatures,
        "tensorflow_text_ops": result.ops_report.text_ops, **result.serving_configs,
        **({"tflite": {k: result.tflite[k] for k in ("file", "mode", "bytes")}} if result.tflite else {}),
    }, indent=2))
    return 0
