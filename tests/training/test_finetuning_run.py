"""Tests of `albert_tf.training.finetuning.run_finetuning`: best-checkpoint selection, step counting,
the atomic output directory, errors, a short run whose loss falls, its typed configuration
(`FinetuningRunConfig`, the same run as the keyword form), epochs and progress output."""

import io
import json
import os
import re

import numpy as np
import pytest

import keras
import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.modeling import AlbertEncoder
from albert_tf.data.features import examples_dataset
from albert_tf.tasks.classification import AlbertForClassification, make_eval_fn
from albert_tf.training import finetuning, progress, run_directory
from albert_tf.training.finetuning import FinetuningError, FinetuningRunConfig, run_finetuning

CONFIG = AlbertConfig(
    vocab_size=30, embedding_size=8, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
    max_position_embeddings=16,
)


def easy_features(n=128, seq=6, seed=0):
    """Label 1 iff the first word is token 7."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, size=n).astype("int32")
    ids = rng.integers(9, 30, size=(n, seq)).astype("int32")
    ids[:, 0] = 2
    ids[:, 1] = np.where(labels == 1, 7, 8)
    return {"input_ids": ids, "input_mask": np.ones((n, seq), "int32"), "segment_ids": np.zeros((n, seq), "int32"), "labels": labels}


def new_model():
    return AlbertForClassification(AlbertEncoder.from_albert_config(CONFIG), num_labels=2)


def leftovers(parent):
    return [name for name in os.listdir(parent) if ".partial-" in name or ".old-" in name or name.endswith(".resume")]


class RecordHead(keras.callbacks.Callback):
    """The classifier kernel after every interval."""

    def __init__(self):
        super().__init__()
        self.kernels = []

    def on_epoch_end(self, epoch, logs=None):
        self.kernels.append(np.array(self.model.head.kernel.numpy()))


@pytest.mark.slow
def test_keeps_the_best_weights_and_counts_steps(tmp_path):
    """Scripted metrics: the second of three evaluations is best; the run ends at exactly 5 steps."""
    keras.utils.set_random_seed(0)
    batches = examples_dataset(easy_features(32)).batch(8)
    scripted = iter([{"accuracy": 0.5, "f1": 0.1}, {"accuracy": 0.9, "f1": 0.2}, {"accuracy": 0.7, "f1": 0.3}])
    recorder = RecordHead()
    model_dir = tmp_path / "out"
    result = run_finetuning(
        new_model(), batches, batches, num_train_steps=5, warmup_steps=1, learning_rate=1e-2, model_dir=str(model_dir),
        eval_fn=lambda model, data: next(scripted), best_metric="accuracy", eval_every_n_steps=2,
        callbacks=[recorder], verbose=0, tensorboard=False,
    )
    assert [h["step"] for h in result.history] == [2, 4, 5]  # the last interval is shorter
    assert [h["is_best"] for h in result.history] == [True, True, False]  # a new best each time
    assert result.final_step == 5 and result.best_step == 4
    assert result.best_metrics == {"accuracy": 0.9, "f1": 0.2}
    assert not np.allclose(recorder.kernels[1], recorder.kernels[2])
    np.testing.assert_array_equal(result.model.head.kernel.numpy(), recorder.kernels[1])

    assert sorted(os.listdir(model_dir)) == ["COMPLETE", "eval_history.jsonl", "finetuning.json", "model.keras"]
    assert leftovers(tmp_path) == []
    info = run_directory.read_run_info(str(model_dir))
    assert info["best_step"] == 4 and info["num_train_steps"] == 5 and info["best_mode"] == "max"
    records = [json.loads(line) for line in (model_dir / "eval_history.jsonl").read_text().splitlines()]
    assert [r["eval_accuracy"] for r in records] == [0.5, 0.9, 0.7] and "train_loss" in records[0]
    loaded = run_directory.load_finetuned_model(str(model_dir))
    np.testing.assert_array_equal(loaded.head.kernel.numpy(), recorder.kernels[1])

    # An existing output is never replaced implicitly ...
    with pytest.raises(FileExistsError, match="completed fine-tuning run"):
        run_finetuning(new_model(), batches, num_train_steps=1, warmup_steps=0, learning_rate=1e-3, model_dir=str(model_dir))

    # ... and a failed replacement leaves the old one intact and no partial directory behind.
    def failing_eval(model, data):
        raise RuntimeError("dev data went away")

    with pytest.raises(RuntimeError, match="dev data went away"):
        run_finetuning(
            new_model(), batches, batches, num_train_steps=2, warmup_steps=0, learning_rate=1e-3,
            model_dir=str(model_dir), eval_fn=failing_eval, best_metric="accuracy", overwrite=True, verbose=0,
            tensorboard=False,
        )
    assert run_directory.read_run_info(str(model_dir))["best_step"] == 4
    assert leftovers(tmp_path) == []


@pytest.mark.slow
def test_errors_before_and_during_training(tmp_path):
    batches = examples_dataset(easy_features(16)).batch(8)
    common = dict(num_train_steps=2, warmup_steps=0, learning_rate=1e-3, verbose=0, tensorboard=False)
    with pytest.raises(FinetuningError, match="warmup_steps"):
        run_finetuning(new_model(), batches, model_dir=str(tmp_path / "a"), **{**common, "warmup_steps": 3})
    with pytest.raises(FinetuningError, match="best_mode"):
        run_finetuning(new_model(), batches, model_dir=str(tmp_path / "a"), best_mode="up", **common)
    with pytest.raises(FinetuningError, match="empty"):
        run_finetuning(new_model(), batches.take(0), model_dir=str(tmp_path / "a"), **common)
    with pytest.raises(FinetuningError, match="precision"):
        run_finetuning(new_model(), batches, model_dir=str(tmp_path / "a"), precision="mixed_bfloat16", **common)
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="non-empty directory"):
        run_finetuning(new_model(), batches, model_dir=str(tmp_path / "full"), **common)
    # A best_metric the evaluation does not produce fails at the first evaluation; nothing is left.
    with pytest.raises(FinetuningError, match="best_metric 'f1' is not among"):
        run_finetuning(
            new_model(), batches, batches, model_dir=str(tmp_path / "b"), best_metric="f1",
            eval_fn=lambda m, d: {"accuracy": 1.0}, **common,
        )
    assert not (tmp_path / "b").exists() and leftovers(tmp_path) == []
    assert finetuning.resolve_best_mode("eval_loss", "auto") == "min"
    assert finetuning.resolve_best_mode("mcc", "auto") == "max"


@pytest.mark.slow
def test_short_run_learns_and_builds_under_the_strategy(tmp_path):
    """Unbatched examples with `batch_size`, a model-building function, the GLUE eval function."""
    train = examples_dataset(easy_features(128))
    dev = examples_dataset(easy_features(64, seed=1))
    result = run_finetuning(
        new_model, train, dev, num_train_steps=80, warmup_steps=8, learning_rate=3e-3, model_dir=str(tmp_path / "run"),
        eval_fn=make_eval_fn(["accuracy", "f1"], regression=False), best_metric="accuracy", eval_every_n_steps=20,
        batch_size=16, shuffle_buffer=128, seed=3, precision="float32", verbose=0,
        bias_correction=False,  # the original's update, at the rate this short run was tuned for
    )
    losses = [h["train_loss"] for h in result.history]
    assert losses[-1] < 0.5 * losses[0]
    assert result.best_metrics["accuracy"] > 0.9
    assert os.path.isdir(tmp_path / "run" / "logs")  # TensorBoard
    assert run_directory.is_complete(str(tmp_path / "run"))


# --- collapse ------------------------------------------------------------------------------------


def unlearnable_features(n, seed, positive_share=0.5):
    """Labels independent of the tokens: nothing to learn beyond the label prior."""
    features = easy_features(n, seed=seed)
    rng = np.random.default_rng(seed + 100)
    features["input_ids"][:, 1] = rng.integers(9, 30, size=n)
    features["labels"] = (rng.random(n) < positive_share).astype("int32")
    return features


def collapse_run(tmp_path, name, train, dev, **kwargs):
    from albert_tf.evaluation import majority_class_baseline

    constant = majority_class_baseline(dev["labels"], ["accuracy", "mcc"])
    def mean_pooled():
        return AlbertForClassification(AlbertEncoder.from_albert_config(CONFIG), num_labels=2, pooling="mean")

    return run_finetuning(
        mean_pooled, examples_dataset(train), examples_dataset(dev), num_train_steps=40, warmup_steps=4,
        learning_rate=3e-3, model_dir=str(tmp_path / name), best_metric="accuracy", eval_every_n_steps=20,
        eval_fn=make_eval_fn(["accuracy", "mcc"], regression=False, diagnostics=True), batch_size=16, seed=3,
        bias_correction=True, constant_baseline=constant, verbose=0, tensorboard=False, **kwargs,
    )


@pytest.mark.slow
def test_a_run_that_learns_is_not_collapsed(tmp_path):
    result = collapse_run(tmp_path, "ok", easy_features(128), easy_features(64, seed=1))
    assert result.collapse is not None and not result.collapsed
    assert all(record["collapsed"] is False for record in result.history[1:])
    info = run_directory.read_run_info(str(tmp_path / "ok"))
    assert info["collapse"]["collapsed"] is False and info["bias_correction"] is True
    assert info["constant_baseline"]["kind"] == "majority_class"


@pytest.mark.slow
def test_a_run_stuck_at_the_label_prior_is_reported(tmp_path, caplog):
    train = unlearnable_features(128, seed=0)
    dev = unlearnable_features(64, seed=1, positive_share=0.8)
    with caplog.at_level("WARNING", logger="albert_tf.training.finetuning"):
        result = collapse_run(tmp_path, "stuck", train, dev)
    assert result.collapsed
    assert "best constant answer" in result.collapse.reason or result.collapse.constant
    assert any("collapsed" in message for message in caplog.messages)
    assert run_directory.read_run_info(str(tmp_path / "stuck"))["collapse"]["collapsed"] is True


@pytest.mark.slow
def test_on_collapse_raise_writes_nothing(tmp_path):
    train = unlearnable_features(128, seed=0)
    dev = unlearnable_features(64, seed=1, positive_share=0.8)
    with pytest.raises(finetuning.FinetuningCollapsed, match="fine-tuning collapsed"):
        collapse_run(tmp_path, "raise", train, dev, on_collapse="raise")
    assert not (tmp_path / "raise").exists() and leftovers(tmp_path) == []
    with pytest.raises(FinetuningError, match="on_collapse"):
        collapse_run(tmp_path, "bad", train, dev, on_collapse="ignore")


# --- the configuration ---------------------------------------------------------------------------


@pytest.mark.slow
def test_the_keyword_form_is_the_config_form(tmp_path):
    """The same settings as keywords and as a `FinetuningRunConfig`: the same weights, history and
    `finetuning.json`."""
    settings = dict(
        num_train_steps=6, warmup_steps=1, learning_rate=3e-3, best_metric="accuracy", eval_every_n_steps=3,
        batch_size=8, shuffle_buffer=32, seed=7, bias_correction=True, metadata={"task": "easy"}, verbose=0,
        tensorboard=False,
    )
    train, dev = examples_dataset(easy_features(32)), examples_dataset(easy_features(16, seed=1))
    eval_fn = make_eval_fn(["accuracy"], regression=False)
    by_keywords = run_finetuning(new_model, train, dev, eval_fn=eval_fn, model_dir=str(tmp_path / "keywords"), **settings)
    config = FinetuningRunConfig(model_dir=tmp_path / "config", **settings)
    by_config = run_finetuning(new_model, train, dev, config, eval_fn=eval_fn)
    for a, b in zip(by_keywords.model.weights, by_config.model.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    strip = lambda history: [{k: v for k, v in h.items() if k != "elapsed_s"} for h in history]  # noqa: E731
    assert strip(by_keywords.history) == strip(by_config.history) and by_config.best_step == by_keywords.best_step
    info = [{k: v for k, v in run_directory.read_run_info(d).items() if k != "history"}
            for d in (by_keywords.model_dir, by_config.model_dir)]
    assert info[0] == info[1] and info[1]["bias_correction"] is True and info[1]["metadata"] == {"task": "easy"}
    assert config.model_dir == str(tmp_path / "config")  # a path-like becomes its string


def test_config_names_its_first_bad_setting(tmp_path):
    base = dict(num_train_steps=2, warmup_steps=0, learning_rate=1e-3, model_dir=str(tmp_path / "run"))
    for changes, message in (
        ({"num_train_steps": 0}, "num_train_steps must be >= 1"),
        ({"warmup_steps": 3}, r"warmup_steps \(3\) exceeds num_train_steps \(2\)"),
        ({"steps_per_execution": True}, "steps_per_execution must be an integer"),
        ({"precision": "float16"}, "precision must be one of float32, mixed_bfloat16"),
        ({"best_mode": "up"}, "best_mode"),
        ({"verbose": 3}, "verbose must be 0, 1, 2 or 'auto'"),
        ({"eval_every_n_steps": 0}, "eval_every_n_steps must be >= 1"),
        ({"model_dir": ""}, "model_dir must be a path"),
        ({"on_collapse": "ignore"}, "on_collapse must be 'warn' or 'raise'"),
    ):
        with pytest.raises(FinetuningError, match=message):
            FinetuningRunConfig(**{**base, **changes})
    config = FinetuningRunConfig(**base)
    batches = examples_dataset(easy_features(16)).batch(8)
    with pytest.raises(FinetuningError, match="not both"):
        run_finetuning(new_model(), batches, None, config, seed=1)
    config.warmup_steps = 5  # set after it was made: checked again by the run
    with pytest.raises(FinetuningError, match="warmup_steps"):
        run_finetuning(new_model(), batches, None, config)
    assert not (tmp_path / "run").exists()


# --- epochs and progress -------------------------------------------------------------------------


def test_epochs_count_full_batches():
    """The run drops a last partial batch, so an epoch of 200 examples at batch 32 is 6 steps and
    2 epochs are 12 (rounding up gave 13: a third, 1-step interval shown as "Epoch 3/3")."""
    from albert_tf.training.finetuning_config import steps_for_epochs, steps_per_epoch

    assert steps_per_epoch(200, 32) == 6
    assert steps_for_epochs(200, 2, 32) == 12


def scripted_run(tmp_path, name, verbose, **kwargs):
    """Two epochs of 5 steps (40 examples, batch 8), evaluated after each."""
    scores = iter([{"accuracy": 0.5}, {"accuracy": 0.75}])
    return run_finetuning(
        new_model, examples_dataset(easy_features(40)), examples_dataset(easy_features(16, seed=1)),
        num_train_steps=10, warmup_steps=1, learning_rate=1e-3,
        model_dir=str(tmp_path / name), eval_fn=kwargs.pop("eval_fn", lambda model, data: next(scores)),
        best_metric="accuracy", batch_size=8, verbose=verbose, tensorboard=False, **kwargs,
    )


@pytest.mark.slow
def test_piped_progress_is_one_plain_line_per_interval(tmp_path, capsys):
    """Not a terminal ("auto" under pytest): no carriage returns or colour codes; each interval is
    one line labelled in steps and epochs, and its evaluation follows on a line of its own."""
    result = scripted_run(tmp_path, "piped", "auto")
    out = capsys.readouterr().out
    assert "\r" not in out and "\x1b[" not in out and "Epoch" not in out
    lines = [line for line in out.splitlines() if line.startswith(("steps ", "eval at step"))]
    assert [re.sub(r": .*", "", line) for line in lines] == [
        "steps 1-5 of 10 (epoch 1 of 2)", "eval at step 5", "steps 6-10 of 10 (epoch 2 of 2)", "eval at step 10",
    ]
    assert re.fullmatch(r"steps 1-5 of 10 \(epoch 1 of 2\): accuracy=\d\.\d{4}, loss=\d\.\d{4}, \d+\.\ds", lines[0])
    assert lines[3] == "eval at step 10: accuracy=0.7500  [best]" and result.best_step == 10


@pytest.mark.slow
def test_terminal_progress_bar_ends_before_the_evaluation_prints(tmp_path, capsys):
    scripted_run(tmp_path, "tty", 1)
    out = capsys.readouterr().out
    assert out.count("eval at step") == 2
    # Each evaluation starts a line: the interval's bar was finished first.
    assert all(out[i - 1] == "\n" for i in (m.start() for m in re.finditer("eval at step", out)))
    assert "steps 1-5 of 10 (epoch 1 of 2)\n" in out


def test_progress_line_waits_then_reports():
    now = [0.0]
    stream = io.StringIO()
    line = progress.ProgressLine("predicting", 10, stream=stream, tty=False, delay=3, every=10, clock=lambda: now[0])
    for done, at in ((1, 1.0), (2, 3.5), (3, 5.0), (4, 13.5), (10, 14.0)):
        now[0] = at
        line.update(done)
    line.close()
    # Quiet for 3 s, then a line every 10 s, then the end.
    assert stream.getvalue().splitlines() == [
        "predicting: 2/10 batches, 4s", "predicting: 4/10 batches, 14s", "predicting: 10/10 batches, 14s, done",
    ]

    tty = io.StringIO()
    line = progress.ProgressLine("eval", 4, stream=tty, tty=True, delay=0, clock=lambda: now[0])
    line.update(2)
    line.close()
    assert tty.getvalue().startswith("\reval: 2/4 batches [==========..........], 0s") and tty.getvalue().endswith(", done\n")

    short = io.StringIO()
    line = progress.ProgressLine("quick", 4, stream=short, tty=False, delay=3, clock=lambda: now[0])
    line.update(4)
    line.close()
    assert short.getvalue() == ""  # work shorter than the delay stays silent


def test_progress_callbacks_report_model_predict_and_evaluate(tmp_path):
    model = new_model()
    features = easy_features(24)
    data = examples_dataset(features).batch(8)
    model.compile(optimizer="sgd")
    stream = io.StringIO()
    options = dict(stream=stream, tty=False, delay=0, every=0, clock=lambda: 0.0)
    model.predict(data.map(lambda x: {k: v for k, v in x.items() if k != "labels"}), verbose=0,
                  callbacks=progress.progress_callbacks("scoring", **options))
    model.evaluate(data, verbose=0, callbacks=progress.progress_callbacks("scoring", **options))
    assert stream.getvalue().splitlines() == [f"scoring: {i}/3 batches, 0s" for i in (1, 2, 3)] * 2
    assert progress.progress_callbacks("scoring", verbose=0, stream=stream) == []
    # Nothing is patched onto the model: its methods are the class's.
    assert "predict" not in model.__dict__ and "evaluate" not in model.__dict__


@pytest.mark.slow
def test_an_eval_fn_without_a_callbacks_parameter_still_runs(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(progress, "PROGRESS_DELAY_S", 0.0)
    monkeypatch.setattr(progress, "PROGRESS_EVERY_S", 0.0)
    seen = []

    def plain(model, data):
        seen.append(data)
        return {"accuracy": 0.5}

    scripted_run(tmp_path, "plain", 2, eval_fn=plain)
    assert len(seen) == 2 and "evaluating at step" not in capsys.readouterr().err


@pytest.mark.slow
def test_slow_evaluations_show_progress_on_stderr(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(progress, "PROGRESS_DELAY_S", 0.0)
    monkeypatch.setattr(progress, "PROGRESS_EVERY_S", 0.0)
    scripted_run(tmp_path, "slow", 2, eval_fn=make_eval_fn(["accuracy"], regression=False))
    err = capsys.readouterr().err
    assert "evaluating at step 5: 1/2 batches" in err and "evaluating at step 10: 2/2 batches" in err
