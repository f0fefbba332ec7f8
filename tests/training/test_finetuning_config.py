"""`albert_tf.training.finetuning_config`: one typed configuration (task, optimization, data,
runtime) resolved in one place (the task's preset, then the recipe for the model's size, then the
user's values, with one epochs-to-steps formula); the command line and the pipeline's Trainer
resolving the same run the same way through the one driver; the configuration printed, stored and
read back."""

from __future__ import annotations

import csv
import dataclasses
import json

import numpy as np
import pytest

from albert_tf.config import AlbertConfig
from albert_tf.errors import ParameterError
from albert_tf.tasks.family import task_family, task_names
from albert_tf.tasks.runner import FinetuneSettings
from albert_tf.training.finetuning_config import (
    USER_NAMES,
    FinetuningConfig,
    FinetuningError,
    resolve_finetuning_config,
    steps_for_epochs,
)

# Hidden sizes of the recipe's three size classes.
TINY, SMALL, BASE = (AlbertConfig(vocab_size=100, hidden_size=h, num_attention_heads=2, intermediate_size=2 * h)
                     for h in (128, 384, 768))
# Where each user value lands in the tree.
WHERE = {"learning_rate": "optimization", "bias_correction": "optimization", "weight_decay": "optimization",
         "batch_size": "data", "eval_batch_size": "data", "max_seq_length": "data",
         "dropout": "task", "encoder_dropout": "task", "pooling": "task"}


def resolve(task, config, **values):
    return resolve_finetuning_config(task_family(task), config, **values)


def values_of(config, names):
    return {name: getattr(getattr(config, WHERE[name]), name) for name in names}


@pytest.mark.parametrize("task, config, expected, num_train, schedule", [
    # A preset's rate only for base-size models; smaller ones take the recipe's. The preset's steps and warmup.
    ("sst-2", TINY, dict(learning_rate=1e-3, batch_size=32, max_seq_length=512, dropout=0.1, encoder_dropout=0.0,
                         pooling="mean", bias_correction=True, weight_decay=0.01), 4000, (20935, 1256)),
    ("sst-2", BASE, dict(learning_rate=1e-5, pooling="cls", bias_correction=True), 4000, (20935, 1256)),
    ("qqp", SMALL, dict(learning_rate=1e-4, batch_size=128, encoder_dropout=0.1, pooling="mean"), 10, (14000, 1000)),
    # No preset: the generic defaults (3 epochs of full batches, 10 % warmup) and the recipe's rate.
    ("classification", TINY, dict(learning_rate=1e-3, batch_size=32, max_seq_length=128, dropout=0.1,
                                  encoder_dropout=None, pooling="mean", bias_correction=True), 4000, (375, 37)),
    ("classification", BASE, dict(learning_rate=2e-5, pooling="cls"), 4010, (375, 37)),
    ("regression", SMALL, dict(learning_rate=1e-4, pooling="mean"), 100, (9, 0)),
    # Tagging trains the recipe's 10 epochs.
    ("conll", TINY, dict(learning_rate=1e-3, max_seq_length=128), 4000, (1250, 125)),
    ("peoples-daily", BASE, dict(learning_rate=2e-5, pooling="cls"), 320, (100, 10)),
    # Reading comprehension: the paper's Table 14.
    ("squad-v1", BASE, dict(learning_rate=5e-5, batch_size=48, max_seq_length=384, dropout=0.0, encoder_dropout=0.0),
     88000, (3649, 365)),
    ("squad-v2", TINY, dict(learning_rate=1e-3, batch_size=48, max_seq_length=512, dropout=0.1), 1, (8144, 814)),
    ("race", SMALL, dict(learning_rate=1e-4, batch_size=32, encoder_dropout=0.1, dropout=0.1), 1, (12000, 1000)),
])
def test_defaults_of_each_kind_of_task(task, config, expected, num_train, schedule):
    resolved = resolve(task, config)
    assert values_of(resolved, expected) == expected
    assert tuple(resolved.schedule(num_train)) == schedule
    assert resolved.data.eval_batch_size == resolved.data.batch_size
    assert resolved.task.name == task


def test_every_task_resolves_with_its_presets_metrics():
    for task in task_names():
        resolved = resolve(task, TINY)
        assert resolved.runtime.precision == "float32" and resolved.runtime.seed == 12345
    sst2 = resolve("sst-2", TINY)
    assert sst2.task.metrics == ("accuracy",) and sst2.task.best_metric == "accuracy" and sst2.preset.name == "sst-2"
    assert resolve("classification", TINY).task.metrics is None


