"""Distiller: the Trainer's fine-tuned model as the teacher of a smaller student
(`albert_tf.distillation.distill`), exported like the Trainer's candidate.

The step runs only when the pipeline's `distill:` settings switch it on
(`albert_tf.pipeline_steps.settings.DistillStepSettings`);
then the student is what the Evaluator judges (all its gates, plus "within `teacher_margin` of the
teacher") and what the InfraValidator and Pusher get.

Output (the Trainer's layout, so `candidate_path` and the later steps read it unchanged)::

    data/train.jsonl, data/dev.jsonl   the ExampleGen splits the student learns from (dev = eval)
    model/                             the student in `albert-tf finetune`'s layout
    serving/<model_name>/1/            the student's candidate SavedModel
    summary.json                       the distillation, the teacher's and the student's dev metrics
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Dict

from albert_tf.pipeline_steps import example_gen, vocab_gen
from albert_tf.pipeline_steps.settings import DistillStepSettings
from albert_tf.pipeline_steps.staging import read_summary, staged_directory, write_summary

DATA_SUBDIR = "data"


def write_split_tables(examples_dir: str, target: str) -> Dict[str, int]:
    """The ExampleGen train and eval splits as `train.jsonl` / `dev.jsonl` in `target`."""
    os.makedirs(target, exist_ok=True)
    counts = {}
    for split, name in (("train", "train"), ("eval", "dev")):
        rows = example_gen.read_split(examples_dir, split)
        with open(os.path.join(target, f"{name}.jsonl"), "w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n")
        counts[name] = len(rows)
    return counts


def run_distiller(examples_dir: str, vocab_dir: str, trainer_dir: str, output_dir: str, settings: DistillStepSettings, *,
                  model_name: str, seed: int = 12345) -> Dict[str, Any]:
    """Distils the Trainer's model into the student and exports it; returns the summary."""
    from albert_tf.distillation import DistillSettings, distill
    from albert_tf.export.saved_model import export_saved_model
    from albert_tf.pipeline_steps.trainer import CANDIDATE_VERSION, MODEL_SUBDIR, SERVING_SUBDIR
    from albert_tf.tasks.classification.family import ClassificationFamily

    teacher_dir = os.path.join(trainer_dir, MODEL_SUBDIR)
    with staged_directory(output_dir) as staging:
        data_dir = os.path.join(staging, DATA_SUBDIR)
        counts = write_split_tables(examples_dir, data_dir)
        outcome = distill(DistillSettings(
            teacher=teacher_dir, student=settings.student, data=data_dir, model_dir=os.path.join(staging, MODEL_SUBDIR),
            temperature=settings.temperature, alpha=settings.alpha, transfer=settings.transfer,
            max_labeled=settings.max_labeled, unlabeled_from_train=settings.unlabeled_from_train,
            num_epochs=settings.epochs, batch_size=settings.batch_size, learning_rate=settings.learning_rate,
            seed=seed, quiet=True,
        ))
        spec = outcome.spec
        exported = export_saved_model(
            outcome.student, vocab_gen.tokenizer_layer(vocab_dir, spec.max_seq_length), os.path.join(staging, SERVING_SUBDIR),
            model_name, version=CANDIDATE_VERSION, labels=list(spec.labels), pair=ClassificationFamily.is_pair(spec),
            extra_assets=[os.path.join(staging, MODEL_SUBDIR, "task.json")],
        )
        summary = {
            "distill": dataclasses.asdict(settings),
            "examples": counts,
            "steps": outcome.num_train_steps,
            "best_dev_metrics": {k: float(v) for k, v in outcome.student_metrics.items()},
            "teacher_dev_metrics": {k: float(v) for k, v in outcome.teacher_metrics.items()},
            "teacher": os.path.abspath(teacher_dir),
            "constant_baseline": None if outcome.constant_baseline is None else outcome.constant_baseline.to_dict(),
            "model_name": model_name,
            "candidate": os.path.relpath(exported.path, staging),
            "signatures": sorted(exported.signatures),
            "vocab": read_summary(vocab_dir),
        }
        write_summary(staging, summary)
    return summary
