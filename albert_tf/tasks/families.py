"""The task families: what each kind of fine-tuning task does, from its files to its export.

One class per family, one instance per task name:

* `ClassificationFamily` -- the GLUE tasks and any `classification` / `regression` table
  (in `albert_tf.tasks.classification.family`);
* `TaggingFamily` -- token classification (`conll`, `peoples-daily`; in
  `albert_tf.tasks.tagging.family`);
* `SquadFamily` -- extractive question answering (`squad-v1`, `squad-v2`);
* `MultipleChoiceFamily` -- `race`.

A family reads its splits, encodes features, builds the head, gives the best constant answer and
the dev `eval_fn` of a run (`plan`), evaluates and predicts with a fine-tuned model directory
(`evaluate_splits`, `predict`), writes predictions, and says how the model exports
(`export_arguments`, `export_kind`). `task_family(task name, TaskSpec or model)` is the one lookup;
`albert_tf.tasks.runner.finetune` and `albert_tf.tasks.inference` drive it.

Every user-facing problem is a one-line `albert_tf.tasks.errors.TaskError`.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Sequence, Union

from albert_tf.kinds import SPEC_KINDS, SPEC_MULTIPLE_CHOICE, SPEC_SQUAD
# Each family lives in its task's folder; importable from here as before.
from albert_tf.tasks.classification.family import TABLE_TASKS, ClassificationFamily
from albert_tf.tasks.errors import TaskError
from albert_tf.tasks.spec import GLUE_TASKS, TaskSpec
from albert_tf.tasks.tagging.family import (  # noqa: F401
    CONLL_FILES,
    PEOPLES_DAILY_FRACTIONS,
    TAGGING_TASKS,
    TaggingFamily,
    conll_split_file,
    peoples_daily_splits,
)
# The task template and its shared pieces, importable from here as before.
from albert_tf.tasks.family import (  # noqa: F401
    GENERIC_DEFAULTS,
    Predictions,
    ReadingFamily,
    TableFamily,
    TaskFamily,
    TrainingPlan,
    format_metrics,
    progress_callbacks_for,
    reading_data_errors,
    write_jsonl,
)

SQUAD_TASKS = ("squad-v1", "squad-v2")
RACE_TASKS = ("race",)
READING_TASKS = SQUAD_TASKS + RACE_TASKS
TASKS = GLUE_TASKS + TABLE_TASKS + TAGGING_TASKS + READING_TASKS

# The official SQuAD file names, by task and split.
SQUAD_FILES = {
    "squad-v1": {"train": "train-v1.1.json", "dev": "dev-v1.1.json"},
    "squad-v2": {"train": "train-v2.0.json", "dev": "dev-v2.0.json"},
}
SQUAD_PREDICTIONS_DIR = "predictions_dev"


def squad_split_file(task: str, data: str, split: str) -> str:
    """The SQuAD JSON file of `split` ("train" or "dev") in the directory `data`, or `data`
    itself when it is a file.

    Raises:
        TaskError: An unknown split or a missing file.
    """
    if os.path.isfile(data):
        return data
    names = SQUAD_FILES[task]
    if split not in names:
        raise TaskError(f"{task} has the splits {', '.join(names)} (as {', '.join(names.values())}), not {split!r}")
    path = os.path.join(data, names[split])
    if not os.path.isfile(path):
        raise TaskError(f"SQuAD {split} file {path} does not exist")
    return path


def race_split_path(data: str, split: str) -> str:
    """The folder of a RACE split (`RACE/<split>`).

    Raises:
        TaskError: No such folder.
    """
    path = os.path.join(data, split)
    if not os.path.isdir(path):
        raise TaskError(f"no RACE {split} folder {path}")
    return path


class SquadFamily(ReadingFamily):
    """Extractive question answering from the official SQuAD v1.1 / v2.0 files, scored by the
    official EM/F1; v2's no-answer threshold is tuned on dev and stored in `task.json`."""

    tasks = SQUAD_TASKS
    kinds = (SPEC_SQUAD,)

    def plan(self, settings, hyper, tokenizer_type, tokenizer_file, tokenizer) -> TrainingPlan:
        from albert_tf.data.squad import DEFAULT_DOC_STRIDE, DEFAULT_MAX_QUERY_LENGTH
        from albert_tf.tasks import squad_postprocessing as post
        from albert_tf.tasks.squad import build_squad_model, evaluate_squad, prepare_squad_task, write_squad_outputs

        s = settings
        if tokenizer_type != "sentencepiece":
            raise TaskError(
                f"{s.task} needs a SentencePiece tokenizer (--spm-model): the answer alignment follows the "
                f"original SentencePiece preprocessing"
            )
        version = "v1" if s.task == "squad-v1" else "v2"
        train_file = squad_split_file(s.task, s.data, "train")
        dev_file = squad_split_file(s.task, s.data, "dev")
        options = dict(
            max_seq_length=hyper["max_seq_length"],
            doc_stride=s.doc_stride or DEFAULT_DOC_STRIDE,
            max_query_length=s.max_query_length or DEFAULT_MAX_QUERY_LENGTH,
            n_best_size=s.n_best_size or post.DEFAULT_N_BEST_SIZE,
            max_answer_length=s.max_answer_length or post.DEFAULT_MAX_ANSWER_LENGTH,
        )
        eval_batch_size = hyper["eval_batch_size"]
        with reading_data_errors():
            data = prepare_squad_task(
                tokenizer, version=version, train_file=train_file, eval_file=dev_file, eval_batch_size=eval_batch_size, **options
            )
        for path, count in ((train_file, len(data.train_features)), (dev_file, len(data.eval_features))):
            if not count:
                raise TaskError(f"{path} gives no SQuAD features (no question whose answer could be aligned)")
        for path, skipped in data.skipped.items():
            if skipped:
                print(f"{path}: left out {len(skipped)} question(s): {skipped[0].reason} ...", flush=True)
        spec = TaskSpec(
            s.task, SPEC_SQUAD, None, hyper["max_seq_length"], list(hyper["metrics"]), data.best_metric,
            self.tokenizer_entry(s, tokenizer_type, tokenizer_file), settings=dict(data.settings),
        )

        def build_head(encoder):
            return build_squad_model(encoder, version, dropout=hyper["dropout"])

        def write_results(directory: str, model) -> Dict[str, Any]:
            # v2: the no-answer threshold is tuned on dev here and kept for `predict`, as the original
            # run_squad_v2 tunes it on the dev predictions.
            metrics, outputs = evaluate_squad(
                model, data.eval_json, data.eval_examples, data.eval_features, data.eval_dataset, version=version,
                batch_size=eval_batch_size, n_best_size=options["n_best_size"], max_answer_length=options["max_answer_length"],
                callbacks=progress_callbacks_for(None if s.quiet else "evaluating dev"),
            )
            metrics = {k: float(v) for k, v in metrics.items()}
            if version == "v2":
                spec.settings["null_score_diff_threshold"] = metrics["null_score_diff_threshold"]
            write_squad_outputs(outputs, os.path.join(directory, SQUAD_PREDICTIONS_DIR))
            print("dev: " + format_metrics(metrics), flush=True)
            return {"dev": metrics}

        summary = (
            f"{len(data.train_examples)} train questions ({len(data.train_features)} features) / "
            f"{len(data.eval_examples)} dev questions ({len(data.eval_features)} features)"
        )
        return TrainingPlan(spec, data.train_dataset, data.eval_dataset, data.eval_fn, len(data.train_features), summary, build_head, write_results)

    def split_names(self, spec, data):
        # The official test set is hidden; SQuAD runs are scored on dev.
        return {"dev": ["dev"]} if os.path.isfile(os.path.join(data, SQUAD_FILES[spec.task]["dev"])) else {}

    def default_eval_splits(self, spec, data):
        if os.path.isfile(data):
            return [os.path.basename(data)], False
        return super().default_eval_splits(spec, data)

    def evaluate_file(self, model, spec: TaskSpec, tokenizer, path: str, batch_size: int, *, tune_threshold: bool = False,
                      label: Optional[str] = "evaluating"):
        """The official scores of `model` on a SQuAD file, and its predictions.

        Args:
            tune_threshold: v2: tune the no-answer threshold on this file (as after training)
                rather than apply the one stored in `spec.settings`.

        Returns:
            `(metrics, outputs)` of `albert_tf.tasks.squad.evaluate_squad`, the metrics as floats
            and with `num_examples`.
        """
        from albert_tf.tasks.squad import evaluate_squad, prepare_squad_task

        settings = spec.settings
        with reading_data_errors():
            data = prepare_squad_task(
                tokenizer, version=settings["version"], eval_file=path, max_seq_length=spec.max_seq_length,
                doc_stride=settings["doc_stride"], max_query_length=settings["max_query_length"], eval_batch_size=batch_size,
                n_best_size=settings["n_best_size"], max_answer_length=settings["max_answer_length"],
            )
        if not data.eval_features:
            raise TaskError(f"{path} has no question to evaluate")
        threshold = None if tune_threshold else settings.get("null_score_diff_threshold")
        metrics, outputs = evaluate_squad(
            model, data.eval_json, data.eval_examples, data.eval_features, data.eval_dataset,
            version=settings["version"], batch_size=batch_size, n_best_size=settings["n_best_size"],
            max_answer_length=settings["max_answer_length"], null_score_diff_threshold=threshold,
            callbacks=progress_callbacks_for(label),
        )
        metrics = {k: float(v) for k, v in metrics.items()}
        metrics["num_examples"] = len(data.eval_examples)
        return metrics, outputs

    def predict_file(self, model, spec: TaskSpec, tokenizer, path: str, batch_size: int,
                     label: Optional[str] = "predicting") -> Dict[str, Any]:
        """`albert_tf.tasks.squad.predict_squad_file` with the run's settings (and, for v2, its
        tuned no-answer threshold); progress under `label` when it is slow (None: none)."""
        from albert_tf.tasks.squad import predict_squad_file

        settings = spec.settings
        with reading_data_errors():
            return predict_squad_file(
                model, tokenizer, path, version=settings["version"], max_seq_length=spec.max_seq_length,
                doc_stride=settings["doc_stride"], max_query_length=settings["max_query_length"], batch_size=batch_size,
                n_best_size=settings["n_best_size"], max_answer_length=settings["max_answer_length"],
                null_score_diff_threshold=settings.get("null_score_diff_threshold"), callbacks=progress_callbacks_for(label),
            )

    def evaluate_splits(self, model_dir, spec, tokenizer, data, splits, explicit, *, batch_size, max_examples, on_error,
                        predictions_dir):
        from albert_tf.tasks.resources import load_model
        from albert_tf.tasks.squad import write_squad_outputs

        self.check_eval_options(spec, max_examples, on_error)
        if os.path.isfile(data):
            # The file is the one split, whatever the named splits say.
            splits = [os.path.basename(data)]
        # Find every file before the model is loaded, so that a bad one fails fast.
        sources = {split: squad_split_file(spec.task, data, split) for split in splits}
        model = load_model(model_dir)
        results = {}
        for split, path in sources.items():
            results[split], outputs = self.evaluate_file(model, spec, tokenizer, path, batch_size, label=f"evaluating {split}")
            if predictions_dir:
                target = predictions_dir if len(sources) == 1 else os.path.join(predictions_dir, split)
                write_squad_outputs(outputs, target)
        return results

    def predict(self, model_dir, spec, tokenizer, *, texts, text_b, input, data, split, batch_size, output):
        from albert_tf.tasks.resources import load_model
        from albert_tf.tasks.squad import write_squad_outputs

        self.check_predict_inputs(spec, texts, text_b, data)
        if output and output.lower().endswith((".json", ".jsonl", ".tsv")):
            raise TaskError(f"for {spec.task}, --output is a directory (it receives predictions.json, nbest_predictions.json, ...)")
        path = input or squad_split_file(spec.task, data, split or "dev")
        if not os.path.isfile(path):
            raise TaskError(f"SQuAD file {path} does not exist")
        model = load_model(model_dir)
        outputs = self.predict_file(model, spec, tokenizer, path, batch_size)
        notes = []
        if outputs["skipped"]:
            notes.append(f"{path}: {len(outputs['skipped'])} question(s) could not be aligned and got a default answer")
        if output:
            write_squad_outputs(outputs, output)
            return Predictions(written=output, notes=notes)
        return Predictions(records=[{"id": qas_id, "answer": answer} for qas_id, answer in outputs["predictions"].items()], notes=notes)

    def export_arguments(self, spec):
        result = super().export_arguments(spec)
        settings = dict(spec.settings or {})
        if settings.get("null_score_diff_threshold") is None:
            settings.pop("null_score_diff_threshold", None)
        result["qa_settings"] = settings
        return result


