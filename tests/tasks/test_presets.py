"""Tests of `albert_tf.tasks.presets`: the original ALBERT GLUE fine-tuning defaults."""

import pytest

from albert_tf.tasks.classification.data import GLUE_LAYOUTS
from albert_tf.metrics import METRICS
from albert_tf.tasks.presets import PRESETS, finetune_preset


def test_values_of_the_original_run_glue_script():
    # (lr, batch, steps, warmup) of google-research/albert run_glue.sh, all at max_seq_length 512.
    expected = {
        "sst-2": (1e-5, 32, 20935, 1256),
        "mnli": (3e-5, 128, 10000, 1000),
        "cola": (1e-5, 16, 5336, 320),
        "qnli": (1e-5, 32, 33112, 1986),
        "qqp": (5e-5, 128, 14000, 1000),
        "rte": (3e-5, 32, 800, 200),
        "sts-b": (2e-5, 16, 3598, 214),
        "mrpc": (2e-5, 32, 800, 200),
    }
    for name, values in expected.items():
        preset = finetune_preset(name)
        assert (preset.learning_rate, preset.batch_size, preset.num_train_steps, preset.warmup_steps) == values
        assert preset.max_seq_length == 512 and preset.classifier_dropout == 0.1


def test_every_glue_task_has_a_preset_with_known_metrics():
    assert set(PRESETS) == set(GLUE_LAYOUTS)
    for preset in PRESETS.values():
        assert preset.best_metric in preset.metrics
        assert set(preset.metrics) <= set(METRICS)
    assert finetune_preset("CoLA").best_metric == "mcc"
    assert finetune_preset("stsb").metrics == ("pearson", "spearman")
    assert finetune_preset("mrpc").metrics == ("accuracy", "f1")
    with pytest.raises(ValueError, match="no fine-tuning preset"):
        finetune_preset("squad")
