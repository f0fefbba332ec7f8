"""Tests of `albert_tf.tasks.presets`: the original ALBERT fine-tuning defaults, in one registry."""

from albert_tf.tasks.classification.data import GLUE_LAYOUTS
from albert_tf.metrics import METRICS
from albert_tf.tasks.presets import TASK_PRESETS, task_preset


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
        preset = task_preset(name)
        assert (preset.learning_rate, preset.batch_size, preset.num_train_steps, preset.warmup_steps) == values
        assert preset.max_seq_length == 512 and preset.classifier_dropout == 0.1


def test_one_registry_holds_every_task_preset_with_known_metrics():
    assert set(TASK_PRESETS) == set(GLUE_LAYOUTS) | {"squad-v1", "squad-v2", "race"}
    for preset in TASK_PRESETS.values():
        assert preset.best_metric in preset.metrics
        assert set(preset.metrics) <= set(METRICS) | {"exact_match", "exact", "f1"}
    assert task_preset("CoLA").best_metric == "mcc"
    assert task_preset("stsb").metrics == ("pearson", "spearman")
    assert task_preset("mrpc").metrics == ("accuracy", "f1")
    # A task without a preset (its run takes the recipe's values), the families agree.
    from albert_tf.tasks.family import task_family, task_names

    assert task_preset("squad") is None and task_preset("classification") is None
    for name in task_names():
        assert task_family(name).preset() is task_preset(name)
