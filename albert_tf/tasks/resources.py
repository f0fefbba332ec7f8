"""What a fine-tuning run or a fine-tuned model directory needs besides its data: the tokenizer,
the encoder's configuration, the check of an `init` checkpoint, the saved task model, and for
exports the in-graph tokenizer layer (of a model directory, or with a pretrained encoder).

Every problem is a one-line `albert_tf.tasks.errors.TaskError` that names the file or setting.
"""

from __future__ import annotations

import os
import sys
from typing import Optional, Tuple

from albert_tf.errors import as_python, raw_message
from albert_tf.tasks.errors import TaskError, param
from albert_tf.tasks.spec import TaskSpec

# What `init` accepts (`albert_tf.checkpoints.any_format.init_encoder`), for the message that says a
# path is none of them.
INIT_KINDS = (
    "a .keras, .weights.h5, .safetensors or .npz file, a TF checkpoint prefix (or its .index / .data-* "
    "file), a directory of a TF checkpoint, a fine-tuning or pretraining output directory, an albert-tf "
    "export or pushed version, a TF-Hub module, a Hugging Face model directory or a keras-hub preset directory"
)
_CHECKPOINT_SUFFIXES = (".keras", ".weights.h5", ".safetensors", ".safetensors.index.json", ".npz", ".bin", ".pt", ".pth")


def load_tokenizer(kind: str, path: str, lower_case: bool):
    """A `SentencePieceTokenizer` ("sentencepiece") or `WordPieceTokenizer` ("wordpiece")."""
    from albert_tf.tokenization.resolve import python_tokenizer

    if not os.path.isfile(path):
        raise TaskError(f"tokenizer file not found: {path}")
    try:
        return python_tokenizer(kind, path, lower_case=lower_case)
    except (ValueError, OSError) as e:
        raise TaskError(raw_message(e)) from None


def load_tokenizer_layer(kind: str, path: str, lower_case: bool, sequence_length: int):
    """The in-graph `AlbertTokenizerLayer` of a tokenizer file (`kind` as `load_tokenizer`'s)."""
    from albert_tf.tokenization.resolve import tokenizer_layer

    try:
        return tokenizer_layer(kind, path, sequence_length=sequence_length, lower_case=lower_case)
    except (ValueError, OSError) as e:
        raise TaskError(f"cannot build the tokenizer from {path}: {e}") from None


def tokenizer_from_model_dir(model_dir: str, spec: TaskSpec):
    """The tokenizer stored in a fine-tuned model directory, with its stored casing."""
    return load_tokenizer(spec.tokenizer["type"], os.path.join(model_dir, spec.tokenizer["file"]), spec.tokenizer["lower_case"])


def resolve_tokenizer_file(spm_model: Optional[str], vocab_file: Optional[str], init: Optional[str]) -> Tuple[str, str, Optional[bool]]:
    """(type, path, lower_case) from `spm_model` / `vocab_file`, else the tokenizer stored with
    `init`, found in every layout `from_pretrained` reads (`albert_tf.tokenization.resolve.find_tokenizer`
    with `EVERY_LAYOUT`: a model directory's `task.json`, a pretraining run's `tokenizer.json`, a
    keras-hub preset, an export's assets, a TF-Hub module's, a file beside the checkpoint).
    lower_case is the casing stored with it, None where none is."""
    from albert_tf.tokenization.resolve import EVERY_LAYOUT, find_tokenizer

    if spm_model and vocab_file:
        raise TaskError(f"pass {param('spm_model')} or {param('vocab_file')}, not both")
    if spm_model:
        return "sentencepiece", spm_model, None
    if vocab_file:
        return "wordpiece", vocab_file, None
    if init:
        found = find_tokenizer(init, EVERY_LAYOUT)
        if found is not None:
            return found.kind, found.file, found.lower_case
    raise TaskError(f"no tokenizer: pass {param('spm_model')} (SentencePiece .model) or {param('vocab_file')} (WordPiece vocab.txt)")


def is_checkpoint_path(path: str) -> bool:
    """Whether `path` is of a kind `init_encoder` reads (not whether it loads)."""
    from albert_tf.checkpoints import any_format as init_module
    from albert_tf.checkpoints.original import CheckpointError, resolve_checkpoint_prefix
    from albert_tf.weight_index import is_export

    if os.path.isfile(path) and path.lower().endswith(_CHECKPOINT_SUFFIXES):
        return True
    if os.path.isdir(path) and (is_export(path) or init_module.is_tfhub_module(path)):
        return True
    if os.path.isdir(path):
        markers = (
            init_module.FINETUNED_MODEL, init_module.PRETRAINING_ENCODER, init_module.PRETRAINING_CHECKPOINTS,
            "model.safetensors", "model.safetensors.index.json",
        )
        keras_hub_preset = all(os.path.isfile(os.path.join(path, name)) for name in ("config.json", "model.weights.h5"))
        if keras_hub_preset or any(os.path.exists(os.path.join(path, name)) for name in markers):
            return True
    try:
        resolve_checkpoint_prefix(path)
    except CheckpointError:
        return False
    return True


