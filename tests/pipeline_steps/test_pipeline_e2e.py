"""The whole pipeline on tiny data with kfp.local; its compiled YAML; the TFX user module."""

from __future__ import annotations

import dataclasses
import glob
import json
import os
import shutil
import sys
import types

import pytest

from albert_tf.pipeline_steps.staging import read_summary

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _pipeline_helpers import echo_pipeline, tiny_inputs, tiny_settings  # noqa: E402
from _quiet import unexpected_stderr  # noqa: E402

STEPS = ["example_gen", "vocab_gen", "statistics_gen", "schema_gen", "example_validator", "transform", "pretrainer",
         "trainer", "evaluator", "infra_validator", "pusher"]


def versions(serving_base, name="tiny"):
    return sorted(os.listdir(os.path.join(serving_base, name)))


def test_pipeline_end_to_end(shared_pipeline_run, tmp_path, capsys):
    from albert_tf import AlbertTextClassifier
    from albert_tf.cli import main
    from pipelines.albert_pipeline import run_local

    settings, first, root = shared_pipeline_run.settings, shared_pipeline_run.run, shared_pipeline_run.pipeline_root
    # The main job's stderr (its steps' included) holds no warning the user cannot act on.
    assert unexpected_stderr(shared_pipeline_run.stderr) == []
    with open(first.log_file, encoding="utf-8") as log:
        assert "\x1b" not in log.read()  # the file log holds no terminal colour codes
    a = first.artifacts
    # Its models load with the package's own API: each carries its tokenizer.
    for model_dir in (a["pretrained_model"], os.path.join(a["trained_model"], "model")):
        model = AlbertTextClassifier.from_pretrained(model_dir, num_classes=2, sequence_length=24)
        assert model.predict(["good film"], verbose=0).shape == (1, 2)
    assert os.path.isfile(os.path.join(a["corpus_splits"], "Split-train", "documents.tfrecord"))
    assert os.path.isfile(os.path.join(a["example_splits"], "Split-eval", "examples.tfrecord"))
    assert os.path.isfile(os.path.join(a["vocabulary"], "spm.model"))
    assert glob.glob(os.path.join(a["transformed"], "pretraining", "records", "*.tfrecord"))
    assert read_summary(a["transformed"])["finetuning"]["counts"] == {"train": 240, "eval": 300}
    assert os.path.isfile(os.path.join(a["pretrained_model"], "encoder.keras"))
    assert os.path.isfile(os.path.join(a["pretrained_model"], "tf1", "model.ckpt.index"))
    trained = a["trained_model"]
    assert os.path.isfile(os.path.join(trained, "model", "COMPLETE"))
    assert read_summary(trained)["init"]["source"].startswith(a["pretrained_model"])
    assert os.path.isfile(os.path.join(trained, "serving", "tiny", "1", "assets.extra", "tf_serving_warmup_requests"))
    assert first.evaluation["blessed"] and first.evaluation["baseline"] is None
    assert {"accuracy", "f1", "mcc"} <= set(first.evaluation["candidate"]["metrics"])
    assert first.evaluation["candidate"]["metrics"]["mcc"] > 0.3
    assert first.evaluation["constant_baseline"]["metrics"]["accuracy"] == pytest.approx(0.5)
    report = json.load(open(os.path.join(a["evaluation"], "evaluation.json")))  # the report is on disk
    assert set(report["slices"]) == {"0", "1"} and len(report["confusion_matrix"]["matrix"]) == 2
    assert read_summary(a["infra_blessing"])["requests"]
    assert first.push["pushed"] and first.push["version"] == 1
    base = settings.serving_base
    assert versions(base) == ["1"]  # no hidden staging directory left beside it
    assert os.path.isfile(os.path.join(base, "tiny", "1", "saved_model.pb"))
    assert 'name: "tiny"' in open(os.path.join(base, "models.config")).read()
    # The pushed version is a checkpoint too (its assets/weights.json): from_pretrained reads it.
    pushed = AlbertTextClassifier.from_pretrained(os.path.join(base, "tiny", "1"), num_classes=2, sequence_length=24)
    assert pushed.predict(["good film"], verbose=0).shape == (1, 2)
    assert os.path.isfile(os.path.join(base, "batching_parameters.txt"))

    # Unchanged inputs, through the command line: the data and training steps come from the
    # cache; a candidate that must beat the pushed model by a margin it cannot reach is not
    # blessed and not pushed, and the command says why in one line and exits 3.
    config = os.path.join(str(tmp_path), "settings.json")
    with open(config, "w", encoding="utf-8") as f:
        json.dump(dataclasses.replace(settings, eval_tolerance=-1.0).to_dict(), f)
    capsys.readouterr()
    code = main(["pipeline", "run", "--config", config, "--pipeline-root", root])
    out, err = capsys.readouterr()
    assert code == 3
    # Quiet by default: a line per step, kfp.local's JSON dumps only in the log file.
    assert "Got executor_input" not in out and '"parameterValues"' not in out
    for step in ("example-gen", "vocab-gen", "transform", "pretrainer", "trainer"):
        assert f"  {step:<16s} cached" in out, out
    executed = [line.split()[0] for line in out.splitlines() if line.startswith("  ") and " SUCCESS (" in line]
    assert {"evaluator", "infra-validator", "pusher"} <= set(executed), out
    [log] = [line.split("full log: ", 1)[1] for line in out.splitlines() if line.startswith("full log: ")]
    assert open(log).read().count("Got executor_input") == len(executed)
    error_lines = [line for line in err.splitlines() if line.startswith("albert-tf pipeline: error:")]
    assert len(error_lines) == 1 and "the Evaluator refused the model:" in error_lines[0]
    assert "worse than the pushed model" in error_lines[0]
    assert "best constant answer:" in out and "not pushed: the Evaluator did not bless the candidate" in out
    second = max(glob.glob(os.path.join(root, "albert-tf-pipeline-*")), key=os.path.getmtime)
    evaluation = read_summary(os.path.join(second, "evaluator", "blessing"))
    assert not evaluation["blessed"] and "worse than the pushed model" in evaluation["reason"]
    assert evaluation["baseline"]["metrics"] == evaluation["candidate"]["metrics"]
    # The cached steps wrote nothing of their own: the Evaluator read the first run's candidate.
    assert not os.path.exists(os.path.join(second, "trainer"))
    push = read_summary(os.path.join(second, "pusher", "pushed_model"))
    assert not push["pushed"] and "Evaluator" in push["reason"]
    assert versions(base) == ["1"]

    # An infra validation that fails stops the run before the Pusher. (The shared run's warmup
    # requests are put back afterwards.)
    warmup = os.path.join(trained, "serving", "tiny", "1", "assets.extra", "tf_serving_warmup_requests")
    with open(warmup, "rb") as f:
        requests = f.read()
    try:
        with open(warmup, "wb") as f:
            f.write(b"not a TFRecord")
        with pytest.raises(RuntimeError, match="^InfraValidator: .*tf_serving_warmup_requests is not a TFRecord file") as failed:
            run_local(settings, root)
        assert "\n" not in str(failed.value)
    finally:
        with open(warmup, "wb") as f:
            f.write(requests)
    latest_run = max(glob.glob(os.path.join(root, "albert-tf-pipeline-*")), key=os.path.getmtime)
    assert not os.path.exists(os.path.join(latest_run, "pusher"))
    assert versions(base) == ["1"]


