"""Fine-tuning defaults of the GLUE, SQuAD and RACE tasks, from the original ALBERT release.

Learning rate, batch size, training steps, warmup steps and sequence length are those of
google-research/albert's `run_glue.sh` and the README's fine-tuning table (all with AdamW and
`max_seq_length=512`); the dropout rates (encoder and classifier) follow Table 14 of the paper,
which also gives WNLI (not in `run_glue.sh`). `metrics` are what GLUE reports for the task and
`best_metric` selects the checkpoint kept, as `run_classifier.py` picks its best checkpoint by dev
accuracy (by Pearson correlation for STS-B and Matthews correlation for CoLA).

`finetune_preset(name)` returns the `TaskPreset` (`albert_tf.training.finetuning_config`) of a GLUE
task; `PRESETS` holds them all.

The reading-comprehension tasks (`READING_PRESETS`, `reading_preset(name)`: "squad-v1",
"squad-v2", "race") take learning rate, batch size, steps, warmup, sequence length and the
encoder dropout from Table 14 of the paper. Their head dropout follows the original code rather
than the table: `create_v1_model` has no dropout before its span layer (0.0), the v2 head's
answerability branch and the RACE head use 0.1. SQuAD is scored by the official scripts' EM/F1 (v1.1
`exact_match`, v2.0 `exact`) and its weights are kept by F1, RACE by accuracy; the original saved (and evaluated) a checkpoint every
1000 steps.
"""

from __future__ import annotations

from typing import Dict

from albert_tf.training.finetuning_config import TaskPreset


PRESETS: Dict[str, TaskPreset] = {
    preset.name: preset
    for preset in (
        TaskPreset("cola", 1e-5, 16, 5336, 320, metrics=("mcc", "accuracy"), best_metric="mcc"),
        TaskPreset("sst-2", 1e-5, 32, 20935, 1256),
        TaskPreset("mrpc", 2e-5, 32, 800, 200, metrics=("accuracy", "f1")),
        TaskPreset("sts-b", 2e-5, 16, 3598, 214, metrics=("pearson", "spearman"), best_metric="pearson"),
        TaskPreset("qqp", 5e-5, 128, 14000, 1000, encoder_dropout=0.1, metrics=("accuracy", "f1")),
        TaskPreset("mnli", 3e-5, 128, 10000, 1000),
        TaskPreset("qnli", 1e-5, 32, 33112, 1986, save_checkpoints_steps=200),
        TaskPreset("rte", 3e-5, 32, 800, 200, encoder_dropout=0.1),
        TaskPreset("wnli", 2e-5, 16, 2000, 250, encoder_dropout=0.1),
    )
}

_ALIASES = {"sst2": "sst-2", "stsb": "sts-b", "sts": "sts-b"}


def finetune_preset(name: str) -> TaskPreset:
    """The `TaskPreset` of a GLUE task (case-insensitive; "sst2", "stsb" accepted).

    Raises:
        ValueError: For a task without a preset.
    """
    key = name.lower()
    key = _ALIASES.get(key, key)
    if key not in PRESETS:
        raise ValueError(f"no fine-tuning preset for {name!r}; presets: {', '.join(PRESETS)}")
    return PRESETS[key]


READING_PRESETS: Dict[str, TaskPreset] = {
    preset.name: preset
    for preset in (
        TaskPreset(
            "squad-v1", 5e-5, 48, 3649, 365, max_seq_length=384, classifier_dropout=0.0,
            save_checkpoints_steps=1000, metrics=("exact_match", "f1"), best_metric="f1",
        ),
        TaskPreset(
            "squad-v2", 3e-5, 48, 8144, 814, max_seq_length=512, classifier_dropout=0.1,
            save_checkpoints_steps=1000, metrics=("exact", "f1"), best_metric="f1",
        ),
        TaskPreset(
            "race", 2e-5, 32, 12000, 1000, max_seq_length=512, encoder_dropout=0.1, classifier_dropout=0.1,
            save_checkpoints_steps=1000,
        ),
    )
}


def reading_preset(name: str) -> TaskPreset:
    """The `TaskPreset` of "squad-v1", "squad-v2" or "race" (case-insensitive).

    Raises:
        ValueError: For a task without a reading-comprehension preset.
    """
    key = name.lower()
    if key not in READING_PRESETS:
        raise ValueError(f"no reading-comprehension preset for {name!r}; presets: {', '.join(READING_PRESETS)}")
    return READING_PRESETS[key]
