"""Scoring and predicting with a fine-tuned model directory (the output of `finetune`).

`evaluate_model_dir` gives the task's metrics on labelled splits, read exactly as in training;
`predict_model_dir` gives predictions for texts, a file or a split. Both read `task.json` and hand
the work to the task's family (`albert_tf.tasks.family.task_family`); `albert-tf evaluate` and
`albert-tf predict` are their command-line callers. Problems are one-line `TaskError`s.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Optional, Sequence

from albert_tf.tasks.errors import TaskError
from albert_tf.tasks.family import task_family
from albert_tf.tasks.family import Predictions
from albert_tf.tasks.resources import tokenizer_from_model_dir
from albert_tf.tasks.spec import TaskSpec


def evaluate_model_dir(
    model_dir: str,
    data: str,
    *,
    splits: Optional[Sequence[str]] = None,
    batch_size: int = 32,
    max_examples: Optional[int] = None,
    on_error: str = "raise",
    predictions_dir: Optional[str] = None,
) -> Dict[str, Dict[str, Any]]:
    """{split: metrics} of the model in `model_dir` on `data`.

    Args:
        splits: The splits to score; default every dev split and labelled test split (for SQuAD,
            `data` may be one JSON file: its one split).
        max_examples: Score only the first N examples of each split (not for SQuAD / RACE).
        on_error: Malformed rows: "raise" or "skip" (not for SQuAD / RACE).
        predictions_dir: SQuAD: also write the official prediction files here (per split in a
            subfolder when several are scored).

    Raises:
        TaskError: Bad arguments, model directory or data.
    """
    if batch_size < 1:
        raise TaskError(f"--batch-size must be >= 1, got {batch_size}")
    if max_examples is not None and max_examples < 1:
        raise TaskError(f"--max-examples must be >= 1, got {max_examples}")
    spec = TaskSpec.read(model_dir)
    if not os.path.exists(data):
        raise TaskError(f"--data not found: {data}")
    tokenizer = tokenizer_from_model_dir(model_dir, spec)
    family = task_family(spec)
    if splits:
        requested, explicit = list(splits), True
    else:
        requested, explicit = family.default_eval_splits(spec, data)
    return family.evaluate_splits(
        model_dir, spec, tokenizer, data, requested, explicit, batch_size=batch_size, max_examples=max_examples,
        on_error=on_error, predictions_dir=predictions_dir,
    )


def predict_model_dir(
    model_dir: str,
    *,
    texts: Sequence[str] = (),
    text_b: Optional[Sequence[str]] = None,
    input: Optional[str] = None,
    data: Optional[str] = None,
    split: Optional[str] = None,
    batch_size: int = 32,
    output: Optional[str] = None,
) -> Predictions:
    """Predictions of the model in `model_dir` for exactly one of `texts` (with `text_b` for pair
    tasks), the file `input` or `split` of `data` (default test; dev for SQuAD).

    `output`: a `.jsonl` file of the records, a `.tsv` of `index<TAB>prediction` (tables and
    tagging), or for SQuAD a directory of the official prediction files; without it the
    records come back in `Predictions.records`.

    Raises:
        TaskError: Bad arguments, model directory or data.
    """
    if batch_size < 1:
        raise TaskError(f"--batch-size must be >= 1, got {batch_size}")
    if sum(bool(x) for x in (texts, input, data)) != 1:
        raise TaskError("give exactly one of: TEXT arguments, --input FILE, or --data DIR (with --split)")
    spec = TaskSpec.read(model_dir)
    tokenizer = tokenizer_from_model_dir(model_dir, spec)
    return task_family(spec).predict(
        model_dir, spec, tokenizer, texts=list(texts or []), text_b=text_b, input=input, data=data, split=split,
        batch_size=batch_size, output=output,
    )
