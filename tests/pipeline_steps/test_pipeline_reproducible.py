"""A seeded pipeline run is reproducible: the same inputs give the same data and the same model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from albert_tf.pipeline_steps import transform
from albert_tf.pipeline_steps.staging import read_summary

REPO = Path(__file__).resolve().parents[2]


def read_records(files):
    import tensorflow as tf

    return [r for f in files for r in tf.data.TFRecordDataset(f).as_numpy_iterator()]


def write_records(path, records):
    import tensorflow as tf

    with tf.io.TFRecordWriter(str(path)) as writer:
        for record in records:
            writer.write(record)


def record_files(directory):
    return {name: Path(directory, name).read_bytes() for name in sorted(os.listdir(directory)) if name.endswith(".tfrecord")}


def test_canonical_record_order_ignores_the_writers_order_and_sharding(tmp_path):
    records = [f"record {i}".encode() * (1 + i % 7) for i in range(300)]
    one, three = tmp_path / "one", tmp_path / "three"
    one.mkdir(), three.mkdir()
    write_records(one / "part-00000-of-00001.tfrecord", records)
    for shard in range(3):
        write_records(three / f"part-{shard:05d}-of-00003.tfrecord", records[::-1][shard::3])
    (three / "metadata.json").write_text(json.dumps({"files": ["part-00000-of-00003.tfrecord"]}), encoding="utf-8")
    for shard_bytes in (transform.CANONICAL_SHARD_BYTES, 2000):  # one canonical shard, then several
        a = transform.canonical_record_order(str(one), shard_bytes)
        b = transform.canonical_record_order(str(three), shard_bytes)
        assert record_files(one) == record_files(three)
        assert [os.path.basename(f) for f in a] == [os.path.basename(f) for f in b] == sorted(record_files(one))
        assert sorted(read_records(b)) == sorted(records)
        assert sorted(os.listdir(one)) == [os.path.basename(f) for f in a]  # the old shards are gone
        assert json.loads((three / "metadata.json").read_text())["files"] == [os.path.basename(f) for f in b]
    assert len(b) > 1


def test_transform_output_does_not_depend_on_the_runners_record_order(shared_pipeline_run, tmp_path, monkeypatch):
    """Beam promises the set of records, not their order; the local runner's order changed from
    run to run. A second Transform (of the shared run's splits and vocabulary) whose runner writes
    the records reversed, in two shards, must still give the run's files (the Pretrainer reads
    them in file order)."""
    from albert_tf.data import beam_pipeline

    settings, artifacts = shared_pipeline_run.settings, shared_pipeline_run.run.artifacts
    first = Path(artifacts["transformed"])
    real = beam_pipeline.make_pretraining_data

    def another_runners_order(*args, **kwargs):
        run = real(*args, **kwargs)
        records = read_records(run.files)[::-1]
        for path in run.files:
            os.remove(path)
        for shard in range(2):
            write_records(Path(run.output_dir, f"part-{shard:05d}-of-00002.tfrecord"), records[shard::2])
        return run

    monkeypatch.setattr(beam_pipeline, "make_pretraining_data", another_runners_order)
    second = tmp_path / "second"
    transform.run_transform(
        artifacts["corpus_splits"], artifacts["example_splits"], artifacts["vocabulary"], str(second),
        max_seq_length=settings.max_seq_length, max_predictions_per_seq=settings.max_predictions_per_seq,
        dupe_factor=settings.dupe_factor, seed=settings.seed,
    )
    records_dir = Path(transform.RECORDS_DIR)
    assert record_files(first / records_dir) == record_files(second / records_dir)
    assert read_summary(str(first))["pretraining"]["counters"]["instances"] == len(read_records(transform.pretraining_files(str(first))))
    assert json.loads((second / records_dir / "metadata.json").read_text())["files"] == sorted(record_files(first / records_dir))


# What the pipeline's Pretrainer and Trainer components call (pipelines/components.py), with the
# run's settings, in a fresh process.
TRAIN_AGAIN = r'''
import json, sys

from albert_tf.export import compatibility
from albert_tf.pipeline_steps import trainer
from albert_tf.pipeline_steps.settings import PipelineSettings
from albert_tf.pipeline_steps.staging import read_summary

transformed, vocab, out = sys.argv[1], sys.argv[2], sys.argv[3]
s = PipelineSettings.from_json(sys.argv[4])
# The test loads and runs both candidates itself; the export's reload check (one more process)
# would repeat that, and the run's Trainer made it on the same weights.
compatibility.check_reload = lambda *args, **kwargs: None
config = s.albert_config(read_summary(vocab)["vocab_size"])
trainer.run_pretrainer(transformed, vocab, f"{out}/pretrained", config, steps=s.pretrain_steps,
                       batch_size=s.pretrain_batch_size, learning_rate=s.pretrain_learning_rate,
                       warmup_steps=s.pretrain_warmup_steps, strategy=s.strategy, precision=s.precision, seed=s.seed,
                       deterministic=s.deterministic)
trainer.run_trainer(transformed, vocab, f"{out}/pretrained", f"{out}/trained", config,
                    model_name=s.model_name, num_epochs=s.finetune_epochs, batch_size=s.finetune_batch_size,
                    learning_rate=s.finetune_learning_rate, pooling=s.finetune_pooling,
                    bias_correction=s.finetune_bias_correction, warmup_proportion=s.finetune_warmup_fraction,
                    strategy=s.strategy, precision=s.precision, seed=s.seed, deterministic=s.deterministic)
'''


def saved_model_state(path):
    """Every variable of a SavedModel (name, shape, bytes; sorted: the export's object order may
    vary) and its probabilities for a few texts."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401

    loaded = tf.saved_model.load(path)
    serve = loaded.signatures["serving_default"]
    variables = sorted((v.name, tuple(v.shape), v.numpy().tobytes()) for v in serve.variables)
    assert variables, "the signature reads no variables"
    texts = tf.constant(["good film", "awful plot and dull actor", "the nation"])
    return variables, serve(text=texts)["probabilities"].numpy()


def test_training_steps_give_the_same_model_twice(shared_pipeline_run, tmp_path):
    """The Pretrainer and Trainer, run again in a fresh process on the shared run's Transform
    output with its settings (its seed), write the weights that run's steps wrote."""
    settings, artifacts = shared_pipeline_run.settings, shared_pipeline_run.run.artifacts
    again = tmp_path / "again"
    done = subprocess.run([sys.executable, "-c", TRAIN_AGAIN, artifacts["transformed"], artifacts["vocabulary"],
                           str(again), settings.to_json()], cwd=REPO, capture_output=True, text=True)
    if done.returncode:
        pytest.fail(f"the training steps failed:\n{done.stderr[-3000:]}")
    runs = [(Path(artifacts["pretrained_model"]), Path(artifacts["trained_model"])),
            (again / "pretrained", again / "trained")]
    (pretrained_a, trained_a), (pretrained_b, trained_b) = runs
    checkpoint = Path("tf1", "model.ckpt.data-00000-of-00001")
    assert (pretrained_a / checkpoint).read_bytes() == (pretrained_b / checkpoint).read_bytes()
    assert read_summary(str(trained_a))["best_dev_metrics"] == read_summary(str(trained_b))["best_dev_metrics"]
    candidate = Path("serving", settings.model_name, "1")
    (variables_a, probabilities_a), (variables_b, probabilities_b) = (
        saved_model_state(str(trained / candidate)) for _, trained in runs)
    assert variables_a == variables_b
    np.testing.assert_array_equal(probabilities_a, probabilities_b)
