"""The task template: what every fine-tuning task provides, the pieces they share, and the lookup.

A task is one folder of `albert_tf.tasks` (`classification/`, `tagging/`, ...). Its raw-text Keras
model (`text_model.py`: `AlbertTextClassifier`, ...) is the task as a user holds it; the model
reaches the rest of the folder: its head on token ids (`head.py`, the model's `task_model`), its
TF Serving signatures (`serving.py`), and the folder's `TaskFamily` subclass (`family.py`; the
model's `family`), which is the task as `albert-tf finetune`, `evaluate`, `predict` and `export`
run it: it reads its splits, encodes features, builds the raw-text model, gives the best constant
answer and the dev `eval_fn` of a run (`plan`), evaluates and predicts with a fine-tuned model
directory (`evaluate_splits`, `predict`), writes predictions, and says how the model exports
(`export_arguments`). `TableFamily` is the base of the families read from example files
(classification, regression, tagging), `ReadingFamily` of those that read whole files (SQuAD,
RACE).

There is no list of tasks to edit: a `TaskFamily` subclass that names its `tasks` and `kinds`
registers itself when its module is imported, and `task_family` first imports the `family`
module of every folder of `albert_tf.tasks`. Adding a task is adding a folder (README, "Adding a
task"); a family defined anywhere else (a test, a user's package) registers the same way.
A task's kinds (`TaskSpec.kind`, `export.json`'s "kind") are the folder's constants
(`albert_tf.tasks.tagging.TAGGING`, ...), the one vocabulary of kinds.

Every user-facing problem is a one-line `albert_tf.tasks.errors.TaskError`.
"""

from __future__ import annotations

import abc
import contextlib
import dataclasses
import importlib
import importlib.util
import json
import os
import pkgutil
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from albert_tf import file_io
from albert_tf.tasks.errors import TaskError, param
from albert_tf.tasks.spec import TaskSpec


# --- small shared pieces -----------------------------------------------------------------------


def progress_callbacks_for(label: Optional[str]) -> list:
    """Keras callbacks that show a slow prediction's progress under `label`
    (`albert_tf.training.progress.progress_callbacks`); none when it is None."""
    from albert_tf.training.progress import progress_callbacks

    return progress_callbacks(label or "", verbose=label is not None)


def first_items(items: List, count: Optional[int]) -> List:
    return items if count is None else items[:count]


def write_lines(path: str, lines: Sequence[str]) -> None:
    """`lines` joined by newlines, written atomically."""
    file_io.atomic_write_text(path, "\n".join(lines) + "\n")


def write_jsonl(path: str, records: Sequence[Dict[str, Any]]) -> None:
    """One JSON object per line, written atomically."""
    with file_io.open_atomic(path, "w") as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n")


@contextlib.contextmanager
def reading_data_errors(*errors):
    """Turns a reader's `errors` (a family's data error: malformed or missing files, bad lengths)
    and missing files into `TaskError`s; their messages name the file."""
    try:
        yield
    except (*errors, FileNotFoundError) as e:
        raise TaskError(str(e)) from None


def format_metrics(metrics: Dict[str, float]) -> str:
    return ", ".join(f"{k}={v:.4f}" for k, v in sorted(metrics.items()))


@dataclasses.dataclass
class TrainingPlan:
    """What a task contributes to a fine-tuning run (`TaskFamily.plan`).

    Attributes:
        spec: The task spec (written to the model directory after `write_results`, which may
            add to its `settings`).
        train_data, eval_data: Unbatched datasets of feature dicts (labels inside).
        eval_fn: The dev evaluation of the model's head (`task_model`) for `run_finetuning`
            (None: `model.evaluate`).
        num_train: Training elements (SQuAD: features), the size of an epoch.
        summary: "... train / ... dev ..." for the log.
        build_model: `build_model(encoder, preprocessor) -> ` the task's raw-text model (an
            `albert_tf.tasks.text_task.AlbertTextTask`, uncompiled), whose head keeps Keras'
            default name.
        write_results: `write_results(directory, head) -> {split: metrics}`: the final dev/test
            evaluations of the trained head; unlabelled test data get prediction files in
            `directory`.
        constant_baseline: The dev set's best constant answer (`albert_tf.evaluation.baselines`),
            for the collapse check; None where the family has none.
    """

    spec: TaskSpec
    train_data: Any
    eval_data: Any
    eval_fn: Optional[Callable[[Any, Any], Dict[str, float]]]
    num_train: int
    summary: str
    build_model: Callable[[Any, Any], Any]
    write_results: Callable[[str, Any], Dict[str, Any]]
    constant_baseline: Any = None


