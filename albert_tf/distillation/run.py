"""`distill(DistillSettings(...))`: a student trained from a fine-tuned teacher, written as a normal
model directory (the layout of `albert-tf finetune`: `albert-tf evaluate / predict / export`,
`evaluate_model_dir` and `predict_model_dir` read it unchanged).

The run reads the teacher's `task.json` (task, labels, columns, tokenizer), builds the transfer
set and labels it with the teacher once, and trains the student with
`albert_tf.training.finetuning.run_finetuning` on the `DistillationModel` objective, keeping the
best dev weights of the student alone. `finetuning.json` records the distillation settings, the
student's architecture source and the teacher's dev metrics (measured at the student's sequence
length); the dev set's best constant answer is printed beside both, as `finetune` does.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Dict

from albert_tf.distillation.settings import DISTILLABLE_KINDS, DistillError, DistillSettings, check_settings
from albert_tf.tasks.errors import TaskError
from albert_tf.training.finetuning_config import FinetuningError, resolve_finetuning_config

DISTILLATION_KEY = "distillation"


@dataclasses.dataclass
class DistillOutcome:
    """What `distill` did.

    Attributes:
        model_dir: The student's model directory.
        spec: Its `task.json`.
        result: The `FinetuningResult` of the run (its model is the wrapper; `student` the student).
        student: The trained student task model (best weights).
        teacher_metrics: The teacher's dev metrics at the student's sequence length.
        student_metrics: The student's best dev metrics.
        constant_baseline: The dev set's best constant answer.
        num_labeled, num_unlabeled: The transfer set.
        num_train_steps: The schedule run.
    """

    model_dir: str
    spec: Any
    result: Any
    student: Any
    teacher_metrics: Dict[str, float]
    student_metrics: Dict[str, float]
    constant_baseline: Any
    num_labeled: int
    num_unlabeled: int
    num_train_steps: int


def _read_teacher(path: str):
    from albert_tf.tasks.resources import load_model, tokenizer_from_model_dir
    from albert_tf.tasks.spec import CONFIG_FILE, TaskSpec

    spec = TaskSpec.read(path)
    if spec.kind not in DISTILLABLE_KINDS:
        raise DistillError(
            f"--teacher {path} is a {spec.kind} model (task {spec.task}); distillation covers "
            f"{', '.join(DISTILLABLE_KINDS)}"
        )
    from albert_tf.config import AlbertConfig, ConfigError

    try:
        config = AlbertConfig.from_json_file(os.path.join(path, CONFIG_FILE))
    except (OSError, ValueError, ConfigError) as e:
        raise DistillError(f"--teacher {path}: cannot read its {CONFIG_FILE}: {e}") from None
    return spec, config, tokenizer_from_model_dir(path, spec), load_model(path)


def _metrics_line(metrics: Dict[str, float]) -> str:
    return ", ".join(f"{k}={v:.4f}" for k, v in sorted(metrics.items()) if isinstance(v, (int, float)))


def distill(settings: DistillSettings) -> DistillOutcome:
    """Trains `settings.student` from `settings.teacher` and writes `settings.model_dir`.

    Raises:
        DistillError / TaskError: Bad settings, teacher, student or data (one line each), an
            existing `model_dir` without `overwrite`, or a failed run.
    """
    s = settings
    check_settings(s)
    from albert_tf.training.run_directory import is_complete

    if os.path.exists(s.model_dir) and os.listdir(s.model_dir) and not s.overwrite:
        what = "a completed run" if is_complete(s.model_dir) else "not empty"
        raise DistillError(f"--model-dir {s.model_dir} is {what}; pass --overwrite to replace it")
    from albert_tf.distillation.student import resolve_student
    from albert_tf.distillation.transfer_set import build_transfer_set, label_with_teacher
    from albert_tf.tasks.family import task_family

    teacher_spec, teacher_config, tokenizer, teacher = _read_teacher(s.teacher)
    plan = resolve_student(s.student, teacher_config)
    family = task_family(teacher_spec)
    seq_length = s.max_seq_length or teacher_spec.max_seq_length
    if seq_length > plan.config.max_position_embeddings:
        raise DistillError(f"--max-seq-length {seq_length} exceeds the student's max_position_embeddings {plan.config.max_position_embeddings}")
    columns = dict(teacher_spec.columns)
    if s.text_column:
        columns["text"] = s.text_column
    if s.label_column:
        columns["label"] = s.label_column
    spec = dataclasses.replace(teacher_spec, max_seq_length=seq_length, columns=columns)

    splits = family.split_names(spec, s.data)
    if not splits.get("dev"):
        raise DistillError(f"no dev split in {s.data}: the run selects the student's best weights on dev data")
    train_examples = family.read_split(spec, s.data, "train")
    dev_split = splits["dev"][0]
    dev_examples = family.read_split(spec, s.data, dev_split)
    # The student keeps the teacher's head: its dropout and pooling, unless given.
    dropout = s.dropout if s.dropout is not None else float(getattr(teacher, "dropout", 0.1))
    pooling = s.pooling or getattr(teacher, "pooling", None) or "cls"
    config = resolve_finetuning_config(
        family, plan.config, use_preset=False, learning_rate=s.learning_rate, batch_size=s.batch_size,
        eval_batch_size=s.eval_batch_size, max_seq_length=seq_length, dropout=dropout, pooling=pooling,
        num_train_steps=s.num_train_steps or None, num_epochs=s.num_epochs, warmup_proportion=s.warmup_proportion,
        seed=s.seed,
    )
    eval_batch_size = config.data.eval_batch_size
    transfer = build_transfer_set(
        family, spec, tokenizer, train_examples, max_labeled=s.max_labeled, unlabeled_from_train=s.unlabeled_from_train,
        unlabeled=s.unlabeled, unlabeled_column=s.unlabeled_column, seed=s.seed,
    )
    _, eval_data, eval_fn, constant = family.prepare_data(spec, tokenizer, transfer.labeled, dev_examples, eval_batch_size)
    quiet = s.quiet
    if not quiet:
        print(f"teacher {s.teacher}: labelling {transfer.size} transfer examples "
              f"({len(transfer.labeled)} labelled, {transfer.num_unlabeled} unlabelled)", flush=True)
    label_with_teacher(transfer, teacher, eval_batch_size)
    teacher_metrics = family.evaluate_examples(teacher, spec, tokenizer, dev_examples, eval_batch_size, None)
    print(f"teacher dev (seq {seq_length}): {_metrics_line(teacher_metrics)}", flush=True)

    steps, _ = config.schedule(transfer.size)
    record = {
        "settings": {k: (os.path.abspath(v) if k in ("teacher", "data", "unlabeled") and v else v) for k, v in s.to_dict().items()},
        "student": plan.source,
        "student_from_teacher": plan.from_teacher,
        "teacher": {"model_dir": os.path.abspath(s.teacher), "config": teacher_config.to_dict(),
                    "dev_metrics": teacher_metrics, "max_seq_length": seq_length},
        "num_labeled": len(transfer.labeled),
        "num_unlabeled": transfer.num_unlabeled,
    }
    result, student = _train(s, config, plan, family, spec, teacher, tokenizer, transfer, eval_data, eval_fn, constant,
                             record, splits=splits, dev_split=dev_split, dev_examples=dev_examples)
    best = spec.best_metric
    print(f"student best dev {best} at step {result.best_step}: {_metrics_line(result.best_metrics)}")
    print(f"teacher dev {best}={teacher_metrics[best]:.4f}")
    if constant is not None:
        print(f"best constant answer: {best}={constant.metrics[best]:.4f} ({constant.description})")
    if result.collapsed:
        print(f"WARNING: the student collapsed: {result.collapse.reason}", flush=True)
    print(f"wrote {result.model_dir}")
    return DistillOutcome(result.model_dir, spec, result, student, teacher_metrics, result.best_metrics, constant,
                          len(transfer.labeled), transfer.num_unlabeled, steps)


def _train(s: DistillSettings, config, plan, family, spec, teacher, tokenizer, transfer, eval_data, eval_fn, constant,
           record, *, splits, dev_split, dev_examples):
    from albert_tf.distillation.objective import DistillationModel
    from albert_tf.distillation.student import build_student
    from albert_tf.data.features import examples_dataset
    from albert_tf.tasks.model_dir import text_model_around
    from albert_tf.tasks.resources import tokenizer_layer_from_model_dir
    from albert_tf.tasks.runner import write_model_assets
    from albert_tf.training.finetuning import FinetuningRunConfig, run_finetuning

    eval_batch_size = config.data.eval_batch_size
    tokenizer_file = os.path.join(s.teacher, spec.tokenizer["file"])
    built: Dict[str, Any] = {}

    def build_model():
        student = build_student(plan, family, spec, teacher, dropout=config.task.dropout, pooling=config.task.pooling,
                                init=s.student_init)
        built["student"] = student
        return DistillationModel(
            student, spec.kind, temperature=s.temperature, alpha=s.alpha, transfer=s.transfer,
            transfer_weight=s.transfer_weight, teacher=teacher if s.transfer != "none" else None,
        )

    def write_results(directory: str, model) -> Dict[str, Any]:
        results: Dict[str, Any] = {}
        for kind in ("dev", "test"):
            for split in splits.get(kind, []):
                examples = dev_examples if split == dev_split else family.read_split(spec, s.data, split)
                if family.has_labels(spec, examples):
                    results[split] = family.evaluate_examples(model, spec, tokenizer, examples, eval_batch_size, None)
                    print(f"{split}: " + _metrics_line(results[split]), flush=True)
        return results

    def save_assets(directory: str, model) -> None:
        write_model_assets(directory, tokenizer_file, plan.config, spec, lambda: write_results(directory, model.task_model),
                           model=model, training=config.to_dict())

    def whole_student(model):
        # The model directory keeps the student whole, as every fine-tuned directory does.
        return text_model_around(model.student, tokenizer_layer_from_model_dir(s.teacher, spec), spec)

    print(
        f"distilling {spec.task} into {plan.source}: {transfer.size} transfer examples, T {s.temperature}, "
        f"alpha {s.alpha}, transfer {s.transfer}",
        flush=True,
    )
    for line in config.describe(transfer.size):
        print(line, flush=True)
    try:
        run_config = FinetuningRunConfig.from_config(
            config, transfer.size, s.model_dir, best_metric=spec.best_metric, eval_every_n_steps=s.eval_every,
            shuffle_buffer=min(transfer.size, 100_000),
            metadata={"task": spec.task, DISTILLATION_KEY: record, "config": plan.config.to_dict(),
                      "data": os.path.abspath(s.data)},
            overwrite=s.overwrite, verbose=0 if s.quiet else "auto",
            collapse_metric=spec.best_metric if constant is not None else None,
        )
        result = run_finetuning(
            build_model, examples_dataset(transfer.features), eval_data, run_config, eval_fn=eval_fn,
            save_assets=save_assets, saved_model=whole_student, constant_baseline=constant,
        )
    except (FinetuningError, FileExistsError) as e:
        raise TaskError(str(e)) from None
    return result, built["student"]
