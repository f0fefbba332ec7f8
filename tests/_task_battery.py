"""The per-task test battery, written once: every raw-text task model passes the same checks.

In the spirit of keras-hub's `run_task_test`: a `TaskCase` says how to build one family's model,
a tiny learnable set of raw strings and labels, the probe inputs to answer, how the served
answers read as `predict`'s, and what bad inputs look like; the checks below take a trained
case and apply to each family alike (tests/tasks/test_task_battery.py lists the families):

1. `check_fit_lowers_the_loss`: `fit` on raw strings learns (the training loss falls);
2. `check_keras_round_trip`: `model.save(x.keras)` + `keras.saving.load_model` answer identically;
3. `check_export`: `model.export` writes a SavedModel of the family's kind with `serving_default`;
4. `check_served_answers_equal_predict`: the SavedModel loaded in-process serves what `predict`
   answers (floats within 1e-5, labels, entity and answer spans equal);
5. `check_bad_input`: each bad input raises one exception whose one-line message names the problem;
6. `check_finetune_runs_the_driver`: `model.finetune` on raw strings trains through
   `run_finetuning`, the driver of `albert-tf finetune`, learns, and writes a model directory
   whose `model.keras` answers as the model does;
7. `check_loss_is_the_heads`: the loss `compile()` gives the model equals its head's
   `compute_task_loss` (what `albert-tf finetune` and the pipeline minimise) on the same batch;
8. `check_trains_as_its_head`: on token features with the labels inside (how `albert-tf finetune`,
   the pipeline's Trainer and the benchmarks feed it), compiled with `loss=None`, the model is its
   head: the head's outputs, loss and metric names, and the head's variables in the head's order.

The trained case is made once per family for the session (`produce`, behind conftest.py's
`task_family` fixture) and shared with the round-trip matrix (tests/tasks/test_round_trip.py): `fit`
on the raw strings, a few more updates through `model.finetune` (which writes the matrix's model
directory), `model.save` and `model.export`. Checks 6 and 8 build fresh models of their own.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Sequence

import keras
import numpy as np
import tensorflow as tf

from albert_tf.export.saved_model import read_export_info
from albert_tf.training.run_directory import read_run_info
from albert_tf.modeling import AlbertEncoder
from albert_tf.tokenization.in_graph import AlbertTokenizerLayer

# Served answers against `predict`'s: the SavedModel runs other kernels than Keras' traced graph.
SERVED_TOLERANCE = 1e-5
# The last epoch's training loss must be at most this fraction of the first's.
LEARNED_LOSS_RATIO = 0.6
# `finetune`'s best dev loss must be at most this fraction of its first evaluation's.
FINETUNED_LOSS_RATIO = 0.8
# The recipe's optimizer at this rate learns each tiny set in a few dozen updates (at the tiny
# recipe's 1e-3 it would take hundreds).
LEARNING_RATE = 5e-3
# `produce`'s `model.finetune` after `fit`: a few updates, enough to write the model directory.
FINETUNE_STEPS = 4


# Compared by identity (`eq=False`): equal bad inputs of two families stay two test parameters,
# which pytest must not group together across the families' module-scoped models.
@dataclasses.dataclass(frozen=True, eq=False)
class BadInput:
    """An input a model must refuse before it runs: `predict(x)`, or `evaluate(x, y)` with labels
    (`evaluate` reads its inputs as `fit` does, without changing the shared model).

    Attributes:
        what: The problem, in words (the test id).
        x, y: The input (and labels).
        error: The exception's type.
        match: A regular expression its message must match.
    """

    what: str
    x: Any
    error: type
    match: str
    y: Any = None


@dataclasses.dataclass(frozen=True)
class TaskCase:
    """One family's model, data and answers, as the battery needs them.

    Attributes:
        name: The family's name (the test ids and the served model's name).
        build: `(encoder, preprocessor) -> model`: a fresh compiled raw-text task model.
        sequence_length: The tokenizer layer's sequence length.
        x, y: The tiny learnable training set: raw strings (as `fit` takes them) and labels.
        probe: Raw inputs that `predict`, the reloaded model and the SavedModel answer.
        serving_inputs: `probe -> serving_default`'s keyword arguments.
        served_answers: `serving_default`'s outputs (NumPy) -> the answers to compare.
        predicted_answers: `predict`'s output -> the answers to compare (default: as it is).
        export_kind: The kind `export.json` records (the task kind; SQuAD with its version).
        signatures: The export's signature keys.
        bad_inputs: Inputs that must raise one clear error.
        export_kwargs: More `model.export` arguments (e.g. `pair=True`).
        head_labels: `y` of a `make_dataset` batch -> the head's label inputs (the names its
            `compute_task_loss` reads).
        epochs, batch_size: The training run.
    """

    name: str
    build: Callable[[AlbertEncoder, AlbertTokenizerLayer], keras.Model]
    sequence_length: int
    x: Any
    y: Any
    probe: Any
    serving_inputs: Callable[[Any], Dict[str, tf.Tensor]]
    served_answers: Callable[[Dict[str, np.ndarray]], Any]
    export_kind: str
    signatures: Sequence[str]
    bad_inputs: Sequence[BadInput]
    predicted_answers: Callable[[Any], Any] = lambda predicted: predicted
    export_kwargs: Dict[str, Any] = dataclasses.field(default_factory=dict)
    head_labels: Callable[[Any], Dict[str, tf.Tensor]] = lambda y: {"labels": y}
    epochs: int = 6
    batch_size: int = 8


@dataclasses.dataclass
class TrainedTask:
    """A case's trained model, its `fit` history and `predict`'s answers to the probe (from a
    predict function traced after the last training, as a reloaded model's is)."""

    case: TaskCase
    model: keras.Model
    history: keras.callbacks.History
    predicted: Any


@dataclasses.dataclass
class ProducedTask(TrainedTask):
    """A family's model as `produce` made it: `fit` (`history`), then `model.finetune`,
    `model.save` and `model.export` of the same model; `predicted` (also `answers`) is the finished
    model's answers to the probe, which every producer's output must give back.

    Attributes:
        paths: {producer: path}: "model.finetune" (the model directory), "model.save" (the
            `.keras` file) and "export" (the SavedModel's version directory).
        export_result: `model.export`'s `ExportResult`.
    """

    paths: Dict[str, Path] = dataclasses.field(default_factory=dict)
    export_result: Any = None

    @property
    def answers(self):
        return self.predicted


@dataclasses.dataclass
class ExportedTask:
    """A trained case's export: the `ExportResult` and its `serving_default` loaded in-process."""

    trained: TrainedTask
    result: Any
    serving_default: Callable


def build(case: TaskCase, config, spm_model: str, seed: int = 0) -> keras.Model:
    """The case's model on a fresh encoder of `config` and the SentencePiece model.

    Seeding clears TF's eager kernel cache: call it before the graphs of the case are built, not
    between them (the battery's fixtures train one family at a time)."""
    keras.utils.set_random_seed(seed)
    encoder = AlbertEncoder.from_albert_config(config)
    preprocessor = AlbertTokenizerLayer.from_sentencepiece(spm_model, sequence_length=case.sequence_length)
    return case.build(encoder, preprocessor)


def fit(case: TaskCase, model: keras.Model) -> keras.callbacks.History:
    """`model.fit` on the case's raw strings at `LEARNING_RATE`."""
    model.optimizer.learning_rate = LEARNING_RATE
    return model.fit(case.x, case.y, batch_size=case.batch_size, epochs=case.epochs, verbose=0)


def produce(case: TaskCase, config, spm_model: str, root: Path) -> ProducedTask:
    """The family's one shared model (tests/tasks/test_task_battery.py and test_round_trip.py read
    it): `build` and `fit`, then `model.finetune` for `FINETUNE_STEPS` more updates into
    `root/run` (what is checked there is that every loader answers as the model, not how well it
    learned: no constant-answer check), `model.save` to `root/saved.keras` and `model.export`
    without the fresh-process compatibility check under `root/serving`; then the answers.

    `predict` comes last: `finetune` seeds, which clears TF's eager kernel cache and with it the
    SentencePiece resource of a QA model's traced answer function made before."""
    model = build(case, config, spm_model)
    history = fit(case, model)
    model.finetune(case.x, case.y, validation_data=(case.x, case.y), model_dir=str(root / "run"), seed=0,
                   learning_rate=LEARNING_RATE, batch_size=case.batch_size, num_train_steps=FINETUNE_STEPS,
                   warmup_proportion=0.0, constant_baseline=None, verbose=0)
    model.save(root / "saved.keras")
    result = model.export(root / "serving", model_name=case.name, check=False, **case.export_kwargs)
    paths = {"model.finetune": root / "run", "model.save": root / "saved.keras", "export": Path(result.path)}
    return ProducedTask(case, model, history, model.predict(case.probe, verbose=0), paths=paths,
                        export_result=result)


class Producers:
    """`producers(name)`: the family's `ProducedTask`, made by `produce` on its first request and
    kept: one per family for the session. Each pytest-xdist worker makes its own, which is why
    conftest.py schedules the modules that read them as one unit of work."""

    def __init__(self, cases: Dict[str, TaskCase], config, spm_model: str, tmp_path_factory):
        self.cases, self.config, self.spm_model, self.tmp_path_factory = cases, config, spm_model, tmp_path_factory
        self.produced: Dict[str, ProducedTask] = {}

    def __call__(self, name: str) -> ProducedTask:
        if name not in self.produced:
            root = self.tmp_path_factory.mktemp(f"{name}_family")
            self.produced[name] = produce(self.cases[name], self.config, self.spm_model, root)
        return self.produced[name]


def load_export(trained: ProducedTask) -> ExportedTask:
    """The produced export and its `serving_default`, loaded in-process."""
    result = trained.export_result
    serving_default = tf.saved_model.load(result.path).signatures["serving_default"]
    return ExportedTask(trained, result, serving_default)


def assert_same_answers(got, want, tolerance: float = 0.0, where: str = "answers") -> None:
    """Answers equal, nested alike (dicts, lists, arrays): floats within `tolerance` (relative and
    absolute), everything else (labels, ids, spans, texts) exactly."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and set(got) == set(want), (where, got, want)
        for key in want:
            assert_same_answers(got[key], want[key], tolerance, f"{where}[{key!r}]")
    elif isinstance(want, (list, tuple)):
        assert isinstance(got, (list, tuple)) and len(got) == len(want), (where, got, want)
        for i, (g, w) in enumerate(zip(got, want)):
            assert_same_answers(g, w, tolerance, f"{where}[{i}]")
    elif isinstance(want, (float, np.floating)) or (isinstance(want, np.ndarray) and want.dtype.kind == "f"):
        np.testing.assert_allclose(got, want, rtol=tolerance, atol=tolerance, err_msg=where)
    elif isinstance(want, np.ndarray):
        np.testing.assert_array_equal(got, want, err_msg=where)
    else:
        assert got == want, (where, got, want)


# --- the checks ------------------------------------------------------------------------------------


def check_fit_lowers_the_loss(trained: TrainedTask) -> None:
    """`fit` on raw strings ran every epoch with finite losses, and learned: the loss fell."""
    losses = trained.history.history["loss"]
    assert len(losses) == trained.case.epochs and np.isfinite(losses).all(), losses
    assert losses[-1] <= LEARNED_LOSS_RATIO * losses[0], losses


def check_keras_round_trip(trained: TrainedTask, tmp_path: Path) -> None:
    """A `.keras` file reloads as the same class and config with the same answers, bit for bit."""
    model = trained.model
    path = tmp_path / f"{trained.case.name}.keras"
    model.save(path)
    reloaded = keras.saving.load_model(path)
    assert type(reloaded) is type(model)
    assert reloaded.get_config() == model.get_config()
    # The optimizer comes back with its state: training would go on from where it was.
    assert int(reloaded.optimizer.iterations) == int(model.optimizer.iterations) > 0
    assert_same_answers(reloaded.predict(trained.case.probe, verbose=0), trained.predicted)


def check_export(exported: ExportedTask) -> None:
    """The export is version 1 of a SavedModel of the family's kind, with the family's signatures,
    `serving_default` among them."""
    result, case = exported.result, exported.trained.case
    assert Path(result.path).parts[-2:] == (case.name, "1") and Path(result.path, "saved_model.pb").is_file()
    assert "serving_default" in case.signatures and set(result.signatures) == set(case.signatures)
    assert read_export_info(result.path)["kind"] == case.export_kind
    assert callable(exported.serving_default)


def check_served_answers_equal_predict(exported: ExportedTask) -> None:
    """`serving_default` on the probe's raw strings answers what `predict` does."""
    case = exported.trained.case
    outputs = exported.serving_default(**case.serving_inputs(case.probe))
    served = case.served_answers({key: value.numpy() for key, value in outputs.items()})
    assert_same_answers(served, case.predicted_answers(exported.trained.predicted), SERVED_TOLERANCE)


def check_bad_input(trained: TrainedTask, bad: BadInput) -> None:
    """The bad input raises one exception (none chained to it) of the expected type, with a
    one-line message that names the problem."""
    error = _raised(trained.model, bad)
    assert error is not None, f"{bad.what}: nothing raised"
    message = str(error)
    assert type(error) is bad.error, f"{bad.what}: {type(error).__name__} instead of {bad.error.__name__}: {message}"
    assert error.__cause__ is None and (error.__context__ is None or error.__suppress_context__), (
        f"{bad.what}: raised while handling {error.__context__!r}"
    )
    assert message and "\n" not in message, f"{bad.what}: {message!r}"
    assert re.search(bad.match, message), f"{bad.what}: {message!r} does not match {bad.match!r}"


def check_finetune_runs_the_driver(case: TaskCase, config, spm_model: str, model_dir: Path) -> None:
    """`finetune` on the case's raw strings (dev: the same strings) runs the resolved schedule in
    `run_finetuning`, learns (the best dev loss is at most `FINETUNED_LOSS_RATIO` of the first
    evaluation's), keeps the best weights and writes them as a `.keras` model that answers alike."""
    model = build(case, config, spm_model)
    result = model.finetune(case.x, case.y, validation_data=(case.x, case.y), model_dir=str(model_dir), seed=0,
                            learning_rate=LEARNING_RATE, batch_size=case.batch_size, num_epochs=case.epochs,
                            warmup_proportion=0.0, verbose=0)
    info = read_run_info(str(model_dir))
    assert result.final_step == info["num_train_steps"] > 0
    assert info["learning_rate"] == LEARNING_RATE and info["bias_correction"]
    losses = [record["eval_loss"] for record in result.history]
    # The first evaluation comes after a pass of training: the loss has fallen some way already.
    assert len(losses) == case.epochs and min(losses) <= FINETUNED_LOSS_RATIO * losses[0], losses
    assert model.best_metric in result.best_metrics and not result.collapsed
    reloaded = keras.saving.load_model(model_dir / "model.keras")
    assert type(reloaded) is type(model)
    assert_same_answers(reloaded.predict(case.probe, verbose=0), model.predict(case.probe, verbose=0))


def check_loss_is_the_heads(trained: TrainedTask) -> None:
    """`compile()`'s loss is the head's: the raw-text model and `albert-tf finetune` minimise the
    same function (compared on one batch of the training set, dropout off)."""
    model, case = trained.model, trained.case
    x, y = next(iter(model.make_dataset(case.x, case.y, batch_size=case.batch_size)))
    compiled = model.compute_loss(x=x, y=y, y_pred=model(x, training=False), training=False)
    inputs = {**x, **case.head_labels(y)}
    head = model.task_model.compute_task_loss(inputs, model.task_model(inputs, training=False))
    np.testing.assert_allclose(float(compiled), float(head), rtol=1e-5, err_msg=f"{case.name}: compiled vs head loss")


def check_trains_as_its_head(case: TaskCase, config, spm_model: str) -> None:
    """A fresh model of the case, given one training batch as a feature dict with the labels inside:
    it calls its head (`has_labels_inside`), its variables are the head's in the head's order (what
    `run_finetuning` checkpoints and the optimizer's slots follow), and compiled with `loss=None`
    its `evaluate` reports the head's loss and the head's metrics under the head's names."""
    model = build(case, config, spm_model)
    x, y = next(iter(model.make_dataset(case.x, case.y, batch_size=case.batch_size)))
    inputs = {**x, **case.head_labels(y)}
    assert model.has_labels_inside(inputs) and not model.has_labels_inside(x), case.name
    head = model.task_model
    for part in ("variables", "trainable_variables"):
        assert [id(v) for v in getattr(model, part)] == [id(v) for v in getattr(head, part)], (case.name, part)
    outputs, head_outputs = model(inputs, training=False), head(inputs, training=False)
    assert sorted(outputs) == sorted(head_outputs), case.name
    for name in head_outputs:
        np.testing.assert_array_equal(outputs[name], head_outputs[name], err_msg=f"{case.name}: {name}")
    model.compile(optimizer="adam", loss=None)
    result = model.evaluate(tf.data.Dataset.from_tensors(inputs), verbose=0, return_dict=True)
    assert set(result) == {"loss"} | {m.name for m in head.metrics}, (case.name, sorted(result))
    np.testing.assert_allclose(result["loss"], float(head.compute_task_loss(inputs, head_outputs)), rtol=1e-5,
                               err_msg=f"{case.name}: evaluate's loss vs the head's")


def _raised(model, bad: BadInput) -> Optional[BaseException]:
    try:
        if bad.y is None:
            model.predict(bad.x, verbose=0)
        else:
            model.evaluate(bad.x, bad.y, verbose=0)
    except Exception as error:  # noqa: BLE001 - the check inspects whatever was raised
        return error
    return None