@dataclasses.dataclass
class Predictions:
    """What `TaskFamily.predict` produced.

    Attributes:
        records: JSON-able records, one per example or question, for showing (None when they
            were written to a file instead).
        written: The file or directory written, if any.
        notes: Remarks for the user (questions that could not be aligned, ...).
    """

    records: Optional[List[Dict[str, Any]]] = None
    written: Optional[str] = None
    notes: List[str] = dataclasses.field(default_factory=list)


class TaskFamily(abc.ABC):
    """The behaviour shared by the tasks of one family; subclasses fill in the family's parts.

    A concrete subclass names its `tasks` and `kinds`, and is registered by defining it.

    Attributes:
        task: The task name this instance serves.
        tasks: The family's task names (`--task`).
        kinds: The `TaskSpec.kind`s its model directories carry; the first picks the recipe
            (`albert_tf.training.recipes.recommended_recipe`).
        text_models: Kind -> the raw-text model class, or its name in the folder's `text_model`
            module (imported when a model is loaded, not when the task is looked up).
        options: The `FinetuneSettings` fields only this family reads (`doc_stride`, ...).
        table: Whether the task reads named columns of a table (`text_column`, `label_column`).
        reading: Whether it reads whole files (no example limits, no skipping of bad rows).
    """

    tasks: Tuple[str, ...] = ()
    kinds: Tuple[str, ...] = ()
    text_models: Dict[str, Union[str, type]] = {}
    options: Tuple[str, ...] = ()
    table = False
    reading = False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.tasks and cls.kinds:
            _register(cls)

    def __init__(self, task: str):
        self.task = task

    @classmethod
    def text_model_class(cls, kind: str) -> type:
        """The raw-text model class of this family's `kind`."""
        entry = cls.text_models[kind]
        if isinstance(entry, str):
            package = cls.__module__.rsplit(".", 1)[0]
            entry = getattr(importlib.import_module(f"{package}.text_model"), entry)
        return entry

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.task!r})"

    def reads_columns(self) -> bool:
        """Whether the task reads named columns of a table (`text_column`, `label_column`)."""
        return False

    def check_data(self, data: str) -> None:
        """Refuses a `--data` that cannot hold the task's files (by default: not a directory)."""
        if not os.path.isdir(data):
            raise TaskError(f"{param('data')} must be a directory: {data}")

    # --- a fine-tuning run ----------------------------------------------------------------------

    def preset(self):
        """The task's `TaskPreset` (`albert_tf.tasks.presets.TASK_PRESETS`), or None (the recipe's run)."""
        from albert_tf.tasks.presets import task_preset

        return task_preset(self.task)

    @abc.abstractmethod
    def plan(self, settings, config, tokenizer_type: str, tokenizer_file: str, tokenizer) -> TrainingPlan:
        """Reads and encodes the run's data (`settings` a `FinetuneSettings`, `config` its resolved
        `albert_tf.training.finetuning_config.FinetuningConfig`) and says how to build, evaluate and
        report the model."""

    def tokenizer_entry(self, settings, tokenizer_type: str, tokenizer_file: str) -> Dict[str, Any]:
        return {"type": tokenizer_type, "file": os.path.basename(tokenizer_file), "lower_case": bool(settings.lower_case)}

    # --- a fine-tuned model directory -----------------------------------------------------------

    @abc.abstractmethod
    def split_names(self, spec: TaskSpec, data: str) -> Dict[str, List[str]]:
        """{"dev": [...], "test": [...]} split names available for the task in `data`."""

    def default_eval_splits(self, spec: TaskSpec, data: str) -> Tuple[List[str], bool]:
        """(splits, explicit=False) that `evaluate` scores when none are named: every dev and
        test split."""
        available = self.split_names(spec, data)
        requested = available.get("dev", []) + available.get("test", [])
        if not requested:
            raise TaskError(f"no dev or test split for {spec.task} in {data}")
        return requested, False

    @abc.abstractmethod
    def evaluate_splits(self, model_dir: str, spec: TaskSpec, tokenizer, data: str, splits: Sequence[str], explicit: bool, *,
                        batch_size: int, max_examples: Optional[int], on_error: str,
                        predictions_dir: Optional[str]) -> Dict[str, Dict[str, Any]]:
        """{split: metrics} of the model in `model_dir` on the labelled `splits` of `data`
        (`explicit`: the splits were named, so an unlabelled one is an error)."""

    @abc.abstractmethod
    def predict(self, model_dir: str, spec: TaskSpec, tokenizer, *, texts: Sequence[str], text_b: Optional[Sequence[str]],
                input: Optional[str], data: Optional[str], split: Optional[str], batch_size: int,
                output: Optional[str]) -> Predictions:
        """Predictions of the model in `model_dir` for `texts`, the file `input` or `split` of
        `data` (exactly one), written to `output` when it is given."""

    # --- export -----------------------------------------------------------------------------------

    def export_arguments(self, spec: TaskSpec) -> Dict[str, Any]:
        """The task-specific `export_saved_model` keyword arguments (`labels`, `pair`,
        `qa_settings`, `task_settings`) of a model directory with `spec`."""
        return dict(labels=None, pair=False, qa_settings=None, task_settings=None)


