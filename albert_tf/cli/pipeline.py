"""`albert-tf pipeline`: the TFX-style pipeline, run locally or compiled for Kubeflow / Vertex AI.

    albert-tf pipeline run                      # the embedded sample: a few minutes on 2 CPU cores
    albert-tf pipeline run --config my.yaml     # a real configuration (albert_tf.pipeline_steps.settings)
    albert-tf pipeline compile --config my.yaml --image REGISTRY/albert-tf:0.1.0 --output albert.yaml

`run` executes every step with `kfp.local` (subprocesses of this interpreter; data and training
steps cached under `--pipeline-root`), prints one line per step, where each artifact is and the
pushed model's eval metrics, then answers a sample request through the local TF-Serving-protocol
server. kfp.local's own output (executor inputs and outputs as JSON, every step's log) goes to a
log file under `--pipeline-root`; `--verbose` prints it as well. A failed step is one line naming
the step, its cause and that log file; the exit status says what kind of failure it was
(`albert_tf.pipeline_steps.failures.EXIT_CODES`, listed by `albert-tf pipeline run --help`).
`compile` refuses settings that are paths on this machine (`--allow-local-paths` to write them anyway).
"""

from __future__ import annotations

import argparse
import os
import textwrap

from albert_tf.cli import CommandError
from albert_tf.pipeline_steps import failures

NAME = "pipeline"
HELP = "Run the whole chain (vocab -> data -> pretrain -> fine-tune -> evaluate -> validate -> push) locally, or compile it for Kubeflow/Vertex."

DEFAULT_ROOT = "albert-tf-pipeline"
_ARTIFACT_ORDER = [
    "corpus_splits", "example_splits", "vocabulary", "statistics", "schema", "anomalies", "transformed", "pretrained_model",
    "trained_model", "distilled_model",
    "evaluation", "blessing", "infra_blessing", "pushed_model",
]
# The sample job's labels (Rotten Tomatoes: 1 is a positive review); a configured task's labels are its own.
SAMPLE_LABEL_NAMES = {"0": "rotten", "1": "fresh"}


EXIT_STATUS_EPILOG = "exit status:\n" + "\n".join(
    textwrap.fill(text, 79, initial_indent=f"  {code}  ", subsequent_indent="     ") for code, text in failures.EXIT_CODES)
