"""`task.json`: the task spec stored beside a fine-tuned model, and the other files of that layout.

`TaskSpec` says what a fine-tuned model does and how to feed it; `albert-tf finetune` and the
pipeline's Trainer write it, `evaluate`, `predict`, `export` and the serving exports read it.
The model directory also holds `albert_config.json` (`CONFIG_FILE`) and the final evaluations
(`RESULTS_FILE`, written with `write_json`).
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Dict, List, Optional

from albert_tf import file_io
from albert_tf.tasks.errors import TaskError

TASK_FILE = "task.json"
CONFIG_FILE = "albert_config.json"
RESULTS_FILE = "eval_results.json"
TASK_FORMAT_VERSION = 1


class TaskSpecError(TaskError):
    """A model directory without a readable `task.json` of a supported version."""


def write_json(path: str, value: Any) -> None:
    """`value` as indented JSON, written atomically."""
    file_io.atomic_write_json(path, value)


@dataclasses.dataclass
class TaskSpec:
    """`task.json`: what the fine-tuned model does and how to feed it.

    Attributes:
        task: The `--task` name.
        kind: "classification", "regression", "tagging", "squad" or "multiple_choice"
            (`albert_tf.tasks.family.task_kinds()`).
        labels: Class labels / tags in id order (None for regression and SQuAD; the option
            letters for RACE).
        max_seq_length: Sequence length of the inputs.
        metrics: Reported dev metrics; `best_metric` selected the weights.
        best_metric: See `metrics`.
        tokenizer: {"type": "sentencepiece"|"wordpiece", "file": name in the model dir, "lower_case"}.
        columns: Table columns {"text", "text_b", "label", "format", "quoting"} of
            classification/regression. "format" is the training files' format as given (None:
            from their extensions); files read later are read in their own format
            (`albert_tf.data.tables.detect_file_format`), this one only breaking a tie.
        token_unit: For tagging, how `predict` splits raw text: "char" or "word".
        settings: SQuAD / RACE conversion and post-processing settings (`version`, `doc_stride`,
            `max_query_length`, `n_best_size`, `max_answer_length`, for v2 the tuned
            `null_score_diff_threshold`; RACE `max_qa_length`, `levels`). Empty for the other
            tasks, and in files written before it existed.
        model: The raw-text model the directory holds (`albert_tf.tasks.model_dir.model_record`):
            `{"class": "AlbertTextClassifier", "config": {its constructor arguments}}`, so that
            `from_pretrained` and an export rebuild it whole. None in files written before it existed
            (the model is then read from its head and this spec).
        training: The resolved fine-tuning configuration the model was trained with (learning
            rate, batch size, schedule, precision, ...); None where the producer recorded none.
    """

    task: str
    kind: str
    labels: Optional[List[str]]
    max_seq_length: int
    metrics: List[str]
    best_metric: str
    tokenizer: Dict[str, Any]
    columns: Dict[str, Optional[str]] = dataclasses.field(default_factory=dict)
    token_unit: str = "word"
    settings: Dict[str, Any] = dataclasses.field(default_factory=dict)
    model: Optional[Dict[str, Any]] = None
    training: Optional[Dict[str, Any]] = None
    format_version: int = TASK_FORMAT_VERSION

    def write(self, directory: str) -> None:
        write_json(os.path.join(directory, TASK_FILE), dataclasses.asdict(self))

    @classmethod
    def read(cls, model_dir: str) -> "TaskSpec":
        from albert_tf.training.run_directory import is_complete

        if not os.path.isdir(model_dir):
            raise TaskSpecError(f"model directory not found: {model_dir}")
        if not is_complete(model_dir):
            raise TaskSpecError(f"{model_dir} is not a completed fine-tuning directory (no COMPLETE file)")
        return cls.from_file(os.path.join(model_dir, TASK_FILE), model_dir)

    @classmethod
    def from_file(cls, path: str, model_dir: Optional[str] = None) -> "TaskSpec":
        """The spec in the `task.json` at `path` (a model directory's, or an export's asset)."""
        try:
            with open(path, encoding="utf-8") as f:
                values = json.load(f)
        except FileNotFoundError:
            where = model_dir or os.path.dirname(path)
            raise TaskSpecError(f"{path} is missing: {where} was not written by `albert-tf finetune`") from None
        except (ValueError, UnicodeDecodeError) as e:
            raise TaskSpecError(f"{path} is not valid JSON: {e}") from None
        if not isinstance(values, dict) or values.get("format_version") != TASK_FORMAT_VERSION:
            version = values.get("format_version") if isinstance(values, dict) else None
            raise TaskSpecError(f"{path}: unsupported task file (format_version {version!r})")
        names = {f.name for f in dataclasses.fields(cls)}
        try:
            return cls(**{k: v for k, v in values.items() if k in names})
        except TypeError as e:
            raise TaskSpecError(f"{path}: {e}") from None
