"""The pipeline's Kubeflow Pipelines v2 components: thin wrappers over `albert_tf.pipeline_steps`.

Each function below is a lightweight Python component: KFP ships its source to the step's
container (or, locally, a subprocess of this interpreter) and calls it with typed parameters
and artifacts. The bodies only import `albert_tf` and call one step function with the
artifacts' local paths, so all logic stays in the library and is tested there. Each body runs in
`albert_tf.pipeline_steps.failures.reported_failure()`: a failure prints one marker line with its
cause into the step's log, which `albert-tf pipeline run` shows as one line (a new step must too).

`make_components(image)` turns them into components on a container image that has this package
installed (`pipelines/Dockerfile`); `install_kfp_package=False` because that image (and the local
interpreter) already has `kfp`.
"""


from typing import Dict, List

from kfp import dsl
from kfp.dsl import Artifact, Dataset, Input, Metrics, Model, Output


def example_gen(
    corpus: str,
    task_data: str,
    text_column: str,
    text_b_column: str,
    label_column: str,
    eval_fraction: float,
    input_fingerprint: str,
    span: int,
    num_spans: int,
    encoding: str,
    corpus_splits: Output[Dataset],
    example_splits: Output[Dataset],
):
    """Raw corpus and labelled files -> train/eval TFRecords (`input_fingerprint` keys the cache;
    `span`: the `{SPAN}` of `task_data` to read, -1 for the latest; `num_spans`: how many up to it;
    `encoding`: the files' encoding). Bad rows are left out and counted for the ExampleValidator."""
    from albert_tf.pipeline_steps.failures import reported_failure

    with reported_failure():
        from albert_tf.pipeline_steps.example_gen import run_example_gen

        counts = run_example_gen(
            corpus, task_data, corpus_splits.path, example_splits.path, text_column=text_column,
            text_b_column=text_b_column or None, label_column=label_column, eval_fraction=eval_fraction, span=span,
            num_spans=num_spans, encoding=encoding,
        )
        corpus_splits.metadata.update({"documents": counts["corpus"], "fingerprint": input_fingerprint})
        example_splits.metadata.update({"examples": counts["examples"], **counts["span"],
                                        "bad_rows": {s: b["bad"] for s, b in counts["bad_rows"].items()}})


def vocab_gen(
    corpus_splits: Input[Dataset],
    example_splits: Input[Dataset],
    vocab_type: str,
    vocab_size: int,
    character_coverage: float,
    hard_vocab_limit: bool,
    lower_case: bool,
    seed: int,
    warm_start: bool,
    serving_base: str,
    model_name: str,
    vocabulary: Output[Artifact],
):
    """A SentencePiece or WordPiece vocabulary from the train splits; with `warm_start`, the latest
    pushed model's (the base the Pretrainer and Trainer then continue from)."""
    from albert_tf.pipeline_steps.failures import reported_failure

    with reported_failure():
        from albert_tf.pipeline_steps.vocab_gen import run_vocab_gen

        summary = run_vocab_gen(
            corpus_splits.path, example_splits.path, vocabulary.path, vocab_type=vocab_type, vocab_size=vocab_size,
            character_coverage=character_coverage, hard_vocab_limit=hard_vocab_limit, lower_case=lower_case, seed=seed, warm_start=warm_start, serving_base=serving_base, model_name=model_name,
        )
        vocabulary.metadata.update({k: v for k, v in summary.items() if k != "warm_start"})
        vocabulary.metadata["warm_start"] = (summary.get("warm_start") or {}).get("path", "")


def statistics_gen(
    corpus_splits: Input[Dataset],
    example_splits: Input[Dataset],
    vocabulary: Input[Artifact],
    beam_runner: str,
    beam_args: List[str],
    max_seq_length: int,
    statistics: Output[Artifact],
):
    """TFDV statistics (DatasetFeatureStatisticsList) of every split, with Beam on the data step's runner
    (texts measured against `max_seq_length`; ExampleGen's bad rows counted as missing values)."""
    from albert_tf.pipeline_steps.failures import reported_failure

    with reported_failure():
        from albert_tf.pipeline_steps.statistics_gen import run_statistics_gen

        summary = run_statistics_gen(corpus_splits.path, example_splits.path, vocabulary.path, statistics.path,
                                     beam_runner=beam_runner, beam_args=beam_args, max_seq_length=max_seq_length)
        statistics.metadata.update({"span": summary["span"], "examples": summary["examples"]})


