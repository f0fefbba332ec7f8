"""The tokenizer a pretraining run carries: copied into ``model_dir`` and ``tf1/`` (``spm.model``
or ``vocab.txt``, described by ``tokenizer.json``), so that the output is all fine-tuning needs;
`tokenizer_of_run` finds it there, and a run is not continued with another vocabulary.
"""

from __future__ import annotations

import os
from typing import Optional

from albert_tf import file_io
from albert_tf.training.pretraining_config import TOKENIZER_KINDS, PretrainingError, TokenizerFile

TOKENIZER_FILE = "tokenizer.json"


def _as_tokenizer_file(found) -> Optional[TokenizerFile]:
    """The `TokenizerFile` of a `tokenization.resolve.StoredTokenizer` (lower-cased unless recorded)."""
    if found is None:
        return None
    return TokenizerFile(found.kind, found.file, True if found.lower_case is None else found.lower_case)


def _read_tokenizer_entry(directory: str) -> Optional[TokenizerFile]:
    """The tokenizer that ``tokenizer.json`` in `directory` describes, or None."""
    from albert_tf.tokenization.resolve import TOKENIZER_JSON, tokenizer_in

    return _as_tokenizer_file(tokenizer_in(directory, TOKENIZER_JSON))


def tokenizer_of_run(path: str) -> Optional[TokenizerFile]:
    """The tokenizer a pretraining output carries (written by `run_pretraining`), or None.

    Args:
        path: The run directory, its ``tf1/`` or ``checkpoints/`` folder, or a file or checkpoint
            prefix in one of them (anything `albert-tf finetune --init` accepts from a run).

    Returns:
        The `TokenizerFile` that ``tokenizer.json`` describes, or None where there is none
        (`albert_tf.tokenization.resolve.find_tokenizer` with `RUN_SEARCH`).
    """
    from albert_tf.tokenization.resolve import RUN_SEARCH, find_tokenizer as find_stored

    return _as_tokenizer_file(find_stored(path, RUN_SEARCH))


def _file_bytes(path: str) -> bytes:
    import tensorflow as tf

    with tf.io.gfile.GFile(path, "rb") as f:
        return f.read()


def check_tokenizer_of_run(directory: str, tokenizer: TokenizerFile) -> None:
    """Refuses to continue a run that was pretrained with another vocabulary."""
    previous = _read_tokenizer_entry(directory)
    if previous is None:
        return
    if previous.kind != tokenizer.kind or _file_bytes(previous.path) != _file_bytes(tokenizer.path):
        raise PretrainingError(
            f"{directory} was pretrained with the tokenizer in {previous.path}; {tokenizer.path} is another "
            "vocabulary (use a new --model-dir for new data)"
        )


def install_tokenizer(directory: str, tokenizer: TokenizerFile) -> str:
    """Copies the tokenizer file into `directory` and describes it in ``tokenizer.json``."""
    import tensorflow as tf

    name = TOKENIZER_KINDS[tokenizer.kind]
    target = os.path.join(directory, name)
    if os.path.abspath(target) != os.path.abspath(tokenizer.path):
        with file_io.atomic_output(target) as tmp:
            tf.io.gfile.copy(tokenizer.path, tmp, overwrite=True)
    entry = {"type": tokenizer.kind, "file": name, "lower_case": tokenizer.lower_case}
    file_io.atomic_write_json(os.path.join(directory, TOKENIZER_FILE), entry, ensure_ascii=True)
    return target