# --- tables: classification, regression and tagging ----------------------------------------------


class TableFamily(TaskFamily):
    """Families whose data are example files read split by split (`read_split`)."""

    # The kind of the provisional spec the training split is read with.
    spec_kind_when_reading = "classification"

    @abc.abstractmethod
    def build_spec(self, settings, config, tokenizer_entry, train_examples) -> TaskSpec:
        """The run's `task.json` spec (labels, metrics, columns) from its settings, its
        `FinetuningConfig` and its training examples."""

    @abc.abstractmethod
    def prepare_data(self, spec: TaskSpec, tokenizer, train_examples, dev_examples, eval_batch_size: int):
        """(train dataset, dev dataset, eval_fn, the dev set's best constant answer), unbatched
        datasets of encoded features."""

    @abc.abstractmethod
    def build_model(self, encoder, preprocessor, spec: TaskSpec, *, dropout: float, pooling: Optional[str] = None):
        """The raw-text model (an uncompiled `AlbertTextTask`) for `spec`, on the tokenizer layer
        `preprocessor`: the task a run fine-tunes. Its `task_model` is `build_task_model`'s, with
        the name Keras gives it."""

    @abc.abstractmethod
    def build_task_model(self, encoder, spec: TaskSpec, *, dropout: float, pooling: Optional[str] = None):
        """The token-level task model alone (encoder + this family's head) for `spec`: what
        `build_model`'s `task_model` is, for callers without a tokenizer (a distillation student)."""

    @abc.abstractmethod
    def read_split(self, spec: TaskSpec, data: str, split: str, *, on_error: str = "raise",
                   cache: Optional[dict] = None, table_format: Optional[str] = None):
        """The examples of `split` for the task.

        Args:
            table_format: A table's format as given for this run (`FinetuneSettings.table_format`);
                by default each file's own (`albert_tf.data.tables.detect_file_format`).

        Raises:
            TaskError: A missing or malformed file (the message names the file and line).
        """

    def has_labels(self, spec: TaskSpec, examples) -> bool:
        return all(e.label is not None for e in examples)

    @abc.abstractmethod
    def evaluate_examples(self, model, spec: TaskSpec, tokenizer, examples, batch_size: int,
                          label: Optional[str] = "evaluating") -> Dict[str, float]:
        """The task's metrics of `model` on labelled examples (progress under `label` when it is
        slow; None: none)."""

    @abc.abstractmethod
    def predict_examples(self, model, spec: TaskSpec, tokenizer, examples, batch_size: int,
                         label: Optional[str] = "predicting") -> List[Dict[str, Any]]:
        """One prediction record per example (progress under `label` when it is slow)."""

    @abc.abstractmethod
    def prediction_row(self, spec: TaskSpec, index: int, example, record) -> Tuple[str, str]:
        """(index, prediction) of one row of the `index<TAB>prediction` file."""

    def write_predictions_tsv(self, path: str, examples, records, spec: TaskSpec) -> None:
        """GLUE-submission style `index<TAB>prediction`."""
        with file_io.open_atomic(path, "w") as f:
            f.write("index\tprediction\n")
            for index, (example, record) in enumerate(zip(examples, records)):
                guid, value = self.prediction_row(spec, index, example, record)
                f.write(f"{guid}\t{value}\n")

    @abc.abstractmethod
    def examples_from_texts(self, spec: TaskSpec, texts: Sequence[str], texts_b: Optional[Sequence[str]]):
        """Unlabelled examples of the family's type for raw `texts` (and `texts_b` for pair tasks)."""

    @abc.abstractmethod
    def examples_from_file(self, spec: TaskSpec, path: str):
        """Unlabelled examples of the family's type read from the file `path`."""

    def plan(self, settings, config, tokenizer_type, tokenizer_file, tokenizer) -> TrainingPlan:
        s = settings
        cache: Dict[str, Any] = {}
        # Read the training data with a provisional spec (the label list comes from it for tables).
        provisional = TaskSpec(
            s.task, self.spec_kind_when_reading, None, config.data.max_seq_length, [], "",
            {}, {"text": s.text_column, "text_b": s.text_b_column, "label": s.label_column, "format": s.table_format, "quoting": s.tsv_quoting},
        )
        reading = dict(on_error=s.on_error, cache=cache, table_format=s.table_format)
        train_examples = first_items(self.read_split(provisional, s.data, "train", **reading), s.max_train_examples)
        spec = self.build_spec(s, config, self.tokenizer_entry(s, tokenizer_type, tokenizer_file), train_examples)
        splits = self.split_names(spec, s.data)
        if not splits.get("dev"):
            raise TaskError(f"no dev split for {s.task} in {s.data}: the run selects its best weights on dev data")
        dev_split = splits["dev"][0]
        dev_examples = first_items(self.read_split(spec, s.data, dev_split, **reading), s.max_eval_examples)
        eval_batch_size = config.data.eval_batch_size
        train_data, eval_data, eval_fn, constant = self.prepare_data(spec, tokenizer, train_examples, dev_examples,
                                                                     eval_batch_size)

        def write_results(directory: str, model) -> Dict[str, Any]:
            results: Dict[str, Any] = {}
            for kind in ("dev", "test"):
                for split in splits.get(kind, []):
                    examples = dev_examples if split == dev_split else first_items(
                        self.read_split(spec, s.data, split, **reading), s.max_eval_examples
                    )
                    if self.has_labels(spec, examples):
                        label = None if s.quiet else f"evaluating {split}"
                        results[split] = self.evaluate_examples(model, spec, tokenizer, examples, eval_batch_size, label)
                        print(f"{split}: " + format_metrics(results[split]), flush=True)
                    else:
                        label = None if s.quiet else f"predicting {split}"
                        records = self.predict_examples(model, spec, tokenizer, examples, eval_batch_size, label)
                        self.write_predictions_tsv(os.path.join(directory, f"predictions_{split}.tsv"), examples, records, spec)
                        print(f"{split}: wrote predictions_{split}.tsv ({len(records)} predictions)", flush=True)
            return results

        return TrainingPlan(
            spec, train_data, eval_data, eval_fn, len(train_examples),
            f"{len(train_examples)} train / {len(dev_examples)} dev examples",
            lambda encoder, preprocessor: self.build_model(encoder, preprocessor, spec, dropout=config.task.dropout,
                                                            pooling=config.task.pooling),
            write_results,
            constant,
        )

    def evaluate_splits(self, model_dir, spec, tokenizer, data, splits, explicit, *, batch_size, max_examples, on_error,
                        predictions_dir):
        from albert_tf.tasks.resources import load_model

        if predictions_dir:
            raise TaskError("--predictions-dir is for SQuAD models")
        model = load_model(model_dir)
        cache: dict = {}
        results = {}
        for split in splits:
            examples = self.read_split(spec, data, split, on_error=on_error, cache=cache)
            if max_examples is not None:
                examples = examples[:max_examples]
            if not self.has_labels(spec, examples):
                if explicit:
                    raise TaskError(f"split {split!r} has no labels to evaluate against; use `albert-tf predict`")
                continue
            results[split] = self.evaluate_examples(model, spec, tokenizer, examples, batch_size, f"evaluating {split}")
            results[split]["num_examples"] = len(examples)
        if not results:
            raise TaskError("no labelled split to evaluate")
        return results

    def predict(self, model_dir, spec, tokenizer, *, texts, text_b, input, data, split, batch_size, output):
        from albert_tf.tasks.resources import load_model

        if texts:
            examples = self.examples_from_texts(spec, texts, text_b)
        elif input:
            if text_b:
                raise TaskError("--text-b goes with TEXT arguments, not --input")
            examples = self.examples_from_file(spec, input)
        else:
            if not os.path.exists(data):
                raise TaskError(f"--data not found: {data}")
            examples = self.read_split(spec, data, split or "test")
        model = load_model(model_dir)
        records = self.predict_examples(model, spec, tokenizer, examples, batch_size)
        if output and output.lower().endswith(".tsv"):
            self.write_predictions_tsv(output, examples, records, spec)
            return Predictions(written=output)
        if output:
            write_lines(output, [json.dumps(record, ensure_ascii=False, sort_keys=True) for record in records])
            return Predictions(written=output)
        return Predictions(records=records)


