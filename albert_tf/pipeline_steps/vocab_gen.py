"""VocabGen: a SentencePiece (ALBERT's recipe) or WordPiece vocabulary from the training splits.

Trained on the corpus's train split and the labelled train texts (the fine-tuning domain must be
covered too); the eval splits are never seen. Output: `spm.model` + `spm.vocab`, or `vocab.txt`,
and `summary.json` with the tokenizer settings every later step reads (`tokenizer_spec`).

A warm-started run (`warm_start`, `albert_tf.pipeline_steps.warm_start`) trains no vocabulary: it
takes the latest pushed model's, whose embedding rows belong to its pieces, and records that base
as the summary's `warm_start` for the Pretrainer and Trainer.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any, Dict, Optional

from albert_tf.pipeline_steps import example_gen
from albert_tf.pipeline_steps.staging import read_summary, staged_directory, write_summary

SPM_PREFIX = "spm"
WORDPIECE_FILE = "vocab.txt"


def run_vocab_gen(
    corpus_dir: str,
    examples_dir: str,
    output_dir: str,
    *,
    vocab_type: str = "sentencepiece",
    vocab_size: int = 30000,
    character_coverage: float = 0.99995,
    hard_vocab_limit: bool = True,
    lower_case: bool = True,
    seed: int = 12345,
    warm_start: bool = False,
    serving_base: str = "",
    model_name: str = "",
) -> Dict[str, Any]:
    """Trains the vocabulary into `output_dir`; returns its summary (type, file, size, lower_case).

    With `warm_start` and a model pushed under `<serving_base>/<model_name>`, its vocabulary is
    taken instead (`vocab_type`, `vocab_size` and `lower_case` are then the base's) and the summary's
    `warm_start` names the base; with nothing pushed yet, `warm_start` is None and the run starts
    from scratch. `character_coverage` and `hard_vocab_limit` are SentencePiece's (`train_sentencepiece`).
    """
    from albert_tf.tokenization import build_wordpiece_vocab, train_sentencepiece

    if warm_start:
        from albert_tf.pipeline_steps.warm_start import resolve_base

        base = resolve_base(serving_base, model_name)
        if base is not None:
            return _base_vocabulary(base, output_dir)

    lines = []
    for row in example_gen.read_split(corpus_dir, "train", example_gen.CORPUS_FILE):
        lines.extend(row[example_gen.TEXT_FEATURE].split("\n"))
    for row in example_gen.read_split(examples_dir, "train"):
        lines.extend(row[k] for k in (example_gen.TEXT_FEATURE, example_gen.TEXT_B_FEATURE) if row.get(k))
    with staged_directory(output_dir) as staging:
        with tempfile.TemporaryDirectory() as tmp:
            text_file = os.path.join(tmp, "train.txt")
            with open(text_file, "w", encoding="utf-8") as f:
                for line in lines:
                    f.write(line.replace("\n", " ") + "\n")
            if vocab_type == "sentencepiece":
                vocab = train_sentencepiece([text_file], os.path.join(staging, SPM_PREFIX), vocab_size, lower_case=lower_case, seed=seed,
                                            character_coverage=character_coverage, hard_vocab_limit=hard_vocab_limit)
                file_name, size = SPM_PREFIX + ".model", vocab.vocab_size
            elif vocab_type == "wordpiece":
                vocab = build_wordpiece_vocab([text_file], os.path.join(staging, WORDPIECE_FILE), vocab_size, lower_case=lower_case)
                file_name, size = WORDPIECE_FILE, vocab.vocab_size
            else:
                raise ValueError(f"vocab_type must be 'sentencepiece' or 'wordpiece', got {vocab_type!r}")
        summary = {"type": vocab_type, "file": file_name, "vocab_size": int(size), "lower_case": bool(lower_case), "lines": len(lines)}
        if warm_start:
            summary["warm_start"] = None  # asked for, but nothing is pushed yet
        write_summary(staging, summary)
    return summary


def _base_vocabulary(base: Dict[str, Any], output_dir: str) -> Dict[str, Any]:
    from albert_tf.pipeline_steps.warm_start import base_tokenizer

    source, info = base_tokenizer(base["path"])
    file_name = SPM_PREFIX + ".model" if info["type"] == "sentencepiece" else WORDPIECE_FILE
    with staged_directory(output_dir) as staging:
        shutil.copyfile(source, os.path.join(staging, file_name))
        summary = {"type": info["type"], "file": file_name, "lower_case": bool(info["lower_case"]), "lines": 0,
                   "warm_start": base}
        summary["vocab_size"] = int(_load(staging, summary).vocab_size)
        write_summary(staging, summary)
    return summary


def warm_start_base(vocab_dir: str) -> Optional[str]:
    """The base model a warm-started run continues from (VocabGen resolved it), or None."""
    base = read_summary(vocab_dir).get("warm_start")
    return base["path"] if base else None


def tokenizer_file(vocab_dir: str) -> str:
    return os.path.join(vocab_dir, read_summary(vocab_dir)["file"])


def load_tokenizer(vocab_dir: str):
    """The Python tokenizer of a VocabGen output."""
    return _load(vocab_dir, read_summary(vocab_dir))


def _load(vocab_dir: str, info: Dict[str, Any]):
    from albert_tf.tokenization.resolve import python_tokenizer

    return python_tokenizer(info["type"], os.path.join(vocab_dir, info["file"]), lower_case=info["lower_case"])


def tokenizer_layer(vocab_dir: str, sequence_length: int):
    """The in-graph `AlbertTokenizerLayer` of a VocabGen output (the exported models' tokenizer)."""
    from albert_tf.tokenization.resolve import tokenizer_layer

    info = read_summary(vocab_dir)
    path = os.path.join(vocab_dir, info["file"])
    return tokenizer_layer(info["type"], path, sequence_length=sequence_length, lower_case=info["lower_case"])