class MultipleChoiceFamily(ReadingFamily):
    """Multiple choice from the `RACE/` folder (`train/`, `dev/`, optionally `test/`, each with
    `middle/` and `high/`), scored by accuracy."""

    tasks = RACE_TASKS
    kinds = (SPEC_MULTIPLE_CHOICE,)

    def plan(self, settings, hyper, tokenizer_type, tokenizer_file, tokenizer) -> TrainingPlan:
        from albert_tf.data.race import DEFAULT_MAX_QA_LENGTH
        from albert_tf.tasks.multiple_choice import MultipleChoiceModel, prepare_race_task

        s = settings
        train_path = race_split_path(s.data, "train")
        dev_path = race_split_path(s.data, "dev")
        with reading_data_errors():
            data = prepare_race_task(
                tokenizer, train_path=train_path, eval_path=dev_path, max_seq_length=hyper["max_seq_length"],
                max_qa_length=s.max_qa_length or DEFAULT_MAX_QA_LENGTH,
            )
        num_choices = len(data.train_examples[0].options)
        spec = TaskSpec(
            s.task, SPEC_MULTIPLE_CHOICE, [chr(ord("A") + i) for i in range(num_choices)], hyper["max_seq_length"],
            list(hyper["metrics"]), data.best_metric, self.tokenizer_entry(s, tokenizer_type, tokenizer_file),
            settings=dict(data.settings),
        )
        eval_batch_size = hyper["eval_batch_size"]

        def build_head(encoder):
            return MultipleChoiceModel(encoder, dropout=hyper["dropout"])

        def write_results(directory: str, model) -> Dict[str, Any]:
            results = {"dev": self.scores(self.predict_examples(
                model, spec, tokenizer, data.eval_examples, eval_batch_size, None if s.quiet else "evaluating dev"
            ))}
            print(f"dev: accuracy={results['dev']['accuracy']:.4f}", flush=True)
            if os.path.isdir(os.path.join(s.data, "test")):
                examples = self.read_examples(spec, race_split_path(s.data, "test"))
                records = self.predict_examples(model, spec, tokenizer, examples, eval_batch_size, None if s.quiet else "test")
                if all(e.label is not None for e in examples):
                    results["test"] = self.scores(records)
                    print(f"test: accuracy={results['test']['accuracy']:.4f}", flush=True)
                else:
                    write_jsonl(os.path.join(directory, "predictions_test.jsonl"), records)
                    print(f"test: wrote predictions_test.jsonl ({len(records)} predictions)", flush=True)
            return results

        summary = f"{len(data.train_examples)} train / {len(data.eval_examples)} dev questions"
        return TrainingPlan(spec, data.train_dataset, data.eval_dataset, None, len(data.train_examples), summary, build_head, write_results)

    def split_names(self, spec, data):
        return {kind: [kind] for kind in ("dev", "test") if os.path.isdir(os.path.join(data, kind))}

    def read_examples(self, spec: TaskSpec, path: str):
        """The `RaceExample`s of a split folder, file or glob, at the run's levels."""
        from albert_tf.data.race import LEVELS, read_race_examples

        with reading_data_errors():
            return read_race_examples(path, levels=tuple(spec.settings.get("levels", LEVELS)))

    def predict_examples(self, model, spec: TaskSpec, tokenizer, examples, batch_size: int,
                         label: Optional[str] = "predicting") -> List[Dict[str, Any]]:
        """One record per RACE question: `id`, `question_index`, `prediction` (the option
        letter), `probabilities` and, when known, the gold `answer` (progress under `label` when
        it is slow; None: none)."""
        from albert_tf.tasks.multiple_choice import predict_race_examples

        if not examples:
            raise TaskError("there are no RACE questions to predict")
        with reading_data_errors():
            return predict_race_examples(
                model, tokenizer, examples, max_seq_length=spec.max_seq_length,
                max_qa_length=spec.settings["max_qa_length"], batch_size=batch_size, callbacks=progress_callbacks_for(label),
            )

    @staticmethod
    def scores(records: Sequence[Dict[str, Any]]) -> Dict[str, float]:
        """`accuracy` and `num_examples` of prediction records that all carry their `answer`."""
        from albert_tf.tasks.multiple_choice import race_accuracy

        return {
            "accuracy": race_accuracy([r["prediction"] for r in records], [r["answer"] for r in records]),
            "num_examples": len(records),
        }

    def evaluate_splits(self, model_dir, spec, tokenizer, data, splits, explicit, *, batch_size, max_examples, on_error,
                        predictions_dir):
        from albert_tf.tasks.resources import load_model

        self.check_eval_options(spec, max_examples, on_error)
        # Read every split before the model is loaded, so that a bad file fails fast.
        sources = {}
        for split in splits:
            examples = self.read_examples(spec, race_split_path(data, split))
            if any(e.label is None for e in examples):
                if explicit:
                    raise TaskError(f"split {split!r} has no answers to evaluate against; use `albert-tf predict`")
                continue
            sources[split] = examples
        if not sources:
            raise TaskError("no labelled split to evaluate")
        model = load_model(model_dir)
        return {
            split: self.scores(self.predict_examples(model, spec, tokenizer, examples, batch_size, f"evaluating {split}"))
            for split, examples in sources.items()
        }

    def predict(self, model_dir, spec, tokenizer, *, texts, text_b, input, data, split, batch_size, output):
        from albert_tf.tasks.resources import load_model

        self.check_predict_inputs(spec, texts, text_b, data)
        if output and output.lower().endswith(".tsv"):
            raise TaskError(f"for {spec.task}, --output is a .jsonl file")
        examples = self.read_examples(spec, input or race_split_path(data, split or "test"))
        model = load_model(model_dir)
        records = self.predict_examples(model, spec, tokenizer, examples, batch_size)
        if output:
            write_jsonl(output, records)
            return Predictions(written=output)
        return Predictions(records=records)

    def export_arguments(self, spec):
        result = super().export_arguments(spec)
        max_qa_length = (spec.settings or {}).get("max_qa_length")
        result["task_settings"] = {} if max_qa_length is None else {"max_qa_length": max_qa_length}
        return result