@pytest.mark.slow
def test_the_pushed_model_loads_whole_everywhere(shared_pipeline_run):
    """The round-trip matrix for the pipeline's producers: the pushed version and the Trainer's model
    directory load whole with `from_pretrained` (twice, bit for bit alike) and with
    `keras.saving.load_model`, and answer what the served signature answers."""
    import numpy as np
    import tensorflow as tf

    from albert_tf import AlbertTextClassifier

    settings = shared_pipeline_run.settings
    pushed = os.path.join(settings.serving_base, settings.model_name, "1")
    model_dir = os.path.join(shared_pipeline_run.run.artifacts["trained_model"], "model")
    texts = ["good film", "a dull mess", "the plot was"]
    served = tf.saved_model.load(pushed).signatures["serving_default"](text=tf.constant(texts))["logits"].numpy()
    for path in (pushed, model_dir):
        first, second = (AlbertTextClassifier.from_pretrained(path) for _ in range(2))
        assert first.num_classes == 2 and first.preprocessor.sequence_length == 24
        answers = first.predict(texts, verbose=0)
        np.testing.assert_allclose(answers, served, rtol=1e-5, atol=1e-5, err_msg=path)
        np.testing.assert_array_equal(second.predict(texts, verbose=0), answers)
    import keras

    reloaded = keras.saving.load_model(os.path.join(model_dir, "model.keras"))
    np.testing.assert_allclose(reloaded.predict(texts, verbose=0), served, rtol=1e-5, atol=1e-5)


