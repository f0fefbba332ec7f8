"""`albert-tf pretrain`: ALBERT pretraining (n-gram MLM + SOP) with `run_pretraining`.

Trains on original-format pretraining TFRecords (from `albert-tf make-pretraining-data` or the
original `create_pretraining_data.py`) under any `tf.distribute` strategy, checkpointing every
``--checkpoint-every`` steps; rerunning the same command after a crash resumes exactly where the
newest readable checkpoint left off. For example::

    albert-tf pretrain --config base-v2 --data 'gs://bucket/data/*.tfrecord' --strategy tpu \\
        --steps 125000 --batch-size 4096 --model-dir gs://bucket/albert_base
    albert-tf pretrain --config my_albert_config.json --data 'data/*.tfrecord' --strategy mirrored \\
        --steps 10000 --batch-size 256 --max-seq-length 128 --precision mixed_bfloat16 --model-dir out/
    albert-tf pretrain --config tiny --data data/ --model-dir out/       # a CPU-sized run

Run settings start from the config's preset (`albert_tf.config.PRETRAINING_PRESETS`: the paper's
for the released sizes, CPU-sized ones for ``tiny`` and ``small``, which also take the data's
vocabulary size); flags override them. Without ``--config`` the model is ``base-v2`` with the
paper's recipe where a GPU or TPU is found, else ``small``, sized for a small CPU machine. On a CPU
the run's peak memory is estimated first (`albert_tf.training.memory`), and a run that would not
fit is refused in one line naming the estimate, what is free, and the preset or batch that fits. A ``make-pretraining-data`` output (``--data DIR``, or globs
inside it) brings its ``metadata.json``: the sequence length and masked positions come from there
(a flag that contradicts them is an error), and so does the tokenizer when the metadata names it
(else ``--spm-model``/``--vocab-file``); the tokenizer is copied into the outputs.

``--masking on-the-fly`` masks the records anew in every epoch inside tf.data
(`albert_tf.data.on_the_fly`) instead of training on the masks they carry: unmasked records
(``make-pretraining-data --masked-lm-prob 0``) or masked ones (their original ids are put back
first). The n-gram and whole-word settings come from the data's ``metadata.json`` (the original
ALBERT's without one), the rate too unless it is 0 there (then 0.15, or ``--masked-lm-prob``), and
the special ids and vocabulary size from the data's tokenizer.

Before anything is written every record file is read once (``--no-check-records`` skips this for
very large data): a truncated or corrupted file is reported with its name, record and byte
offset. A run that fails leaves no trace: a ``--model-dir`` it created is removed unless it holds
a checkpoint to resume from, and an existing one is not touched before the checks have passed.

Outputs in ``--model-dir``: ``checkpoints/`` (resume state), ``logs/`` (TensorBoard),
``metrics.jsonl``, ``pretrainer.keras``, ``encoder.keras``, ``tf1/model.ckpt`` with
``tf1/albert_config.json`` (the original checkpoint format), and the tokenizer (``spm.model`` or
``vocab.txt`` with ``tokenizer.json``, also in ``tf1/``) that `albert-tf finetune --init` uses.

The run is the library's `albert_tf.training.pretraining_runner.pretrain` (`PretrainSettings`
mirrors these flags); this module maps the flags onto it, prints its progress and result, and
reports its `PretrainingError`s as one-line command errors.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys

from albert_tf.cli import library_errors
from albert_tf.errors import as_flags

NAME = "pretrain"
HELP = "Pretrain ALBERT (masked LM + sentence-order prediction) on pretraining TFRecords; resumable."

# As `albert_tf.training.strategies.STRATEGY_NAMES` / `PRECISIONS` and
# `albert_tf.training.pretraining_runner.MASKING_MODES`, spelled out because importing
# `albert_tf.training` imports TensorFlow, which `albert-tf --help` must not wait for.
STRATEGY_NAMES = ("default", "one_device", "mirrored", "multi_worker", "tpu")
PRECISIONS = ("float32", "mixed_bfloat16")
MASKING_MODES = ("offline", "on-the-fly")


def add_arguments(parser):
    data = parser.add_argument_group("data and model")
    data.add_argument(
        "--data",
        help="pretraining TFRecords: a make-pretraining-data output directory (its metadata.json gives the "
        "lengths and vocabulary), a glob or comma-separated globs (local or gs://). "
        "Without it, the command runs its built-in sample job",
    )
    data.add_argument(
        "--config",
        help="preset (base-v2, ..., or the CPU sizes tiny and small: see `albert-tf info --list`) or "
        "albert_config.json; the run settings follow the preset. Default: base-v2 with the paper's recipe "
        "(batch 4096, 125,000 steps) where a GPU or TPU is found, else small (batch 32, 4,000 steps), "
        "which fits a 2-core, 16 GB machine: pass --config base-v2 for the paper's recipe there",
    )
    data.add_argument(
        "--max-seq-length", type=int, help="sequence length of the records (default: from the data)"
    )
    data.add_argument(
        "--max-predictions-per-seq", type=int, help="masked positions per record (default: from the data)"
    )
    data.add_argument(
        "--spm-model", help="SentencePiece model the data was made with, copied into --model-dir "
        "(default: the one the data's metadata.json names)"
    )
    data.add_argument("--vocab-file", help="WordPiece vocab.txt the data was made with (as --spm-model)")
    data.add_argument(
        "--lower-case", action=argparse.BooleanOptionalAction, default=None,
        help="whether the data's text was lower-cased, recorded with the tokenizer (default: the metadata's, else on)",
    )
    data.add_argument(
        "--check-records", action=argparse.BooleanOptionalAction, default=True,
        help="read every record once before training to find damaged files (default: on)",
    )
    data.add_argument(
        "--masking", choices=MASKING_MODES, default="offline",
        help="'offline': train on the masks the records carry; 'on-the-fly': fresh n-gram masks every epoch, "
        "from unmasked (make-pretraining-data --masked-lm-prob 0) or masked records (default: offline)",
    )
    data.add_argument(
        "--masked-lm-prob", type=float,
        help="with --masking on-the-fly: the fraction of tokens masked (default: the data's metadata.json, "
        "0.15 where it says 0)",
    )
    data.add_argument("--sentence-task", choices=("sop", "nsp"), default="sop", help="label meaning of the records")
    data.add_argument("--shuffle-buffer", type=int, default=10000, help="records held for shuffling")
    data.add_argument("--model-dir", help="output and resume directory (required with --data)")

    train = parser.add_argument_group("training")
    train.add_argument("--steps", type=int, help="optimizer updates (default: the preset's, 125000 for the paper)")
    train.add_argument(
        "--batch-size", type=int, help="global batch size per micro-batch (default: the preset's, 4096 for the paper)"
    )
    train.add_argument(
        "--learning-rate", type=float, help="peak learning rate (default: the preset's, 0.00176 for the paper)"
    )
    train.add_argument(
        "--warmup-steps", type=int,
        help="linear warmup updates (default: the preset's, its share of --steps if fewer; 3125 for the paper)",
    )
    train.add_argument("--optimizer", choices=("lamb", "adamw"), default="lamb")
    train.add_argument("--weight-decay", type=float, default=0.01)
    train.add_argument("--clipnorm", type=float, default=1.0, help="global-norm gradient clipping (0: none)")
    train.add_argument("--grad-accum", type=int, default=1, help="micro-batches accumulated per update")
    train.add_argument("--seed", type=int, default=12345)

    runtime = parser.add_argument_group("runtime")
    runtime.add_argument("--strategy", choices=STRATEGY_NAMES, default="default")
    runtime.add_argument("--tpu", help="TPU name or grpc:// address for --strategy tpu (default: TPU_NAME or local)")
    runtime.add_argument("--precision", choices=PRECISIONS, default="float32")
    runtime.add_argument(
        "--jit-compile",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="XLA for the train step (default: on for GPU/TPU, off on CPU, where it measured slower)",
    )
    runtime.add_argument("--steps-per-execution", type=int, default=1, help="train steps per tf.function call")
    runtime.add_argument(
        "--deterministic-ops",
        action="store_true",
        help="tf.config.experimental.enable_op_determinism() (bit-exact resume on GPU)",
    )

    ckpt = parser.add_argument_group("checkpoints and logs")
    ckpt.add_argument(
        "--checkpoint-every", type=int,
        help="checkpoint interval in updates (default: the preset's, 5000 for the paper)",
    )
    ckpt.add_argument(
        "--keep-checkpoints", type=int, help="newest checkpoints kept (default: the preset's, 5 for the paper)"
    )
    ckpt.add_argument("--log-every", type=int, default=100, help="TensorBoard running metrics every N updates (0: off)")
    ckpt.add_argument("--verbose", choices=("auto", "0", "1", "2"), default="auto", help="Keras progress output")


@contextlib.contextmanager
def _logging_to_stderr():
    """The package's INFO lines on stderr, each once, for the duration of the command.

    They are not passed on to the root logger: a library may have given it a handler of its own
    (Apache Beam does on import), which printed every line a second time.
    """
    logger = logging.getLogger("albert_tf")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    saved = logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(saved[0])
        logger.propagate = saved[1]


def _print_summary(result) -> None:
    last = result.history[-1] if result.history else None
    if result.initial_step:
        print(f"resumed from {result.restored_from} (step {result.initial_step})")
    for skipped in result.skipped_checkpoints:
        print(f"skipped unreadable checkpoint {skipped}")
    if last is not None:
        metrics = ", ".join(
            f"{k} {last[k]:.4f}" for k in ("loss", "mlm_loss", "mlm_accuracy", "sop_loss", "sop_accuracy") if k in last
        )
        print(f"step {last['step']}: {metrics}")
    else:
        print(f"nothing to train: the run was already at step {result.final_step}")
    for name, path in result.artifacts.items():
        print(f"{name:>15s}: {path}")
    if result.checkpoint:
        print(f"{'checkpoint':>15s}: {result.checkpoint}")


def _print_flags(line: str) -> None:
    print(as_flags(line))


def run(args) -> int:
    from albert_tf.training.pretraining_runner import PretrainSettings, pretrain

    with _logging_to_stderr(), library_errors():
        result = pretrain(PretrainSettings.from_namespace(args), report=_print_flags)
        _print_summary(result)
    return 0
