"""Tests for albert_tf.data.beam_pipeline and the make-pretraining-data CLI: output equals the in-memory
instances, sharding does not change it, malformed input fails cleanly and leaves nothing behind."""

import argparse
import functools
import json
import logging
import dataclasses
import os
from pathlib import Path

import pytest
import tensorflow as tf

from albert_tf.data import beam_pipeline as B
from albert_tf.data import pipeline_output
from albert_tf.data import pretraining_instances as P
from albert_tf.data.documents import MalformedInputError, read_documents
from albert_tf.data.tfrecords import serialize_instance

SOTU = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "en" / "sotu"
INSTANCE = P.InstanceConfig(max_seq_length=128, max_predictions_per_seq=20)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """A tiny SentencePiece model, three sotu files and a pipeline config using official's tokenizer."""
    files = sorted(str(f) for f in SOTU.glob("199*.txt"))[:3]
    if not files:
        pytest.skip(f"shared data not found at {SOTU}")
    import sentencepiece as spm
    from official.nlp.tools.tokenization import FullSentencePieceTokenizer

    prefix = tmp_path_factory.mktemp("spm") / "sp"
    sentences = [s for f in files for d in read_documents(f, "paragraphs") for s in d.sentences]
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences),
        model_prefix=str(prefix),
        vocab_size=2000,
        model_type="unigram",
        pad_id=0,
        unk_id=1,
        bos_id=-1,
        eos_id=-1,
        control_symbols=["[CLS]", "[SEP]", "[MASK]"],
        minloglevel=2,
        num_threads=1,
    )
    model = f"{prefix}.model"
    config = B.PipelineConfig(
        instance=INSTANCE,
        tokenizer=functools.partial(FullSentencePieceTokenizer, model),
        dupe_factor=2,
        seed=11,
        input_format="paragraphs",
        num_shards=2,
        max_tokenize_batch=2,
    )
    return files, model, config, tmp_path_factory.mktemp("runs")


def _records(paths):
    return sorted(r.numpy() for r in tf.data.TFRecordDataset(sorted(str(p) for p in paths)))


@pytest.fixture(scope="module")
def first_run(setup):
    files, _, config, runs = setup
    summary = B.make_pretraining_data(files, str(runs / "out"), config)
    return summary


def test_output_equals_the_in_memory_instances(setup, first_run):
    files, _, config, _ = setup
    tokenizer = config.tokenizer()
    tokenize = P.DocumentTokenizer(tokenizer)
    docs = [tokenize(d) for f in files for d in read_documents(f, "paragraphs")]
    vocab = P.VocabInfo.from_tokenizer(tokenizer)
    expected = sorted(
        serialize_instance(i, 128, 20)
        for i in P.create_training_instances(docs, INSTANCE, vocab, seed=11, dupe_factor=2)
    )
    assert _records(first_run.files) == expected
    assert first_run.counters["instances"] == len(expected)
    assert first_run.counters["documents"] == len(docs) == 3
    assert 0 < first_run.counters["random_next_instances"] < len(expected) / 4


def test_shards_metadata_and_no_leftovers(setup, first_run):
    _, _, _, runs = setup
    out = Path(first_run.output_dir)
    assert sorted(os.listdir(out)) == ["metadata.json", "part-00000-of-00002.tfrecord", "part-00001-of-00002.tfrecord"]
    assert [p for p in os.listdir(runs) if ".tmp-" in p or ".partial-" in p] == []
    metadata = json.loads((out / "metadata.json").read_text())
    assert metadata["format"] == "albert-pretraining-tfrecord"
    assert metadata["instance_config"]["max_seq_length"] == 128 and metadata["seed"] == 11
    assert metadata["vocab"] == {"vocab_size": 2000, "cls_id": 2, "sep_id": 3, "mask_id": 4}
    assert metadata["tokenizer"] is None  # a tokenizer factory of the caller's: nothing to record
    assert [f["name"] for f in metadata["features"]][:2] == ["input_ids", "input_mask"]
    assert metadata["counters"]["instances"] == first_run.counters["instances"]
    assert pipeline_output.read_metadata(str(out)) == metadata


