"""The raw-text classifier and regressor, the keras-hub way: strings in, logits or scores out.

`AlbertTextClassifier` and `AlbertTextRegressor` hold the in-graph tokenizer
(`model.preprocessor`), the `AlbertEncoder` (`model.encoder`) and the id-level head of
`albert_tf.tasks.classification.head` (`model.task_model`); they are the models `albert-tf
finetune` trains for classification and regression tasks, and they export what `albert-tf export`
serves. How they take text, compile and save is `albert_tf.tasks.text_task.AlbertTextTask`'s.
"""

from __future__ import annotations

from typing import Optional, Sequence

import keras
import numpy as np
import tensorflow as tf

from albert_tf.tasks.classification import CLASSIFICATION, REGRESSION
from albert_tf.tasks.classification.head import AlbertForClassification, AlbertForRegression
from albert_tf.tasks.text_task import (
    AlbertTextTask,
    check_parts,
    class_ids,
    export_text_model,
    resolve_pooling,
    token_inputs,
)
from albert_tf.tokenization.in_graph import DEFAULT_LENGTH_BUCKET, check_length_bucket


# The table columns `albert-tf evaluate` and `predict --data` read for a model that `model.finetune`
# trained on arrays: `text` (and `text_b` for pairs) and `label`.
TABLE_COLUMNS = {"text": "text", "text_b": None, "label": "label", "format": None, "quoting": "csv"}


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertTextClassifier(AlbertTextTask):
    """Text (or text-pair) classifier on raw strings: tokenizer -> `AlbertEncoder` -> `AlbertForClassification` head.

    Input: a batch of texts, or a pair `(texts_a, texts_b)`; output: logits `[batch, num_classes]`.
    Labels for `fit` and `evaluate`: class ids `0..num_classes-1`, or the model's label names
    (`labels`), which are mapped to their ids.
    The head is `AlbertForClassification`'s (dropout, dense on the `[CLS]` pooler or the token mean),
    kept as `task_model`, which is what `export` serves.

    Compiled by default (`compile=True`) with the recipe's bias-corrected AdamW, sparse
    categorical cross-entropy on the logits and `accuracy` (`SparseCategoricalAccuracy`).

    Args:
        encoder: An `AlbertEncoder`.
        preprocessor: The `AlbertTokenizerLayer` of the encoder's vocabulary.
        num_classes: Number of classes (>= 2).
        labels: Class names in id order (optional): what `export` serves, and what `fit` and
            `evaluate` take as labels beside the ids.
        dropout: Dropout before the head.
        pooling: "cls" (the encoder's pooler) or "mean" (the mean of the last layer over the real
            tokens; the pooler is then frozen, as it gets no gradient).
        compile: Compile with the defaults above.
        **kwargs: `keras.Model` arguments (`name`, ...).

    Example:

    >>> model = AlbertTextClassifier.from_pretrained("albert_base", num_classes=2)  # doctest: +SKIP
    >>> model.fit(x=["a good film", "a bad film"], y=[1, 0], batch_size=2, epochs=3)  # doctest: +SKIP
    >>> model.predict(["good"]).argmax(-1)  # doctest: +SKIP
    array([1])
    >>> model.save("classifier.keras")  # doctest: +SKIP
    >>> model.export("serving", model_name="sentiment")  # doctest: +SKIP
    """

    kind = CLASSIFICATION

    def __init__(self, encoder, preprocessor, num_classes: int, dropout: float = 0.1, pooling: str = "cls",
                 compile: bool = True, length_bucket: Optional[int] = DEFAULT_LENGTH_BUCKET,
                 task_model_name: Optional[str] = "classifier", labels: Optional[Sequence[str]] = None, **kwargs):
        check_parts(encoder, preprocessor)
        if labels is not None and len(labels) != num_classes:
            raise ValueError(f"{len(labels)} labels for {num_classes} classes: give one name per class")
        # === Layers ===
        self.encoder = encoder
        self.preprocessor = preprocessor
        self.task_model = AlbertForClassification(encoder, num_labels=num_classes, dropout=dropout, pooling=pooling,
                                           name=task_model_name)
        if pooling == "mean":
            # The head reads the token mean: the pooler gets no gradient.
            encoder.pooler.trainable = False

        # === Functional Model ===
        inputs = token_inputs()
        outputs = self.task_model(inputs)["logits"]
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)
        self.length_bucket = check_length_bucket(length_bucket)

        # === Config ===
        self.num_classes = num_classes
        self.labels = None if labels is None else [str(label) for label in labels]
        self.dropout = dropout
        self.pooling = pooling
        if compile:
            self.compile()

    head_fields = ("num_classes",)
    default_name = "albert_text_classifier"

    @classmethod
    def from_pretrained(cls, path, num_classes: Optional[int] = None, *, labels: Optional[Sequence[str]] = None,
                        sequence_length: Optional[int] = None, pooling: Optional[str] = None,
                        dropout: Optional[float] = None, new_head: bool = False, seed: Optional[int] = None,
                        compile: bool = True, config=None, tokenizer=None, lower_case: Optional[bool] = None,
                        dtype=None, allow_vocab_mismatch: bool = False,
                        name: Optional[str] = None) -> "AlbertTextClassifier":
        """The classifier stored at `path`, whole, or a new one on the pretrained encoder there.

        A fine-tuned classifier (a model directory of `albert-tf finetune`, `model.finetune` or the
        pipeline, its export or pushed version, a `.keras` file) comes back with its head, labels,
        number of classes and sequence length. A checkpoint without a head (any layout
        `resolve_pretrained` reads) gets a new head; so does a fine-tuned one given another
        `num_classes` or `new_head=True`. A new head is seeded (`seed`, default 0) and said so in
        one line on stderr.

        Args:
            path: The model directory, export, `.keras` file or checkpoint.
            num_classes: Number of classes (needed for a new head; default the stored one).
            labels: Class names in id order (default the stored ones).
            sequence_length: Length of the packed inputs (default the stored one, else 128).
            pooling: "cls" or "mean"; default the stored one, else the recipe's for the model's size.
            dropout: Dropout before the head (default the stored one, else 0.1).
            new_head: Replace a stored head by a new one.
            seed: Seeds a new head.
            compile: Compile with the recipe (see the class).
            config, tokenizer, lower_case, allow_vocab_mismatch: See `load_pretrained_backbone`
                (for a checkpoint read as an encoder).
            dtype: The encoder's dtype policy (e.g. "mixed_bfloat16").
            name: The model's name (also the served name `export` defaults to).
        """
        if num_classes is None and labels is not None:
            num_classes = len(labels)
        return cls._restore(
            path, dict(num_classes=num_classes, labels=labels, pooling=pooling, dropout=dropout), new_head=new_head,
            seed=seed, compile=compile, name=name, sequence_length=sequence_length, dtype=dtype, config=config,
            tokenizer=tokenizer, lower_case=lower_case, allow_vocab_mismatch=allow_vocab_mismatch,
        )

    @classmethod
    def arguments_from_spec(cls, spec, head_config):
        return {**super().arguments_from_spec(spec, head_config), "num_classes": len(spec.labels),
                "labels": list(spec.labels), "pooling": head_config.get("pooling", "cls")}

    @classmethod
    def complete_arguments(cls, config, encoder):
        if config.get("num_classes") is None:
            raise ValueError("num_classes is needed for a new classifier head: pass num_classes= (or labels=)")
        if config.get("labels") is not None and len(config["labels"]) != config["num_classes"]:
            config = {k: v for k, v in config.items() if k != "labels"}  # another number of classes: new names
        return {**config, "pooling": resolve_pooling(config.get("pooling"), encoder, cls.kind)}

    def spec_fields(self):
        labels = self.labels or [str(i) for i in range(self.num_classes)]
        return dict(task="classification", kind=CLASSIFICATION, labels=labels, metrics=["accuracy"],
                    best_metric="accuracy", columns=dict(TABLE_COLUMNS))

    def default_loss(self):
        return keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def default_metrics(self):
        return [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]

    best_metric = "accuracy"
    predict_by_length = True

    def _labels_array(self, y, features=None):
        """Class ids 0..num_classes-1, or label names mapped through `labels` (one-line errors
        for names the model has not, or ids outside its classes)."""
        return class_ids(y, self.num_classes, names=self.labels, no_names=(
            "the model has no label names: pass labels=[...] to from_pretrained or the constructor, "
            f"or class ids 0..{self.num_classes - 1}"))

    def _check_dataset_labels(self, spec):
        if spec is not None and any(s.dtype == tf.string for s in tf.nest.flatten(spec)):
            names = "model.labels lists the names in id order" if self.labels else "the model has no label names"
            raise ValueError(f"the dataset's labels are strings: map them to class ids 0..{self.num_classes - 1} in "
                             f"the dataset ({names}), or pass the texts and labels as arrays")

    def constant_baseline(self, validation_data):
        """Always the dev data's most frequent class (given as arrays; None for a dataset)."""
        from albert_tf.evaluation.baselines import majority_class_baseline

        if isinstance(validation_data, tf.data.Dataset):
            return None
        return majority_class_baseline(self._labels_array(validation_data[1]), ("accuracy",))

    def export(self, export_base, model_name: Optional[str] = None, version: Optional[int] = None, *,
               labels: Optional[Sequence[str]] = None, pair: bool = False, check: bool = True, **kwargs):
        """Writes the TF Serving SavedModel `<export_base>/<model_name>/<version>/`, as `albert-tf export`.

        Signatures: `serving_default` (raw `text`, and `text_b` with `pair=True`, in; `probabilities`,
        `logits`, `label_id`, `label` out), `tokens` (token ids in) and `classify` (TF Serving's
        Classify API); see `albert_tf.export.signatures`.

        Args:
            export_base: The TF Serving model base directory.
            model_name: The served name (default the model's name).
            version: The integer version (default the next free one).
            labels: Class names in id order (default "0", "1", ...).
            pair: The model takes text pairs (`text`, `text_b`).
            check: Run the TF Serving compatibility check (ops and a fresh-process reload).
            **kwargs: `export_saved_model` arguments (`batching`, `container_base`, `extra_assets`,
                `length_bucket`: default the model's;
                `tflite="dynamic-int8"` or `"float32"` for a `model.tflite` beside the SavedModel).

        Returns:
            The `ExportResult` (`result.path` is the version directory).
        """
        return export_text_model(self, export_base, model_name, version, labels=labels or self.labels, pair=pair,
                                 check=check, **kwargs)

    def get_config(self):
        config = super().get_config()
        config.update({"num_classes": self.num_classes, "dropout": self.dropout, "pooling": self.pooling,
                       "labels": self.labels})
        return config


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertTextRegressor(AlbertTextTask):
    """Text (or text-pair) regression on raw strings: tokenizer -> `AlbertEncoder` -> `AlbertForRegression` head.

    Input as `AlbertTextClassifier`; output: one float per text, `[batch]`. Compiled by default with
    the recipe's bias-corrected AdamW, the mean squared error and the Pearson correlation
    (`pearson`).

    Args:
        encoder: An `AlbertEncoder`.
        preprocessor: The `AlbertTokenizerLayer` of the encoder's vocabulary.
        dropout: Dropout before the head.
        pooling: "cls" or "mean", as `AlbertTextClassifier`.
        compile: Compile with the defaults above.
        **kwargs: `keras.Model` arguments (`name`, ...).

    Example:

    >>> model = AlbertTextRegressor.from_pretrained("albert_base")  # doctest: +SKIP
    >>> model.fit(x=(["a man sings"] * 2, ["a man is singing", "a cat sleeps"]), y=[4.8, 0.2])  # doctest: +SKIP
    >>> model.predict((["a man sings"], ["someone sings"]))  # doctest: +SKIP
    """

    kind = REGRESSION

    def __init__(self, encoder, preprocessor, dropout: float = 0.1, pooling: str = "cls", compile: bool = True,
                 length_bucket: Optional[int] = DEFAULT_LENGTH_BUCKET, task_model_name: Optional[str] = "regressor",
                 **kwargs):
        check_parts(encoder, preprocessor)
        # === Layers ===
        self.encoder = encoder
        self.preprocessor = preprocessor
        self.task_model = AlbertForRegression(encoder, dropout=dropout, pooling=pooling, name=task_model_name)
        if pooling == "mean":
            encoder.pooler.trainable = False

        # === Functional Model ===
        inputs = token_inputs()
        outputs = self.task_model(inputs)["predictions"]
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)
        self.length_bucket = check_length_bucket(length_bucket)

        # === Config ===
        self.dropout = dropout
        self.pooling = pooling
        if compile:
            self.compile()

    default_name = "albert_text_regressor"

    @classmethod
    def from_pretrained(cls, path, *, sequence_length: Optional[int] = None, pooling: Optional[str] = None,
                        dropout: Optional[float] = None, new_head: bool = False, seed: Optional[int] = None,
                        compile: bool = True, config=None, tokenizer=None, lower_case: Optional[bool] = None,
                        dtype=None, allow_vocab_mismatch: bool = False,
                        name: Optional[str] = None) -> "AlbertTextRegressor":
        """The regressor stored at `path`, whole, or a new one on the pretrained encoder there
        (arguments as `AlbertTextClassifier.from_pretrained`)."""
        return cls._restore(
            path, dict(pooling=pooling, dropout=dropout), new_head=new_head, seed=seed, compile=compile, name=name,
            sequence_length=sequence_length, dtype=dtype, config=config, tokenizer=tokenizer, lower_case=lower_case,
            allow_vocab_mismatch=allow_vocab_mismatch,
        )

    @classmethod
    def arguments_from_spec(cls, spec, head_config):
        return {**super().arguments_from_spec(spec, head_config), "pooling": head_config.get("pooling", "cls")}

    @classmethod
    def complete_arguments(cls, config, encoder):
        return {**config, "pooling": resolve_pooling(config.get("pooling"), encoder, cls.kind)}

    def spec_fields(self):
        return dict(task="regression", kind=REGRESSION, labels=None, metrics=["pearson", "spearman"],
                    best_metric="pearson", columns=dict(TABLE_COLUMNS))

    def default_loss(self):
        return keras.losses.MeanSquaredError()

    def default_metrics(self):
        return [keras.metrics.PearsonCorrelation(name="pearson")]

    best_metric = "pearson"
    predict_by_length = True

    def _labels_array(self, y, features=None):
        """The scores as float32; one line for a label that is no number (a name, None, NaN)."""
        try:
            labels = np.asarray(y, dtype="float32")
        except (TypeError, ValueError):
            labels = None
        if labels is None or not np.isfinite(labels).all():
            odd = [v for v in np.asarray(y, dtype=object).reshape(-1) if not _is_finite_number(v)]
            if not odd:
                raise ValueError("a regressor's labels are numbers (scores), one per input")
            raise ValueError(f"label {odd[0]!r} is not a number: a regressor's labels are numbers (scores)")
        return labels

    def _check_dataset_labels(self, spec):
        if spec is not None and any(s.dtype == tf.string for s in tf.nest.flatten(spec)):
            raise ValueError("the dataset's labels are strings: a regressor's labels are numbers (scores)")

    def export(self, export_base, model_name: Optional[str] = None, version: Optional[int] = None, *,
               pair: bool = False, check: bool = True, **kwargs):
        """Writes the TF Serving SavedModel, as `albert-tf export` does for a regressor: `serving_default`
        and `tokens` return `score`, `regress` is TF Serving's Regress API. Arguments as
        `AlbertTextClassifier.export` (without `labels`)."""
        return export_text_model(self, export_base, model_name, version, pair=pair, check=check, **kwargs)

    def get_config(self):
        config = super().get_config()
        config.update({"dropout": self.dropout, "pooling": self.pooling})
        return config


def _is_finite_number(value) -> bool:
    """Whether `value` reads as a finite float as `np.asarray(..., dtype="float32")` reads it."""
    try:
        return bool(np.isfinite(np.float32(value)))
    except (TypeError, ValueError):
        return False
