"""`MultipleChoiceFamily`: multiple choice (`race`) for `albert-tf finetune`, `evaluate`,
`predict` and `export`, from the `RACE/` folder."""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Sequence

from albert_tf.tasks.multiple_choice import MULTIPLE_CHOICE
from albert_tf.tasks.errors import TaskError
from albert_tf.tasks.family import (
    Predictions,
    ReadingFamily,
    TrainingPlan,
    progress_callbacks_for,
    reading_data_errors,
    write_jsonl,
)
from albert_tf.tasks.multiple_choice.data import RaceDataError
from albert_tf.tasks.spec import TaskSpec

RACE_TASKS = ("race",)


def race_split_path(data: str, split: str) -> str:
    """The folder of a RACE split (`RACE/<split>`).

    Raises:
        TaskError: No such folder.
    """
    path = os.path.join(data, split)
    if not os.path.isdir(path):
        raise TaskError(f"no RACE {split} folder {path}")
    return path


class MultipleChoiceFamily(ReadingFamily):
    """Multiple choice from the `RACE/` folder (`train/`, `dev/`, optionally `test/`, each with
    `middle/` and `high/`), scored by accuracy."""

    tasks = RACE_TASKS
    kinds = (MULTIPLE_CHOICE,)
    text_models = {MULTIPLE_CHOICE: "AlbertMultipleChoice"}
    options = ("max_qa_length",)

    def plan(self, settings, config, tokenizer_type, tokenizer_file, tokenizer) -> TrainingPlan:
        from albert_tf.tasks.multiple_choice.data import DEFAULT_MAX_QA_LENGTH
        from albert_tf.tasks.multiple_choice.evaluation import prepare_race_task
        from albert_tf.tasks.multiple_choice.text_model import AlbertMultipleChoice

        s = settings
        train_path = race_split_path(s.data, "train")
        dev_path = race_split_path(s.data, "dev")
        with reading_data_errors(RaceDataError):
            data = prepare_race_task(
                tokenizer, train_path=train_path, eval_path=dev_path, max_seq_length=config.data.max_seq_length,
                max_qa_length=s.max_qa_length or DEFAULT_MAX_QA_LENGTH,
            )
        num_choices = len(data.train_examples[0].options)
        spec = TaskSpec(
            s.task, MULTIPLE_CHOICE, [chr(ord("A") + i) for i in range(num_choices)], config.data.max_seq_length,
            list(config.task.metrics), data.best_metric, self.tokenizer_entry(s, tokenizer_type, tokenizer_file),
            settings=dict(data.settings),
        )
        eval_batch_size = config.data.eval_batch_size

        def build_model(encoder, preprocessor):
            return AlbertMultipleChoice(encoder, preprocessor, dropout=config.task.dropout, compile=False, task_model_name=None)

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
        return TrainingPlan(spec, data.train_dataset, data.eval_dataset, None, len(data.train_examples), summary, build_model, write_results)

    def split_names(self, spec, data):
        return {kind: [kind] for kind in ("dev", "test") if os.path.isdir(os.path.join(data, kind))}

    def read_examples(self, spec: TaskSpec, path: str):
        """The `RaceExample`s of a split folder, file or glob, at the run's levels."""
        from albert_tf.tasks.multiple_choice.data import LEVELS, read_race_examples

        with reading_data_errors(RaceDataError):
            return read_race_examples(path, levels=tuple(spec.settings.get("levels", LEVELS)))

    def predict_examples(self, model, spec: TaskSpec, tokenizer, examples, batch_size: int,
                         label: Optional[str] = "predicting") -> List[Dict[str, Any]]:
        """One record per RACE question: `id`, `question_index`, `prediction` (the option
        letter), `probabilities` and, when known, the gold `answer` (progress under `label` when
        it is slow; None: none)."""
        from albert_tf.tasks.multiple_choice.evaluation import predict_race_examples

        if not examples:
            raise TaskError("there are no RACE questions to predict")
        with reading_data_errors(RaceDataError):
            return predict_race_examples(
                model, tokenizer, examples, max_seq_length=spec.max_seq_length,
                max_qa_length=spec.settings["max_qa_length"], batch_size=batch_size, callbacks=progress_callbacks_for(label),
            )

    @staticmethod
    def scores(records: Sequence[Dict[str, Any]]) -> Dict[str, float]:
        """`accuracy` and `num_examples` of prediction records that all carry their `answer`."""
        from albert_tf.tasks.multiple_choice.metrics import race_accuracy

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
