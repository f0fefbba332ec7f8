"""Tests for the pretraining-data pipeline on Beam's DaskRunner: a Dask cluster of worker processes
writes exactly the direct runner's records and counts, fails cleanly, and leaves no process behind."""

import argparse
import json
import os
from pathlib import Path

import psutil
import pytest

pytest.importorskip("dask.distributed")

from albert_tf.data import beam_pipeline as B  # noqa: E402
from albert_tf.data import dask_runner as D  # noqa: E402
from albert_tf.data import pipeline_output  # noqa: E402
from albert_tf.data import pretraining_instances as P  # noqa: E402
from albert_tf.data.documents import MalformedInputError, read_documents  # noqa: E402

SAMPLE = Path(B.__file__).resolve().parents[1] / "resources" / "sample" / "sotu"


@pytest.fixture(scope="module")
def cluster():
    """Two worker processes of one thread each, as a remote cluster would be; shut down also on failure."""
    from dask.distributed import LocalCluster

    local = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=40)
    try:
        yield local
    finally:
        D._stop_workers(local)
        local.close()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """A SentencePiece model of the bundled sample and a small corpus: three addresses, one with
    control characters to clean, and a Latin-1 file that cannot be read."""
    import sentencepiece as spm

    root = tmp_path_factory.mktemp("dask-corpus")
    files = sorted(SAMPLE.glob("*.txt"))
    sentences = [s for f in files for d in read_documents(str(f), "paragraphs") for s in d.sentences]
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences),
        model_prefix=str(root / "sp"),
        vocab_size=1500,
        model_type="unigram",
        pad_id=0,
        unk_id=1,
        bos_id=-1,
        eos_id=-1,
        control_symbols=["[CLS]", "[SEP]", "[MASK]"],
        minloglevel=2,
        num_threads=1,
    )
    texts = root / "texts"
    texts.mkdir()
    for f in files[:3]:
        (texts / f.name).write_text(f.read_text("utf-8"), encoding="utf-8")
    (texts / "stray.txt").write_text(files[3].read_text("utf-8").replace(" ", " \x02", 2), encoding="utf-8")
    (texts / "latin1.txt").write_bytes("Caf\xe9 au lait.\n".encode("latin-1"))
    config = B.PipelineConfig(
        instance=P.InstanceConfig(max_seq_length=128, max_predictions_per_seq=20),
        tokenizer=B.TokenizerSpec(spm_model=str(root / "sp.model")),
        dupe_factor=2,
        seed=7,
        input_format="paragraphs",
        on_error="skip",
        max_tokenize_batch=2,
    )
    return texts, config, root


def _records(paths):
    # TensorFlow only here: the Dask workers import this module to unpickle `_BrokenTokenizer`,
    # and each would pay TensorFlow's import (seconds) for nothing.
    import tensorflow as tf

    return sorted(r.numpy() for r in tf.data.TFRecordDataset(sorted(str(p) for p in paths)))


def _metadata(summary):
    metadata = pipeline_output.read_metadata(summary.output_dir)
    return {k: v for k, v in metadata.items() if k != "files"}


@pytest.fixture(scope="module")
def direct(corpus):
    texts, config, root = corpus
    return B.make_pretraining_data(str(texts), str(root / "direct"), config)


@pytest.mark.slow
def test_dask_writes_the_direct_runners_records_and_counts(corpus, cluster, direct):
    texts, config, root = corpus
    sharded = B.PipelineConfig(**{**config.__dict__, "num_shards": 2})
    summary = B.make_pretraining_data(str(texts), str(root / "dask"), sharded, runner="dask", dask_address=cluster.scheduler_address)
    assert _records(summary.files) == _records(direct.files)
    assert summary.counters == direct.counters
    assert summary.counters["instances"] > 100 and summary.counters["random_next_instances"] > 0
    assert summary.counters["cleaned_characters"] == 2 and summary.counters["skipped_files"] == 1
    assert summary.cleaned_files == direct.cleaned_files == {str(texts / "stray.txt"): 2}
    assert summary.skipped_files == direct.skipped_files and "latin1.txt" in summary.skipped_files[0][0]
    assert [os.path.basename(f) for f in summary.files] == ["part-00000-of-00002.tfrecord", "part-00001-of-00002.tfrecord"]
    metadata = _metadata(summary)
    assert metadata == {**_metadata(direct), "counters": metadata["counters"]}
    assert json.loads((root / "dask" / "metadata.json").read_text())["counters"] == direct.counters
    assert sorted(os.listdir(root)) == ["dask", "direct", "sp.model", "sp.vocab", "texts"]  # no temporary directory left


@pytest.mark.slow
def test_the_scheduler_address_as_a_pipeline_option(corpus, cluster, direct):
    # The form a pipeline passes on: its runner name and its Beam arguments.
    texts, config, root = corpus
    summary = B.make_pretraining_data(
        str(texts),
        str(root / "option"),
        config,
        runner="DaskRunner",
        pipeline_args=[f"--dask_client_address={cluster.scheduler_address}", "--dask_npartitions=3"],
    )
    assert _records(summary.files) == _records(direct.files) and summary.counters == direct.counters
    assert len(summary.files) > 1  # one piece per task that wrote records