def schema_gen(statistics: Input[Artifact], pinned_schema: str, statistics_store: str, schema: Output[Artifact]):
    """The schema: the pinned one, the one kept from the first run, or one inferred from the train split."""
    from albert_tf.pipeline_steps.failures import reported_failure

    with reported_failure():
        from albert_tf.pipeline_steps.schema_gen import run_schema_gen

        summary = run_schema_gen(statistics.path, schema.path, schema=pinned_schema, store=statistics_store)
        schema.metadata.update({"source": summary["source"]})


def example_validator(statistics: Input[Artifact], schema: Input[Artifact], statistics_store: str,
                      on_error: str, max_truncated_fraction: float, anomalies: Output[Artifact]):
    """TFDV Anomalies of every split against the schema and the previous span; errors stop the run here
    (`on_error`: "raise" makes any bad row one; above `max_truncated_fraction` long texts warn)."""
    from albert_tf.pipeline_steps.failures import reported_failure

    with reported_failure():
        from albert_tf.pipeline_steps.example_validator import run_example_validator

        summary = run_example_validator(statistics.path, schema.path, anomalies.path, store=statistics_store,
                                        on_error=on_error, max_truncated_fraction=max_truncated_fraction)
        anomalies.metadata.update({"span": summary["span"], "passed": summary["passed"], "report": summary["report"]})


def transform(
    corpus_splits: Input[Dataset],
    example_splits: Input[Dataset],
    vocabulary: Input[Artifact],
    max_seq_length: int,
    max_predictions_per_seq: int,
    dupe_factor: int,
    seed: int,
    beam_runner: str,
    beam_args: List[str],
    deterministic: bool,
    transformed: Output[Dataset],
):
    """SOP + n-gram pretraining records (Beam) and fine-tuning features."""
    from albert_tf.pipeline_steps.failures import reported_failure

    with reported_failure():
        from albert_tf.pipeline_steps.transform import run_transform

        summary = run_transform(
            corpus_splits.path, example_splits.path, vocabulary.path, transformed.path, max_seq_length=max_seq_length,
            max_predictions_per_seq=max_predictions_per_seq, dupe_factor=dupe_factor, seed=seed,
            beam_runner=beam_runner, beam_args=beam_args, deterministic=deterministic,
        )
        transformed.metadata.update({"pretraining": summary["pretraining"]["counters"], "finetuning": summary["finetuning"]["counts"]})


def pretrainer(
    transformed: Input[Dataset],
    vocabulary: Input[Artifact],
    model_config_json: str,
    steps: int,
    batch_size: int,
    learning_rate: float,
    warmup_steps: int,
    strategy: str,
    precision: str,
    seed: int,
    deterministic: bool,
    pretrained_model: Output[Model],
):
    """ALBERT pretraining (n-gram MLM + SOP, LAMB) under the given tf.distribute strategy."""
    from albert_tf.pipeline_steps.failures import reported_failure

    with reported_failure():
        import json

        from albert_tf.pipeline_steps.settings import albert_config_for
        from albert_tf.pipeline_steps.staging import read_summary
        from albert_tf.pipeline_steps.trainer import run_pretrainer

        config = albert_config_for(json.loads(model_config_json), read_summary(vocabulary.path)["vocab_size"],
                                   read_summary(transformed.path)["max_seq_length"])
        summary = run_pretrainer(
            transformed.path, vocabulary.path, pretrained_model.path, config, steps=steps, batch_size=batch_size,
            learning_rate=learning_rate, warmup_steps=warmup_steps, strategy=strategy, precision=precision, seed=seed,
            deterministic=deterministic,
        )
        pretrained_model.metadata.update(summary["final_metrics"])


