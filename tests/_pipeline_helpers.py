"""Tiny pipeline inputs written by the pipeline tests (a task table, a corpus, tiny settings) and
the one tiny pipeline run that the end-to-end, warm-start and distillation tests share."""

import contextlib
import os
import random
import shutil
import sys
from typing import NamedTuple

from kfp import dsl

from albert_tf.pipeline_steps.settings import PipelineSettings


def write_task(directory, train_rows, dev_rows, header="label\ttext"):
    directory.mkdir(parents=True, exist_ok=True)
    for name, rows in (("train", train_rows), ("dev", dev_rows)):
        (directory / f"{name}.tsv").write_text(header + "\n" + "".join(f"{l}\t{t}\n" for l, t in rows), encoding="utf-8")
    return directory


def write_corpus(directory, count=5):
    directory.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        (directory / f"doc{i}.txt").write_text(f"First paragraph of document {i}. It has two sentences.\nA second paragraph.\n", encoding="utf-8")
    return str(directory / "*.txt")


WORDS = ("the nation people congress law year states good bad great awful film plot actor scene story "
         "music war peace trade budget tax school health jobs energy future freedom economy").split()
POSITIVE, NEGATIVE = "good great wonderful moving".split(), "bad awful dull boring".split()


def tiny_inputs(root, random_labels=False):
    """A corpus and a keyword task (a label word decides); `random_labels`: nothing to learn."""
    rng = random.Random(0)
    corpus = root / "corpus"
    corpus.mkdir(parents=True)
    for d in range(6):
        paragraphs = [". ".join(" ".join(rng.choice(WORDS) for _ in range(8)).capitalize() for _ in range(3)) + "." for _ in range(12)]
        (corpus / f"doc{d}.txt").write_text("\n".join(paragraphs) + "\n", encoding="utf-8")
    # Enough rows that the tiny model learns the keywords rather than memorising the examples.
    task = write_keyword_task(root / "task", rng, (("train", 240), ("dev", 60)), random_labels)
    return str(corpus / "*.txt"), str(task)


def write_keyword_task(task, rng, counts, random_labels=False):
    """`train.tsv` / `dev.tsv` of the keyword task (one sentiment word decides the label) with
    `counts` rows per split, drawn from `rng`."""
    task.mkdir(parents=True)
    for split, count in counts:
        rows = []
        for i in range(count):
            label = i % 2
            words = [rng.choice(POSITIVE if label else NEGATIVE)] + [rng.choice(WORDS) for _ in range(5)]
            rng.shuffle(words)
            if random_labels:
                label = int(rng.random() < 0.7)
            rows.append(f"{label}\t{' '.join(words)}")
        (task / f"{split}.tsv").write_text("label\ttext\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return task


def write_span(directory, seed):
    """A span of the keyword task, drawn with its own seed. Its eval split is large enough (300
    rows) that the drift check sees two clean spans as the same."""
    write_keyword_task(directory, random.Random(seed), (("train", 240), ("dev", 300)))


def tiny_settings(root, **overrides) -> PipelineSettings:
    corpus, task = tiny_inputs(root) if not (root / "corpus").exists() else (str(root / "corpus" / "*.txt"), str(root / "task"))
    values = dict(
        corpus=corpus, task_data=task, vocab_size=60, max_seq_length=24, max_predictions_per_seq=4, dupe_factor=1,
        model=dict(embedding_size=8, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
                   max_position_embeddings=24),
        pretrain_steps=3, pretrain_batch_size=8, pretrain_warmup_steps=1, finetune_epochs=8.0, finetune_batch_size=16,
        finetune_learning_rate=5e-3,
        serving_base=str(root / "serving"), model_name="tiny", eval_threshold=0.0, eval_fraction=0.3,
    )
    values.update(overrides)
    return PipelineSettings(**values)


class SharedRun(NamedTuple):
    """The shared run: its settings, its `LocalRun`, its pipeline root and what it wrote on stderr."""

    settings: PipelineSettings
    run: object
    pipeline_root: str
    stderr: str


@contextlib.contextmanager
def stderr_into(path):
    """Sends this process's stderr (file descriptor 2, which the steps' subprocesses inherit, and
    `sys.stderr`) into the file `path` for the block."""
    sys.stderr.flush()
    saved = os.dup(2)
    with open(path, "a", encoding="utf-8") as f:
        os.dup2(f.fileno(), 2)
        try:
            with contextlib.redirect_stderr(f):
                yield
        finally:
            f.flush()
            os.dup2(saved, 2)
            os.close(saved)


def run_shared_pipeline(root) -> SharedRun:
    """The tiny pipeline run once on span 1 of the keyword task (`root/task-{SPAN}`), from scratch
    to a pushed version 1 under `root/serving`. Its tests read it and never change it for good: a
    test that needs another serving base or a second span copies what it needs (see
    `fresh_serving_base` for one that reuses the run's cached steps)."""
    from pipelines.albert_pipeline import run_local

    _, task = tiny_inputs(root)
    shutil.rmtree(task)
    write_span(root / "task-1", seed=1)
    settings = tiny_settings(root, task_data=str(root / "task-{SPAN}"))
    pipeline_root = str(root / "runs")
    stderr = root / "stderr.txt"
    with stderr_into(stderr):
        run = run_local(settings, pipeline_root)
    return SharedRun(settings, run, pipeline_root, stderr.read_text(encoding="utf-8"))


@contextlib.contextmanager
def fresh_serving_base(settings: PipelineSettings):
    """An empty serving base and statistics store at the shared run's paths for the block; the
    shared run's are put back afterwards. The paths are pipeline parameters of the cached steps:
    a run with them (and the same data) takes those steps from the shared run's cache."""
    kept = [(path, path + ".kept") for path in (os.path.abspath(settings.serving_base), settings.statistics_store_path())]
    for path, aside in kept:
        os.rename(path, aside)
    try:
        yield
    finally:
        for path, aside in kept:
            shutil.rmtree(path, ignore_errors=True)
            os.rename(aside, path)


# A two-step pipeline (the second never cached) for what kfp.local prints; a second or two a step. Defined here:
# kfp reads the parameter types from the annotations, which `from __future__ import annotations`
# (in the test modules) turns into strings.
@dsl.component(base_image="python:3.11", install_kfp_package=False)
def echo(word: str) -> str:
    print(f"the step says {word}")
    return word


@dsl.pipeline(name="echo")
def echo_pipeline(word: str = "hi") -> str:
    first = echo(word=word)
    return echo(word=first.output).set_caching_options(False).output
