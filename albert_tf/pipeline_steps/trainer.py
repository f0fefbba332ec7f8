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
from albert_tf.pipeline_steps.settings import PIPELINE_TASK, finetuning_hyperparameters
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
    from albert_tf.training.pretraining import PretrainingRunConfig, TokenizerFile, run_pretraining

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
    from albert_tf.tasks.families import ClassificationFamily

    columns = {
        "text": example_gen.TEXT_FEATURE,
        "text_b": example_gen.TEXT_B_FEATURE if pair else None,
        "label": example_gen.LABEL_FEATURE,
        "format": "jsonl",
        "quoting": "csv",
    }
    tokenizer = {"type": vocab_info["type"], "file": vocab_info["file"], "lower_case": vocab_info["lower_case"]}
    return ClassificationFamily.classification_spec(PIPELINE_TASK, labels, max_seq_length, tokenizer, columns)


def train_classifier(
    train_data,
    eval_data,
    *,
    num_train: int,
    labels,
    pair: bool,
    vocab_dir: str,
    output_dir: str,
    albert_config,
    model_name: str,
    max_seq_length: int,
    init: Optional[str] = None,
    epochs: Optional[float] = None,
    num_train_steps: Optional[int] = None,
    batch_size: Optional[int] = None,
    learning_rate: Optional[float] = None,
    strategy: str = "default",
    precision: str = "float32",
    seed: int = 12345,
    pooling: Optional[str] = None,
    bias_correction: Optional[bool] = None,
    warmup_fraction: Optional[float] = None,
    deterministic: bool = True,
    warm_start: Optional[str] = None,
) -> Dict[str, Any]:
    """Fine-tunes a classifier on unbatched feature datasets and exports it; the shared core of the
    Trainer component and the TFX user module.

    Hyper-parameters left None are resolved as `albert-tf finetune --task classification` resolves
    them (`albert_tf.pipeline_steps.settings.finetuning_hyperparameters`): the recipe for the
    model's size, else the generic defaults (3 epochs, batch 32, 10 % warmup). `num_train_steps`
    fixes the length in updates instead of `epochs`, which count full batches
    (`albert_tf.training.finetuning.steps_for_epochs`).

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
    import numpy as np

    from albert_tf.checkpoints.any_format import init_encoder
    from albert_tf.evaluation import majority_class_baseline
    from albert_tf.export.saved_model import export_saved_model
    from albert_tf.modeling import AlbertEncoder
    from albert_tf.tasks.classification import make_eval_fn
    from albert_tf.tasks.families import task_family
    from albert_tf.tasks.runner import on_head, write_model_assets
    from albert_tf.training.finetuning import FinetuningRunConfig, run_finetuning
    from albert_tf.training.strategies import get_strategy

    if deterministic_op_kernels(deterministic):
        import tensorflow as tf

        tf.config.experimental.enable_op_determinism()
    vocab_info = read_summary(vocab_dir)
    if warm_start is not None:
        from albert_tf.pipeline_steps.warm_start import check_architecture, check_labels, load_head

        check_architecture(warm_start, albert_config)
        check_labels(warm_start, labels)
    spec = _task_spec(labels, max_seq_length, vocab_info, pair)
    hyper = finetuning_hyperparameters(
        albert_config, learning_rate=learning_rate, batch_size=batch_size, max_seq_length=max_seq_length,
        pooling=pooling, bias_correction=bias_correction, num_train_steps=num_train_steps, num_epochs=epochs,
        warmup_proportion=warmup_fraction,
    )
    steps, warmup = hyper.schedule(num_train)
    init_source: Dict[str, str] = {}
    # The task's raw-text model, as `albert-tf finetune` builds it; its tokenizer is also the export's.
    preprocessor = vocab_gen.tokenizer_layer(vocab_dir, max_seq_length)

    def build_model():
        encoder = AlbertEncoder.from_albert_config(albert_config, dtype=precision)
        if init:
            result = init_encoder(encoder, init)
            init_source.update(kind=result.kind, source=result.source)
        model = task_family(spec).build_model(encoder, preprocessor, spec, hyper.for_plan())
        if warm_start is not None:
            load_head(warm_start, model.task_model)
            init_source.update(warm_start=warm_start)
        return model

    def save_assets(directory: str, model) -> None:
        def results():
            # The kept weights are those of the best evaluation (as `albert-tf finetune` reports).
            return {"dev": max(evaluations, key=lambda m: m[spec.best_metric]) if evaluations else {}}

        write_model_assets(directory, os.path.join(vocab_dir, vocab_info["file"]), albert_config, spec, results,
                           model=model, training=hyper.to_dict())

    eval_labels = np.concatenate([batch["labels"] for batch in eval_data.batch(1024).as_numpy_iterator()])
    constant = majority_class_baseline(eval_labels, ["accuracy", "mcc"], label_names=list(labels))
    evaluations = []
    with staged_directory(output_dir) as staging:
        model_dir = os.path.join(staging, MODEL_SUBDIR)
        eval_fn = make_eval_fn(list(spec.metrics) + ["mcc"], regression=False, diagnostics=True)

        def tracking_eval_fn(model, dataset, callbacks=None):
            metrics = eval_fn(model, dataset, callbacks=callbacks)
            evaluations.append({k: float(v) for k, v in metrics.items()})
            return metrics

        config = FinetuningRunConfig(
            num_train_steps=steps,
            warmup_steps=warmup,
            learning_rate=hyper.learning_rate,
            model_dir=model_dir,
            best_metric=spec.best_metric,
            batch_size=hyper.batch_size,
            shuffle_buffer=min(num_train, 100_000),
            precision=precision,
            seed=seed,
            metadata={"task": PIPELINE_TASK, "init": init_source, "config": albert_config.to_dict()},
            tensorboard=False,
            verbose=0,
            bias_correction=hyper.bias_correction,
            collapse_metric="accuracy",
        )
        result = run_finetuning(
            build_model, train_data, eval_data, config, eval_fn=on_head(tracking_eval_fn), strategy=get_strategy(strategy),
            save_assets=save_assets, constant_baseline=constant,
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
            "constant_baseline": constant.to_dict(),
            "collapse": None if result.collapse is None else result.collapse.to_dict(),
            "recipe": {"learning_rate": hyper.learning_rate, "epochs": hyper.num_epochs, "batch_size": hyper.batch_size,
                       "pooling": hyper.pooling, "bias_correction": hyper.bias_correction,
                       "warmup_fraction": hyper.warmup_proportion},
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
    epochs: Optional[float] = None,
    batch_size: Optional[int] = None,
    learning_rate: Optional[float] = None,
    strategy: str = "default",
    precision: str = "float32",
    seed: int = 12345,
    pooling: Optional[str] = None,
    bias_correction: Optional[bool] = None,
    warmup_fraction: Optional[float] = None,
    deterministic: bool = True,
) -> Dict[str, Any]:
    """Fine-tunes on the Transform features, starting from the Pretrainer's encoder (and, in a
    warm-started run, the base model's classifier head); hyper-parameters left None are resolved
    as `train_classifier` says.

    `deterministic`: the same inputs and seed give the same model (`deterministic_op_kernels`).
    """
    info = read_summary(transform_dir)
    finetuning = info["finetuning"]
    return train_classifier(
        transform.finetuning_dataset(transform_dir, "train"),
        transform.finetuning_dataset(transform_dir, "eval"),
        num_train=finetuning["counts"]["train"],
        labels=finetuning["labels"],
        pair=finetuning["pair"],
        vocab_dir=vocab_dir,
        output_dir=output_dir,
        albert_config=albert_config,
        model_name=model_name,
        max_seq_length=info["max_seq_length"],
        init=pretrained_dir,
        epochs=epochs,
        batch_size=batch_size,
        learning_rate=learning_rate,
        strategy=strategy,
        precision=precision,
        seed=seed,
        pooling=pooling,
        bias_correction=bias_correction,
        warmup_fraction=warmup_fraction,
        deterministic=deterministic,
        warm_start=vocab_gen.warm_start_base(vocab_dir),
    )


def candidate_path(trainer_dir: str) -> str:
    """The candidate SavedModel version directory of a Trainer output."""
    return os.path.join(trainer_dir, read_summary(trainer_dir)["candidate"])