def test_sharding_and_input_order_do_not_change_the_records(setup, first_run):
    files, _, config, runs = setup
    one_shard = B.PipelineConfig(**{**config.__dict__, "num_shards": 1, "max_tokenize_batch": 64})
    # Reversed order and a glob for the same files: inputs are sorted before numbering documents.
    summary = B.make_pretraining_data(list(reversed(files)), str(runs / "one"), one_shard)
    assert len(summary.files) == 1
    assert _records(summary.files) == _records(first_run.files)


class _SkippingTokenizer:
    """official's tokenizer, but sentences containing SKIPME yield no tokens (documents to drop)."""

    def __init__(self, model):
        from official.nlp.tools.tokenization import FullSentencePieceTokenizer

        self._inner = FullSentencePieceTokenizer(model)
        self.vocab = self._inner.vocab

    def tokenize(self, text):
        return [] if "SKIPME" in text else self._inner.tokenize(text)

    def convert_tokens_to_ids(self, tokens):
        return self._inner.convert_tokens_to_ids(tokens)


def test_documents_without_tokens_are_dropped_and_numbering_stays_dense(setup, tmp_path):
    files, model, config, _ = setup
    lines = [s for d in read_documents(files[0], "paragraphs") for s in d.sentences]
    corpus = tmp_path / "a.txt"
    corpus.write_text(
        "\n".join(lines[:40]) + "\n\nSKIPME one.\nSKIPME two.\n\n" + "\n".join(lines[40:90]) + "\n", encoding="utf-8"
    )
    second = tmp_path / "b.txt"
    second.write_text("SKIPME.\n\n" + "\n".join(lines[90:130]) + "\n", encoding="utf-8")
    skipping = B.PipelineConfig(
        **{**config.__dict__, "tokenizer": functools.partial(_SkippingTokenizer, model), "input_format": "sentences"}
    )
    summary = B.make_pretraining_data([str(corpus), str(second)], str(tmp_path / "out"), skipping)
    assert summary.counters["documents"] == 5 and summary.counters["documents_without_tokens"] == 2
    tokenizer = skipping.tokenizer()
    tokenize = P.DocumentTokenizer(tokenizer)
    docs = [tokenize(d) for f in (corpus, second) for d in read_documents(str(f))]
    docs = [d for d in docs if len(d)]
    assert len(docs) == 3
    vocab = P.VocabInfo.from_tokenizer(tokenizer)
    expected = sorted(
        serialize_instance(i, 128, 20)
        for i in P.create_training_instances(docs, INSTANCE, vocab, seed=11, dupe_factor=2)
    )
    assert _records(summary.files) == expected


def test_existing_output_and_overwrite(setup, first_run):
    files, _, config, runs = setup
    target = runs / "existing"
    small = B.PipelineConfig(**{**config.__dict__, "dupe_factor": 1, "num_shards": 3})
    B.make_pretraining_data(files[:1], str(target), small)
    with pytest.raises(B.PipelineError, match="is not empty"):
        B.make_pretraining_data(files[:1], str(target), small)
    summary = B.make_pretraining_data(files[:1], str(target), config, overwrite=True)
    assert sorted(os.listdir(target)) == [
        "metadata.json",
        "part-00000-of-00002.tfrecord",
        "part-00001-of-00002.tfrecord",
    ]
    assert len(summary.files) == 2
    (target / "notes.txt").write_text("mine")
    with pytest.raises(B.PipelineError, match="did not write .notes.txt"):
        B.make_pretraining_data(files[:1], str(target), config, overwrite=True)
    assert (target / "notes.txt").read_text() == "mine"


def test_tokenizer_spec(setup, tmp_path):
    _, model, _, _ = setup
    spec = B.TokenizerSpec(spm_model=model)
    assert spec.piece_style == "sentencepiece"
    tokenizer = spec()
    assert tokenizer.tokenize("Hello World")[0].startswith("\u2581")  # lower-cased SentencePiece pieces
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "##s"]) + "\n")
    spec = B.TokenizerSpec(vocab_file=str(vocab))
    assert spec.piece_style == "wordpiece" and spec().tokenize("Hello worlds") == ["hello", "world", "##s"]
    info = P.VocabInfo.from_tokenizer(spec(), spec.piece_style)
    assert info.start_table == bytes([1, 1, 1, 1, 1, 1, 1, 0])
    with pytest.raises(ValueError, match="exactly one"):
        B.TokenizerSpec()


