"""Fine-tuning defaults of the GLUE, SQuAD and RACE tasks, from the original ALBERT release.

Learning rate, batch size, training steps, warmup steps and sequence length are those of
google-research/albert's `run_glue.sh` and the README's fine-tuning table (all with AdamW and
`max_seq_length=512`); the dropout rates (encoder and classifier) follow Table 14 of the paper,
which also gives WNLI (not in `run_glue.sh`). `metrics` are what GLUE reports for the task and
`best_metric` selects the checkpoint kept, as `run_classifier.py` picks its best checkpoint by dev
accuracy (by Pearson correlation for STS-B and Matthews correlation for CoLA).

`TASK_PRESETS` is the one registry of task presets (`TaskPreset`,
`albert_tf.training.finetuning_config`), GLUE's and the reading-comprehension tasks';
`task_preset(name)` finds one (None for a task without a preset: its run takes the recipe's
values). They are the first layer of `resolve_finetuning_config` (a family's `preset()`).

The reading-comprehension tasks ("squad-v1", "squad-v2", "race") take learning rate, batch size, steps, warmup, sequence length and the
encoder dropout from Table 14 of the paper. Their head dropout follows the original code rather
than the table: `create_v1_model` has no dropout before its span layer (0.0), the v2 head's
answerability branch and the RACE head use 0.1. SQuAD is scored by the official scripts' EM/F1 (v1.1
`exact_match`, v2.0 `exact`) and its weights are kept by F1, RACE by accuracy; the original saved (and evaluated) a checkpoint every
1000 steps.
"""

from __future__ import annotations

from typing import Dict, Optional

from albert_tf.training.finetuning_config import TaskPreset


TASK_PRESETS: Dict[str, TaskPreset] = {
    preset.name: preset
    for preset in (
        # GLUE: google-research/albert's run_glue.sh.
        TaskPreset("cola", 1e-5, 16, 5336, 320, metrics=("mcc", "accuracy"), best_metric="mcc"),
        TaskPreset("sst-2", 1e-5, 32, 20935, 1256),
        TaskPreset("mrpc", 2e-5, 32, 800, 200, metrics=("accuracy", "f1")),
        TaskPreset("sts-b", 2e-5, 16, 3598, 214, metrics=("pearson", "spearman"), best_metric="pearson"),
        TaskPreset("qqp", 5e-5, 128, 14000, 1000, encoder_dropout=0.1, metrics=("accuracy", "f1")),
        TaskPreset("mnli", 3e-5, 128, 10000, 1000),
        TaskPreset("qnli", 1e-5, 32, 33112, 1986, save_checkpoints_steps=200),
        TaskPreset("rte", 3e-5, 32, 800, 200, encoder_dropout=0.1),
        TaskPreset("wnli", 2e-5, 16, 2000, 250, encoder_dropout=0.1),
        # Reading comprehension: Table 14 of the paper.
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

# Other spellings of the GLUE task names.
_ALIASES = {"sst2": "sst-2", "stsb": "sts-b", "sts": "sts-b"}


def task_preset(name: str) -> Optional[TaskPreset]:
    """The `TaskPreset` of a task (case-insensitive; "sst2", "stsb" accepted), None for a task
    without one."""
    key = name.lower()
    return TASK_PRESETS.get(_ALIASES.get(key, key))
