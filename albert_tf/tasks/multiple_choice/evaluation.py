"""Running a multiple-choice head: its answers and the data of a fine-tuning run.

`prepare_race_task` reads and converts the RACE files of a run for
`albert_tf.training.finetuning.run_finetuning` (whose default `eval_fn`, `model.evaluate`, gives
the dev `accuracy`); `predict_race` gives the choice probabilities and indices of a
`AlbertForMultipleChoice` (`albert_tf.tasks.multiple_choice.head`), and `predict_race_examples` one
record (option letter, probabilities) per question.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Dict, List, Optional, Sequence, Union

import numpy as np

from albert_tf.tasks.base import ENCODER_INPUTS
from albert_tf.tasks.multiple_choice.head import AlbertForMultipleChoice


def predict_race(model: AlbertForMultipleChoice, dataset, *, batch_size: int = 8, callbacks=None) -> Dict[str, np.ndarray]:
    """Choice probabilities [n, choices] and predicted indices [n] for a RACE dataset.

    Args:
        model: The fine-tuned `AlbertForMultipleChoice`.
        dataset: From `albert_tf.tasks.multiple_choice.data.make_race_dataset` (batched or not; labels ignored).
        batch_size: Batch size when `dataset` is unbatched.
        callbacks: Keras callbacks for `model.predict` (progress).
    """
    spec = dataset.element_spec
    if not isinstance(spec, dict) or "input_ids" not in spec:
        raise ValueError("the dataset must yield dicts of RACE features (make_race_dataset)")
    if spec["input_ids"].shape.rank == 2:
        dataset = dataset.batch(batch_size)
    dataset = dataset.map(lambda x: {k: x[k] for k in ENCODER_INPUTS})
    logits = np.asarray(model.predict(dataset, verbose=0, callbacks=callbacks)["logits"])
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
    probabilities = shifted / shifted.sum(axis=-1, keepdims=True)
    return {"probabilities": probabilities, "predictions": probabilities.argmax(axis=-1)}


def predict_race_examples(
    model: AlbertForMultipleChoice,
    tokenizer,
    examples: Sequence[Any],
    *,
    max_seq_length: int = 512,
    max_qa_length: int = 128,
    batch_size: int = 8,
    callbacks=None,
) -> List[Dict[str, Any]]:
    """One record per example: `id`, `question_index`, `prediction` (the option letter),
    `probabilities` (one per option) and, when the example has one, the gold `answer`
    (`callbacks` go to `model.predict`)."""
    from albert_tf.tasks.multiple_choice import data as race

    features = race.convert_race_examples(examples, tokenizer, max_seq_length=max_seq_length, max_qa_length=max_qa_length)
    predicted = predict_race(model, race.make_race_dataset(features, require_labels=False), batch_size=batch_size, callbacks=callbacks)
    records = []
    for example, probabilities, choice in zip(examples, predicted["probabilities"], predicted["predictions"]):
        record = {
            "id": example.example_id,
            "question_index": example.question_index,
            "prediction": chr(ord("A") + int(choice)),
            "probabilities": [float(p) for p in probabilities],
        }
        if example.label is not None:
            record["answer"] = chr(ord("A") + example.label)
        records.append(record)
    return records


@dataclasses.dataclass
class RaceTaskData:
    """What `run_finetuning` needs for a RACE run, from `prepare_race_task`.

    Attributes:
        train_dataset, eval_dataset: Unbatched feature datasets (labels inside), or None.
        best_metric: "accuracy" (reported by `model.evaluate`, the default `eval_fn`).
        train_examples, eval_examples: The examples read.
        settings: The conversion settings, for the run's metadata.
    """

    train_dataset: Any
    eval_dataset: Any
    best_metric: str
    train_examples: List[Any]
    eval_examples: List[Any]
    settings: Dict[str, Any]


def prepare_race_task(
    tokenizer,
    *,
    train_path: Optional[Union[str, os.PathLike, Sequence[Union[str, os.PathLike]]]] = None,
    eval_path: Optional[Union[str, os.PathLike, Sequence[Union[str, os.PathLike]]]] = None,
    max_seq_length: int = 512,
    max_qa_length: int = 128,
    levels: Sequence[str] = ("middle", "high"),
) -> RaceTaskData:
    """Reads and converts the RACE data of a fine-tuning run.

    Args:
        tokenizer: The model's tokenizer.
        train_path, eval_path: Split folders (e.g. `RACE/train`, `RACE/dev`), files or globs.
        max_seq_length, max_qa_length: Conversion (512 and 128 as the original).
        levels: RACE levels read from split folders.

    Raises:
        See `albert_tf.tasks.multiple_choice.data.read_race_examples` and `convert_race_examples`.
    """
    from albert_tf.tasks.multiple_choice import data as race

    if train_path is None and eval_path is None:
        raise ValueError("give a train_path, an eval_path or both")
    lengths = dict(max_seq_length=max_seq_length, max_qa_length=max_qa_length)
    train_dataset = eval_dataset = None
    train_examples: List[Any] = []
    eval_examples: List[Any] = []
    if train_path is not None:
        train_examples = race.read_race_examples(train_path, levels=levels)
        train_dataset = race.make_race_dataset(race.convert_race_examples(train_examples, tokenizer, **lengths))
    if eval_path is not None:
        eval_examples = race.read_race_examples(eval_path, levels=levels)
        eval_dataset = race.make_race_dataset(race.convert_race_examples(eval_examples, tokenizer, **lengths))
    return RaceTaskData(
        train_dataset=train_dataset,
        eval_dataset=eval_dataset,
        best_metric="accuracy",
        train_examples=train_examples,
        eval_examples=eval_examples,
        settings=dict(lengths, levels=list(levels)),
    )