RUN_DESCRIPTION = (
    "Run the whole pipeline locally with kfp.local (ExampleGen, VocabGen, StatisticsGen, SchemaGen, ExampleValidator, "
    "Transform, Pretrainer, Trainer, Evaluator, InfraValidator, Pusher): one line per step, the artifacts, the eval "
    "metrics and the pushed version, then a request of the task's eval split through the local server. Without "
    "--config: the embedded sample job. A failed step is one line naming the step and its cause; its full log is in "
    "the run's log file, whose path the line gives."
)
COMPILE_DESCRIPTION = (
    "Write the pipeline as Kubeflow Pipelines v2 YAML (Kubeflow Pipelines, Vertex AI Pipelines), every step on "
    "--image, the settings of --config as the parameters' defaults. Settings that are paths on this machine are "
    "refused (a cluster's steps cannot read them): give gs:// (or /gcs/, s3://) paths, or --allow-local-paths."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION")
    sub.required = True
    run = sub.add_parser("run", help="run the pipeline locally (kfp.local)", description=textwrap.fill(RUN_DESCRIPTION, 79),
                         epilog=EXIT_STATUS_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    run.add_argument("--config", help="pipeline settings, .yaml or .json (default: the embedded sample job)")
    run.add_argument("--pipeline-root", default=os.path.join(DEFAULT_ROOT, "runs"), help="where artifacts go")
    run.add_argument("--serving-base", help="TF Serving model base to push into (overrides the config's serving_base)")
    run.add_argument("--warm-start", action="store_true",
                     help="continue from the latest pushed (blessed) model: its vocabulary, encoder and head (the config's warm_start)")
    run.add_argument("--no-cache", action="store_true", help="re-run every step even when its inputs are unchanged")
    run.add_argument("--no-sample-request", action="store_true", help="skip the closing request through the local server")
    run.add_argument("--verbose", action="store_true",
                     help="print all of kfp.local's output (executor inputs/outputs as JSON, every step's log); "
                          "otherwise it only goes to the run's log file")
    compile_ = sub.add_parser("compile", help="write the pipeline YAML for Kubeflow Pipelines / Vertex AI",
                              description=COMPILE_DESCRIPTION)
    compile_.add_argument("--config", help="pipeline settings whose values become the parameter defaults")
    compile_.add_argument("--image", default=None,
                          help="the container image every step runs on, with albert-tf installed: built from "
                               "pipelines/Dockerfile and pushed to a registry the cluster pulls from (default: the "
                               "local name of pipelines/README.md's build, without a registry)")
    compile_.add_argument("--output", default="albert_tf_pipeline.yaml", help="the YAML file to write")
    compile_.add_argument("--allow-local-paths", action="store_true",
                          help="write settings that are paths on this machine into the YAML anyway "
                               "(e.g. a cluster that mounts the same paths)")


class ModelRefused(CommandError):
    """The run finished but its model is not good enough to push (exit status 3)."""

    exit_code = failures.EXIT_MODEL_REFUSED


class PipelineFailed(CommandError):
    """A step failed or refused its input: one line, and the exit status of its kind (`failures.EXIT_CODES`)."""

    def __init__(self, message: str, exit_code: int):
        super().__init__(message)
        self.exit_code = exit_code


def _metrics_line(metrics) -> str:
    return ", ".join(f"{name} {value:.4f}" for name, value in sorted(metrics.items()))


def _settings(path):
    from albert_tf.pipeline_steps.settings import PipelineSettings, SettingsError

    try:
        return PipelineSettings.from_file(path) if path else PipelineSettings()
    except SettingsError as e:
        raise CommandError(str(e)) from None


def _named(label: str, names) -> str:
    return f"{names[label]!r} ({label!r})" if names and label in names else repr(label)


def _shown(text: str, limit: int = 120) -> str:
    return repr(text if len(text) <= limit else text[:limit - 3] + "...")


def _sample_request(serving_base: str, model_name: str, examples_dir: str, names=None, log_file=None) -> None:
    from albert_tf.pipeline_steps.sample_request import sample_request

    answer = sample_request(serving_base, model_name, examples_dir, log_file=log_file)
    pair = f" / {_shown(answer['text_b'])}" if answer["text_b"] else ""
    print(f"sample request of the eval split via the local server (REST :predict on {model_name}): "
          f"{_shown(answer['text'])}{pair}")
    print(f"  -> label {_named(answer['label'], names)}, probabilities {answer['probabilities']}")


def _run(args) -> int:
    import dataclasses

    settings = _settings(args.config)
    if args.serving_base:
        settings = dataclasses.replace(settings, serving_base=args.serving_base)
    if args.warm_start:
        settings = dataclasses.replace(settings, warm_start=True)
    try:
        from pipelines.albert_pipeline import run_local
    except ImportError as e:
        raise CommandError(f"the pipeline needs the `pipelines` package of albert-tf and kfp: {e}") from None
    print(f"running {('the sample job' if not args.config else args.config)}: artifacts under {os.path.abspath(args.pipeline_root)}")
    from albert_tf.pipeline_steps.preflight import MissingInputError, PreflightError
    from pipelines.albert_pipeline import StepFailed

    try:
        result = run_local(settings, args.pipeline_root, cache=not args.no_cache, verbose=args.verbose)
    except MissingInputError as e:
        raise PipelineFailed(e.cli_message, failures.EXIT_DATA_REFUSED) from None
    except PreflightError as e:
        raise CommandError(e.cli_message) from None
    except FileNotFoundError as e:
        raise PipelineFailed(str(e), failures.EXIT_DATA_REFUSED) from None
    except StepFailed as e:
        # The step's cause in one line, with the log file that holds all of it.
        raise PipelineFailed(str(e), e.exit_code) from None
    except RuntimeError as e:
        raise PipelineFailed(f"the pipeline failed: {failures.one_line(str(e))}", failures.EXIT_INTERNAL) from None
    print(f"full log: {result.log_file}")
    if result.data_validation:
        print(f"data validation: {result.data_validation['line']}; report: {result.data_validation['report']}")
    if settings.warm_start:
        from albert_tf.pipeline_steps.staging import read_summary

        base = read_summary(result.artifacts["vocabulary"]).get("warm_start")
        print(f"warm start: from {base['path']}" if base else "warm start: nothing pushed yet, trained from scratch")
    print("\nartifacts:")
    # A step this list does not know yet is shown last rather than refused.
    for name in sorted(result.artifacts, key=lambda n: (_ARTIFACT_ORDER + [n]).index(n)):
        print(f"  {name:>16s}: {result.artifacts[name]}")
    evaluation = result.evaluation
    print(f"\nevaluation ({evaluation['examples']} eval examples, report in {result.artifacts.get('evaluation')}):")
    print(f"  candidate:             {_metrics_line(evaluation['candidate']['metrics'])}")
    if evaluation.get("teacher"):
        # With the Distiller the candidate is the student; the Trainer's model is its teacher.
        print(f"  teacher (Trainer):     {_metrics_line(evaluation['teacher']['metrics'])}")
    names = None if args.config else SAMPLE_LABEL_NAMES
    if names:
        print("  labels:                " + ", ".join(f"{label!r} {name}" for label, name in sorted(names.items())))
    constant = evaluation.get("constant_baseline")
    if constant:
        print(f"  best constant answer:  {_metrics_line(constant['metrics'])}  ({constant['description']})")
    if evaluation.get("baseline"):
        print(f"  pushed model before:   {_metrics_line(evaluation['baseline']['metrics'] or {})}")
    push = result.push
    if not evaluation["blessed"]:
        print(f"not pushed: {push['reason']}")
        raise ModelRefused(f"the Evaluator refused the model: {evaluation['reason']}")
    print(f"  blessed: {evaluation['reason']}")
    if push["pushed"]:
        print(f"pushed version {push['version']} -> {push['path']}")
    else:
        print(f"not pushed: {push['reason']}")
    served = os.path.join(push["serving_base"], push["model_name"])
    if not args.no_sample_request and os.path.isdir(served):
        _sample_request(push["serving_base"], push["model_name"], result.artifacts["example_splits"], names,
                        result.log_file)
    return 0


def _compile(args) -> int:
    settings = _settings(args.config)
    from albert_tf.pipeline_steps.cluster_paths import describe_local_paths, local_paths
    from pipelines.albert_pipeline import DEFAULT_IMAGE, compile_pipeline, pipeline_arguments

    found = local_paths(pipeline_arguments(settings))
    if found and not args.allow_local_paths:
        raise CommandError(describe_local_paths(found))
    path = compile_pipeline(settings, args.output, image=args.image or DEFAULT_IMAGE)
    print(f"wrote {path} (image {args.image or DEFAULT_IMAGE})")
    return 0


def run(args) -> int:
    return _run(args) if args.action == "run" else _compile(args)