@pytest.mark.parametrize(
    "content, message",
    [
        (b"Fine sentence.\nsecond \xc3\x28 line\n", "bad.txt:2: not valid UTF-8"),
        (b"Fine sentence.\nPK\x03\x04\x00\x00\n", "bad.txt:2: binary data"),
        (b"", "bad.txt: is empty"),
    ],
)
def test_malformed_input_fails_without_output(setup, tmp_path, content, message):
    files, _, config, _ = setup
    bad = tmp_path / "bad.txt"
    bad.write_bytes(content)
    with pytest.raises(MalformedInputError) as info:
        B.make_pretraining_data(files[:1] + [str(bad)], str(tmp_path / "out"), config)
    assert message in str(info.value) and str(bad) in str(info.value)
    assert sorted(os.listdir(tmp_path)) == ["bad.txt"]


def _in_memory_records(paths, config, dupe_factor=2):
    tokenizer = config.tokenizer()
    tokenize = P.DocumentTokenizer(tokenizer)
    docs = [tokenize(d) for f in paths for d in read_documents(str(f), config.input_format)]
    vocab = P.VocabInfo.from_tokenizer(tokenizer)
    return sorted(
        serialize_instance(i, 128, 20)
        for i in P.create_training_instances(docs, INSTANCE, vocab, seed=11, dupe_factor=dupe_factor)
    )


def test_control_characters_are_cleaned_and_counted(setup, tmp_path):
    files, _, config, _ = setup
    # A stray U+0002 used to fail the run as "binary data"; it is cleaned out, as BERT does.
    text = Path(files[0]).read_text(encoding="utf-8")
    stray = tmp_path / "stray.txt"
    stray.write_text(text.replace(" ", " \x02", 2).replace(".", ".\u200b", 1), encoding="utf-8")
    summary = B.make_pretraining_data([str(stray)], str(tmp_path / "out"), config)
    assert summary.counters["cleaned_characters"] == 3 and summary.counters["cleaned_files"] == 1
    assert summary.cleaned_files == {str(stray): 3}
    metadata = pipeline_output.read_metadata(summary.output_dir)
    assert metadata["cleaned_files"] == {str(stray): 3} and metadata["counters"]["cleaned_characters"] == 3
    clean = tmp_path / "clean.txt"
    clean.write_text(text, encoding="utf-8")
    assert _records(summary.files) == _in_memory_records([stray], config) == _in_memory_records([clean], config)


@pytest.mark.slow
def test_on_error_skip_leaves_unreadable_files_out(setup, tmp_path):
    files, _, config, _ = setup
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for f in files[:2]:
        (corpus / Path(f).name).write_bytes(Path(f).read_bytes())
    (corpus / "a_latin1.txt").write_bytes("Caf\xe9 au lait.\n".encode("latin-1"))
    (corpus / "b_utf16.txt").write_bytes("Some text.\n".encode("utf-16-le"))
    (corpus / "c_empty.txt").write_bytes(b"")
    (corpus / "notes.md").write_bytes(b"\xff not read: not a *.txt file")
    skipping = B.PipelineConfig(**{**config.__dict__, "on_error": "skip"})
    # A directory stands for its *.txt files.
    summary = B.make_pretraining_data([str(corpus)], str(tmp_path / "out"), skipping)
    assert summary.counters["files"] == 2 and summary.counters["skipped_files"] == 3
    assert summary.skipped_files == [
        (str(corpus / "a_latin1.txt"), f"{corpus / 'a_latin1.txt'}:1: not valid UTF-8 (byte 4 of the line: b'\\xe9')"),
        (str(corpus / "b_utf16.txt"), f"{corpus / 'b_utf16.txt'}:1: binary data, not UTF-8 text (a NUL at column 2)"),
        (str(corpus / "c_empty.txt"), f"{corpus / 'c_empty.txt'}: is empty"),
    ]
    metadata = pipeline_output.read_metadata(summary.output_dir)
    assert [e["file"] for e in metadata["skipped_files"]] == [p for p, _ in summary.skipped_files]
    # The same records as a run on the readable files alone.
    assert _records(summary.files) == _in_memory_records(sorted(corpus.glob("1*.txt")), config)
    with pytest.raises(MalformedInputError, match="a_latin1.txt:1: not valid UTF-8"):
        B.make_pretraining_data([str(corpus)], str(tmp_path / "failed"), config)
    with pytest.raises(B.PipelineError, match=r"no readable input file; skipped 1 unreadable file: .*a_latin1.txt:1"):
        B.make_pretraining_data([str(corpus / "a_latin1.txt")], str(tmp_path / "none"), skipping)
    assert sorted(os.listdir(tmp_path)) == ["corpus", "out"]
    with pytest.raises(ValueError, match="on_error must be 'raise' or 'skip'"):
        B.PipelineConfig(**{**config.__dict__, "on_error": "fail"})