# --- reading comprehension: SQuAD and RACE --------------------------------------------------------


class ReadingFamily(TaskFamily):
    """Families that read whole files: no example limits, a malformed question stops the run."""

    reading = True

    def check_eval_options(self, spec: TaskSpec, max_examples: Optional[int], on_error: str) -> None:
        if on_error != "raise":
            raise TaskError(f"--on-error {on_error} is not supported for {spec.task}")
        if max_examples is not None:
            raise TaskError(f"--max-examples is not supported for {spec.task}; cut the data files instead")

    def check_predict_inputs(self, spec: TaskSpec, texts, text_b, data) -> None:
        if texts or text_b:
            raise TaskError(f"{spec.task} reads questions from a file: give --input FILE or --data DIR, not TEXT arguments")
        if data and not os.path.exists(data):
            raise TaskError(f"--data not found: {data}")


# --- the lookup: every registered family ----------------------------------------------------------

_FAMILIES: List[type] = []
_discovered = False


def _register(family: type) -> None:
    for registered in list(_FAMILIES):
        if registered.__qualname__ == family.__qualname__ and registered.__module__ == family.__module__:
            _FAMILIES.remove(registered)  # a module imported again (a reload)
            continue
        clash = (set(registered.tasks) & set(family.tasks)) | (set(registered.kinds) & set(family.kinds))
        if clash:
            raise TypeError(f"{family.__name__} names {', '.join(sorted(clash))}, already {registered.__name__}'s")
    _FAMILIES.append(family)