def test_the_users_values_win():
    given = dict(learning_rate=3e-4, batch_size=8, eval_batch_size=5, max_seq_length=64, dropout=0.0,
                 encoder_dropout=0.2, pooling="cls", bias_correction=False, weight_decay=0.0)
    for task in task_names():
        assert values_of(resolve(task, TINY, **given), given) == given
    # An eval batch size of 0 is unset, as the command line reads it.
    assert resolve("classification", TINY, batch_size=8, eval_batch_size=0).data.eval_batch_size == 8
    runtime = resolve("classification", TINY, precision="mixed_bfloat16", strategy="mirrored", jit_compile=True, seed=7).runtime
    assert (runtime.precision, runtime.strategy, runtime.jit_compile, runtime.seed) == ("mixed_bfloat16", "mirrored", True, 7)


def test_the_length_and_the_warmup_in_order():
    # 640 examples at batch 32: 20 updates an epoch.
    assert tuple(resolve("sst-2", TINY, num_epochs=2.0).schedule(640)) == (40, 4)  # the preset's warmup goes with its steps
    assert tuple(resolve("sst-2", TINY, num_train_steps=50).schedule(640)) == (50, 5)
    assert tuple(resolve("sst-2", TINY, num_train_steps=50, num_epochs=2.0).schedule(640)) == (50, 5)  # steps first
    assert tuple(resolve("sst-2", TINY, warmup_proportion=0.5).schedule(640)) == (20935, 10467)
    assert tuple(resolve("sst-2", TINY, num_train_steps=50, warmup_steps=3, warmup_proportion=0.5).schedule(640)) == (50, 3)
    assert tuple(resolve("conll", TINY, num_train_steps=7).schedule(640)) == (7, 0)
    assert tuple(resolve("conll", TINY, num_epochs=1.5).schedule(640)) == (30, 3)
    # Epochs count full batches of accumulated updates (`steps_for_epochs`).
    assert tuple(resolve("classification", TINY, gradient_accumulation_steps=2).schedule(4000)) == (186, 18)
    assert tuple(resolve("classification", TINY).schedule(5)) == (3, 0)  # fewer examples than a batch: 1 an epoch
    with pytest.raises(FinetuningError) as raised:
        resolve("classification", TINY, num_train_steps=2, warmup_steps=5).schedule(100)
    assert raised.value.cli_message == "--warmup-steps (5) exceeds the number of training steps (2)"


def test_epochs_count_full_batches():
    assert steps_for_epochs(200, 2, 32) == 12
    assert steps_for_epochs(1080, 2, 32) == 66
    assert steps_for_epochs(50, 2.2, 10) == 11  # 2.2 * 5 is 11.000000000000002 in floats
    assert steps_for_epochs(200, 2.5, 16, gradient_accumulation_steps=2) == 15
    assert steps_for_epochs(5, 3, 32) == 3  # fewer examples than a batch: one step an epoch


@pytest.mark.parametrize("values, message", [
    (dict(learning_rate=0.0), "learning_rate must be > 0, got 0.0"),
    (dict(batch_size=0), "batch_size must be an integer >= 1, got 0"),
    (dict(num_epochs=-1.0), "num_epochs must be > 0, got -1.0"),
    (dict(warmup_proportion=1.5), "warmup_proportion must be in [0, 1], got 1.5"),
    (dict(pooling="max"), "pooling must be one of mean, cls, got 'max'"),
    (dict(precision="float16"), "precision must be one of float32, mixed_bfloat16, got 'float16'"),
    (dict(learning_rte=1e-3), "unknown fine-tuning setting 'learning_rte'; did you mean 'learning_rate'?"),
])
def test_an_impossible_value_is_one_line_naming_it(values, message):
    with pytest.raises(FinetuningError) as raised:
        resolve("classification", TINY, **values)
    assert isinstance(raised.value, ParameterError) and "\n" not in str(raised.value)
    assert str(raised.value).startswith(message), str(raised.value)