def test_directory_inputs(tmp_path):
    (tmp_path / "b.txt").write_text("x")
    (tmp_path / "a.txt").write_text("x")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "c.txt").write_text("x")
    (tmp_path / "empty").mkdir()
    expected = [str(tmp_path / "a.txt"), str(tmp_path / "b.txt")]
    assert B.expand_inputs([str(tmp_path)]) == expected
    assert B.expand_inputs(str(tmp_path) + "/") == expected
    with pytest.raises(FileNotFoundError, match=r"no \*.txt file in directory .*empty"):
        B.expand_inputs([str(tmp_path / "empty")])


def test_failing_run_logs_no_beam_traceback(setup, tmp_path, caplog):
    files, _, config, _ = setup
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"caf\xe9\n")
    with caplog.at_level(logging.INFO):
        with pytest.raises(MalformedInputError):
            B.make_pretraining_data([files[0], str(bad)], str(tmp_path / "out"), config)
    assert not [r for r in caplog.records if r.exc_info or "MalformedInputError" in r.getMessage()]


class _BrokenTokenizer(_SkippingTokenizer):
    def tokenize(self, text):
        raise RuntimeError("tokenizer bug")


def test_other_failures_are_still_logged(setup, tmp_path, caplog):
    files, model, config, _ = setup
    broken = B.PipelineConfig(**{**config.__dict__, "tokenizer": functools.partial(_BrokenTokenizer, model)})
    with caplog.at_level(logging.INFO):
        with pytest.raises(B.PipelineError, match="tokenizer bug"):
            B.make_pretraining_data(files[:1], str(tmp_path / "out"), broken)
    assert [r for r in caplog.records if r.levelno == logging.ERROR and "tokenizer bug" in r.getMessage()]


def test_inputs_that_match_nothing(setup, tmp_path):
    _, _, config, _ = setup
    with pytest.raises(FileNotFoundError, match="no input file matches"):
        B.make_pretraining_data([str(tmp_path / "nothing-*.txt")], str(tmp_path / "out"), config)
    assert not (tmp_path / "out").exists()


def _cli(argv):
    from albert_tf.cli import make_pretraining_data as cli

    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    return cli.run(parser.parse_args(argv))


def test_cli(setup, tmp_path, capsys):
    files, model, _, _ = setup
    out = tmp_path / "cli"
    argv = ["--input", files[0], "--output-dir", str(out), "--spm-model", model, "--input-format", "paragraphs"]
    argv += ["--max-seq-length", "64", "--dupe-factor", "1", "--num-shards", "1", "--seed", "5"]
    assert _cli(argv + ["--", "--direct_running_mode=in_memory"]) == 0
    printed = capsys.readouterr().out
    assert "instances from 1 documents in 1 files to 1 shards" in printed
    records = _records(out.glob("part-*"))
    example = tf.train.Example.FromString(records[0]).features.feature
    assert len(example["input_ids"].int64_list.value) == 64
    assert json.loads((out / "metadata.json").read_text())["instance_config"]["max_seq_length"] == 64

    from albert_tf.cli import CommandError

    with pytest.raises(CommandError, match="is not empty"):
        _cli(argv)
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"\xff\xfe")
    with pytest.raises(CommandError, match=r"bad.txt:1: not valid UTF-8 .*\(--on-error skip leaves such files out\)"):
        _cli(["--input", str(bad), "--output-dir", str(tmp_path / "x"), "--spm-model", model])
    with pytest.raises(CommandError, match="not a SentencePiece model|No such file|does not exist"):
        _cli(["--input", files[0], "--output-dir", str(tmp_path / "y"), "--spm-model", str(bad)])
    with pytest.raises(CommandError, match="max_seq_length"):
        _cli(["--input", files[0], "--output-dir", str(tmp_path / "z"), "--spm-model", model, "--max-seq-length", "3"])
    assert sorted(os.listdir(tmp_path)) == ["bad.txt", "cli"]


