"""The pipeline steps' own rules (albert_tf.pipeline_steps): settings, splits, the blessing rule, pushing."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from albert_tf.pipeline_steps import evaluator, example_gen, pusher
from albert_tf.pipeline_steps.settings import PipelineSettings, SettingsError
from albert_tf.pipeline_steps.staging import read_summary, staged_directory

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _pipeline_helpers import write_corpus, write_task  # noqa: E402


# --- settings ------------------------------------------------------------------------------------


def test_default_settings_are_the_bundled_sample():
    settings = PipelineSettings()
    assert example_gen.expand_corpus(settings.corpus)
    assert os.path.isfile(os.path.join(settings.task_data, "train.tsv"))
    config = settings.albert_config(1234)
    assert config.vocab_size == 1234 and config.hidden_size == 128


def test_the_main_job_fine_tunes_with_its_recorded_recipe(tmp_path, monkeypatch, tiny_spm_model):
    """The sample job's Trainer (its summary.json "config"): 4000 examples, batch 32, 3 epochs -> 375
    steps (37 of warmup), 1e-3, mean pooling, bias-corrected AdamW. A change here changes the model."""
    import numpy as np

    from albert_tf.pipeline_steps import trainer
    from albert_tf.pipeline_steps.staging import write_summary
    from albert_tf.data.features import examples_dataset
    from albert_tf.training import finetuning

    s = PipelineSettings()
    with open(os.path.join(s.task_data, "train.tsv"), encoding="utf-8") as f:
        num_train = sum(1 for _ in f) - 1  # the header
    assert num_train == 4000
    seen = {}

    class Captured(Exception):
        pass

    def run_finetuning(model, train_dataset, eval_dataset=None, config=None, **objects):
        seen.update(config=config, model=model())
        raise Captured

    monkeypatch.setattr(finetuning, "run_finetuning", run_finetuning)
    vocab_dir = tmp_path / "vocab"
    vocab_dir.mkdir()
    write_summary(str(vocab_dir), {"type": "sentencepiece", "file": tiny_spm_model, "lower_case": True})
    features = {name: np.ones((8, s.max_seq_length), "int32") for name in ("input_ids", "input_mask", "segment_ids")}
    data = examples_dataset({**features, "labels": np.arange(8, dtype="int32") % 2})
    with pytest.raises(Captured):
        # As `run_trainer` calls it with the settings (`pipelines/components.py`).
        trainer.train_classifier(
            data, data, s.finetuning_config(s.vocab_size), num_train=num_train, labels=["0", "1"], pair=False,
            vocab_dir=str(vocab_dir), output_dir=str(tmp_path / "trainer"), albert_config=s.albert_config(s.vocab_size),
            model_name=s.model_name, deterministic=s.deterministic,
        )
    config = seen["config"]
    assert (config.num_train_steps, config.warmup_steps, config.batch_size) == (375, 37, 32)
    assert config.learning_rate == 1e-3 and config.bias_correction is True and seen["model"].pooling == "mean"
    assert (s.finetune_epochs, s.finetune_warmup_fraction, s.seed) == (3.0, 0.1, 12345)
    # The settings show what the one resolver decided; the Trainer's configuration is theirs.
    resolved = s.finetuning_config(s.vocab_size)
    assert (resolved.optimization.num_epochs, resolved.data.batch_size, resolved.optimization.weight_decay) == (3.0, 32, 0.01)


def test_settings_file_resolves_relative_paths_and_rejects_unknown_keys(tmp_path):
    path = tmp_path / "cfg.yaml"
    path.write_text("corpus: data/*.txt\ntask_data: task\nvocab_size: 500\nmodel: base-v2\n", encoding="utf-8")
    settings = PipelineSettings.from_file(str(path))
    assert settings.corpus == str(tmp_path / "data" / "*.txt")
    assert settings.task_data == str(tmp_path / "task")
    assert settings.albert_config(500).hidden_size == 768

    path.write_text("vocab_sise: 500\n", encoding="utf-8")
    with pytest.raises(SettingsError, match=r"cfg.yaml: unknown setting\(s\) vocab_sise"):
        PipelineSettings.from_file(str(path))


@pytest.mark.parametrize(
    "values, message",
    [
        ({"vocab_size": "big"}, "vocab_size must be int"),
        ({"vocab_size": True}, "vocab_size must be int"),
        ({"eval_fraction": 1.5}, "eval_fraction must be in"),
        ({"strategy": "magic"}, "strategy must be one of"),
        ({"model": {"hidden_sise": 3}}, "model:"),
        ({"max_seq_length": 4096}, "exceeds the model's max_position_embeddings"),
        ({"beam_args": "--x"}, "beam_args must be a list of strings"),
        ({"model_name": "../x"}, "model_name must be a plain directory name"),
    ],
)
def test_bad_settings_are_named(values, message):
    with pytest.raises(SettingsError, match=message):
        PipelineSettings.from_dict(values)


def test_settings_file_errors(tmp_path):
    with pytest.raises(SettingsError, match="cannot read"):
        PipelineSettings.from_file(str(tmp_path / "missing.yaml"))
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(SettingsError, match="bad.json is not valid JSON"):
        PipelineSettings.from_file(str(bad))
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"corpus: \xff\xfe\n")
    with pytest.raises(SettingsError, match="not UTF-8"):
        PipelineSettings.from_file(str(binary))


# --- staging -------------------------------------------------------------------------------------


def test_staged_directory_is_all_or_nothing(tmp_path):
    target = tmp_path / "out"
    with pytest.raises(RuntimeError):
        with staged_directory(str(target)) as staging:
            open(os.path.join(staging, "half"), "w").close()
            raise RuntimeError("crash")
    assert not target.exists() and os.listdir(tmp_path) == []
    target.mkdir()  # orchestrators create the artifact folder ahead of the step
    with staged_directory(str(target)) as staging:
        open(os.path.join(staging, "done"), "w").close()
    assert os.listdir(target) == ["done"]
    with pytest.raises(FileExistsError, match="not empty"):
        with staged_directory(str(target)):
            pass


# --- ExampleGen ----------------------------------------------------------------------------------


def test_example_gen_splits_and_reads_back(tmp_path):
    corpus = write_corpus(tmp_path / "corpus", 6)
    task = write_task(tmp_path / "task", [("1", "good film"), ("0", "bad film"), ("1", "fine")], [("0", "dull"), ("1", "great")])
    counts = example_gen.run_example_gen(corpus, str(task), str(tmp_path / "c"), str(tmp_path / "e"), eval_fraction=0.3)
    assert counts["examples"] == {"train": 3, "eval": 2}
    assert sum(counts["corpus"].values()) == 6 and counts["corpus"]["train"] >= 1 and counts["corpus"]["eval"] >= 1
    train = example_gen.read_split(str(tmp_path / "e"), "train")
    assert train[0] == {"text": "good film", "label": "1"}
    docs = example_gen.read_split(str(tmp_path / "c"), "train", example_gen.CORPUS_FILE)
    assert docs[0]["text"].split("\n")[1] == "A second paragraph."
    assert read_summary(str(tmp_path / "e"))["labels"] == ["0", "1"]
    # The split of a document depends on its own name only.
    assert all(example_gen.corpus_split(f"doc{i}.txt", 0.3) == example_gen.corpus_split(f"/other/doc{i}.txt", 0.3) for i in range(6))


def test_example_gen_writes_what_tensorflow_writes_without_importing_it(tmp_path):
    """ExampleGen writes its TFRecords without TensorFlow (its data steps need nothing else of it):
    the files are byte for byte what `tf.io.TFRecordWriter` writes of the same `tf.train.Example`s
    (serialized deterministically), the same in two processes, TensorFlow reads them back, and a
    damaged file is one line naming the record."""
    import tensorflow as tf

    from albert_tf.data.tfrecords import read_records

    corpus = write_corpus(tmp_path / "corpus", 2)
    task = write_task(tmp_path / "task", [("1", "good fïlm 電影"), ("0", "bad film")], [("0", "dull")])
    script = ("import sys\nfrom albert_tf.pipeline_steps import example_gen\n"
              "example_gen.run_example_gen(*sys.argv[1:5], eval_fraction=0.3)\n"
              "example_gen.read_split(sys.argv[4], 'train')\nassert 'tensorflow' not in sys.modules, 'TensorFlow was imported'\n")
    subprocess.run([sys.executable, "-c", script, corpus, str(task), str(tmp_path / "c"), str(tmp_path / "e")],
                   check=True, capture_output=True, timeout=120)
    path = os.path.join(example_gen.split_dir(str(tmp_path / "e"), "train"), example_gen.EXAMPLES_FILE)
    with tf.io.TFRecordWriter(str(tmp_path / "tf.tfrecord")) as writer:
        for label, text in (("1", "good fïlm 電影"), ("0", "bad film")):
            feature = {k: tf.train.Feature(bytes_list=tf.train.BytesList(value=[v.encode("utf-8")]))
                       for k, v in (("text", text), ("label", label))}
            example = tf.train.Example(features=tf.train.Features(feature=feature))
            writer.write(example.SerializeToString(deterministic=True))
    written = open(path, "rb").read()
    assert written == (tmp_path / "tf.tfrecord").read_bytes()
    example_gen.run_example_gen(corpus, str(task), str(tmp_path / "c2"), str(tmp_path / "e2"), eval_fraction=0.3)
    assert open(os.path.join(example_gen.split_dir(str(tmp_path / "e2"), "train"), example_gen.EXAMPLES_FILE), "rb").read() == written
    assert list(tf.data.TFRecordDataset(path).as_numpy_iterator()) == list(read_records(path))
    for name, damaged, what in (("cut", written[:-3], "truncated record 1"), ("header", written[:5], "truncated record 0"),
                                ("flipped", written[:20] + bytes([written[20] ^ 1]) + written[21:], "corrupted record 0")):
        (tmp_path / name).write_bytes(damaged)
        with pytest.raises(ValueError, match=f"^{re.escape(str(tmp_path / name))}: {what} at byte "):
            list(read_records(str(tmp_path / name)))


def test_example_gen_names_bad_input_and_writes_nothing(tmp_path):
    corpus = write_corpus(tmp_path / "corpus", 2)
    (tmp_path / "corpus" / "doc1.txt").write_bytes(b"fine line\nbroken \xff\xfe line\n")
    task = write_task(tmp_path / "task", [("1", "a")], [("0", "b")])
    with pytest.raises(ValueError, match=r"doc1.txt:2"):
        example_gen.run_example_gen(corpus, str(task), str(tmp_path / "c"), str(tmp_path / "e"))
    assert not (tmp_path / "c").exists() and not (tmp_path / "e").exists()

    corpus = write_corpus(tmp_path / "ok", 2)
    bad_task = write_task(tmp_path / "bad", [("1", "a")], [("0", "b")], header="label\tsentence")
    with pytest.raises(ValueError, match="text"):
        example_gen.run_example_gen(corpus, str(bad_task), str(tmp_path / "c"), str(tmp_path / "e"))
    with pytest.raises(FileNotFoundError, match="matches no file"):
        example_gen.run_example_gen(str(tmp_path / "none" / "*.txt"), str(task), str(tmp_path / "c"), str(tmp_path / "e"))
    assert not (tmp_path / "c").exists()


# --- Evaluator rule ------------------------------------------------------------------------------


def test_blessing_rule():
    assert evaluator.decide({"accuracy": 0.7}, None, "accuracy", 0.6, 0.0)[0]
    blessed, reason = evaluator.decide({"accuracy": 0.5}, None, "accuracy", 0.6, 0.0)
    assert not blessed and "below the threshold" in reason
    blessed, reason = evaluator.decide({"accuracy": 0.7}, {"accuracy": 0.71}, "accuracy", 0.6, 0.0)
    assert not blessed and "worse than the pushed model" in reason
    assert evaluator.decide({"accuracy": 0.7}, {"accuracy": 0.71}, "accuracy", 0.6, 0.02)[0]
    assert evaluator.decide({"accuracy": 0.71}, {"accuracy": 0.71}, "accuracy", 0.6, 0.0)[0]


def test_score_counts_unknown_labels_as_wrong():
    metrics = evaluator.score(["pos", "neg", "maybe", "pos"], ["pos", "neg", "neg", "neg"], ["neg", "pos"])
    assert metrics["accuracy"] == pytest.approx(0.5)
    assert metrics["f1"] == pytest.approx(0.5)  # tp 1, fp 2 ("maybe" for a true neg counts as pos), fn 0


# --- Pusher --------------------------------------------------------------------------------------


def fake_saved_model(directory, weights: bytes):
    (directory / "variables").mkdir(parents=True)
    (directory / "saved_model.pb").write_bytes(b"graph")
    (directory / "variables" / "variables.data-00000-of-00001").write_bytes(weights)
    (directory / "assets").mkdir()
    return str(directory)


def test_pusher_versions_and_blessings(tmp_path):
    base = tmp_path / "serving"
    first = fake_saved_model(tmp_path / "a", b"w1")
    result = pusher.run_pusher(first, True, True, str(base), "m", str(tmp_path / "p1"))
    assert result["pushed"] and result["version"] == 1
    assert (base / "m" / "1" / "saved_model.pb").exists() and (base / "models.config").exists()
    assert json.loads((tmp_path / "p1" / "summary.json").read_text())["pushed"]

    again = pusher.run_pusher(first, True, True, str(base), "m")
    assert not again["pushed"] and "identical to the serving version 1" in again["reason"]

    second = fake_saved_model(tmp_path / "b", b"w2")
    for blessed, infra, why in ((False, True, "Evaluator"), (True, False, "InfraValidator")):
        result = pusher.run_pusher(second, blessed, infra, str(base), "m")
        assert not result["pushed"] and why in result["reason"]
    assert sorted(os.listdir(base / "m")) == ["1"]
    assert pusher.run_pusher(second, True, True, str(base), "m")["version"] == 2
    assert 'base_path: "/models/m"' in (base / "models.config").read_text()


def test_interrupted_push_leaves_no_version(tmp_path, monkeypatch):
    import shutil

    base = tmp_path / "serving"
    candidate = fake_saved_model(tmp_path / "a", b"w1")
    real_copytree = shutil.copytree

    def failing_copy(src, dst, **kwargs):
        if src.endswith("saved_model.pb"):
            raise OSError("disk full")
        return shutil.copy2(src, dst, **kwargs)

    def copytree(src, dst, *args, **kwargs):
        # Nested calls (shutil recurses through this name) pass the copy function on themselves.
        return real_copytree(src, dst, *args, **kwargs) if args or kwargs else real_copytree(src, dst, copy_function=failing_copy)

    monkeypatch.setattr(pusher.shutil, "copytree", copytree)
    with pytest.raises(Exception, match="disk full"):
        pusher.run_pusher(candidate, True, True, str(base), "m")
    assert os.listdir(base / "m") == []
