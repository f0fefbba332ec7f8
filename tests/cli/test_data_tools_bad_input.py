"""train-tokenizer and make-pretraining-data on awkward input: both read the same cleaned text,
agree on unreadable files, and a failing make-pretraining-data run prints one line, without Beam's
traceback or its "apitools not found" warning."""

import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from albert_tf.data import beam_pipeline as B
from albert_tf.data.documents import MalformedInputError, read_documents
from albert_tf.data.pretraining_instances import InstanceConfig
from albert_tf.tokenization import corpus_files
from albert_tf.tokenization.sentencepiece_vocab import iter_training_sentences, train_sentencepiece
from albert_tf.tokenization.text import preprocess_text
from albert_tf.tokenization.wordpiece_vocab import build_wordpiece_vocab

REPO = Path(__file__).resolve().parents[2]
SOTU = REPO.parent / "shared" / "data" / "en" / "sotu"
WORDS = "the nation congress people states year law peace trade war treaty army navy budget".split()


def _document(rng, sentences=4):
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 12))).capitalize() + "." for _ in range(sentences)]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """A directory with a clean file, one with stray control characters and one in Latin-1."""
    rng = random.Random(3)
    directory = tmp_path_factory.mktemp("corpus")
    clean = ["\n".join(_document(rng)) for _ in range(8)]
    (directory / "a_clean.txt").write_text("\n\n".join(clean) + "\n", encoding="utf-8")
    stray = [_document(rng) for _ in range(8)]
    stray[0][1] = stray[0][1].replace(" ", " \x02", 1)  # as the 1890 address: "4 1\x02 per cent"
    stray[1][0] = stray[1][0].replace(" ", "\u200b ", 1)  # a zero-width space (category Cf)
    stray[2].insert(1, "\x07\x1b")  # a line of control characters only
    (directory / "b_stray.txt").write_text("\n\n".join("\n".join(d) for d in stray) + "\n", encoding="utf-8")
    (directory / "c_latin1.txt").write_bytes("Caf\xe9 society.\nSecond line.\n".encode("latin-1"))
    return directory


def test_both_tools_read_the_same_cleaned_text(corpus):
    files = corpus_files.expand_inputs(str(corpus))
    assert [os.path.basename(f) for f in files] == ["a_clean.txt", "b_stray.txt", "c_latin1.txt"]
    readable = files[:2]
    # What train-tokenizer trains on is what make-pretraining-data tokenizes, sentence by sentence.
    report = corpus_files.CorpusReport()
    trained_on = list(iter_training_sentences(readable, report=report))
    documents = [d for f in readable for d in read_documents(f, "sentences")]
    assert trained_on == [preprocess_text(s) for d in documents for s in d.sentences]
    assert not any(c in s for s in trained_on for c in "\x02\x07\x1b\u200b")
    assert (report.cleaned_characters, report.cleaned_files) == (4, [str(corpus / "b_stray.txt")])

    # The Latin-1 file: the same problem, named the same way, by both.
    latin1 = str(corpus / "c_latin1.txt")
    expected = f"{latin1}:1: not valid UTF-8 (byte 4 of the line: b'\\xe9')"
    with pytest.raises(corpus_files.UnreadableTextError) as tokenizer_error:
        list(iter_training_sentences(files))
    with pytest.raises(MalformedInputError) as reader_error:
        list(read_documents(latin1))
    assert str(tokenizer_error.value) == str(reader_error.value) == expected


def test_both_tools_report_the_same_cleaning_and_skips(corpus, tmp_path):
    spm = train_sentencepiece(
        str(corpus), str(tmp_path / "sp"), 60, hard_vocab_limit=False, seed=1, on_error="skip", num_threads=1
    )
    wordpiece = build_wordpiece_vocab(str(corpus), str(tmp_path / "vocab.txt"), 100, on_error="skip")
    config = B.PipelineConfig(
        instance=InstanceConfig(max_seq_length=64, max_predictions_per_seq=10),
        tokenizer=B.TokenizerSpec(spm_model=spm.model_file),
        piece_style="sentencepiece",
        dupe_factor=1,
        on_error="skip",
    )
    summary = B.make_pretraining_data([str(corpus)], str(tmp_path / "out"), config)
    latin1 = str(corpus / "c_latin1.txt")
    skipped = ((latin1, f"{latin1}:1: not valid UTF-8 (byte 4 of the line: b'\\xe9')"),)
    assert spm.skipped_files == wordpiece.skipped_files == tuple(summary.skipped_files) == skipped
    stray = str(corpus / "b_stray.txt")
    assert spm.cleaned_files == wordpiece.cleaned_files == tuple(summary.cleaned_files) == (stray,)
    assert spm.cleaned_characters == wordpiece.cleaned_characters == summary.counters["cleaned_characters"] == 4
    assert summary.counters["files"] == 2 and summary.counters["documents"] == 16


def test_the_1890_address_reads_the_same_in_both_tools():
    path = SOTU / "1890_benjamin_harrison_r.txt"
    if not path.exists():
        pytest.skip(f"shared data not found at {SOTU}")
    report = corpus_files.CorpusReport()
    lines = [line.strip() for _, _, line in corpus_files.iter_corpus_lines([str(path)], report=report) if line.strip()]
    document, = read_documents(str(path), "paragraphs")
    assert " ".join(lines) == " ".join(document.sentences)
    assert report.cleaned_characters == 1 and "\x02" not in " ".join(lines)


def _run(code, *args, cwd):
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=300
    )


@pytest.mark.slow
def test_a_failing_run_prints_one_line(corpus, tmp_path, tiny_spm_model):
    argv = ["make-pretraining-data", "--input", str(corpus), "--output-dir", str(tmp_path / "out"),
            "--spm-model", tiny_spm_model, "--dupe-factor", "1", "--max-seq-length", "64"]  # fmt: skip
    result = _run("import sys, albert_tf.cli as c; sys.exit(c.main(sys.argv[1:]))", *argv, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    # The cleaning note of b_stray.txt (if read before the failure) is progress; beside it, only
    # the error, and no traceback.
    lines = result.stderr.splitlines()
    assert [line for line in lines if "b_stray.txt: removed 4 control characters" not in line] == [
        f"albert-tf make-pretraining-data: error: {corpus / 'c_latin1.txt'}:1: not valid UTF-8 "
        "(byte 4 of the line: b'\\xe9') (--on-error skip leaves such files out)"
    ]
    assert not (tmp_path / "out").exists()


def test_importing_beam_drops_only_the_apitools_warning(tmp_path):
    code = (
        "import logging, albert_tf.data.beam_pipeline\n"
        "logging.getLogger('apache_beam.io.gcp').warning('a real warning')\n"
        "logging.warning('apitools not found, later: not from the import')\n"
    )
    result = _run(code, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [
        "WARNING:apache_beam.io.gcp:a real warning",
        "WARNING:root:apitools not found, later: not from the import",
    ]
