"""Sentence and sentence-pair classification and regression (GLUE-style tasks).

The models follow google-research/albert `run_classifier.py`: the pooled output (tanh dense on
`[CLS]`) -> dropout (0.1) -> a dense layer initialised with a truncated normal of the encoder's
`initializer_range`, giving `num_labels` logits trained with the mean cross-entropy, or one value
trained with the mean squared error for regression (STS-B). Labels travel in the input dict
(`labels`: int class ids, or float targets), so `model.fit(dataset)` needs no `y`.

Also here: `encode_examples` (tokenize and pack `TextExample`s into model features with the
Python tokenizers), `examples_dataset` (a `tf.data.Dataset` of them), `predict_scores`
(logits or regression values for features) and `make_eval_fn` (the dev evaluation for
`albert_tf.training.finetuning.run_finetuning`, computing the task's GLUE metrics).
"""

from __future__ import annotations

import os
import uuid
from typing import Any, Callable, Dict, List, Optional, Sequence

import keras
import numpy as np
from keras import ops

from albert_tf.data.glue import LabelVocab, TextExample, regression_target
from albert_tf.kinds import KIND_CLASSIFIER, KIND_REGRESSOR
from albert_tf.metrics import glue_metrics
from albert_tf.tasks.base import AlbertTaskModel

FEATURE_NAMES = ("input_ids", "input_mask", "segment_ids")
POOLING_MODES = ("cls", "mean")


def masked_mean(sequence_output, input_mask):
    """The mean of `sequence_output` [batch, seq, H] over the positions where `input_mask` is 1."""
    mask = ops.cast(ops.expand_dims(input_mask, -1), sequence_output.dtype)
    total = ops.sum(sequence_output * mask, axis=1)
    return total / ops.maximum(ops.sum(mask, axis=1), ops.cast(1.0, sequence_output.dtype))