# --- golden records: the output of the pipeline before its fast path, byte for byte ---------------

SAMPLE = Path(B.__file__).resolve().parents[1] / "resources" / "sample" / "sotu"
_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


class _GoldenTokenizer:
    """A tokenizer that depends on nothing but this file: lower-cased whitespace words, the 600 most
    frequent as one piece, the others cut into 3-letter pieces ("##" continuations)."""

    def __init__(self, words):
        self._common = frozenset(words[:600])
        pieces = {p for w in words for p in self._split(w)}
        self.vocab = {p: i for i, p in enumerate(_SPECIALS + sorted(pieces))}

    def _split(self, word):
        if word in self._common:
            return [word]
        return [word[:3]] + ["##" + word[i : i + 3] for i in range(3, len(word), 3)]

    def tokenize(self, text):
        return [p for w in text.lower().split() for p in self._split(w)]

    def convert_tokens_to_ids(self, tokens):
        return [self.vocab.get(t, 1) for t in tokens]


def _golden_words():
    import collections

    counts = collections.Counter(w for f in sorted(SAMPLE.glob("*.txt")) for w in f.read_text("utf-8").lower().split())
    return [w for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]


# sha256 of the sorted records, computed by the pipeline as it was before the fast path (commit
# fca79ce: reference functions, per-record Beam elements); the fast path must not change a byte.
GOLDEN = {
    "default128": (
        dict(instance=P.InstanceConfig(max_seq_length=128, max_predictions_per_seq=20), dupe_factor=2, seed=3),
        "8b9d8c31dffc15d5aa57149351d0952f5f0c90e6b2c7c3c32fb769d1bd28022e",
        {"documents": 12, "files": 12, "instances": 1650, "random_next_instances": 4},
    ),
    "variant64": (
        dict(
            instance=P.InstanceConfig(
                max_seq_length=64,
                max_predictions_per_seq=10,
                masked_lm_prob=0.2,
                short_seq_prob=0.3,
                ngram=2,
                do_whole_word_mask=False,
                random_next_sentence=True,
            ),
            dupe_factor=3,
            seed=99,
        ),
        "a6ff158d6f45df480833fbdaeba7bc4085e3316c979ce5350798dc50ba1ba8cc",
        {"documents": 12, "files": 12, "instances": 7279, "random_next_instances": 4785},
    ),
}


@pytest.mark.parametrize("name", sorted(GOLDEN))
@pytest.mark.slow
def test_records_equal_the_golden_records(name, tmp_path):
    import hashlib

    settings, digest, counters = GOLDEN[name]
    config = B.PipelineConfig(
        tokenizer=functools.partial(_GoldenTokenizer, _golden_words()),
        piece_style="wordpiece",
        input_format="paragraphs",
        num_shards=3,
        **settings,
    )
    summary = B.make_pretraining_data(str(SAMPLE), str(tmp_path / "out"), config)
    records = _records(summary.files)
    assert hashlib.sha256(b"".join(records)).hexdigest() == digest
    assert summary.counters == counters and len(summary.files) == 3


def test_framed_records_are_tfrecords(tmp_path):
    from apache_beam.io.tfrecordio import _TFRecordUtil

    from albert_tf.data.tfrecords import frame_record

    values = [b"", b"x", bytes(range(256)) * 40]
    path = tmp_path / "framed.tfrecord"
    path.write_bytes(b"".join(frame_record(v) for v in values))
    assert _records([path]) == sorted(values)
    for value in values:
        with open(tmp_path / "beam.tfrecord", "wb") as f:
            _TFRecordUtil.write_record(f, value)
        assert (tmp_path / "beam.tfrecord").read_bytes() == frame_record(value)


def test_metadata_names_the_tokenizer_spec(setup, tmp_path):
    """`pretrain --data` reads the tokenizer from here, so its output carries it unasked."""
    files, model, config, _ = setup
    spec = dataclasses.replace(config, tokenizer=B.TokenizerSpec(spm_model=os.path.relpath(model)), dupe_factor=1)
    summary = B.make_pretraining_data(files[:1], str(tmp_path / "out"), spec)
    tokenizer = pipeline_output.read_metadata(summary.output_dir)["tokenizer"]
    assert tokenizer == {"spm_model": os.path.abspath(model), "vocab_file": None, "lower_case": True}