def test_a_model_trained_on_random_labels_is_refused(shared_pipeline_run, tmp_path):
    """Labels independent of the texts: whatever the tiny model answers, it is no better than the
    majority class, so the Evaluator refuses it. The steps from ExampleGen to the Evaluator run
    here, in this process, on the shared run's vocabulary and pretrained encoder (the command
    line's exit status and messages for a refused model are `test_pipeline_end_to_end`'s)."""
    from albert_tf.pipeline_steps.evaluator import run_evaluator
    from albert_tf.pipeline_steps.example_gen import run_example_gen
    from albert_tf.pipeline_steps.settings import albert_config_for
    from albert_tf.pipeline_steps.trainer import candidate_path, run_trainer
    from albert_tf.pipeline_steps.transform import run_transform

    settings, a = shared_pipeline_run.settings, shared_pipeline_run.run.artifacts
    corpus, task = tiny_inputs(tmp_path, random_labels=True)
    step = lambda name: str(tmp_path / name)  # noqa: E731
    run_example_gen(corpus, task, step("corpus_splits"), step("examples"), eval_fraction=settings.eval_fraction)
    run_transform(step("corpus_splits"), step("examples"), a["vocabulary"], step("transformed"),
                  max_seq_length=settings.max_seq_length, max_predictions_per_seq=settings.max_predictions_per_seq,
                  dupe_factor=settings.dupe_factor, seed=settings.seed)
    config = albert_config_for(settings.model, read_summary(a["vocabulary"])["vocab_size"], settings.max_seq_length)
    # Two epochs: there is nothing to learn however long it trains.
    run_trainer(step("transformed"), a["vocabulary"], a["pretrained_model"], step("trained"), config,
                model_name=settings.model_name, num_epochs=2.0, batch_size=settings.finetune_batch_size,
                learning_rate=settings.finetune_learning_rate, seed=settings.seed)
    evaluation = run_evaluator(step("examples"), candidate_path(step("trained")), step("serving/tiny"), step("blessing"),
                               threshold=settings.eval_threshold, confidence=settings.eval_confidence)
    assert not evaluation["blessed"], evaluation["reason"]
    constant = evaluation["constant_baseline"]["metrics"]["accuracy"]
    assert constant > 0.6  # about 70% of the random labels are 1
    assert evaluation["candidate"]["metrics"]["accuracy"] <= constant + 0.1, evaluation["reason"]
    assert "beats the constant answer failed" in evaluation["reason"], evaluation["reason"]


