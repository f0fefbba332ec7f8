"""The classification family: sentence(-pair) classification and regression as `albert-tf
finetune`, `evaluate`, `predict` and `export` run them, on the GLUE tasks and on `classification` /
`regression` tables (`ClassificationFamily`, looked up by `albert_tf.tasks.family.task_family`)."""

from __future__ import annotations

import os
from typing import Any, Dict, Optional, Sequence

from albert_tf.tasks.classification import CLASSIFICATION, REGRESSION
from albert_tf.data.features import examples_dataset
from albert_tf.data.tables import (
    DataFormatError,
    MissingColumnError,
    TextExample,
    detect_file_format,
    find_split_file,
    read_table,
    read_text,
)
from albert_tf.tasks.classification.data import LabelVocab, encode_examples, glue_layout, read_glue_split
from albert_tf.tasks.classification.metrics import make_eval_fn, predict_scores, score_predictions
from albert_tf.tasks.errors import TaskError
from albert_tf.tasks.family import TableFamily, progress_callbacks_for
from albert_tf.tasks.spec import TaskSpec

GLUE_TASKS = ("cola", "sst-2", "mrpc", "sts-b", "qqp", "mnli", "qnli", "rte", "wnli")
TABLE_TASKS = ("classification", "regression")


class ClassificationFamily(TableFamily):
    """Sentence(-pair) classification and regression: the GLUE tasks, read from the standard GLUE
    files, and `classification` / `regression` tables (TSV, CSV, JSONL) with named columns."""

    tasks = GLUE_TASKS + TABLE_TASKS
    kinds = (CLASSIFICATION, REGRESSION)
    text_models = {CLASSIFICATION: "AlbertTextClassifier", REGRESSION: "AlbertTextRegressor"}

    def reads_columns(self) -> bool:
        return self.task in TABLE_TASKS

    def build_spec(self, settings, config, tokenizer_entry, train_examples) -> TaskSpec:
        s = settings
        if s.task in GLUE_TASKS:
            layout = glue_layout(s.task)
            kind = REGRESSION if layout.is_regression else CLASSIFICATION
            labels = list(layout.labels) if layout.labels else None
            return TaskSpec(s.task, kind, labels, config.data.max_seq_length, list(config.task.metrics), config.task.best_metric,
                            tokenizer_entry)
        columns = {"text": s.text_column, "text_b": s.text_b_column, "label": s.label_column, "format": s.table_format, "quoting": s.tsv_quoting}
        if s.task == "regression":
            return TaskSpec(s.task, REGRESSION, None, config.data.max_seq_length, ["pearson", "spearman"], "pearson", tokenizer_entry, columns)
        try:
            vocab = LabelVocab.from_examples(train_examples)
        except ValueError as e:
            raise TaskError(str(e)) from None
        return self.classification_spec(s.task, vocab.labels, config.data.max_seq_length, tokenizer_entry, columns)

    @staticmethod
    def is_pair(spec: TaskSpec) -> bool:
        """Whether the task reads text pairs (its GLUE layout's, else its `text_b` column)."""
        if spec.task in GLUE_TASKS:
            return glue_layout(spec.task).text_b is not None
        return bool(spec.columns.get("text_b"))

    @staticmethod
    def label_vocab(spec: TaskSpec):
        """The `LabelVocab` of a classifier's spec; None for a regressor."""
        return LabelVocab(spec.labels) if spec.labels is not None else None

    @staticmethod
    def classification_spec(task: str, labels: Sequence[str], max_seq_length: int, tokenizer_entry: Dict[str, Any],
                            columns: Dict[str, Optional[str]]) -> TaskSpec:
        """The `TaskSpec` of a classifier of `labels` read from table `columns`: accuracy (and F1
        for two classes), weights kept by accuracy."""
        metrics = ["accuracy", "f1"] if len(labels) == 2 else ["accuracy"]
        return TaskSpec(task, CLASSIFICATION, list(labels), max_seq_length, metrics, "accuracy", tokenizer_entry, columns)

    def prepare_data(self, spec, tokenizer, train_examples, dev_examples, eval_batch_size):
        from albert_tf.evaluation import majority_class_baseline, mean_baseline

        regression = spec.kind == REGRESSION
        vocab = self.label_vocab(spec)
        try:
            train = encode_examples(train_examples, tokenizer, seq_length=spec.max_seq_length, label_vocab=vocab, regression=regression)
            dev = encode_examples(dev_examples, tokenizer, seq_length=spec.max_seq_length, label_vocab=vocab, regression=regression)
        except DataFormatError as e:
            raise TaskError(str(e)) from None
        eval_fn = make_eval_fn(spec.metrics, regression, diagnostics=True)
        names = list(spec.metrics) + ([] if spec.best_metric in spec.metrics else [spec.best_metric])
        if regression:
            constant = mean_baseline(dev["labels"], names)
        else:
            constant = majority_class_baseline(dev["labels"], names, label_names=vocab.labels)
        return examples_dataset(train), examples_dataset(dev), eval_fn, constant

    def build_task_model(self, encoder, spec, *, dropout, pooling):
        from albert_tf.tasks.classification.head import build_task_model

        return build_task_model(encoder, None if spec.kind == REGRESSION else len(spec.labels),
                                dropout=dropout, pooling=pooling)

    def build_model(self, encoder, preprocessor, spec, *, dropout, pooling):
        from albert_tf.tasks.classification.text_model import AlbertTextClassifier, AlbertTextRegressor

        options = dict(dropout=dropout, pooling=pooling, compile=False, task_model_name=None)
        if spec.kind == REGRESSION:
            return AlbertTextRegressor(encoder, preprocessor, **options)
        return AlbertTextClassifier(encoder, preprocessor, len(spec.labels), labels=spec.labels, **options)

    def split_names(self, spec, data):
        if spec.task in GLUE_TASKS:
            layout = glue_layout(spec.task)
            return {
                "dev": [s for s in layout.dev_files if os.path.isfile(os.path.join(data, layout.dev_files[s]))],
                "test": [s for s in layout.test_files if os.path.isfile(os.path.join(data, layout.test_files[s]))],
            }
        out = {}
        for kind in ("dev", "test"):
            try:
                find_split_file(data, kind)
                out[kind] = [kind]
            except ValueError:
                pass
        return out

    def read_split(self, spec, data, split, *, on_error="raise", cache=None, table_format=None):
        try:
            if spec.task in GLUE_TASKS:
                try:
                    return read_glue_split(spec.task, data, split, on_error=on_error)
                except MissingColumnError as e:
                    # Most often a table of another layout given to a GLUE task name.
                    raise TaskError(
                        f"{e}: not the GLUE {spec.task} layout; for any other table use --task classification "
                        f"--text-column COLUMN --label-column COLUMN"
                    ) from None
            path = find_split_file(data, split)
            label_column = spec.columns.get("label")
            options = dict(
                text_column=spec.columns["text"], text_b_column=spec.columns.get("text_b"),
                table_format=table_format or detect_file_format(path, spec.columns.get("format")),
                tsv_quoting=spec.columns.get("quoting") or "csv", on_error=on_error,
            )
            if split == "test":
                # A test file may or may not carry labels.
                try:
                    return read_table(path, label_column=label_column, **options)
                except MissingColumnError as e:
                    if label_column and e.column == label_column:
                        return read_table(path, **options)
                    raise
            return read_table(path, label_column=label_column, **options)
        except (DataFormatError, ValueError) as e:
            if isinstance(e, TaskError):
                raise
            raise TaskError(str(e)) from None

    def evaluate_examples(self, model, spec, tokenizer, examples, batch_size, label="evaluating"):
        regression = spec.kind == REGRESSION
        try:
            features = encode_examples(
                examples, tokenizer, seq_length=spec.max_seq_length, label_vocab=self.label_vocab(spec), regression=regression
            )
        except DataFormatError as e:
            raise TaskError(str(e)) from None
        scores = predict_scores(model, features, batch_size, callbacks=progress_callbacks_for(label))
        return score_predictions(scores, features["labels"], spec.metrics, regression)

    def predict_examples(self, model, spec, tokenizer, examples, batch_size, label="predicting"):
        """Classification: `label` and `probabilities`; regression: `prediction`."""
        features = encode_examples(examples, tokenizer, seq_length=spec.max_seq_length, with_labels=False)
        scores = predict_scores(model, features, batch_size, callbacks=progress_callbacks_for(label))
        return self.records_from_scores(spec, scores)

    @staticmethod
    def records_from_scores(spec, scores) -> list:
        """The prediction records of logits `[n, classes]` (classification: `label` and
        `probabilities`) or predictions `[n]` (regression: `prediction`): what `albert-tf predict`
        prints, and what `albert_tf.inference.bulk` writes as answers."""
        import numpy as np

        scores = np.asarray(scores)
        if spec.kind == REGRESSION:
            return [{"prediction": float(v)} for v in scores.reshape(-1)]
        shifted = scores - scores.max(axis=-1, keepdims=True)
        probabilities = np.exp(shifted) / np.exp(shifted).sum(axis=-1, keepdims=True)
        return [
            {"label": spec.labels[int(p.argmax())], "probabilities": {name: float(q) for name, q in zip(spec.labels, p)}}
            for p in probabilities
        ]

    def prediction_row(self, spec, index, example, record):
        value = record["label"] if spec.kind == CLASSIFICATION else f"{record['prediction']:.6f}"
        guid = example.guid if example.guid and ":" not in example.guid else str(index)
        return guid, value

    def examples_from_texts(self, spec, texts, texts_b):
        if self.is_pair(spec):
            if not texts_b or len(texts_b) != len(texts):
                raise TaskError(f"{spec.task} is a sentence-pair task: give one --text-b per TEXT ({len(texts)} texts, {len(texts_b or [])} --text-b)")
        elif texts_b:
            raise TaskError(f"{spec.task} takes single texts; --text-b is for sentence-pair tasks")
        examples = []
        for i, text in enumerate(texts):
            if not text.strip():
                raise TaskError(f"text {i + 1} is empty")
            b = texts_b[i] if texts_b else None
            if b is not None and not b.strip():
                raise TaskError(f"--text-b {i + 1} is empty")
            examples.append(TextExample(text, b, None, "<command line>", i + 1, str(i)))
        return examples

    def examples_from_file(self, spec, path):
        """A TSV/CSV/JSONL table with the training columns, in the file's own format, or `.txt`
        with one text per line."""
        try:
            if path.lower().endswith(".txt"):
                lines = read_text(path).split("\n")
                examples = [TextExample(l.rstrip("\r"), None, None, path, n, str(n - 1)) for n, l in enumerate(lines, 1) if l.strip()]
                if self.is_pair(spec):
                    raise TaskError(f"{spec.task} is a pair task: give a .tsv/.csv/.jsonl --input with both text columns")
                if not examples:
                    raise TaskError(f"{path} has no text")
                return examples
            columns = spec.columns
            if not columns.get("text"):
                layout = glue_layout(spec.task)
                text, text_b = layout.test_text_a, layout.test_text_b
            else:
                text, text_b = columns["text"], columns.get("text_b")
            # The file's own format (its extension, else its first line), not the training files'.
            return read_table(
                path, text_column=text, text_b_column=text_b, table_format=detect_file_format(path, columns.get("format")),
                tsv_quoting=columns.get("quoting") or "csv",
            )
        except DataFormatError as e:
            raise TaskError(str(e)) from None

    def export_arguments(self, spec):
        result = super().export_arguments(spec)
        result["pair"] = self.is_pair(spec)
        if spec.kind == CLASSIFICATION:
            result["labels"] = list(spec.labels)
        return result
