"""The task families: what each kind of fine-tuning task does, from its files to its export.

One class per family, one instance per task name:

* `ClassificationFamily` -- the GLUE tasks and any `classification` / `regression` table;
* `TaggingFamily` -- token classification (`conll`, `peoples-daily`);
* `SquadFamily` -- extractive question answering (`squad-v1`, `squad-v2`;
  `albert_tf.tasks.squad.family`);
* `MultipleChoiceFamily` -- `race` (`albert_tf.tasks.multiple_choice.family`).

A family reads its splits, encodes features, builds the head, gives the best constant answer and
the dev `eval_fn` of a run (`plan`), evaluates and predicts with a fine-tuned model directory
(`evaluate_splits`, `predict`), writes predictions, and says how the model exports
(`export_arguments`, `export_kind`). `task_family(task name, TaskSpec or model)` is the one lookup;
`albert_tf.tasks.runner.finetune` and `albert_tf.tasks.inference` drive it.

Every user-facing problem is a one-line `albert_tf.tasks.errors.TaskError`.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Optional, Sequence, Union

from albert_tf.kinds import (
    RECIPE_TAGGING,
    SPEC_CLASSIFICATION,
    SPEC_REGRESSION,
    SPEC_KINDS,
    SPEC_TAGGING,
)
from albert_tf.tasks.errors import TaskError
from albert_tf.tasks.spec import GLUE_TASKS, TaskSpec
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

# The families of the task folders, importable from here as before.
from albert_tf.tasks.multiple_choice.family import RACE_TASKS, MultipleChoiceFamily, race_split_path  # noqa: F401
from albert_tf.tasks.squad.family import (  # noqa: F401
    SQUAD_FILES,
    SQUAD_PREDICTIONS_DIR,
    SQUAD_TASKS,
    SquadFamily,
    squad_split_file,
)

TABLE_TASKS = ("classification", "regression")
TAGGING_TASKS = ("conll", "peoples-daily")
READING_TASKS = SQUAD_TASKS + RACE_TASKS
TASKS = GLUE_TASKS + TABLE_TASKS + TAGGING_TASKS + READING_TASKS

CONLL_FILES = {
    "train": ("train.txt", "train.conll", "train.bio", "eng.train"),
    "dev": ("dev.txt", "valid.txt", "validation.txt", "dev.conll", "dev.bio", "eng.testa"),
    "test": ("test.txt", "test.conll", "test.bio", "eng.testb"),
}
PEOPLES_DAILY_FRACTIONS = (0.8, 0.1, 0.1)


def conll_split_file(data_dir: str, split: str) -> Optional[str]:
    """The CoNLL file of `split` in `data_dir` (the first of `CONLL_FILES[split]` there), or None."""
    for name in CONLL_FILES[split]:
        path = os.path.join(data_dir, name)
        if os.path.isfile(path):
            return path
    return None


def peoples_daily_splits(path: str) -> Dict[str, list]:
    """The corpus cut by position into train / dev / test (80 / 10 / 10 %)."""
    from albert_tf.data.tagging import read_peoples_daily

    sentences = read_peoples_daily(path)
    n = len(sentences)
    first = int(n * PEOPLES_DAILY_FRACTIONS[0])
    second = first + int(n * PEOPLES_DAILY_FRACTIONS[1])
    return {"train": sentences[:first], "dev": sentences[first:second], "test": sentences[second:]}


class ClassificationFamily(TableFamily):
    """Sentence(-pair) classification and regression: the GLUE tasks, read from the standard GLUE
    files, and `classification` / `regression` tables (TSV, CSV, JSONL) with named columns."""

    tasks = GLUE_TASKS + TABLE_TASKS
    kinds = (SPEC_CLASSIFICATION, SPEC_REGRESSION)

    def preset(self):
        from albert_tf.tasks.presets import finetune_preset

        return finetune_preset(self.task) if self.task in GLUE_TASKS else None

    def build_spec(self, settings, hyper, tokenizer_entry, train_examples) -> TaskSpec:
        from albert_tf.data.glue import LabelVocab, glue_layout

        s = settings
        if s.task in GLUE_TASKS:
            layout = glue_layout(s.task)
            kind = SPEC_REGRESSION if layout.is_regression else SPEC_CLASSIFICATION
            labels = list(layout.labels) if layout.labels else None
            return TaskSpec(s.task, kind, labels, hyper["max_seq_length"], hyper["metrics"], hyper["best_metric"], tokenizer_entry)
        columns = {"text": s.text_column, "text_b": s.text_b_column, "label": s.label_column, "format": s.table_format, "quoting": s.tsv_quoting}
        if s.task == "regression":
            return TaskSpec(s.task, SPEC_REGRESSION, None, hyper["max_seq_length"], ["pearson", "spearman"], "pearson", tokenizer_entry, columns)
        try:
            vocab = LabelVocab.from_examples(train_examples)
        except ValueError as e:
            raise TaskError(str(e)) from None
        return self.classification_spec(s.task, vocab.labels, hyper["max_seq_length"], tokenizer_entry, columns)

    @staticmethod
    def classification_spec(task: str, labels: Sequence[str], max_seq_length: int, tokenizer_entry: Dict[str, Any],
                            columns: Dict[str, Optional[str]]) -> TaskSpec:
        """The `TaskSpec` of a classifier of `labels` read from table `columns`: accuracy (and F1
        for two classes), weights kept by accuracy."""
        metrics = ["accuracy", "f1"] if len(labels) == 2 else ["accuracy"]
        return TaskSpec(task, SPEC_CLASSIFICATION, list(labels), max_seq_length, metrics, "accuracy", tokenizer_entry, columns)

    def prepare_data(self, spec, tokenizer, train_examples, dev_examples, hyper):
        from albert_tf.data.glue import DataFormatError
        from albert_tf.evaluation import majority_class_baseline, mean_baseline
        from albert_tf.tasks import classification

        regression = spec.kind == SPEC_REGRESSION
        vocab = spec.label_vocab()
        try:
            train = classification.encode_examples(train_examples, tokenizer, seq_length=spec.max_seq_length, label_vocab=vocab, regression=regression)
            dev = classification.encode_examples(dev_examples, tokenizer, seq_length=spec.max_seq_length, label_vocab=vocab, regression=regression)
        except DataFormatError as e:
            raise TaskError(str(e)) from None
        eval_fn = classification.make_eval_fn(spec.metrics, regression, diagnostics=True)
        names = list(spec.metrics) + ([] if spec.best_metric in spec.metrics else [spec.best_metric])
        if regression:
            constant = mean_baseline(dev["labels"], names)
        else:
            constant = majority_class_baseline(dev["labels"], names, label_names=vocab.labels)
        return classification.examples_dataset(train), classification.examples_dataset(dev), eval_fn, constant

    def build_model(self, encoder, spec, hyper):
        from albert_tf.tasks.classification import build_task_model

        return build_task_model(encoder, None if spec.kind == SPEC_REGRESSION else len(spec.labels),
                                dropout=hyper["dropout"], pooling=hyper["pooling"])

    def split_names(self, spec, data):
        from albert_tf.data.glue import find_split_file, glue_layout

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
        from albert_tf.data.glue import (
            DataFormatError,
            MissingColumnError,
            detect_file_format,
            find_split_file,
            read_glue_split,
            read_table,
        )

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
        from albert_tf.data.glue import DataFormatError
        from albert_tf.tasks import classification

        regression = spec.kind == SPEC_REGRESSION
        try:
            features = classification.encode_examples(
                examples, tokenizer, seq_length=spec.max_seq_length, label_vocab=spec.label_vocab(), regression=regression
            )
        except DataFormatError as e:
            raise TaskError(str(e)) from None
        scores = classification.predict_scores(model, features, batch_size, callbacks=progress_callbacks_for(label))
        return classification.score_predictions(scores, features["labels"], spec.metrics, regression)

    def predict_examples(self, model, spec, tokenizer, examples, batch_size, label="predicting"):
        """Classification: `label` and `probabilities`; regression: `prediction`."""
        import numpy as np

        from albert_tf.tasks import classification

        features = classification.encode_examples(examples, tokenizer, seq_length=spec.max_seq_length, with_labels=False)
        scores = classification.predict_scores(model, features, batch_size, callbacks=progress_callbacks_for(label))
        if spec.kind == SPEC_REGRESSION:
            return [{"prediction": float(v)} for v in scores]
        shifted = scores - scores.max(axis=-1, keepdims=True)
        probabilities = np.exp(shifted) / np.exp(shifted).sum(axis=-1, keepdims=True)
        return [
            {"label": spec.labels[int(p.argmax())], "probabilities": {name: float(q) for name, q in zip(spec.labels, p)}}
            for p in probabilities
        ]

    def prediction_row(self, spec, index, example, record):
        value = record["label"] if spec.kind == SPEC_CLASSIFICATION else f"{record['prediction']:.6f}"
        guid = example.guid if example.guid and ":" not in example.guid else str(index)
        return guid, value

    def examples_from_texts(self, spec, texts, texts_b):
        from albert_tf.data.glue import TextExample

        if spec.is_pair:
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
        from albert_tf.data.glue import DataFormatError, TextExample, read_text, detect_file_format, glue_layout, read_table

        try:
            if path.lower().endswith(".txt"):
                lines = read_text(path).split("\n")
                examples = [TextExample(l.rstrip("\r"), None, None, path, n, str(n - 1)) for n, l in enumerate(lines, 1) if l.strip()]
                if spec.is_pair:
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
        result["pair"] = spec.is_pair
        if spec.kind == SPEC_CLASSIFICATION:
            result["labels"] = list(spec.labels)
        return result


class TaggingFamily(TableFamily):
    """Token classification (BIO tags): CoNLL-style files (`conll`) or the People's Daily corpus
    cut 80/10/10 by position (`peoples-daily`, per character)."""

    tasks = TAGGING_TASKS
    kinds = (SPEC_TAGGING,)
    recipe_kind = RECIPE_TAGGING
    spec_kind_when_reading = SPEC_TAGGING

    def build_spec(self, settings, hyper, tokenizer_entry, train_examples) -> TaskSpec:
        from albert_tf.data.tagging import TagVocab

        vocab = TagVocab.from_sentences(train_examples)
        return TaskSpec(
            settings.task, SPEC_TAGGING, list(vocab.tags), hyper["max_seq_length"],
            ["entity_f1", "entity_precision", "entity_recall", "token_accuracy"], "entity_f1", tokenizer_entry,
            token_unit="char" if settings.task == "peoples-daily" else "word",
        )

    def prepare_data(self, spec, tokenizer, train_examples, dev_examples, hyper):
        from albert_tf.data.glue import DataFormatError
        from albert_tf.evaluation import majority_tag_baseline
        from albert_tf.tasks import tagging
        from albert_tf.tasks.classification import examples_dataset

        vocab = spec.label_vocab()
        try:
            train = tagging.encode_sentences(train_examples, tokenizer, seq_length=spec.max_seq_length, tag_vocab=vocab)
            dev = tagging.encode_sentences(dev_examples, tokenizer, seq_length=spec.max_seq_length, tag_vocab=vocab)
        except DataFormatError as e:
            raise TaskError(str(e)) from None
        eval_fn = tagging.make_eval_fn(dev, dev_examples, vocab, batch_size=hyper["eval_batch_size"])
        gold = dev.features["labels"][dev.features["labels"] >= 0]
        constant = majority_tag_baseline(gold, vocab.tags) if gold.size else None
        return examples_dataset(train.features), examples_dataset(dev.features), eval_fn, constant

    def build_model(self, encoder, spec, hyper):
        from albert_tf.tasks.tagging import AlbertTokenClassifier

        return AlbertTokenClassifier(encoder, num_labels=len(spec.labels), dropout=hyper["dropout"])

    def split_names(self, spec, data):
        if spec.task == "peoples-daily":
            return {"dev": ["dev"], "test": ["test"]}
        return {kind: [kind] for kind in ("dev", "test") if conll_split_file(data, kind)}

    def read_split(self, spec, data, split, *, on_error="raise", cache=None, table_format=None):
        from albert_tf.data.glue import DataFormatError
        from albert_tf.data.tagging import read_conll, split_long_sentences

        try:
            if spec.task == "peoples-daily":
                if cache is None or "peoples-daily" not in cache:
                    splits = peoples_daily_splits(data)
                    if cache is not None:
                        cache["peoples-daily"] = splits
                else:
                    splits = cache["peoples-daily"]
                sentences = splits[split]
            else:
                path = conll_split_file(data, split)
                if path is None:
                    raise TaskError(f"no CoNLL {split} file in {data} (looked for {', '.join(CONLL_FILES[split])})")
                sentences = read_conll(path)
            # Long sentences are cut so that every token gets a prediction.
            return split_long_sentences(sentences, max(1, spec.max_seq_length - 2))
        except (DataFormatError, ValueError) as e:
            if isinstance(e, TaskError):
                raise
            raise TaskError(str(e)) from None

    def has_labels(self, spec, examples):
        return True

    def evaluate_examples(self, model, spec, tokenizer, examples, batch_size, label="evaluating"):
        from albert_tf.data.glue import DataFormatError
        from albert_tf.tasks import tagging

        vocab = spec.label_vocab()
        try:
            encoded = tagging.encode_sentences(examples, tokenizer, seq_length=spec.max_seq_length, tag_vocab=vocab)
        except DataFormatError as e:
            raise TaskError(str(e)) from None
        logits = tagging.predict_logits(model, encoded.features, batch_size, callbacks=progress_callbacks_for(label))
        return tagging.score_tagging(logits, encoded, examples, vocab)

    def predict_examples(self, model, spec, tokenizer, examples, batch_size, label="predicting"):
        """`tokens`, `tags` and `entities` per sentence."""
        from albert_tf.metrics import get_entities
        from albert_tf.tasks import tagging

        vocab = spec.label_vocab()
        encoded = tagging.encode_sentences(examples, tokenizer, seq_length=spec.max_seq_length, tag_vocab=vocab, with_labels=False)
        logits = tagging.predict_logits(model, encoded.features, batch_size, callbacks=progress_callbacks_for(label))
        records = []
        joiner = "" if spec.token_unit == "char" else " "
        for sentence, tags in zip(examples, tagging.decode_predictions(logits, encoded.word_positions, vocab)):
            entities = [
                {"type": kind, "text": joiner.join(sentence.tokens[start : end + 1]), "start": start, "end": end + 1}
                for kind, start, end in get_entities(tags)
            ]
            records.append({"tokens": list(sentence.tokens), "tags": tags, "entities": entities})
        return records

    def prediction_row(self, spec, index, example, record):
        return f"{example.source}:{example.line}", " ".join(record["tags"])

    def examples_from_texts(self, spec, texts, texts_b):
        from albert_tf.data.tagging import TaggedSentence, split_with_offsets

        if texts_b:
            raise TaskError("--text-b is for sentence-pair tasks")
        sentences = []
        for i, text in enumerate(texts):
            # Unchecked unit, as before: a task.json unit other than "char" splits into words.
            tokens = [unit for unit, _, _ in split_with_offsets(text, spec.token_unit, strict=False)]
            if not tokens:
                raise TaskError(f"text {i + 1} is empty")
            sentences.append(TaggedSentence(tuple(tokens), tuple("O" for _ in tokens), "<command line>", i + 1))
        return sentences

    def examples_from_file(self, spec, path):
        """`.txt`: one sentence per line; else CoNLL columns (the first is the token; tags, if
        any, are ignored)."""
        from albert_tf.data.glue import DataFormatError, read_text
        from albert_tf.data.tagging import read_conll

        try:
            if path.lower().endswith(".txt"):
                texts = [l for l in read_text(path).split("\n") if l.strip()]
                if not texts:
                    raise TaskError(f"{path} has no text")
                return self.examples_from_texts(spec, texts, None)
            return read_conll(path, with_tags=False)
        except DataFormatError as e:
            raise TaskError(str(e)) from None

    def export_arguments(self, spec):
        result = super().export_arguments(spec)
        result["labels"] = list(spec.labels)
        result["task_settings"] = {"token_unit": spec.token_unit}
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