def _check_pooling(pooling: str) -> str:
    if pooling not in POOLING_MODES:
        raise ValueError(f"pooling must be one of {', '.join(POOLING_MODES)}, got {pooling!r}")
    return pooling


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertClassifier(AlbertTaskModel):
    """Sentence(-pair) classifier: pooled output -> dropout -> dense(`num_labels`).

    Inputs: `input_ids`, `input_mask`, `segment_ids` [batch, seq] and, for training and
    evaluation, `labels` [batch] (class ids). Outputs: `{"logits": [batch, num_labels]}`.
    Metrics: `accuracy`.

    Args:
        encoder: An `AlbertEncoder`.
        num_labels: Number of classes (>= 2).
        dropout: Dropout on the pooled output (0.1 as the original).
        pooling: "cls" (the original: the encoder's pooler, tanh dense on `[CLS]`) or "mean" (the
            mean of the last layer over the real tokens). Small encoders trained from scratch or
            briefly pretrained learn reliably only with "mean": their `[CLS]` output is nearly
            the same for every text (see `albert_tf.training.recipes`).
    """

    export_kind = KIND_CLASSIFIER

    pooled_output_only = True

    def __init__(self, encoder, num_labels: int, dropout: float = 0.1, pooling: str = "cls", **kwargs):
        if isinstance(num_labels, bool) or not isinstance(num_labels, int) or num_labels < 2:
            raise ValueError(f"num_labels must be an integer >= 2, got {num_labels!r}")
        self.num_labels = num_labels
        self.pooling = _check_pooling(pooling)
        # The mean reads every position, so the encoder must run in full.
        self.pooled_output_only = pooling == "cls"
        self.reads_pooler = pooling == "cls"
        super().__init__(encoder, dropout=dropout, **kwargs)
        self.accuracy = keras.metrics.Mean(name="accuracy")

    def build_head(self):
        return keras.layers.Dense(
            self.num_labels,
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=self.encoder.initializer_range),
            dtype=self.encoder.embeddings.dtype_policy,
            name="classifier",
        )

    def call_head(self, encoder_outputs, inputs, training=None):
        pooled = self.head_dropout(pooled_features(self.pooling, encoder_outputs, inputs), training=training)
        return {"logits": self.head(pooled)}

    def compute_task_loss(self, inputs, outputs):
        labels = ops.reshape(ops.cast(inputs["labels"], "int32"), (-1,))
        return ops.mean(keras.losses.sparse_categorical_crossentropy(labels, outputs["logits"], from_logits=True))

    def update_task_metrics(self, inputs, outputs):
        labels = ops.reshape(ops.cast(inputs["labels"], "int32"), (-1,))
        predicted = ops.cast(ops.argmax(outputs["logits"], axis=-1), "int32")
        self.accuracy.update_state(ops.cast(ops.equal(predicted, labels), "float32"))

    def get_config(self):
        config = super().get_config()
        config["num_labels"] = self.num_labels
        config["pooling"] = self.pooling
        return config


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertRegressor(AlbertTaskModel):
    """Sentence(-pair) regression: pooled output -> dropout -> dense(1), mean squared error.

    Inputs as `AlbertClassifier`, with float `labels` [batch]. Outputs:
    `{"predictions": [batch]}`.

    Args:
        encoder: An `AlbertEncoder`.
        dropout: Dropout on the pooled output.
        pooling: "cls" or "mean", as `AlbertClassifier`.
    """

    export_kind = KIND_REGRESSOR

    pooled_output_only = True

    def __init__(self, encoder, dropout: float = 0.1, pooling: str = "cls", **kwargs):
        self.pooling = _check_pooling(pooling)
        self.pooled_output_only = pooling == "cls"
        self.reads_pooler = pooling == "cls"
        super().__init__(encoder, dropout=dropout, **kwargs)

    def build_head(self):
        return keras.layers.Dense(
            1,
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=self.encoder.initializer_range),
            dtype=self.encoder.embeddings.dtype_policy,
            name="regressor",
        )

    def call_head(self, encoder_outputs, inputs, training=None):
        pooled = self.head_dropout(pooled_features(self.pooling, encoder_outputs, inputs), training=training)
        return {"predictions": ops.squeeze(self.head(pooled), axis=-1)}

    def compute_task_loss(self, inputs, outputs):
        labels = ops.reshape(ops.cast(inputs["labels"], "float32"), (-1,))
        return ops.mean(ops.square(outputs["predictions"] - labels))

    def get_config(self):
        config = super().get_config()
        config["pooling"] = self.pooling
        return config


def pooled_features(pooling: str, encoder_outputs, inputs):
    """The head's input: the encoder's `pooled_output` ("cls") or the masked token mean ("mean")."""
    if pooling == "cls":
        return encoder_outputs["pooled_output"]
    return masked_mean(encoder_outputs["sequence_output"], inputs["input_mask"])


def build_task_model(encoder, num_labels: Optional[int], dropout: float = 0.1, pooling: str = "cls") -> AlbertTaskModel:
    """An `AlbertClassifier` for `num_labels` classes, or an `AlbertRegressor` for None."""
    if num_labels is None:
        return AlbertRegressor(encoder, dropout=dropout, pooling=pooling)
    return AlbertClassifier(encoder, num_labels=num_labels, dropout=dropout, pooling=pooling)


# --- features ------------------------------------------------------------------------------------


