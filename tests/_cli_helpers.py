"""Shared set-up of the CLI tests (test_cli_finetune, test_cli_qa, test_cli_bad_input): running
subcommands the way `albert-tf` does, the tiny model config, a WordPiece vocabulary file and the
sentiment tables they fine-tune on."""

from __future__ import annotations

import argparse
import importlib
import json
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Sequence, Tuple

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
# A 1-layer encoder of width 16: fine-tunes in seconds on a CPU.
TINY_MODEL = {
    "embedding_size": 8, "hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
    "intermediate_size": 32, "max_position_embeddings": 32,
}
SENTIMENT_WORDS = {"pos": ["good", "great", "fine"], "neg": ["bad", "awful", "dull"]}


def cli_runner(modules: Sequence[str]) -> Callable[[Iterable], Tuple[int, str]]:
    """A `cli(argv)` with the subcommands of `modules` (imported at the first call)."""

    def cli(argv):
        """Runs a subcommand the way `albert-tf` does: exit status 2 and one line for user errors."""
        from albert_tf.cli import CommandError

        parser = argparse.ArgumentParser(prog="albert-tf")
        sub = parser.add_subparsers(dest="command", required=True)
        for name in modules:
            module = importlib.import_module(name)
            command = sub.add_parser(module.NAME)
            module.add_arguments(command)
            command.set_defaults(_run=module.run)
        args = parser.parse_args([str(a) for a in argv])
        try:
            return int(args._run(args) or 0), ""
        except CommandError as e:
            return 2, str(e)

    return cli


def tiny_model_config(vocab_size: int, **overrides) -> Dict:
    """The tiny `albert_config.json` contents with this vocabulary size."""
    return {"vocab_size": vocab_size, **TINY_MODEL, **overrides}


def write_config(path: Path, vocab_size: int, **overrides) -> Path:
    path.write_text(json.dumps(tiny_model_config(vocab_size, **overrides)), encoding="utf-8")
    return path


def write_vocab(path: Path, words: Sequence[str]) -> int:
    """A WordPiece `vocab.txt` of the special tokens and `words`; returns its number of tokens."""
    path.write_text("\n".join(SPECIAL + list(words)) + "\n", encoding="utf-8")
    return len(SPECIAL) + len(words)


# The words of the sentiment tables and a CoNLL sample (`write_tiny_model_files`'s default vocabulary).
WORDS = ["good", "great", "fine", "bad", "awful", "dull", "film", "movie", "plot", "a", "the", "very", "paris", "london", "is",
         "big", "in", "i", "live"]


def write_tiny_model_files(root: Path, words: Sequence[str] = WORDS) -> Dict:
    """`root/vocab.txt` (WordPiece, the special tokens and `words`) and `root/config.json` (the tiny
    model of that vocabulary size, which `finetune` requires of the tokenizer); returns the config."""
    config = tiny_model_config(len(SPECIAL) + len(words))
    assert write_vocab(root / "vocab.txt", words) == config["vocab_size"]
    (root / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return config


def sentiment_rows(n: int) -> List[Tuple[str, str]]:
    """`(label, text)` rows alternating "pos" and "neg", each text the three words of its label in a
    rotating order: every word carries the sentiment, so a random encoder learns it in a few dozen steps."""
    rows = []
    for i in range(n):
        label = "pos" if i % 2 == 0 else "neg"
        words = SENTIMENT_WORDS[label]
        k = (i // 2) % 3
        rows.append((label, " ".join(words[k:] + words[:k])))
    return rows


def write_sentiment_tables(directory: Path, sizes: Dict[str, int], formats: Sequence[str] = ("tsv",)) -> Path:
    """`<split>.tsv` (header `label<TAB>text`) and/or `<split>.jsonl` of `sentiment_rows` in `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    for split, n in sizes.items():
        rows = sentiment_rows(n)
        if "tsv" in formats:
            (directory / f"{split}.tsv").write_text(
                "label\ttext\n" + "".join(f"{label}\t{text}\n" for label, text in rows), encoding="utf-8"
            )
        if "jsonl" in formats:
            (directory / f"{split}.jsonl").write_text(
                "".join(json.dumps({"label": label, "text": text}) + "\n" for label, text in rows), encoding="utf-8"
            )
    return directory