def trainer(
    transformed: Input[Dataset],
    vocabulary: Input[Artifact],
    pretrained_model: Input[Model],
    model_config_json: str,
    model_name: str,
    epochs: float,
    batch_size: int,
    learning_rate: float,
    pooling: str,
    bias_correction: bool,
    warmup_fraction: float,
    strategy: str,
    precision: str,
    seed: int,
    deterministic: bool,
    trained_model: Output[Model],
):
    """Fine-tuning from the pretrained encoder (AdamW), and the candidate SavedModel export."""
    from albert_tf.pipeline_steps.failures import reported_failure

    with reported_failure():
        import json

        from albert_tf.pipeline_steps.settings import albert_config_for
        from albert_tf.pipeline_steps.staging import read_summary
        from albert_tf.pipeline_steps.trainer import run_trainer

        config = albert_config_for(json.loads(model_config_json), read_summary(vocabulary.path)["vocab_size"],
                                   read_summary(transformed.path)["max_seq_length"])
        summary = run_trainer(
            transformed.path, vocabulary.path, pretrained_model.path, trained_model.path, config, model_name=model_name,
            num_epochs=epochs, batch_size=batch_size, learning_rate=learning_rate, pooling=pooling,
            bias_correction=bias_correction, warmup_proportion=warmup_fraction, strategy=strategy, precision=precision,
            seed=seed, deterministic=deterministic,
        )
        trained_model.metadata.update({"best_dev_" + k: v for k, v in summary["best_dev_metrics"].items()})
        trained_model.metadata["collapsed"] = bool(summary["collapse"] and summary["collapse"]["collapsed"])


def evaluator(
    example_splits: Input[Dataset],
    trained_model: Input[Model],
    serving_base: str,
    model_name: str,
    metric: str,
    threshold: float,
    tolerance: float,
    baseline_margin: float,
    min_mcc: float,
    confidence: float,
    evaluation: Output[Metrics],
    blessing: Output[Artifact],
):
    """Task metrics of the candidate, the best constant answer and the pushed model on the eval
    split; the full report (slices, confusion matrix) in `evaluation`, the decision in `blessing`."""
    from albert_tf.pipeline_steps.failures import reported_failure

    with reported_failure():
        import os

        from albert_tf.pipeline_steps.evaluator import kfp_metrics, run_evaluator
        from albert_tf.pipeline_steps.trainer import candidate_path

        summary = run_evaluator(
            example_splits.path, candidate_path(trained_model.path), os.path.join(serving_base, model_name), blessing.path,
            metric=metric, threshold=threshold, tolerance=tolerance, baseline_margin=baseline_margin, min_mcc=min_mcc,
            confidence=confidence, report_dir=evaluation.path,
        )
        for name, value in kfp_metrics(summary).items():
            evaluation.log_metric(name, value)
        blessing.metadata.update({"blessed": summary["blessed"], "reason": summary["reason"]})


def distiller(
    example_splits: Input[Dataset],
    vocabulary: Input[Artifact],
    trained_model: Input[Model],
    distill_json: str,
    model_name: str,
    seed: int,
    distilled_model: Output[Model],
):
    """The Trainer's model as the teacher of a smaller student, exported as the candidate (only in a
    pipeline with `distill.enabled`)."""
    from albert_tf.pipeline_steps.failures import reported_failure

    with reported_failure():
        import json

        from albert_tf.pipeline_steps.distiller import run_distiller
        from albert_tf.pipeline_steps.settings import DistillStepSettings

        summary = run_distiller(
            example_splits.path, vocabulary.path, trained_model.path, distilled_model.path,
            DistillStepSettings.from_dict(json.loads(distill_json)), model_name=model_name, seed=seed,
        )
        distilled_model.metadata.update({"best_dev_" + k: v for k, v in summary["best_dev_metrics"].items()})
        distilled_model.metadata.update({"teacher_dev_" + k: v for k, v in summary["teacher_dev_metrics"].items()})