def encode_examples(
    examples: Sequence[TextExample],
    tokenizer,
    *,
    seq_length: int,
    label_vocab: Optional[LabelVocab] = None,
    regression: bool = False,
    with_labels: bool = True,
) -> Dict[str, np.ndarray]:
    """Tokenizes and packs examples the original way (`[CLS] a [SEP] b [SEP]`, pair truncation).

    Args:
        examples: The examples.
        tokenizer: A `SentencePieceTokenizer` or `WordPieceTokenizer` (anything with
            `encode_inputs(text_a, text_b, seq_length=...)`).
        seq_length: The model's sequence length.
        label_vocab: The label list of a classification task.
        regression: Labels are float targets (no `label_vocab`).
        with_labels: Add `labels` (int32 ids, or float32 targets); False for prediction.

    Returns:
        int32 arrays `input_ids`, `input_mask`, `segment_ids` [n, seq_length], and `labels` [n].

    Raises:
        DataFormatError: An unknown label or non-numeric target, naming the example's file and line.
        ValueError: Empty `examples`, or labels requested without a way to encode them.
    """
    if not examples:
        raise ValueError("no examples to encode")
    if with_labels and not regression and label_vocab is None:
        raise ValueError("classification labels need a label_vocab")
    columns: Dict[str, List] = {name: [] for name in FEATURE_NAMES}
    labels: List = []
    for example in examples:
        packed = tokenizer.encode_inputs(example.text_a, example.text_b, seq_length=seq_length)
        for name in FEATURE_NAMES:
            columns[name].append(packed[name])
        if with_labels:
            labels.append(regression_target(example) if regression else label_vocab.id_of(example))
    features = {name: np.asarray(values, dtype=np.int32) for name, values in columns.items()}
    if with_labels:
        features["labels"] = np.asarray(labels, dtype=np.float32 if regression else np.int32)
    return features


# Above this size the features go through a TFRecord file instead of in-memory tensors: a
# `from_tensor_slices` dataset embeds its arrays in the dataset graph, which cannot exceed the
# 2 GB protobuf limit when a distribution strategy serializes it (GLUE's MNLI at length 512 is
# 2.4 GB of int32 features).
DEFAULT_MAX_IN_MEMORY_BYTES = 512 * 1024 * 1024


def write_features_tfrecord(features: Dict[str, np.ndarray], path: str) -> Dict[str, Dict[str, Any]]:
    """Writes encoded features (one tf.Example per row) to the TFRecord file `path`.

    Returns:
        The layout `{name: {"shape": [...], "dtype": "int32"|"float32"}}` that
        `features_tfrecord_dataset` needs to read the file back with the same shapes and dtypes.
    """
    import tensorflow as tf

    names = sorted(features)
    count = len(features[names[0]])
    with tf.io.TFRecordWriter(path) as writer:
        for i in range(count):
            feature = {}
            for name in names:
                value = features[name][i].reshape(-1)
                if np.issubdtype(value.dtype, np.floating):
                    feature[name] = tf.train.Feature(float_list=tf.train.FloatList(value=value))
                else:
                    feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=value))
            writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    return {name: {"shape": list(features[name].shape[1:]), "dtype": np.dtype(features[name].dtype).name} for name in names}


def features_tfrecord_dataset(paths, layout: Dict[str, Dict[str, Any]], count: Optional[int] = None):
    """An unbatched dataset of the feature dicts `write_features_tfrecord` wrote (in file order)."""
    import tensorflow as tf

    spec = {
        name: tf.io.FixedLenFeature(entry["shape"], tf.float32 if entry["dtype"].startswith("float") else tf.int64)
        for name, entry in layout.items()
    }
    dtypes = {name: tf.as_dtype(entry["dtype"]) for name, entry in layout.items()}

    def parse(record):
        parsed = tf.io.parse_single_example(record, spec)
        return {name: tf.cast(parsed[name], dtypes[name]) for name in layout}

    dataset = tf.data.TFRecordDataset(paths).map(parse, num_parallel_calls=tf.data.AUTOTUNE)
    return dataset if count is None else dataset.apply(tf.data.experimental.assert_cardinality(count))


def _spill_to_tfrecord(features: Dict[str, np.ndarray], directory: Optional[str]):
    import atexit
    import shutil
    import tempfile

    if directory is None:
        directory = tempfile.mkdtemp(prefix="albert_features_")
        atexit.register(shutil.rmtree, directory, True)
    path = os.path.join(directory, f"features-{uuid.uuid4().hex}.tfrecord")
    layout = write_features_tfrecord(features, path)
    return features_tfrecord_dataset(path, layout, count=len(next(iter(features.values()))))