def _discover() -> None:
    """Imports the `family` module of every task folder of `albert_tf.tasks` (light: no TensorFlow)."""
    global _discovered
    if _discovered:
        return
    import albert_tf.tasks as package

    for folder in sorted(info.name for info in pkgutil.iter_modules(package.__path__) if info.ispkg):
        if importlib.util.find_spec(f"{package.__name__}.{folder}.family") is not None:
            importlib.import_module(f"{package.__name__}.{folder}.family")
    _discovered = True


def families() -> Tuple[type, ...]:
    """Every registered `TaskFamily` subclass: the folders' and any defined since."""
    _discover()
    return tuple(_FAMILIES)


def task_names() -> Tuple[str, ...]:
    """Every task name (`--task`), family by family."""
    return tuple(task for family in families() for task in family.tasks)


def task_kinds() -> Tuple[str, ...]:
    """Every task kind (`TaskSpec.kind`)."""
    return tuple(kind for family in families() for kind in family.kinds)


def task_family(task: Union[str, TaskSpec]) -> TaskFamily:
    """The family of a task name (`task_names()`, case-insensitive) or of a model directory's
    `TaskSpec` (by its kind: the pipeline's specs carry the generic task name).

    Raises:
        TaskError: An unknown task name or kind.
    """
    if isinstance(task, TaskSpec):
        for family in families():
            if task.kind in family.kinds:
                return family(task.task)
        raise TaskError(f"unknown task kind {task.kind!r} in task.json; kinds: {', '.join(task_kinds())}")
    if not isinstance(task, str):
        raise TaskError(f"task_family takes a task name or a TaskSpec, got {type(task).__name__}")
    name = task.lower()
    for family in families():
        if name in family.tasks:
            return family(name)
    raise TaskError(f"unknown task {task!r}; tasks: {', '.join(task_names())}")


def text_model_class(kind: str) -> type:
    """The raw-text model class of a task kind (`TaskSpec.kind`).

    Raises:
        TaskError: An unknown kind.
    """
    for family in families():
        if kind in family.kinds:
            return family.text_model_class(kind)
    raise TaskError(f"unknown task kind {kind!r}; kinds: {', '.join(task_kinds())}")


def export_arguments(task_spec: TaskSpec) -> Dict[str, Any]:
    """The task-specific `albert_tf.export.export_saved_model` keyword arguments of a fine-tuned
    model directory (`TaskFamily.export_arguments` of its kind's family).

    Returns:
      `labels`, `pair`, `qa_settings` and `task_settings`: classification — the labels and
      whether inputs are pairs; regression — pairs; SQuAD — the conversion and post-processing
      settings (a missing `null_score_diff_threshold` is the export's default, 0); tagging — the
      tags and `token_unit`; multiple choice — `max_qa_length`.

    Raises:
      ValueError: a kind no family registers.
    """
    try:
        family = task_family(task_spec)
    except TaskError:
        raise ValueError(f"export supports {', '.join(task_kinds())} models, not {task_spec.kind}") from None
    return family.export_arguments(task_spec)