def test_kfp_output_is_a_line_per_step_unless_verbose(tmp_path, capsys):
    """kfp.local prints each task's executor input and outputs as JSON: only into the log file,
    unless verbose (what `albert-tf pipeline run --verbose` sets)."""
    import tempfile

    from kfp import local

    from pipelines.albert_pipeline import kfp_output

    local.init(runner=local.SubprocessRunner(use_venv=False), pipeline_root=str(tmp_path / "root"),
               workspace_root=tempfile.mkdtemp(prefix="albert-kfp-test-"), enable_caching=True,
               cache_root=str(tmp_path / "cache"), raise_on_error=True)
    for run, verbose in enumerate((False, True, False)):
        log = tmp_path / f"run-{run}.log"
        with kfp_output(str(log), verbose=verbose, cacheable=["echo"]):
            echo_pipeline(word="hi")
        out = capsys.readouterr().out
        written = log.read_text()
        assert "Got executor_input" in written and '"parameterValues"' in written and "the step says hi" in written
        if verbose:
            assert "Got executor_input" in out and "the step says hi" in out
        else:
            assert "Got executor_input" not in out and "the step says hi" not in out
            lines = out.splitlines()
            assert len(lines) == 2 and lines[1].startswith("  echo-2           SUCCESS (")
            # The first run computes the first step; the last one takes it from the cache.
            assert lines[0].startswith("  echo             SUCCESS (") if run == 0 else lines[0] == "  echo             cached"


def test_infra_validator_rejects_an_unservable_export(tmp_path):
    from albert_tf.pipeline_steps.infra_validator import InfraValidationError, run_infra_validator

    (tmp_path / "base" / "m" / "1").mkdir(parents=True)
    (tmp_path / "base" / "m" / "1" / "saved_model.pb").write_bytes(b"not a graph")
    with pytest.raises(InfraValidationError, match="no warmup requests"):
        run_infra_validator(str(tmp_path / "base"), "m", str(tmp_path / "out"))
    with pytest.raises(InfraValidationError, match="holds no version"):
        run_infra_validator(str(tmp_path / "base"), "other", str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_compiled_yaml_has_every_component_and_parameter(tmp_path):
    import yaml

    from pipelines.albert_pipeline import compile_pipeline, pipeline_arguments

    settings = tiny_settings(tmp_path, beam_runner="DataflowRunner", beam_args=["--region=europe-west4"], strategy="multi_worker")
    path = compile_pipeline(settings, str(tmp_path / "pipeline.yaml"), image="registry.example/albert-tf:1")
    spec = yaml.safe_load(open(path))
    executors = spec["deploymentSpec"]["executors"]
    assert sorted(e.replace("exec-", "").replace("-", "_") for e in executors) == sorted(STEPS)
    for executor in executors.values():
        assert executor["container"]["image"] == "registry.example/albert-tf:1"
        assert "pip install" not in " ".join(executor["container"]["command"])
    tasks = spec["root"]["dag"]["tasks"]
    assert sorted(t.replace("-", "_") for t in tasks) == sorted(STEPS)
    for name in ("evaluator", "infra-validator", "pusher"):
        assert tasks[name]["cachingOptions"] == {}  # caching off is written as an empty option set
    assert tasks["trainer"]["cachingOptions"] == {"enableCache": True}
    parameters = spec["root"]["inputDefinitions"]["parameters"]
    arguments = pipeline_arguments(settings)
    assert set(parameters) == set(arguments)
    assert parameters["beam_runner"]["defaultValue"] == "DataflowRunner"
    assert parameters["beam_args"]["defaultValue"] == ["--region=europe-west4"]
    assert parameters["strategy"]["defaultValue"] == "multi_worker"
    assert json.loads(parameters["model_config_json"]["defaultValue"])["hidden_size"] == 16
    assert parameters["pretrain_steps"]["parameterType"] == "NUMBER_INTEGER"
    assert parameters["finetune_epochs"]["parameterType"] == "NUMBER_DOUBLE"


def test_cli_compile(tmp_path):
    from albert_tf.cli import main

    config = tmp_path / "cfg.yaml"
    config.write_text("vocab_size: 5000\nmodel: base-v2\nmax_seq_length: 128\n", encoding="utf-8")
    out = tmp_path / "p.yaml"
    # The sample's corpus and task data are this machine's paths: written only when allowed.
    assert main(["pipeline", "compile", "--config", str(config), "--output", str(out), "--allow-local-paths"]) == 0
    assert "albert-tf-pipeline" in out.read_text()
    # The documented real configuration is valid and compiles.
    example = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "pipelines", "example_config.yaml")
    assert main(["pipeline", "compile", "--config", example, "--output", str(out), "--image", "r/albert-tf-python3.11:1"]) == 0
    assert "DataflowRunner" in out.read_text()
    config.write_text("vocab_size: -1\n", encoding="utf-8")
    assert main(["pipeline", "compile", "--config", str(config), "--output", str(out)]) == 2


