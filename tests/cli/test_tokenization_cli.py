"""Tests of albert_tf.cli.train_tokenizer (`albert-tf train-tokenizer`)."""

import argparse
import random

import pytest
import sentencepiece as spm

import albert_tf.cli
from albert_tf.cli import CommandError, train_tokenizer
from albert_tf.tokenization.tokenizers import load_vocab


def _parse(argv):
    parser = argparse.ArgumentParser(prog="albert-tf train-tokenizer")
    train_tokenizer.add_arguments(parser)
    return parser.parse_args(argv)


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory):
    rng = random.Random(0)
    words = "The Nation of and to Congress people states year 1990, 中 文 北 京 (a) law-making".split()
    directory = tmp_path_factory.mktemp("corpus")
    for part in range(2):
        lines = [" ".join(rng.choice(words) for _ in range(10)) for _ in range(150)]
        (directory / f"part{part}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return directory


def test_sentencepiece_with_globs(corpus_dir, tmp_path, capsys):
    prefix = tmp_path / "out" / "spm"
    args = _parse([str(corpus_dir / "part*.txt"), "--output-prefix", str(prefix), "--vocab-size", "50", "--seed", "1"])
    assert train_tokenizer.run(args) == 0
    assert f"wrote {prefix}.model and {prefix}.vocab: 50 pieces from 300 of 300 sentences" in capsys.readouterr().out
    sp = spm.SentencePieceProcessor(model_file=f"{prefix}.model")
    assert [sp.IdToPiece(i) for i in range(5)] == ["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"]
    assert not any(c.isupper() for i in range(5, 50) for c in sp.IdToPiece(i))


def test_sentencepiece_options(corpus_dir, tmp_path):
    prefix = tmp_path / "bpe"
    args = _parse(
        [str(corpus_dir / "part0.txt"), "--output-prefix", str(prefix), "--vocab-size", "70", "--model-type", "bpe",
         "--no-lower-case", "--input-sentence-size", "120", "--character-coverage", "1.0"]
    )
    assert train_tokenizer.run(args) == 0
    sp = spm.SentencePieceProcessor(model_file=f"{prefix}.model")
    assert sp.GetPieceSize() == 70
    assert any(c.isupper() for i in range(sp.GetPieceSize()) for c in sp.IdToPiece(i))


def test_wordpiece(corpus_dir, tmp_path, capsys):
    prefix = tmp_path / "vocab"
    args = _parse([str(corpus_dir / "part*.txt"), "--wordpiece", "--output-prefix", str(prefix), "--vocab-size", "200"])
    assert train_tokenizer.run(args) == 0
    assert f"wrote {prefix}.txt:" in capsys.readouterr().out
    vocab = load_vocab(f"{prefix}.txt")
    assert list(vocab)[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert "中" in vocab and "nation" in vocab


def test_user_errors(corpus_dir, tmp_path):
    part0, out = str(corpus_dir / "part0.txt"), str(tmp_path / "x")
    cases = [
        ([str(tmp_path / "missing*.txt"), "--output-prefix", str(tmp_path / "x")], "no input file matches"),
        ([part0, "--output-prefix", out, "--vocab-size", "5000"], "too large"),
        ([part0, "--output-prefix", out, "--vocab-size", "0"], "must be positive"),
        ([part0, "--output-prefix", out, "--wordpiece", "--model-type", "bpe"], "--model-type apply to SentencePiece only"),
        ([part0, "--output-prefix", out, "--max-unique-chars", "5"], "--wordpiece only"),
    ]
    for argv, message in cases:
        with pytest.raises(CommandError, match=message):
            train_tokenizer.run(_parse(argv))
    assert not list(tmp_path.iterdir())


def test_a_directory_is_its_txt_files(corpus_dir, tmp_path, capsys):
    prefix = tmp_path / "dir"
    args = _parse([str(corpus_dir), "--output-prefix", str(prefix), "--vocab-size", "50", "--seed", "1"])
    assert train_tokenizer.run(args) == 0
    assert "50 pieces from 300 of 300 sentences" in capsys.readouterr().out
    (tmp_path / "empty").mkdir()
    with pytest.raises(CommandError, match=r"no \*.txt file in directory .*empty"):
        train_tokenizer.run(_parse([str(tmp_path / "empty"), "--output-prefix", str(prefix)]))


def test_control_characters_and_unreadable_files(corpus_dir, tmp_path, capsys):
    lines = (corpus_dir / "part0.txt").read_text(encoding="utf-8").splitlines()
    (tmp_path / "a_stray.txt").write_text("\n".join(lines[:100]) + "\n4 1\x02 per cent\n", encoding="utf-8")
    (tmp_path / "b_latin1.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    prefix = str(tmp_path / "out" / "spm")
    for extra in ([], ["--wordpiece"]):
        argv = [str(tmp_path / "*.txt"), "--output-prefix", prefix, "--vocab-size", "50" if not extra else "200"]
        unreadable = r"b_latin1.txt:1: not valid UTF-8 .*\(--on-error skip leaves such files out\)"
        with pytest.raises(CommandError, match=unreadable):
            train_tokenizer.run(_parse(argv + extra))
        assert train_tokenizer.run(_parse(argv + extra + ["--on-error", "skip"])) == 0
        out = capsys.readouterr().out.splitlines()
        assert out[1:] == [
            "cleaned: removed 1 control character (U+0000, U+FFFD, categories Cc/Cf, as the original BERT/ALBERT "
            "text cleaning) from 1 file: a_stray.txt",
            f"skipped 1 unreadable file: {tmp_path / 'b_latin1.txt'}:1: not valid UTF-8 (byte 4 of the line: b'\\xe9')",
        ]
    with pytest.raises(CommandError, match=r"no text to train on; skipped 1 unreadable file: .*b_latin1.txt:1"):
        train_tokenizer.run(_parse([str(tmp_path / "b_latin1.txt"), "--output-prefix", prefix, "--on-error", "skip"]))


@pytest.mark.skipif(
    "albert_tf.cli.train_tokenizer" not in albert_tf.cli.SUBCOMMAND_MODULES,
    reason="train-tokenizer is not registered in albert_tf.cli.SUBCOMMAND_MODULES yet",
)
def test_registered_command(corpus_dir, tmp_path, capsys):
    prefix = tmp_path / "main"
    argv = ["train-tokenizer", str(corpus_dir / "part0.txt"), "--output-prefix", str(prefix), "--vocab-size", "50"]
    assert albert_tf.cli.main(argv) == 0
    assert (tmp_path / "main.model").exists()
    assert albert_tf.cli.main(argv[:-1] + ["99999"]) == 2
    assert "albert-tf train-tokenizer: error: vocab_size=99999 is too large" in capsys.readouterr().err