def examples_dataset(
    features: Dict[str, np.ndarray],
    *,
    max_in_memory_bytes: int = DEFAULT_MAX_IN_MEMORY_BYTES,
    spill_dir: Optional[str] = None,
):
    """An unbatched `tf.data.Dataset` of feature dicts (in file order, with a known length).

    Small feature sets are sliced from memory; larger ones (over `max_in_memory_bytes`) are
    written once to a TFRecord file in `spill_dir` (default: a temporary directory removed at
    exit) and read from there, which works under every distribution strategy.
    """
    import tensorflow as tf

    lengths = {len(v) for v in features.values()}
    if len(lengths) != 1 or not lengths.pop():
        raise ValueError("features must be non-empty arrays of one common length")
    if sum(np.asarray(v).nbytes for v in features.values()) <= max_in_memory_bytes:
        return tf.data.Dataset.from_tensor_slices(dict(features))
    return _spill_to_tfrecord({k: np.asarray(v) for k, v in features.items()}, spill_dir)


def predict_scores(model, features, batch_size: int = 64, *, callbacks=None) -> np.ndarray:
    """Logits [n, num_labels] of a classifier or predictions [n] of a regressor.

    `features` is a dict of arrays or a batched `tf.data.Dataset` of feature dicts; `callbacks`
    go to `model.predict` (e.g. `albert_tf.training.finetuning.progress_callbacks`).
    """
    import tensorflow as tf

    if isinstance(features, dict):
        inputs = {k: features[k] for k in FEATURE_NAMES}
        dataset = tf.data.Dataset.from_tensor_slices(inputs).batch(batch_size)
    else:
        dataset = features.map(lambda batch: {k: batch[k] for k in FEATURE_NAMES})
    outputs = model.predict(dataset, verbose=0, callbacks=callbacks)
    return np.asarray(outputs["logits"] if "logits" in outputs else outputs["predictions"])


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def score_predictions(
    scores: np.ndarray, labels: np.ndarray, metric_names: Sequence[str], regression: bool, diagnostics: bool = False
) -> Dict[str, float]:
    """The task's metrics (and `loss`) from logits / predictions and the true labels.

    With `diagnostics`, also how varied the predictions are, which
    `albert_tf.evaluation.collapse` reads: `predicted_classes` (distinct predicted classes) or
    `prediction_std` (the standard deviation of a regressor's predictions).
    """
    labels = np.asarray(labels).reshape(-1)
    if regression:
        predictions = np.asarray(scores, dtype=np.float64).reshape(-1)
        metrics = glue_metrics(metric_names, predictions, labels.astype(np.float64))
        metrics["loss"] = float(np.mean((predictions - labels) ** 2))
        if diagnostics:
            metrics["prediction_std"] = float(np.std(predictions))
        return metrics
    logits = np.asarray(scores, dtype=np.float64)
    predictions = logits.argmax(axis=-1)
    metrics = glue_metrics(metric_names, predictions, labels.astype(np.int64))
    metrics["loss"] = float(-np.mean(_log_softmax(logits)[np.arange(labels.size), labels.astype(np.int64)]))
    if diagnostics:
        metrics["predicted_classes"] = float(np.unique(predictions).size)
    return metrics


def make_eval_fn(metric_names: Sequence[str], regression: bool, diagnostics: bool = False) -> Callable:
    """`eval_fn(model, eval_dataset, callbacks=None) -> metrics` for `run_finetuning`.

    The dataset is batched feature dicts with `labels`; the labels are read from it once and
    cached, the predictions come from `model.predict`. `diagnostics` as `score_predictions`
    (pass True with `run_finetuning(constant_baseline=...)` so constant predictions are caught).
    """
    cache: Dict[str, object] = {"dataset": None, "labels": None}

    def eval_fn(model, eval_dataset, callbacks=None) -> Dict[str, float]:
        if cache["dataset"] is not eval_dataset:
            labels = np.concatenate([batch["labels"] for batch in eval_dataset.as_numpy_iterator()])
            cache.update(dataset=eval_dataset, labels=labels)
        scores = predict_scores(model, eval_dataset, callbacks=callbacks)
        return score_predictions(scores, cache["labels"], metric_names, regression, diagnostics=diagnostics)

    return eval_fn
