"""Pretrainer and Trainer: LAMB pretraining on the Transform records, AdamW fine-tuning on its
features, and the candidate's TF Serving export.

Pretrainer output: the `run_pretraining` model directory (`encoder.keras`, `pretrainer.keras`,
`tf1/model.ckpt` in the original format, `checkpoints/`, `metrics.jsonl`, TensorBoard `logs/`).

Trainer output::

    model/                       the fine-tuned model in `albert-tf finetune`'s layout (model.keras,
                                 task.json, tokenizer, albert_config.json, eval_results.json, COMPLETE)
    serving/<model_name>/1/      the candidate SavedModel (raw text in, tokenized in the graph),
                                 checked for TF Serving compatibility, with warmup requests
    summary.json                 steps, the best dev metrics, paths

Reproducibility (`deterministic`): both steps seed Python, NumPy, TensorFlow and Keras and read
their data in a seeded order. On a CPU that is enough: two runs on the same inputs give
bit-identical weights. On a GPU, TensorFlow's op determinism is switched on as well
(`deterministic_op_kernels`).
"""

from __future__ import annotations

import os
from typing import Any, Dict, Optional

from albert_tf.pipeline_steps import example_gen, transform, vocab_gen
from albert_tf.pipeline_steps.settings import PIPELINE_TASK, finetuning_config
from albert_tf.training.finetuning_config import FinetuningConfig
from albert_tf.pipeline_steps.staging import read_summary, staged_directory, write_summary

MODEL_SUBDIR = "model"
SERVING_SUBDIR = "serving"
CANDIDATE_VERSION = 1


def deterministic_op_kernels(deterministic: bool) -> bool:
    """Whether a training step should call `tf.config.experimental.enable_op_determinism()`.

    Only where a GPU is visible: GPU kernels (atomic reductions, cuDNN's algorithm choice) vary
    from run to run without it. CPU kernels already give bit-identical results run to run on a
    machine (two Pretrainer and two Trainer runs on the sample job's inputs wrote identical
    weights), and switching op determinism on there only changes which kernels run (other
    bits, no more reproducible) and can cost speed.
    """
    if not deterministic:
        return False
    import tensorflow as tf

    return bool(tf.config.list_physical_devices("GPU"))