def check_init(path: str) -> None:
    """Refuses an `init` that is no checkpoint kind at all, before any work is done.

    Raises:
        TaskError: `path` is missing or of no kind `init_encoder` reads.
    """
    if not os.path.exists(path) and not os.path.exists(path + ".index"):
        raise TaskError(f"{param('init')} not found: {path}")
    if not is_checkpoint_path(path):
        raise TaskError(
            f"{param('init')} {path} is not a checkpoint, a checkpoint directory, a Hugging Face dir or a keras-hub "
            f"preset; {param('init')} takes {INIT_KINDS}"
        )


def resolve_model_config(config: Optional[str], init: Optional[str]):
    """The encoder architecture: `config` (a preset or `albert_config.json`), else the one stored
    with the `init` checkpoint.

    Returns:
        `(AlbertConfig, where it came from)`, the latter for messages ("the model config X").

    Raises:
        TaskError: No usable config, or an `init` that is no checkpoint.
    """
    from albert_tf.checkpoints.any_format import config_from_init
    from albert_tf.checkpoints.original import CheckpointError
    from albert_tf.config import ConfigError, load_config

    if init:
        check_init(init)
    try:
        if config:
            return load_config(config), f"the model config {config}"
        if init:
            found = config_from_init(init)
            if found is not None:
                return found, f"the model of --init {init}"
    except (ConfigError, CheckpointError) as e:
        raise TaskError(raw_message(e)) from None
    if init:
        raise TaskError(
            f"{param('init')} {init} is a checkpoint without a stored architecture (no albert_config.json, config.json or "
            f".keras config beside it): pass {param('config')} (a preset such as base-v2, or an albert_config.json)"
        )
    raise TaskError(f"no model architecture: pass {param('config')} (a preset such as base-v2, or an albert_config.json)")


def check_tokenizer_fits(tokenizer, tokenizer_file: str, config, config_source: str, allow_mismatch: bool) -> None:
    """`albert_tf.tokenization.tokenizers.check_vocab_size` as a one-line `TaskError`; an allowed
    smaller tokenizer is reported on stderr."""
    from albert_tf.tokenization.tokenizers import VocabSizeMismatch, check_vocab_size

    try:
        warning = check_vocab_size(
            tokenizer.vocab_size, config.vocab_size, tokenizer_source=f"the tokenizer {tokenizer_file}",
            model_source=config_source, allow_smaller=allow_mismatch,
            allow_hint=f"pass {param('allow_vocab_mismatch', True)} to use it anyway",
        )
    except VocabSizeMismatch as e:
        raise TaskError(raw_message(e)) from None
    if warning:
        print(f"warning: {as_python(warning)} (allow_vocab_mismatch)", file=sys.stderr, flush=True)


def load_model(model_dir: str):
    """The id-level task model (the head on its encoder) of `model_dir`, with the best weights: the
    `task_model` of the raw-text model the directory keeps, or the head itself in a directory
    written before the whole model was kept."""
    from albert_tf.checkpoints.any_format import register_saved_classes
    from albert_tf.training.run_directory import load_finetuned_model

    register_saved_classes()
    try:
        model = load_finetuned_model(model_dir)
    except (FileNotFoundError, ValueError, OSError) as e:
        raise TaskError(f"cannot load the model in {model_dir}: {e}") from None
    return getattr(model, "task_model", model)


def tokenizer_layer_from_model_dir(model_dir: str, spec: TaskSpec):
    """The in-graph `AlbertTokenizerLayer` of a fine-tuned model directory (its tokenizer file,
    casing and sequence length), for exports."""
    tokenizer_file = os.path.join(model_dir, spec.tokenizer["file"])
    return load_tokenizer_layer(spec.tokenizer["type"], tokenizer_file, spec.tokenizer["lower_case"], spec.max_seq_length)


def encoder_with_tokenizer_layer(init: str, config: Optional[str], spm_model: Optional[str], vocab_file: Optional[str], *,
                                 lower_case: bool = True, sequence_length: int = 128, allow_vocab_mismatch: bool = False):
    """A pretrained `AlbertEncoder` from `init` (architecture `config`, else the one stored with
    it) and the in-graph `AlbertTokenizerLayer` of exactly one of `spm_model` / `vocab_file`, for
    exporting the encoder; a tokenizer whose size is not the encoder's `vocab_size` is refused
    (`check_tokenizer_fits`).

    Returns:
        `(encoder, tokenizer layer)`.
    """
    from albert_tf.checkpoints.any_format import init_encoder
    from albert_tf.checkpoints.original import CheckpointError
    from albert_tf.config import ConfigError
    from albert_tf.modeling import AlbertEncoder
    from albert_tf.tokenization.resolve import tokenizer_layer

    if bool(spm_model) == bool(vocab_file):
        raise TaskError(f"{param('init')} needs exactly one of {param('spm_model')} and {param('vocab_file')}")
    model_config, config_source = resolve_model_config(config, init)
    kind, tokenizer_file = ("sentencepiece", spm_model) if spm_model else ("wordpiece", vocab_file)
    tokenizer = load_tokenizer(kind, tokenizer_file, lower_case)
    check_tokenizer_fits(tokenizer, tokenizer_file, model_config, config_source, allow_vocab_mismatch)
    try:
        encoder = AlbertEncoder.from_albert_config(model_config)
        init_encoder(encoder, init)
        layer = tokenizer_layer(kind, tokenizer_file, sequence_length=sequence_length, lower_case=lower_case)
    except (ConfigError, CheckpointError, ValueError, OSError) as e:
        raise TaskError(raw_message(e)) from None
    return encoder, layer
