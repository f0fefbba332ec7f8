"""Errors that speak the caller's language (`albert_tf.errors`), the peak-memory refusal
(`albert_tf.training.memory`), the pipeline's pre-flight checks, the resume settings check, and
what `from_pretrained` says when there is nothing to load."""

import pytest

from albert_tf.config import AlbertConfig
from albert_tf.errors import ParameterError, as_flags, as_python, param, raw_message
from albert_tf.training import memory
from albert_tf.training.finetune_resume import first_difference


def test_one_message_reads_as_python_arguments_or_as_flags():
    message = f"{param('model_dir')} out is not empty; pass {param('overwrite', True)} (or {param('lower_case', False)})"
    assert as_python(message) == "model_dir out is not empty; pass overwrite=True (or lower_case=False)"
    assert as_flags(message) == "--model-dir out is not empty; pass --overwrite (or --no-lower-case)"
    error = ParameterError(f"use {param('batch_size', 64)} and {param('model_config', 'small')}")
    assert str(error) == "use batch_size=64 and model_config='small'"
    assert error.cli_message == "use --batch-size 64 and --model-config small"
    assert error.for_cli({"model_config": "config"}) == "use --batch-size 64 and --config small"
    # Re-raised as another error, the marks survive.
    assert ParameterError(raw_message(error)).cli_message == error.cli_message


def test_the_memory_estimate_grows_with_batch_length_and_precision():
    config = AlbertConfig.preset("base-v2")
    small = memory.estimate_training_memory(config, 8, 128, predictions_per_seq=20)
    assert memory.estimate_training_memory(config, 16, 128, predictions_per_seq=20).total > small.total
    assert memory.estimate_training_memory(config, 8, 512, predictions_per_seq=20).activations > 4 * small.activations
    half = memory.estimate_training_memory(config, 8, 128, precision="mixed_bfloat16", predictions_per_seq=20)
    assert half.activations < small.activations and half.parameters == small.parameters
    accumulating = memory.estimate_training_memory(config, 8, 128, gradient_accumulation_steps=4, predictions_per_seq=20)
    assert accumulating.optimizer == small.optimizer * 3 // 2


def test_a_run_that_does_not_fit_is_refused_naming_what_fits():
    config = AlbertConfig.preset("base-v2")
    tiny = AlbertConfig.preset("tiny", vocab_size=30000)

    def estimate(batch):
        return memory.estimate_training_memory(config, batch, 512, predictions_per_seq=20)

    free = 8 * memory.GIB
    alternatives = [("tiny", memory.estimate_training_memory(tiny, 32, 128, predictions_per_seq=20))]
    with pytest.raises(memory.TrainingMemoryError) as refused:
        memory.check_fits("pretraining", estimate, 4096, 512, free=free, alternatives=alternatives,
                          config_param="model_config")
    cli = refused.value.for_cli({"model_config": "config", "gradient_accumulation_steps": "grad_accum"})
    assert "pretraining at batch 4096 x length 512 needs about" in cli and "8.0 GiB is free" in cli
    assert "--config tiny" in cli and "--batch-size " in cli and "--grad-accum " in cli and "\n" not in cli
    fitting = int(cli.split("--batch-size ")[1].split()[0])
    assert estimate(fitting).total <= free < estimate(4096).total
    accumulation = int(cli.split("--grad-accum ")[1].split()[0])
    assert fitting * accumulation == 4096
    assert "model_config='tiny'" in str(refused.value) and "batch_size=" in str(refused.value)
    assert memory.check_fits("pretraining", estimate, 1, 512, free=10**15) == estimate(1)


def test_preflight_names_the_place_that_cannot_be_written(tmp_path):
    from albert_tf.pipeline_steps.preflight import PreflightError, check_pipeline, check_writable
    from albert_tf.pipeline_steps.settings import PipelineSettings

    (tmp_path / "file").write_text("x")
    check_writable(str(tmp_path / "new" / "deeper"), "pipeline_root")
    assert not (tmp_path / "new").exists()
    with pytest.raises(PreflightError) as raised:
        check_writable(str(tmp_path / "file" / "runs"), "serving_base")
    assert raised.value.cli_message.startswith("--serving-base ") and str(raised.value).startswith("serving_base ")
    with pytest.raises(PreflightError, match="matches no file"):
        check_pipeline(PipelineSettings(corpus=str(tmp_path / "none-*.txt")), str(tmp_path / "runs"))
    with pytest.raises(PreflightError, match="task_data .* is not a folder"):
        check_pipeline(PipelineSettings(task_data=str(tmp_path / "missing")), str(tmp_path / "runs"))
    check_pipeline(PipelineSettings(serving_base=str(tmp_path / "serving")), str(tmp_path / "runs"))


def test_the_first_differing_setting_is_named():
    saved = {"learning_rate": 0.001, "batch_size": 8, "metadata": {"task": "sst-2"}}
    assert first_difference(saved, dict(saved)) is None
    assert first_difference(saved, {**saved, "batch_size": 16}) == "batch_size"
    assert first_difference(saved, {**saved, "metadata": {"task": "cola"}}) == "metadata"
    assert first_difference(saved, {"learning_rate": 0.001, "batch_size": 8}) == "metadata"


def test_from_pretrained_says_what_it_tried_and_what_it_reads(tmp_path, monkeypatch):
    from albert_tf.tasks.pretrained import PretrainedNotFoundError, resolve_pretrained

    monkeypatch.chdir(tmp_path)
    with pytest.raises(PretrainedNotFoundError) as raised:
        resolve_pretrained("albert_base")
    message = str(raised.value)
    assert f"tried {tmp_path / 'albert_base'} and {tmp_path / 'albert_base'}.index" in message
    assert "ships no weights" in message and "huggingface-cli download" in message and "TF1 release" in message
    with pytest.raises(PretrainedNotFoundError) as raised:
        resolve_pretrained("out/model")
    assert "ships no weights" not in str(raised.value)
    export = tmp_path / "serving" / "m" / "1"
    (export / "assets").mkdir(parents=True)
    (export / "saved_model.pb").write_bytes(b"")
    (export / "assets" / "export.json").write_text("{}")
    # An export is read back through its weight index; one without it says so, and what to pass instead.
    with pytest.raises(PretrainedNotFoundError, match="TF Serving export, but .* without assets/weights.json .* pass "
                                                      "the directory it was exported from"):
        resolve_pretrained(str(export))