def distilled_evaluator(
    example_splits: Input[Dataset],
    trained_model: Input[Model],
    teacher_model: Input[Model],
    serving_base: str,
    model_name: str,
    metric: str,
    threshold: float,
    tolerance: float,
    baseline_margin: float,
    min_mcc: float,
    confidence: float,
    distill_json: str,
    evaluation: Output[Metrics],
    blessing: Output[Artifact],
):
    """The Evaluator of a distilled student: every gate of `evaluator`, plus its metric within
    `teacher_margin` of the teacher's (the Trainer's candidate) on the same eval split."""
    from albert_tf.pipeline_steps.failures import reported_failure

    with reported_failure():
        import json
        import os

        from albert_tf.pipeline_steps.evaluator import kfp_metrics, run_evaluator
        from albert_tf.pipeline_steps.trainer import candidate_path

        summary = run_evaluator(
            example_splits.path, candidate_path(trained_model.path), os.path.join(serving_base, model_name), blessing.path,
            metric=metric, threshold=threshold, tolerance=tolerance, baseline_margin=baseline_margin, min_mcc=min_mcc,
            confidence=confidence, report_dir=evaluation.path, teacher_dir=candidate_path(teacher_model.path),
            teacher_margin=float(json.loads(distill_json)["teacher_margin"]),
        )
        for name, value in kfp_metrics(summary).items():
            evaluation.log_metric(name, value)
        blessing.metadata.update({"blessed": summary["blessed"], "reason": summary["reason"]})


def infra_validator(trained_model: Input[Model], model_name: str, infra_blessing: Output[Artifact]):
    """The candidate served by the TF-Serving-protocol server in a subprocess; warmup replayed."""
    from albert_tf.pipeline_steps.failures import reported_failure

    with reported_failure():
        import os

        from albert_tf.pipeline_steps.infra_validator import run_infra_validator
        from albert_tf.pipeline_steps.staging import read_summary
        from albert_tf.pipeline_steps.trainer import SERVING_SUBDIR

        run_infra_validator(os.path.join(trained_model.path, SERVING_SUBDIR), model_name, infra_blessing.path)
        infra_blessing.metadata.update({"blessed": True, "requests": len(read_summary(infra_blessing.path)["requests"])})


def pusher(
    trained_model: Input[Model],
    blessing: Input[Artifact],
    infra_blessing: Input[Artifact],
    serving_base: str,
    model_name: str,
    pushed_model: Output[Model],
):
    """Copies a blessed candidate into the serving base as the next version (never an unblessed one)."""
    from albert_tf.pipeline_steps.failures import reported_failure

    with reported_failure():
        from albert_tf.pipeline_steps.evaluator import is_blessed
        from albert_tf.pipeline_steps.infra_validator import is_infra_blessed
        from albert_tf.pipeline_steps.pusher import run_pusher
        from albert_tf.pipeline_steps.trainer import candidate_path

        result = run_pusher(
            candidate_path(trained_model.path), is_blessed(blessing.path), is_infra_blessed(infra_blessing.path),
            serving_base, model_name, pushed_model.path,
        )
        pushed_model.metadata.update({k: result[k] for k in ("pushed", "reason", "version", "path") if k in result})


def bulk_inferrer(pushed_model: Input[Model], bulk_infer_input: str, beam_runner: str, inference_result: Output[Artifact]):
    """The pushed model scores the unlabelled `bulk_infer_input` files: PredictionLogs (optional step)."""
    from albert_tf.pipeline_steps.failures import reported_failure

    with reported_failure():
        from albert_tf.pipeline_steps.bulk_inferrer import input_paths, run_bulk_inferrer

        result = run_bulk_inferrer(pushed_model.path, input_paths(bulk_infer_input), inference_result.path,
                                   beam_runner=beam_runner)
        inference_result.metadata.update({k: result[k] for k in ("inferred", "reason", "num_texts", "version") if k in result})


STEPS = (example_gen, vocab_gen, statistics_gen, schema_gen, example_validator, transform, pretrainer, trainer, evaluator,
         infra_validator, pusher, distiller, distilled_evaluator, bulk_inferrer)


def make_components(image: str) -> Dict[str, object]:
    """`{name: component}` for every step, on the container `image`."""
    return {f.__name__: dsl.component(f, base_image=image, install_kfp_package=False) for f in STEPS}