def test_tfx_run_fn(tmp_path, tiny_spm_model):
    import numpy as np
    import tensorflow as tf
    import tensorflow_text  # noqa: F401

    from albert_tf.pipeline_steps.tfx_module import run_fn

    _, task = tiny_inputs(tmp_path)

    def write(split, path):
        # TFX's ExampleGen writes gzipped TFRecords with int64 labels.
        lines = open(os.path.join(task, f"{split}.tsv")).read().splitlines()[1:]
        with tf.io.TFRecordWriter(path, options="GZIP") as writer:
            for line in lines:
                label, text = line.split("\t")
                feature = {"sentence": tf.train.Feature(bytes_list=tf.train.BytesList(value=[text.encode()])),
                           "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(label)]))}
                writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())

    (tmp_path / "train").mkdir()
    (tmp_path / "eval").mkdir()
    write("train", str(tmp_path / "train" / "data.gz"))
    write("dev", str(tmp_path / "eval" / "data.gz"))
    fn_args = types.SimpleNamespace(
        train_files=[str(tmp_path / "train" / "*")], eval_files=[str(tmp_path / "eval" / "*")],
        serving_model_dir=str(tmp_path / "serving_model"), model_run_dir=str(tmp_path / "run"), train_steps=2,
        custom_config={
            "tokenizer": tiny_spm_model, "max_seq_length": 24, "text_feature": "sentence", "batch_size": 8,
            "albert_config": dict(embedding_size=8, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                  intermediate_size=32, max_position_embeddings=24),
        },
    )
    summary = run_fn(fn_args)
    assert summary["steps"] == 2
    loaded = tf.saved_model.load(fn_args.serving_model_dir)
    outputs = loaded.signatures["serving_default"](text=tf.constant(["good film", "awful plot"]))
    assert outputs["probabilities"].shape == (2, 2)
    assert set(np.char.decode(outputs["label"].numpy().astype(bytes)).tolist()) <= {"0", "1"}
    assert os.path.isfile(os.path.join(fn_args.model_run_dir, "training", "model", "task.json"))

    # TFX's warm start: a Resolver's latest blessed model arrives as `fn_args.base_model`.
    warm = types.SimpleNamespace(**{**vars(fn_args), "serving_model_dir": str(tmp_path / "serving_model_2"),
                                    "model_run_dir": str(tmp_path / "run_2"), "base_model": fn_args.serving_model_dir})
    assert run_fn(warm)["init"]["warm_start"] == fn_args.serving_model_dir

    with pytest.raises(ValueError, match="custom_config lacks tokenizer"):
        run_fn(types.SimpleNamespace(**{**vars(fn_args), "custom_config": {}}))
    shutil.rmtree(fn_args.serving_model_dir)
    bad = types.SimpleNamespace(**{**vars(fn_args), "custom_config": {**fn_args.custom_config, "text_feature": "missing"}})
    with pytest.raises(ValueError, match="no feature 'missing'"):
        run_fn(bad)
    assert not os.path.exists(fn_args.serving_model_dir)