# --- the lookup ------------------------------------------------------------------------------------

# In the order a model's export kind is looked up (a more specific model class first).
FAMILIES = (TaggingFamily, MultipleChoiceFamily, SquadFamily, ClassificationFamily)
_BY_TASK = {task: family for family in FAMILIES for task in family.tasks}
_BY_KIND = {kind: family for family in FAMILIES for kind in family.kinds}


def task_family(task: Union[str, TaskSpec]) -> TaskFamily:
    """The family of a task name (`TASKS`, case-insensitive) or of a model directory's `TaskSpec`
    (by its kind: the pipeline's specs carry the generic task name).

    Raises:
        TaskError: An unknown task name or kind.
    """
    if isinstance(task, TaskSpec):
        family = _BY_KIND.get(task.kind)
        if family is None:
            raise TaskError(f"unknown task kind {task.kind!r} in task.json; kinds: {', '.join(_BY_KIND)}")
        return family(task.task)
    if not isinstance(task, str):
        raise TaskError(f"task_family takes a task name or a TaskSpec, got {type(task).__name__}")
    name = task.lower()
    family = _BY_TASK.get(name)
    if family is None:
        raise TaskError(f"unknown task {task!r}; tasks: {', '.join(TASKS)}")
    return family(name)


def export_arguments(task_spec: TaskSpec) -> Dict[str, Any]:
    """The task-specific `albert_tf.export.export_saved_model` keyword arguments of a fine-tuned
    model directory.

    Args:
      task_spec: its `TaskSpec` (`task.json`).

    Returns:
      `labels`, `pair`, `qa_settings` and `task_settings`: classification — the labels and
      whether inputs are pairs; regression — pairs; SQuAD — the conversion and post-processing
      settings (a missing `null_score_diff_threshold` is the export's default, 0); tagging — the
      tags and `token_unit`; multiple choice — `max_qa_length`.

    Raises:
      ValueError: a task kind outside `albert_tf.kinds.SPEC_KINDS`.
    """
    kind = task_spec.kind
    if kind not in SPEC_KINDS:
        raise ValueError(f"export supports {', '.join(SPEC_KINDS)} models, not {kind}")
    return task_family(task_spec).export_arguments(task_spec)


def model_export_kind(model) -> Optional[str]:
    """The export kind of a fine-tuned task model (`TaskFamily.export_kind`), None for any other
    model (an encoder, a pretrainer, ...)."""
    for family in FAMILIES:
        kind = family.export_kind(model)
        if kind is not None:
            return kind
    return None
