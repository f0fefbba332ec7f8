"""Running a SQuAD head: its answers, the official dev scores and the data of a fine-tuning run.

`predict_squad` runs an `AlbertForSquadV1` / `AlbertForSquadV2` (`albert_tf.tasks.squad.head`) over the
prediction dataset of `albert_tf.tasks.squad.data` and gives its raw results; `evaluate_squad`
post-processes and scores them (`albert_tf.tasks.squad.postprocessing`) and `make_squad_eval_fn`
turns that into the `eval_fn` of `albert_tf.training.finetuning.run_finetuning`;
`prepare_squad_task` reads and converts the files of a run, `predict_squad_file` answers a file
and `write_squad_outputs` writes the original's `predictions.json`, `nbest_predictions.json` and
`null_odds.json`.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from albert_tf.tasks.base import AlbertTaskModel
from albert_tf.tasks.squad import postprocessing as post
from albert_tf.tasks.squad.head import SQUAD_VERSIONS

_LABEL_KEYS = ("start_positions", "end_positions", "is_impossible")


def _prediction_dataset(dataset, batch_size: int):
    """The dataset batched (if it is not) and without labels (so the v2 head runs its beam)."""
    spec = dataset.element_spec
    if not isinstance(spec, Mapping) or "input_ids" not in spec:
        raise ValueError("the prediction dataset must yield dicts of SQuAD features (make_squad_dataset)")
    if "unique_ids" not in spec:
        raise ValueError("the prediction dataset has no unique_ids; build it with make_squad_dataset(..., is_training=False)")
    if spec["input_ids"].shape.rank == 1:
        dataset = dataset.batch(batch_size)
    if any(k in spec for k in _LABEL_KEYS):
        dataset = dataset.map(lambda x: {k: v for k, v in x.items() if k not in _LABEL_KEYS})
    return dataset


def predict_squad(model: AlbertTaskModel, dataset, *, batch_size: int = 32, callbacks=None) -> List[Any]:
    """Runs a SQuAD model over a prediction dataset and returns one raw result per feature.

    Args:
        model: An `AlbertForSquadV1` or `AlbertForSquadV2`.
        dataset: From `make_squad_dataset(features, is_training=False)` or
            `read_squad_tfrecord(..., is_training=False)`, batched or not.
        batch_size: Batch size when `dataset` is unbatched.
        callbacks: Keras callbacks for `model.predict` (progress).

    Returns:
        `RawResultV1`s or `RawResultV2`s, in dataset order.
    """
    outputs = model.predict(_prediction_dataset(dataset, batch_size), verbose=0, callbacks=callbacks)
    unique_ids = np.asarray(outputs["unique_ids"]).reshape(-1)
    if "start_logits" in outputs:
        start, end = np.asarray(outputs["start_logits"]), np.asarray(outputs["end_logits"])
        return [post.RawResultV1(int(u), start[i], end[i]) for i, u in enumerate(unique_ids)]
    if "start_top_index" in outputs:
        keys = ("start_top_log_probs", "start_top_index", "end_top_log_probs", "end_top_index", "cls_logits")
        arrays = [np.asarray(outputs[k]) for k in keys]
        return [post.RawResultV2(int(u), *(a[i] for a in arrays)) for i, u in enumerate(unique_ids)]
    raise ValueError(f"{type(model).__name__} did not produce SQuAD outputs (got {sorted(outputs)})")


def evaluate_squad(
    model: AlbertTaskModel,
    dataset_json,
    examples: Sequence[Any],
    features: Sequence[Any],
    eval_dataset,
    *,
    version: str,
    batch_size: int = 32,
    n_best_size: int = post.DEFAULT_N_BEST_SIZE,
    max_answer_length: int = post.DEFAULT_MAX_ANSWER_LENGTH,
    null_score_diff_threshold: Optional[float] = None,
    callbacks=None,
) -> Tuple[Dict[str, float], Dict[str, Any]]:
    """Predicts, post-processes and scores a dev set with the official script (`callbacks` go to
    `model.predict`).

    Returns:
        `(metrics, outputs)`: v1 `exact_match`, `f1`; v2 those of
        `postprocessing.evaluate_v2`. `outputs` holds `predictions` and `nbest` (and for v2
        `null_odds`), ready for `write_json_atomically`.
    """
    results = predict_squad(model, eval_dataset, batch_size=batch_size, callbacks=callbacks)
    if version == "v1":
        metrics, predictions, nbest = post.evaluate_v1(
            dataset_json, examples, features, results, n_best_size=n_best_size, max_answer_length=max_answer_length
        )
        return metrics, {"predictions": predictions, "nbest": nbest}
    if version == "v2":
        metrics, predictions, nbest, null_odds = post.evaluate_v2(
            dataset_json,
            examples,
            features,
            results,
            n_best_size=n_best_size,
            max_answer_length=max_answer_length,
            null_score_diff_threshold=null_score_diff_threshold,
        )
        return metrics, {"predictions": predictions, "nbest": nbest, "null_odds": null_odds}
    raise ValueError(f"version must be one of {SQUAD_VERSIONS}, got {version!r}")


def make_squad_eval_fn(
    dataset_json,
    examples: Sequence[Any],
    features: Sequence[Any],
    *,
    version: str,
    batch_size: int = 32,
    n_best_size: int = post.DEFAULT_N_BEST_SIZE,
    max_answer_length: int = post.DEFAULT_MAX_ANSWER_LENGTH,
) -> Callable[[Any, Any], Dict[str, float]]:
    """An `eval_fn(model, eval_dataset)` for `run_finetuning`: the official dev scores.

    The `eval_dataset` given to it must be the prediction dataset of `features`
    (`make_squad_dataset(features, is_training=False)`). Select the best weights by "f1".
    """
    if version not in SQUAD_VERSIONS:
        raise ValueError(f"version must be one of {SQUAD_VERSIONS}, got {version!r}")

    def eval_fn(model, eval_dataset, callbacks=None) -> Dict[str, float]:
        metrics, _ = evaluate_squad(
            model,
            dataset_json,
            examples,
            features,
            eval_dataset,
            version=version,
            batch_size=batch_size,
            n_best_size=n_best_size,
            max_answer_length=max_answer_length,
            callbacks=callbacks,
        )
        return metrics

    return eval_fn


@dataclasses.dataclass
class SquadTaskData:
    """Everything `run_finetuning` needs for a SQuAD run, from `prepare_squad_task`.

    Attributes:
        version: "v1" or "v2".
        train_dataset: Unbatched training features (labels inside), or None.
        eval_dataset: Unbatched prediction features of the dev file (with `unique_ids`), or None.
        eval_fn: The official-score `eval_fn` for the dev file, or None.
        best_metric: "f1".
        train_examples, train_features, eval_examples, eval_features, eval_json: What they came
            from (the dev ones are needed again to write predictions).
        skipped: Questions left out, by file.
        settings: The conversion settings, for the run's metadata.
    """

    version: str
    train_dataset: Any
    eval_dataset: Any
    eval_fn: Optional[Callable[[Any, Any], Dict[str, float]]]
    best_metric: str
    train_examples: List[Any]
    train_features: List[Any]
    eval_examples: List[Any]
    eval_features: List[Any]
    eval_json: Optional[List[Dict[str, Any]]]
    skipped: Dict[str, List[Any]]
    settings: Dict[str, Any]


def prepare_squad_task(
    tokenizer,
    *,
    version: str,
    train_file: Optional[Union[str, os.PathLike]] = None,
    eval_file: Optional[Union[str, os.PathLike]] = None,
    max_seq_length: int = 384,
    doc_stride: int = 128,
    max_query_length: int = 64,
    eval_batch_size: int = 32,
    n_best_size: int = post.DEFAULT_N_BEST_SIZE,
    max_answer_length: int = post.DEFAULT_MAX_ANSWER_LENGTH,
) -> SquadTaskData:
    """Reads and converts the SQuAD files of a fine-tuning run.

    Args:
        tokenizer: The model's SentencePiece tokenizer.
        version: "v1" (SQuAD v1.1) or "v2" (SQuAD v2.0, unanswerable questions).
        train_file, eval_file: The training and dev JSON files (either may be None).
        max_seq_length, doc_stride, max_query_length: Feature conversion (384, 128, 64).
        eval_batch_size: Prediction batch size of the `eval_fn`.
        n_best_size, max_answer_length: Post-processing (20, 30).

    Raises:
        See `albert_tf.tasks.squad.data.read_squad_examples` and `convert_examples_to_features`.
    """
    from albert_tf.tasks.squad import data

    if version not in SQUAD_VERSIONS:
        raise ValueError(f"version must be one of {SQUAD_VERSIONS}, got {version!r}")
    if train_file is None and eval_file is None:
        raise ValueError("give a train_file, an eval_file or both")
    v2 = version == "v2"
    lengths = dict(max_seq_length=max_seq_length, doc_stride=doc_stride, max_query_length=max_query_length)
    skipped: Dict[str, List[Any]] = {}
    train_dataset = eval_dataset = eval_fn = eval_json = None
    train_examples: List[Any] = []
    train_features: List[Any] = []
    eval_examples: List[Any] = []
    eval_features: List[Any] = []
    if train_file is not None:
        train_examples, read_skips = data.read_squad_examples(train_file, is_training=True, version_2_with_negative=v2)
        train_features, convert_skips = data.convert_examples_to_features(
            train_examples, tokenizer, is_training=True, **lengths
        )
        skipped[os.fspath(train_file)] = read_skips + convert_skips
        train_dataset = data.make_squad_dataset(train_features, is_training=True)
    if eval_file is not None:
        eval_json = data.load_squad_json(eval_file)
        eval_examples, read_skips = data.read_squad_examples(eval_file, is_training=False, version_2_with_negative=v2)
        eval_features, convert_skips = data.convert_examples_to_features(
            eval_examples, tokenizer, is_training=False, **lengths
        )
        skipped[os.fspath(eval_file)] = read_skips + convert_skips
        eval_dataset = data.make_squad_dataset(eval_features, is_training=False)
        eval_fn = make_squad_eval_fn(
            eval_json,
            eval_examples,
            eval_features,
            version=version,
            batch_size=eval_batch_size,
            n_best_size=n_best_size,
            max_answer_length=max_answer_length,
        )
    settings = dict(lengths, version=version, n_best_size=n_best_size, max_answer_length=max_answer_length)
    return SquadTaskData(
        version=version,
        train_dataset=train_dataset,
        eval_dataset=eval_dataset,
        eval_fn=eval_fn,
        best_metric="f1",
        train_examples=train_examples,
        train_features=train_features,
        eval_examples=eval_examples,
        eval_features=eval_features,
        eval_json=eval_json,
        skipped=skipped,
        settings=settings,
    )


def predict_squad_file(
    model: AlbertTaskModel,
    tokenizer,
    path: Union[str, os.PathLike],
    *,
    version: str,
    max_seq_length: int = 384,
    doc_stride: int = 128,
    max_query_length: int = 64,
    batch_size: int = 32,
    n_best_size: int = post.DEFAULT_N_BEST_SIZE,
    max_answer_length: int = post.DEFAULT_MAX_ANSWER_LENGTH,
    null_score_diff_threshold: Optional[float] = None,
    callbacks=None,
) -> Dict[str, Any]:
    """Answers every question of a SQuAD-format file (answers in it, if any, are not used).

    Args:
        model: A fine-tuned `AlbertForSquadV1` / `AlbertForSquadV2`.
        tokenizer: Its SentencePiece tokenizer.
        path: The JSON file.
        version: "v1" or "v2".
        max_seq_length, doc_stride, max_query_length: As the model was trained with.
        batch_size: Prediction batch size.
        n_best_size, max_answer_length: Post-processing.
        null_score_diff_threshold: v2: the no-answer threshold, normally the dev set's tuned
            `null_score_diff_threshold`; None answers every question with its best span.
        callbacks: Keras callbacks for `model.predict` (progress).

    Returns:
        `predictions`, `nbest` (and for v2 `null_odds`) as `write_squad_outputs` takes them, and
        `skipped`: the questions the conversion could not align (answered "" for v2, "empty" for
        v1, as the original).
    """
    from albert_tf.tasks.squad import data

    if version not in SQUAD_VERSIONS:
        raise ValueError(f"version must be one of {SQUAD_VERSIONS}, got {version!r}")
    examples, _ = data.read_squad_examples(path, is_training=False, version_2_with_negative=version == "v2")
    features, skipped = data.convert_examples_to_features(
        examples, tokenizer, is_training=False, max_seq_length=max_seq_length, doc_stride=doc_stride,
        max_query_length=max_query_length,
    )
    results = predict_squad(model, data.make_squad_dataset(features, is_training=False), batch_size=batch_size, callbacks=callbacks)
    if version == "v1":
        predictions, nbest = post.postprocess_v1(
            examples, features, results, n_best_size=n_best_size, max_answer_length=max_answer_length
        )
        return {"predictions": predictions, "nbest": nbest, "skipped": skipped}
    predictions, nbest, null_odds = post.postprocess_v2(
        examples,
        features,
        results,
        n_best_size=n_best_size,
        max_answer_length=max_answer_length,
        null_score_diff_threshold=null_score_diff_threshold,
    )
    return {"predictions": predictions, "nbest": nbest, "null_odds": null_odds, "skipped": skipped}


def write_squad_outputs(outputs: Mapping[str, Any], directory: Union[str, os.PathLike]) -> Dict[str, str]:
    """Writes `predictions.json`, `nbest_predictions.json` (and `null_odds.json`) atomically.

    Args:
        outputs: The second value of `evaluate_squad`, or what `predict_squad_file` returns.
        directory: Where to write (created if needed).

    Returns:
        `name -> path` of the files written.
    """
    names = {"predictions": "predictions.json", "nbest": "nbest_predictions.json", "null_odds": "null_odds.json"}
    written = {}
    for key, filename in names.items():
        if key in outputs:
            path = os.path.join(os.fspath(directory), filename)
            post.write_json_atomically(path, outputs[key])
            written[key] = path
    return written