def test_a_task_kind_or_no_preset_resolves_the_recipe_alone():
    # The raw-text models name their task kind: no preset, so the classification task's values.
    for config in (TINY, BASE):
        by_kind = resolve_finetuning_config("classification", config)
        assert dataclasses.replace(by_kind, task=dataclasses.replace(by_kind.task, name="classification")) == \
            resolve("classification", config)
    assert resolve_finetuning_config("tagging", TINY).optimization.num_epochs == 10
    # Distillation skips the preset: a base-size student on SST-2 takes the recipe's rate, not the paper's 1e-5.
    assert resolve("sst-2", BASE).optimization.learning_rate == 1e-5
    student = resolve_finetuning_config(task_family("sst-2"), BASE, use_preset=False)
    assert student.preset is None and student.optimization.learning_rate == 2e-5
    assert student.data.batch_size == student.recipe.batch_size == 32 and tuple(student.schedule(640)) == (60, 6)
    # Without a preset, the recipe is the one source of the run's defaults.
    recipe = student.recipe
    assert (student.optimization.num_epochs, student.optimization.warmup_proportion, student.task.dropout,
            student.optimization.weight_decay, student.optimization.clipnorm) == (
        recipe.epochs, recipe.warmup_fraction, recipe.dropout, recipe.weight_decay, recipe.clipnorm)
    assert resolve("classification", TINY).data.max_seq_length == recipe.max_seq_length == 128


def test_the_command_lines_training_flags_are_the_configurations_values():
    flags = {f.name for f in dataclasses.fields(FinetuneSettings)}
    assert set(USER_NAMES) - flags == {"clipnorm"}  # the original's clipping is not a flag


def test_the_drivers_settings_come_from_the_configuration():
    from albert_tf.training.finetuning import FinetuningRunConfig

    resolved = resolve("classification", TINY, learning_rate=3e-4, batch_size=8, precision="mixed_bfloat16", seed=4)
    run = FinetuningRunConfig.from_config(resolved, 64, "out", verbose=0)
    assert (run.num_train_steps, run.warmup_steps) == tuple(resolved.schedule(64)) == (24, 2)
    assert (run.learning_rate, run.batch_size, run.eval_batch_size, run.precision, run.seed) == (3e-4, 8, 8, "mixed_bfloat16", 4)
    assert (run.weight_decay, run.clipnorm, run.bias_correction) == (0.01, 1.0, True) and run.verbose == 0
    # The driver's own defaults are the recipe's.
    bare = FinetuningRunConfig(num_train_steps=1, warmup_steps=0, learning_rate=1e-3, model_dir="out")
    assert (bare.weight_decay, bare.clipnorm, bare.bias_correction) == (run.weight_decay, run.clipnorm, run.bias_correction)


def test_the_configuration_round_trips_through_json_and_prints_one_line_a_section():
    resolved = resolve("sst-2", TINY, learning_rate=3e-4, precision="mixed_bfloat16")
    stored = json.loads(json.dumps(resolved.to_dict()))
    assert set(stored) == {"task", "optimization", "data", "runtime", "preset", "recipe"}
    assert FinetuningConfig.from_dict(stored) == resolved
    lines = resolved.describe(640)
    assert [line.split(":")[0] for line in lines] == ["config task", "config optimization", "config data", "config runtime"]
    assert "lr 0.0003" in lines[1] and "20935 steps (warmup 1256)" in lines[1] and "mixed_bfloat16" in lines[3]
    assert resolved.replace(learning_rate=1e-3, seed=1).optimization.learning_rate == 1e-3
    with pytest.raises(FinetuningError, match="not a fine-tuning configuration"):
        FinetuningConfig.from_dict({"task": {}})


def test_a_record_written_flat_before_the_tree_reads_back():
    flat = {"learning_rate": 0.001, "batch_size": 32, "eval_batch_size": 32, "max_seq_length": 64, "dropout": 0.1,
            "encoder_dropout": None, "pooling": "mean", "bias_correction": True, "num_train_steps": None,
            "num_epochs": 3.0, "warmup_steps": None, "warmup_proportion": 0.1, "gradient_accumulation_steps": 1,
            "preset": None, "recipe": {"size_class": "tiny", "learning_rate": 0.001, "epochs": 3.0, "batch_size": 32,
                                       "warmup_fraction": 0.1, "bias_correction": True, "pooling": "mean",
                                       "dropout": 0.1, "weight_decay": 0.01}}
    config = FinetuningConfig.from_dict(flat)
    assert config.optimization.learning_rate == 0.001 and config.data.max_seq_length == 64
    assert config.optimization.weight_decay == 0.01 and config.recipe.size_class == "tiny"


# --- the command line and the pipeline's Trainer resolve one run alike -----------------------------


class Captured(Exception):
    """Raised by the stand-in for `run_finetuning` once it has seen the run."""


def capture_run(monkeypatch, module):
    """Replaces `module.run_finetuning` by one that records the run's config and built model."""
    seen = {}

    def run_finetuning(model, train_dataset, eval_dataset=None, config=None, **objects):
        seen.update(config=config, model=model())
        raise Captured

    monkeypatch.setattr(module, "run_finetuning", run_finetuning)
    return seen


