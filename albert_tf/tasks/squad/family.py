"""`SquadFamily`: extractive question answering (`squad-v1`, `squad-v2`) for `albert-tf finetune`,
`evaluate`, `predict` and `export`, from the official SQuAD JSON files."""

from __future__ import annotations

import os
from typing import Any, Dict, Optional

from albert_tf.tasks.squad import SQUAD
from albert_tf.tasks.errors import TaskError
from albert_tf.tasks.family import (
    Predictions,
    ReadingFamily,
    TrainingPlan,
    format_metrics,
    progress_callbacks_for,
    reading_data_errors,
)
from albert_tf.tasks.spec import TaskSpec
from albert_tf.tasks.squad.data import SquadDataError

SQUAD_TASKS = ("squad-v1", "squad-v2")
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


class SquadFamily(ReadingFamily):
    """Extractive question answering from the official SQuAD v1.1 / v2.0 files, scored by the
    official EM/F1; v2's no-answer threshold is tuned on dev and stored in `task.json`."""

    tasks = SQUAD_TASKS
    kinds = (SQUAD,)
    text_models = {SQUAD: "AlbertQuestionAnswerer"}
    options = ("doc_stride", "max_query_length", "n_best_size", "max_answer_length")

    def plan(self, settings, config, tokenizer_type, tokenizer_file, tokenizer) -> TrainingPlan:
        from albert_tf.tasks.squad import postprocessing as post
        from albert_tf.tasks.squad.data import DEFAULT_DOC_STRIDE, DEFAULT_MAX_QUERY_LENGTH
        from albert_tf.tasks.squad.evaluation import evaluate_squad, prepare_squad_task, write_squad_outputs
        from albert_tf.tasks.squad.text_model import AlbertQuestionAnswerer

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
            max_seq_length=config.data.max_seq_length,
            doc_stride=s.doc_stride or DEFAULT_DOC_STRIDE,
            max_query_length=s.max_query_length or DEFAULT_MAX_QUERY_LENGTH,
            n_best_size=s.n_best_size or post.DEFAULT_N_BEST_SIZE,
            max_answer_length=s.max_answer_length or post.DEFAULT_MAX_ANSWER_LENGTH,
        )
        eval_batch_size = config.data.eval_batch_size
        with reading_data_errors(SquadDataError):
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
            s.task, SQUAD, None, config.data.max_seq_length, list(config.task.metrics), data.best_metric,
            self.tokenizer_entry(s, tokenizer_type, tokenizer_file), settings=dict(data.settings),
        )

        def build_model(encoder, preprocessor):
            reading = {k: v for k, v in options.items() if k != "max_seq_length"}
            return AlbertQuestionAnswerer(encoder, preprocessor, dropout=config.task.dropout, version=version, compile=False,
                                          task_model_name=None, **reading)

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
        return TrainingPlan(spec, data.train_dataset, data.eval_dataset, data.eval_fn, len(data.train_features), summary, build_model, write_results)

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
            `(metrics, outputs)` of `albert_tf.tasks.squad.evaluation.evaluate_squad`, the metrics as floats
            and with `num_examples`.
        """
        from albert_tf.tasks.squad.evaluation import evaluate_squad, prepare_squad_task

        settings = spec.settings
        with reading_data_errors(SquadDataError):
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
        """`albert_tf.tasks.squad.evaluation.predict_squad_file` with the run's settings (and, for v2, its
        tuned no-answer threshold); progress under `label` when it is slow (None: none)."""
        from albert_tf.tasks.squad.evaluation import predict_squad_file

        settings = spec.settings
        with reading_data_errors(SquadDataError):
            return predict_squad_file(
                model, tokenizer, path, version=settings["version"], max_seq_length=spec.max_seq_length,
                doc_stride=settings["doc_stride"], max_query_length=settings["max_query_length"], batch_size=batch_size,
                n_best_size=settings["n_best_size"], max_answer_length=settings["max_answer_length"],
                null_score_diff_threshold=settings.get("null_score_diff_threshold"), callbacks=progress_callbacks_for(label),
            )

    def evaluate_splits(self, model_dir, spec, tokenizer, data, splits, explicit, *, batch_size, max_examples, on_error,
                        predictions_dir):
        from albert_tf.tasks.resources import load_model
        from albert_tf.tasks.squad.evaluation import write_squad_outputs

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
        from albert_tf.tasks.squad.evaluation import write_squad_outputs

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