def run_pretrainer(
    transform_dir: str,
    vocab_dir: str,
    output_dir: str,
    albert_config,
    *,
    steps: int,
    batch_size: int,
    learning_rate: float,
    warmup_steps: int,
    strategy: str = "default",
    precision: str = "float32",
    seed: int = 12345,
    deterministic: bool = True,
) -> Dict[str, Any]:
    """Pretrains the encoder (MLM + SOP, LAMB) on the Transform output; returns the summary.

    A warm-started run (the vocabulary's `warm_start`) continues from the base model's encoder.

    `deterministic`: the same inputs and seed give the same weights (`deterministic_op_kernels`).
    """
    from albert_tf.data.tfrecords import make_pretraining_dataset
    from albert_tf.training.pretraining import PretrainingRunConfig, run_pretraining
    from albert_tf.training.pretraining_config import TokenizerFile

    info = read_summary(transform_dir)
    vocab = read_summary(vocab_dir)
    base = vocab_gen.warm_start_base(vocab_dir)
    if base is not None:
        from albert_tf.pipeline_steps.warm_start import check_architecture

        check_architecture(base, albert_config)
    # The output carries its tokenizer, so that `from_pretrained` and `finetune --init` load it alone.
    tokenizer = TokenizerFile(vocab["type"], vocab_gen.tokenizer_file(vocab_dir), bool(vocab["lower_case"]))
    files = transform.pretraining_files(transform_dir)
    if not files:
        raise FileNotFoundError(f"{transform_dir} holds no pretraining records")
    seq, predictions = info["max_seq_length"], info["max_predictions_per_seq"]
    with staged_directory(output_dir) as staging:
        config = PretrainingRunConfig(
            model_dir=staging,
            model_config=albert_config,
            batch_size=batch_size,
            max_seq_length=seq,
            max_predictions_per_seq=predictions,
            num_train_steps=steps,
            num_warmup_steps=warmup_steps,
            learning_rate=learning_rate,
            precision=precision,
            strategy=strategy,
            checkpoint_every_n_steps=max(1, steps // 4),
            keep_checkpoints=2,
            seed=seed,
            log_every=max(1, steps // 10),
            verbose=0,
            deterministic_ops=deterministic_op_kernels(deterministic),
            tokenizer=tokenizer,
            init_checkpoint=base,
        )
        result = run_pretraining(
            config, lambda: make_pretraining_dataset(files, seq, predictions, batch_size, is_training=True, seed=seed)
        )
        last = result.history[-1] if result.history else {}
        summary = {
            "steps": result.final_step,
            "final_metrics": {k: float(v) for k, v in last.items() if isinstance(v, (int, float)) and k != "step"},
            "albert_config": albert_config.to_dict(),
            "vocab": read_summary(vocab_dir),
            "warm_start": base,
        }
        write_summary(staging, summary)
    return summary


def _task_spec(labels, max_seq_length: int, vocab_info: Dict[str, Any], pair: bool):
    from albert_tf.tasks.classification.family import ClassificationFamily

    columns = {
        "text": example_gen.TEXT_FEATURE,
        "text_b": example_gen.TEXT_B_FEATURE if pair else None,
        "label": example_gen.LABEL_FEATURE,
        "format": "jsonl",
        "quoting": "csv",
    }
    tokenizer = {"type": vocab_info["type"], "file": vocab_info["file"], "lower_case": vocab_info["lower_case"]}
    return ClassificationFamily.classification_spec(PIPELINE_TASK, labels, max_seq_length, tokenizer, columns)


class _TrackedEvaluation:
    """The Trainer's dev evaluation of the head (`eval_fn` of the run): the task's metrics and MCC,
    each evaluation kept, against the majority class of `eval_data` (`constant`)."""

    def __init__(self, spec, eval_data):
        import numpy as np

        from albert_tf.evaluation import majority_class_baseline
        from albert_tf.tasks.classification.metrics import make_eval_fn

        labels = np.concatenate([batch["labels"] for batch in eval_data.batch(1024).as_numpy_iterator()])
        self.constant = majority_class_baseline(labels, ["accuracy", "mcc"], label_names=list(spec.labels))
        self.best_metric = spec.best_metric
        self.evaluations = []
        self._eval_fn = make_eval_fn(list(spec.metrics) + ["mcc"], regression=False, diagnostics=True)

    def __call__(self, model, dataset, callbacks=None):
        metrics = self._eval_fn(model, dataset, callbacks=callbacks)
        self.evaluations.append({k: float(v) for k, v in metrics.items()})
        return metrics

    def results(self, directory, head):
        """`eval_results.json`: the kept weights are those of the best evaluation (as `albert-tf
        finetune` reports)."""
        return {"dev": max(self.evaluations, key=lambda m: m[self.best_metric]) if self.evaluations else {}}


def train_classifier(
    train_data,
    eval_data,
    config: FinetuningConfig,
    *,
    num_train: int,
    labels,
    pair: bool,
    vocab_dir: str,
    output_dir: str,
    albert_config,
    model_name: str,
    init: Optional[str] = None,
    deterministic: bool = True,
    warm_start: Optional[str] = None,
) -> Dict[str, Any]:
    """Fine-tunes a classifier on unbatched feature datasets and exports it; the shared core of the
    Trainer component and the TFX user module, through the driver of `albert-tf finetune`
    (`albert_tf.tasks.runner.train_task_model`).

    `config` is the run's `FinetuningConfig`, resolved as `albert-tf finetune --task
    classification` resolves it (`albert_tf.pipeline_steps.settings.finetuning_config`); its
    sequence length is the features'.

    `warm_start`: a pushed version (`albert_tf.pipeline_steps.warm_start`) whose classifier head
    the model starts from (the encoder comes from `init`); its labels must be `labels`.

    `deterministic`: switch TensorFlow's op determinism on where the kernels need it
    (`deterministic_op_kernels`; process-wide, as TensorFlow has it).

    Every evaluation is checked for collapse against the majority class of the eval data
    (`albert_tf.evaluation.collapse`); the verdict on the kept weights is the summary's
    `collapse` entry, and a collapsed run is reported loudly (the Evaluator then refuses it).

    Writes `output_dir/model` (the `albert-tf finetune` layout: `albert-tf evaluate/predict/export
    --model-dir` work on it) and `output_dir/serving/<model_name>/1` (the candidate SavedModel).
    """
    from albert_tf.export.saved_model import export_saved_model
    from albert_tf.tasks.family import task_family
    from albert_tf.tasks.runner import train_task_model
    from albert_tf.training.strategies import get_strategy

    if deterministic_op_kernels(deterministic):
        import tensorflow as tf

        tf.config.experimental.enable_op_determinism()
    vocab_info = read_summary(vocab_dir)
    if warm_start is not None:
        from albert_tf.pipeline_steps.warm_start import check_architecture, check_labels, load_head

        check_architecture(warm_start, albert_config)
        check_labels(warm_start, labels)
    max_seq_length = config.data.max_seq_length
    spec = _task_spec(labels, max_seq_length, vocab_info, pair)
    steps, _ = config.schedule(num_train)
    family = task_family(spec)
    init_source: Dict[str, str] = {}

    def build(encoder, preprocessor):
        model = family.build_model(encoder, preprocessor, spec, dropout=config.task.dropout, pooling=config.task.pooling)
        if warm_start is not None:
            load_head(warm_start, model.task_model)
            init_source.update(warm_start=warm_start)
        return model

    evaluation = _TrackedEvaluation(spec, eval_data)
    with staged_directory(output_dir) as staging:
        model_dir = os.path.join(staging, MODEL_SUBDIR)
        result = train_task_model(
            build, train_data, eval_data, config, num_train=num_train, model_dir=model_dir,
            # The task's raw-text model, as `albert-tf finetune` builds it; its tokenizer is also the export's.
            preprocessor=vocab_gen.tokenizer_layer(vocab_dir, max_seq_length), model_config=albert_config,
            tokenizer_file=os.path.join(vocab_dir, vocab_info["file"]), spec=spec, results=evaluation.results, init=init,
            strategy=get_strategy(config.runtime.strategy), eval_fn=evaluation, constant_baseline=evaluation.constant,
            init_info=init_source, tensorboard=False, verbose=0,
        )
        if result.collapsed:
            print(f"WARNING: the fine-tuned model collapsed: {result.collapse.reason}", flush=True)
        # The best weights are in the model now (run_finetuning restores them): export those.
        exported = export_saved_model(
            result.model.task_model,
            result.model.preprocessor,
            os.path.join(staging, SERVING_SUBDIR),
            model_name,
            version=CANDIDATE_VERSION,
            labels=list(labels),
            pair=pair,
            extra_assets=[os.path.join(model_dir, "task.json")],
        )
        summary = {
            "steps": steps,
            "best_step": result.best_step,
            "best_dev_metrics": {k: float(v) for k, v in result.best_metrics.items()},
            "constant_baseline": evaluation.constant.to_dict(),
            "collapse": None if result.collapse is None else result.collapse.to_dict(),
            "config": config.to_dict(),
            "init": init_source,
            "model_name": model_name,
            "candidate": os.path.relpath(exported.path, staging),
            "signatures": sorted(exported.signatures),
        }
        write_summary(staging, summary)
    return summary


def run_trainer(
    transform_dir: str,
    vocab_dir: str,
    pretrained_dir: Optional[str],
    output_dir: str,
    albert_config,
    *,
    model_name: str,
    deterministic: bool = True,
    **values: Any,
) -> Dict[str, Any]:
    """Fine-tunes on the Transform features, starting from the Pretrainer's encoder (and, in a
    warm-started run, the base model's classifier head).

    `values`: the user's values of the run's `FinetuningConfig` (`learning_rate`, `num_epochs`,
    `batch_size`, `pooling`, `bias_correction`, `warmup_proportion`, `strategy`, `precision`,
    `seed`, ...; None: resolved), at the Transform's sequence length.

    `deterministic`: the same inputs and seed give the same model (`deterministic_op_kernels`).
    """
    info = read_summary(transform_dir)
    finetuning = info["finetuning"]
    return train_classifier(
        transform.finetuning_dataset(transform_dir, "train"),
        transform.finetuning_dataset(transform_dir, "eval"),
        finetuning_config(albert_config, max_seq_length=info["max_seq_length"], **values),
        num_train=finetuning["counts"]["train"],
        labels=finetuning["labels"],
        pair=finetuning["pair"],
        vocab_dir=vocab_dir,
        output_dir=output_dir,
        albert_config=albert_config,
        model_name=model_name,
        init=pretrained_dir,
        deterministic=deterministic,
        warm_start=vocab_gen.warm_start_base(vocab_dir),
    )


def candidate_path(trainer_dir: str) -> str:
    """The candidate SavedModel version directory of a Trainer output."""
    return os.path.join(trainer_dir, read_summary(trainer_dir)["candidate"])