ROWS = [("pos", "the film was good fun"), ("neg", "a dull and long film")] * 8


def cli_run(tmp_path, monkeypatch, tiny_spm_model, tiny_config, values):
    from albert_tf.tasks import runner
    from albert_tf.training import finetuning

    data = tmp_path / "data"
    data.mkdir()
    for name, rows in (("train.tsv", ROWS), ("dev.tsv", ROWS[:4])):
        with open(data / name, "w", encoding="utf-8", newline="") as f:
            csv.writer(f, delimiter="\t", lineterminator="\n").writerows([("label", "text"), *rows])
    config_file = tmp_path / "albert_config.json"
    tiny_config.to_json_file(str(config_file))
    seen = capture_run(monkeypatch, finetuning)
    with pytest.raises(Captured):
        runner.finetune(FinetuneSettings(
            task="classification", data=str(data), model_dir=str(tmp_path / "cli"), text_column="text",
            label_column="label", config=str(config_file), spm_model=tiny_spm_model, max_seq_length=16, quiet=True,
            **values,
        ))
    return seen


def pipeline_run(tmp_path, monkeypatch, tiny_spm_model, tiny_config, values):
    from albert_tf.pipeline_steps import trainer
    from albert_tf.pipeline_steps.settings import finetuning_config
    from albert_tf.pipeline_steps.staging import write_summary
    from albert_tf.data.features import examples_dataset
    from albert_tf.training import finetuning

    vocab_dir = tmp_path / "vocab"
    vocab_dir.mkdir()
    write_summary(str(vocab_dir), {"type": "sentencepiece", "file": tiny_spm_model, "lower_case": True})
    n, seq = len(ROWS), 16
    features = {"input_ids": np.ones((n, seq), "int32"), "input_mask": np.ones((n, seq), "int32"),
                "segment_ids": np.zeros((n, seq), "int32"), "labels": np.arange(n, dtype="int32") % 2}
    seen = capture_run(monkeypatch, finetuning)
    # The configuration as the Trainer component makes it (`run_trainer`): the pipeline's own helper.
    config = finetuning_config(tiny_config, max_seq_length=seq, **values)
    with pytest.raises(Captured):
        trainer.train_classifier(
            examples_dataset(features), examples_dataset(features), config, num_train=n, labels=["neg", "pos"],
            pair=False, vocab_dir=str(vocab_dir), output_dir=str(tmp_path / "pipeline"), albert_config=tiny_config,
            model_name="m",
        )
    return seen


@pytest.mark.parametrize("values", [
    {},
    dict(learning_rate=3e-4, batch_size=4, num_epochs=2.0, warmup_proportion=0.25, pooling="cls", bias_correction=False),
])
def test_the_command_line_and_the_pipeline_resolve_a_run_alike(tmp_path, monkeypatch, capsys, tiny_spm_model, tiny_config,
                                                              values):
    def config_lines():
        return [line for line in capsys.readouterr().out.splitlines() if line.startswith("config ")]

    cli = cli_run(tmp_path, monkeypatch, tiny_spm_model, tiny_config, values)
    cli_printed = config_lines()
    pipeline = pipeline_run(tmp_path, monkeypatch, tiny_spm_model, tiny_config, values)
    # Each run prints its resolved configuration first, one line a section: the same for both.
    assert len(cli_printed) == 4 and config_lines() == cli_printed
    fields = ("num_train_steps", "warmup_steps", "learning_rate", "batch_size", "eval_batch_size", "bias_correction",
              "weight_decay", "clipnorm", "best_metric", "shuffle_buffer", "seed", "precision", "jit_compile",
              "collapse_metric")
    assert {f: getattr(pipeline["config"], f) for f in fields} == {f: getattr(cli["config"], f) for f in fields}
    # Both train the task's raw-text model, whose head is the same.
    assert [type(run["model"]).__name__ for run in (cli, pipeline)] == ["AlbertTextClassifier"] * 2
    heads = [{k: run["model"].task_model.get_config()[k] for k in ("num_labels", "pooling", "dropout")}
             for run in (cli, pipeline)]
    assert heads[0] == heads[1]
    if not values:
        # 16 examples, the tiny model's recipe: 3 epochs of one full batch, 1e-3, mean pooling, bias-corrected.
        assert (cli["config"].num_train_steps, cli["config"].learning_rate, heads[0]["pooling"]) == (3, 1e-3, "mean")
        assert cli["config"].bias_correction is True
