"""What `from_pretrained` reads: any checkpoint layout this package knows, with its tokenizer.

`resolve_pretrained(path)` finds the encoder's architecture, weights and tokenizer of an original
TF1 release directory or TF-Hub module, a Hugging Face directory, a keras-hub preset, or an
albert_tf output (pretraining or fine-tuning run, export or pushed version);
`load_pretrained_backbone` builds the `AlbertEncoder` and the `AlbertTokenizerLayer` from them.
A path that holds none of these is a one-line `PretrainedNotFoundError` naming what was tried.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Dict, Optional, Tuple, Union

from albert_tf.modeling import AlbertEncoder
from albert_tf.tokenization import resolve
from albert_tf.tokenization.in_graph import AlbertTokenizerLayer


# What `find_tokenizer_file` looks for (`albert_tf.tokenization.resolve.EVERY_LAYOUT`), for its error message.
_LOOKED_FOR = (
    "task.json's tokenizer, tokenizer.json, assets/tokenizer/vocabulary.spm (keras-hub), an export's "
    "assets/export.json, spiece.model, "
    "30k-clean.model, spm.model, *.model, vocab.txt, vocab_chinese.txt, assets/*.model (TF-Hub)"
)


class TokenizerNotFoundError(ValueError):
    """No tokenizer file in a checkpoint layout; the message lists what was looked for and where."""


class PretrainedNotFoundError(ValueError):
    """Nothing at the path given to `from_pretrained`; the message lists the paths tried and the
    layouts read, and says that a bare name is no download."""


# What `from_pretrained` reads, for its error messages.
PRETRAINED_LAYOUTS = (
    "an albert-tf output (`albert-tf pretrain` / `finetune`, the pipeline's pretrained_model or "
    "trained_model/model, an `albert-tf export` or pushed version), a TF1 release directory (albert_config.json, model.ckpt-*, 30k-clean.model), a "
    "TF-Hub module, a Hugging Face directory (config.json, model.safetensors, spiece.model) or a keras-hub preset"
)


def _not_found(path: str) -> PretrainedNotFoundError:
    tried = [os.path.abspath(path), os.path.abspath(path) + ".index"]
    message = f"pretrained model not found at {path}: tried {' and '.join(tried)}; from_pretrained reads {PRETRAINED_LAYOUTS}"
    if not os.path.dirname(path) and "." not in path:
        message += (
            f". {path!r} is read as a path, not a model name: albert_tf ships no weights and downloads nothing. "
            "Get a checkpoint first (the original releases are linked from github.com/google-research/albert, "
            "e.g. albert_base_v2.tar.gz; or `huggingface-cli download albert/albert-base-v2 --local-dir "
            "albert_base`), or train one with `albert-tf pretrain`, and pass its directory"
        )
    return PretrainedNotFoundError(message)


@dataclasses.dataclass(frozen=True)
class PretrainedFiles:
    """What `resolve_pretrained` found for a checkpoint path.

    Attributes:
        weights: The path `albert_tf.checkpoints.any_format.init_encoder` reads the encoder from.
        config: The encoder architecture.
        tokenizer_kind: "sentencepiece" or "wordpiece".
        tokenizer_file: The SentencePiece `.model` or WordPiece `vocab.txt`.
        lower_case: Whether the tokenizer lower-cases the text.
    """

    weights: str
    config: Any
    tokenizer_kind: str
    tokenizer_file: str
    lower_case: bool


def _read_json(path: str) -> Optional[Dict[str, Any]]:
    try:
        with open(path, encoding="utf-8") as f:
            value = json.load(f)
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def find_tokenizer_file(path: Union[str, os.PathLike]) -> Tuple[str, str, Optional[bool]]:
    """The tokenizer stored with the checkpoint at `path`, in any layout `from_pretrained` reads.

    Tried in order, in the directory of `path` (the path itself when it is one) and, for a
    `tf1/`, `checkpoints/` or `variables/` sub-directory, in its parent: a fine-tuning output's
    `task.json` entry; a keras-hub preset's `assets/tokenizer/vocabulary.spm` (or `.txt`); a
    pretraining output's `tokenizer.json` entry; `spiece.model` (Hugging Face), `30k-clean.model`
    (the original releases), `spm.model`, any other `*.model`, `vocab.txt`, `vocab_chinese.txt`;
    a TF-Hub module's `assets/*.model` or `assets/vocab.txt`.

    Returns:
        `(kind, file, lower_case)`: "sentencepiece" or "wordpiece", the file, and the casing the
        layout records (None where it records none).

    Raises:
        TokenizerNotFoundError: None of them is there.
    """
    found = resolve.find_tokenizer(path, resolve.EVERY_LAYOUT)
    if found is not None:
        return found.kind, found.file, found.lower_case
    directories = resolve.search_directories(path, resolve.EVERY_LAYOUT)
    path = os.fspath(path).rstrip("/\\") or os.sep
    raise TokenizerNotFoundError(
        f"no tokenizer found for {path}: looked for {_LOOKED_FOR} in {' and '.join(directories)}; "
        f"pass tokenizer= (a SentencePiece .model or a WordPiece vocab.txt); from_pretrained reads {PRETRAINED_LAYOUTS}"
    )


def _huggingface_lower_case(directory: str) -> Optional[bool]:
    values = _read_json(os.path.join(directory, "tokenizer_config.json"))
    if values is None or "do_lower_case" not in values:
        return None
    return bool(values["do_lower_case"])


def resolve_pretrained(
    path: Union[str, os.PathLike],
    *,
    config=None,
    tokenizer: Optional[Union[str, os.PathLike]] = None,
    lower_case: Optional[bool] = None,
) -> PretrainedFiles:
    """Finds the weights, architecture and tokenizer of a checkpoint layout.

    Args:
        path: A checkpoint file, prefix or directory of any layout
            `albert_tf.checkpoints.any_format.init_encoder` reads, or a TF-Hub module directory.
        config: The architecture, for layouts that store none (a TF-Hub module): an
            `AlbertConfig`, a preset name or an `albert_config.json`; overrides the stored one.
        tokenizer: A SentencePiece `.model` or WordPiece `vocab.txt`, instead of the one stored
            with the checkpoint.
        lower_case: Lower-case the text; default the casing the layout records (`task.json`,
            `tokenizer.json`, Hugging Face `tokenizer_config.json`), else True (ALBERT's English
            and Chinese models are uncased).

    Raises:
        PretrainedNotFoundError: Nothing at `path`.
        TokenizerNotFoundError: No tokenizer stored with the checkpoint, and none given.
        ValueError: No architecture stored with the checkpoint, and none given.
    """
    from albert_tf.checkpoints.any_format import config_from_init, is_tfhub_module
    from albert_tf.config import AlbertConfig, load_config
    from albert_tf.weight_index import ExportWeightsError, is_export, read_weight_index

    path = os.fspath(path)
    if not os.path.exists(path) and not os.path.exists(path + ".index"):
        raise _not_found(path)
    if is_export(path):
        try:
            read_weight_index(path)
        except ExportWeightsError as e:
            raise PretrainedNotFoundError(f"{path} is an albert-tf TF Serving export, but {e}") from None
    weights = path
    if os.path.isdir(path) and is_tfhub_module(path):
        weights = os.path.join(path, "variables")
    if isinstance(config, AlbertConfig):
        resolved = config
    elif config is not None:
        resolved = load_config(os.fspath(config))
    else:
        resolved = config_from_init(weights) or (config_from_init(path) if weights != path else None)
        if resolved is None:
            raise ValueError(
                f"{path} stores no architecture (no albert_config.json, config.json or .keras config); pass config= "
                "(an AlbertConfig, a preset such as base-v2, or an albert_config.json)"
            )
    if tokenizer is not None:
        tokenizer = os.fspath(tokenizer)
        if not os.path.isfile(tokenizer):
            raise TokenizerNotFoundError(f"tokenizer file not found: {tokenizer}")
        kind, file, recorded = resolve.kind_of_file(tokenizer), tokenizer, None
    else:
        kind, file, recorded = find_tokenizer_file(path)
        if recorded is None:
            recorded = _huggingface_lower_case(os.path.dirname(file))
    casing = lower_case if lower_case is not None else (recorded if recorded is not None else True)
    return PretrainedFiles(weights, resolved, kind, file, bool(casing))


def load_pretrained_backbone(
    path: Union[str, os.PathLike],
    *,
    sequence_length: int = 128,
    config=None,
    tokenizer: Optional[Union[str, os.PathLike]] = None,
    lower_case: Optional[bool] = None,
    dtype=None,
    allow_vocab_mismatch: bool = False,
) -> Tuple[AlbertEncoder, AlbertTokenizerLayer, PretrainedFiles]:
    """The pretrained encoder and its tokenizer layer, for the checkpoint at `path`.

    Args:
        path, config, tokenizer, lower_case: See `resolve_pretrained`.
        sequence_length: Length of the packed inputs (at most the model's
            `max_position_embeddings`).
        dtype: The encoder's dtype policy (e.g. "mixed_bfloat16"); default Keras' global one.
        allow_vocab_mismatch: Accept a tokenizer with fewer tokens than the encoder's
            `vocab_size` (a larger one is always refused).

    Returns:
        `(encoder, preprocessor, files)`.

    Raises:
        TokenizerNotFoundError, ValueError: See `resolve_pretrained`; a tokenizer that does not fit
        the encoder (`VocabSizeMismatch`), or a `sequence_length` beyond its positions.
        CheckpointError: Weights that do not load into the architecture.
    """
    from albert_tf.checkpoints.any_format import init_encoder
    from albert_tf.tokenization.tokenizers import check_vocab_size

    files = resolve_pretrained(path, config=config, tokenizer=tokenizer, lower_case=lower_case)
    check_sequence_length(sequence_length, files.config.max_position_embeddings)
    kwargs = dict(sequence_length=sequence_length, lower_case=files.lower_case, name="preprocessor")
    preprocessor = resolve.tokenizer_layer(files.tokenizer_kind, files.tokenizer_file, **kwargs)
    check_vocab_size(
        preprocessor.vocab_size, files.config.vocab_size, tokenizer_source=f"the tokenizer {files.tokenizer_file}",
        model_source=f"the model of {os.fspath(path)}", allow_smaller=allow_vocab_mismatch,
        allow_hint="pass allow_vocab_mismatch=True to use it anyway",
    )
    encoder = AlbertEncoder.from_albert_config(files.config, dtype=dtype, name="encoder")
    init_encoder(encoder, files.weights)
    return encoder, preprocessor, files


def check_sequence_length(sequence_length: int, max_positions: int) -> None:
    if sequence_length > max_positions:
        raise ValueError(
            f"sequence_length {sequence_length} exceeds the model's max_position_embeddings {max_positions}"
        )