def test_dask_options_and_partitions():
    args = D._dask_args(["--dask_client_address=tcp://old:1", "--foo=1"], "tcp://new:2", 117)
    assert args == ["--foo=1", "--dask_client_address=tcp://new:2", "--dask_partition_size=117"]
    assert D._dask_args(["--dask_npartitions=8"], "tcp://a:1", 4) == ["--dask_npartitions=8", "--dask_client_address=tcp://a:1"]
    assert D.is_dask_runner("dask") and D.is_dask_runner("DaskRunner") and not D.is_dask_runner("DirectRunner")
    # DaskRunner cuts the file list by count; the files are dealt out so that the bytes balance.
    sizes = [900, 10, 10, 10, 500, 400, 10, 10]
    order, size = D._balanced_order(sizes, 2)
    assert size == 4 and sorted(order) == list(range(8))
    assert [sum(sizes[i] for i in order[:4]), sum(sizes[i] for i in order[4:])] == [930, 920]
    assert D._balanced_order([5, 1, 1], 4) == ([0, 1, 2], 1)


class _BrokenTokenizer:
    """Fails on every text, as a tokenizer with a bug would (importable by the workers)."""

    def __init__(self, model):
        from albert_tf.tokenization.tokenizers import SentencePieceTokenizer

        self.vocab = SentencePieceTokenizer(model).vocab

    def tokenize(self, text):
        raise RuntimeError("tokenizer bug")


@pytest.mark.slow
def test_a_failing_dask_run_names_the_file_and_leaves_nothing(corpus, cluster, tmp_path, caplog):
    import functools
    import logging

    texts, config, root = corpus
    strict = B.PipelineConfig(**{**config.__dict__, "on_error": "raise"})
    with caplog.at_level(logging.INFO):
        with pytest.raises(MalformedInputError, match=r"latin1.txt:1: not valid UTF-8"):
            B.make_pretraining_data(str(texts), str(tmp_path / "out"), strict, runner="dask", dask_address=cluster.scheduler_address)
    assert os.listdir(tmp_path) == []
    assert not [r for r in caplog.records if r.exc_info or "MalformedInputError" in r.getMessage()]
    # Any other failure is reported with its traceback.
    broken = B.PipelineConfig(**{**config.__dict__, "tokenizer": functools.partial(_BrokenTokenizer, str(root / "sp.model"))})
    caplog.clear()
    with caplog.at_level(logging.INFO):
        with pytest.raises(B.PipelineError, match="tokenizer bug"):
            B.make_pretraining_data(str(texts), str(tmp_path / "out"), broken, runner="dask", dask_address=cluster.scheduler_address)
    assert [r for r in caplog.records if r.levelno == logging.ERROR and r.exc_info]
    assert os.listdir(tmp_path) == []
    with pytest.raises(ValueError, match="dask_address is for runner='dask'"):
        B.make_pretraining_data(str(texts), str(tmp_path / "out"), config, dask_address=cluster.scheduler_address)


def _cli(argv):
    from albert_tf.cli import make_pretraining_data as cli

    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    return cli.run(parser.parse_args(argv))


@pytest.mark.slow
def test_cli_starts_and_stops_its_own_cluster(corpus, direct, tmp_path, capsys):
    texts, config, root = corpus
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    argv = ["--input", str(texts), "--output-dir", str(tmp_path / "cli"), "--spm-model", str(root / "sp.model")]
    argv += ["--input-format", "paragraphs", "--max-seq-length", "128", "--dupe-factor", "2", "--seed", "7"]
    argv += ["--on-error", "skip", "--runner", "dask", "--num-workers", "2"]
    assert _cli(argv) == 0
    printed = capsys.readouterr().out
    assert f"wrote {direct.counters['instances']} instances from 4 documents in 4 files" in printed
    assert _records((tmp_path / "cli").glob("part-*")) == _records(direct.files)
    left = [p for p in psutil.Process().children(recursive=True) if p.pid not in before and p.is_running()]
    assert [p for p in left if p.status() != psutil.STATUS_ZOMBIE] == []

    from albert_tf.cli import CommandError

    with pytest.raises(CommandError, match="--dask-address needs --runner dask"):
        _cli(argv[:-4] + ["--dask-address", "tcp://localhost:8786"])
    with pytest.raises(CommandError, match="--num-workers must be at least 1"):
        _cli(argv[:-1] + ["0"])


def test_a_cluster_that_does_not_start_is_one_line_naming_it(monkeypatch):
    """Dask's loop runner fails with a bare `AssertionError` when its IO loop does not start in time (a
    starved machine): the error names the cluster and the exception's type, not an empty reason."""
    import dask.distributed

    from albert_tf.errors import describe_error

    def no_cluster(**kwargs):
        raise AssertionError()

    monkeypatch.setattr(dask.distributed, "LocalCluster", no_cluster)
    with pytest.raises(B.PipelineError) as raised:
        with D.dask_cluster(num_workers=2):
            pass
    assert str(raised.value) == "the local Dask cluster of 2 worker processes did not start: AssertionError"
    assert describe_error(ValueError("two\nlines")) == "two lines"
