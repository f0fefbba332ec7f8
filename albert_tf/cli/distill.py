"""`albert-tf distill`: train a smaller or shallower student from a fine-tuned teacher.

The teacher is a model directory of `albert-tf finetune` (or the pipeline's Trainer) for
classification, regression or tagging. The student is a preset (it takes the teacher's vocabulary
size), an `albert_config.json` with the teacher's vocabulary, or `shared:N`: the teacher's own
shared block run N times, starting as a copy of the teacher. The transfer set is the labelled
training data (`--max-labeled` keeps a seeded sample of labels) plus unlabelled text the teacher
labels once (`--unlabeled FILE`, and with `--unlabeled-from-train` the rest of the training set).
The loss: `--alpha` x the soft-target KL at `--temperature` (x T^2) + (1 - alpha) x the hard-label
loss, plus `--transfer hidden` (TinyBERT hidden states) or `attention` (MiniLM attention and value
relations). `--model-dir` is a normal model directory: `albert-tf evaluate / predict / export`
read it unchanged, and its `finetuning.json` records the distillation and the teacher's metrics.

The run is the library's `albert_tf.distillation.distill` (`DistillSettings` mirrors these flags).
"""

from __future__ import annotations

import argparse

from albert_tf.cli import library_errors

NAME = "distill"
HELP = "Distil a fine-tuned teacher into a smaller student (a preset, a config, or shared:N of the teacher's own block)."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from albert_tf.distillation.settings import TRANSFERS

    models = parser.add_argument_group("teacher and student")
    models.add_argument("--teacher", required=True, help="fine-tuned model directory (albert-tf finetune / the pipeline's Trainer)")
    models.add_argument("--student", required=True,
                        help="preset (tiny, small, base-v2, ...), albert_config.json, or shared:N (the teacher's block run N times)")
    models.add_argument("--student-init", help="pretrained checkpoint for a preset/config student (default: random weights)")
    models.add_argument("--dropout", type=float, help="dropout before the student's head (default: the teacher's)")
    models.add_argument("--pooling", choices=("mean", "cls"), help="student classifier input (default: the teacher's)")

    data = parser.add_argument_group("transfer set")
    data.add_argument("--data", required=True, help="the task's data directory (train, dev, optionally test)")
    data.add_argument("--text-column", help="table column of the text (default: the teacher's)")
    data.add_argument("--label-column", help="table column of the label (default: the teacher's)")
    data.add_argument("--unlabeled", help="unlabelled text for the teacher to label: .txt (one per line) or a TSV/CSV/JSONL table")
    data.add_argument("--unlabeled-column", help="the --unlabeled table's text column (default: the text column)")
    data.add_argument("--max-labeled", type=int, help="keep the labels of only N training examples (a seeded sample)")
    data.add_argument("--unlabeled-from-train", action="store_true",
                      help="the training examples beyond --max-labeled join the transfer set as unlabelled text")

    loss = parser.add_argument_group("objective")
    loss.add_argument("--temperature", type=float, default=2.0, help="softmax temperature of the soft targets (default 2)")
    loss.add_argument("--alpha", type=float, default=0.5,
                      help="weight of the soft loss; the hard-label loss gets 1 - alpha (default 0.5; 0: labels only)")
    loss.add_argument("--transfer", choices=TRANSFERS, default="none",
                      help="also match the teacher's hidden states (TinyBERT) or last-layer attention (MiniLM)")
    loss.add_argument("--transfer-weight", type=float, default=1.0, help="weight of the --transfer loss (default 1)")

    train = parser.add_argument_group("training")
    train.add_argument("--model-dir", required=True, help="the student's output directory (written atomically)")
    train.add_argument("--overwrite", action="store_true", help="replace an existing --model-dir once the run completes")
    train.add_argument("--num-epochs", type=float, help="passes over the transfer set (default: the recipe's, 3; taggers 10)")
    train.add_argument("--num-train-steps", type=int, help="optimizer updates (default: from --num-epochs)")
    train.add_argument("--batch-size", type=int, help="default 32")
    train.add_argument("--eval-batch-size", type=int)
    train.add_argument("--learning-rate", type=float, help="peak learning rate (default: the recipe's for the student's size)")
    train.add_argument("--warmup-proportion", type=float, help="warmup as a fraction of the steps (default 0.1)")
    train.add_argument("--max-seq-length", type=int, help="default: the teacher's")
    train.add_argument("--eval-every", type=int, help="steps between dev evaluations (default: one epoch)")
    train.add_argument("--seed", type=int, default=12345)
    train.add_argument("--quiet", action="store_true", help="no progress bars")


def run(args) -> int:
    from albert_tf.distillation import DistillSettings, distill

    with library_errors():
        distill(DistillSettings.from_namespace(args))
    return 0
