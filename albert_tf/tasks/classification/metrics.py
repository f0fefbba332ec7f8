"""How a classifier or regressor scores: its predictions on features, the task's GLUE metrics
(`score_predictions`) and the dev evaluation of a fine-tuning run (`make_eval_fn`, for
`albert_tf.training.finetuning.run_finetuning`)."""

from __future__ import annotations

from typing import Callable, Dict, Sequence

import numpy as np

from albert_tf.metrics import glue_metrics
from albert_tf.data.features import FEATURE_NAMES


def predict_scores(model, features, batch_size: int = 64, *, callbacks=None) -> np.ndarray:
    """Logits [n, num_labels] of a classifier or predictions [n] of a regressor.

    `features` is a dict of arrays or a batched `tf.data.Dataset` of feature dicts; `callbacks`
    go to `model.predict` (e.g. `albert_tf.training.progress.progress_callbacks`).
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
