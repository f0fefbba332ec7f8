"""`albert-tf pretrain`: ALBERT pretraining (n-gram MLM + SOP) with `run_pretraining`.

Trains on original-format pretraining TFRecords (from `albert-tf make-pretraining-data` or the
original `create_pretraining_data.py`) under any `tf.distribute` strategy, checkpointing every
``--checkpoint-every`` steps; rerunning the same command after a crash resumes exactly where the
newest readable checkpoint left off. For example::

    albert-tf pretrain --config base-v2 --data 'gs://bucket/data/*.tfrecord' --strategy tpu \\
        --steps 125000 --batch-size 4096 --model-dir gs://bucket/albert_base
    albert-tf pretrain --config my_albert_config.json --data 'data/*.tfrecord' --strategy mirrored \\
        --steps 10000 --batch-size 256 --max-seq-length 128 --precision mixed_bfloat16 --model-dir out/

Outputs in ``--model-dir``: ``checkpoints/`` (resume state), ``logs/`` (TensorBoard),
``metrics.jsonl``, ``pretrainer.keras``, ``encoder.keras`` and ``tf1/model.ckpt`` with
``tf1/albert_config.json`` (the original checkpoint format).
"""

from __future__ import annotations

import argparse
import glob
import logging
import os
import sys

NAME = "pretrain"
HELP = "Pretrain ALBERT (masked LM + sentence-order prediction) on pretraining TFRecords; resumable."

# The original recipe (run_pretraining.py flags of the released models), used with --data.
PAPER_DEFAULTS = dict(
    config="base-v2",
    batch_size=4096,
    max_seq_length=512,
    max_predictions_per_seq=20,
    steps=125000,
    warmup_steps=3125,
    checkpoint_every=5000,
    keep_checkpoints=5,
    model_dir=None,
)
PAPER_LEARNING_RATE = 0.00176


# As `albert_tf.training.strategies.STRATEGY_NAMES` / `PRECISIONS`, spelled out because importing
# `albert_tf.training` imports TensorFlow, which `albert-tf --help` must not wait for.
STRATEGY_NAMES = ("default", "one_device", "mirrored", "multi_worker", "tpu")
PRECISIONS = ("float32", "mixed_bfloat16")


def add_arguments(parser):
    data = parser.add_argument_group("data and model")
    data.add_argument(
        "--data",
        help="pretraining TFRecord files: a glob, comma-separated globs (local or gs://). "
        "Without it, the command runs its built-in sample job",
    )
    data.add_argument("--config", help="preset name (e.g. base-v2) or albert_config.json (default: base-v2)")
    data.add_argument("--max-seq-length", type=int, help="sequence length of the records (default 512)")
    data.add_argument(
        "--max-predictions-per-seq", type=int, help="masked positions per record (default 20)"
    )
    data.add_argument("--sentence-task", choices=("sop", "nsp"), default="sop", help="label meaning of the records")
    data.add_argument("--shuffle-buffer", type=int, default=10000, help="records held for shuffling")
    data.add_argument("--model-dir", help="output and resume directory (required with --data)")

    train = parser.add_argument_group("training")
    train.add_argument("--steps", type=int, help="optimizer updates (default 125000)")
    train.add_argument("--batch-size", type=int, help="global batch size per micro-batch (default 4096)")
    train.add_argument("--learning-rate", type=float, default=PAPER_LEARNING_RATE, help="peak learning rate")
    train.add_argument(
        "--warmup-steps", type=int, help="linear warmup updates (default 3125, or 2.5%% of --steps if fewer)"
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
    ckpt.add_argument("--checkpoint-every", type=int, help="checkpoint interval in updates (default 5000)")
    ckpt.add_argument("--keep-checkpoints", type=int, help="newest checkpoints kept (default 5)")
    ckpt.add_argument("--log-every", type=int, default=100, help="TensorBoard running metrics every N updates (0: off)")
    ckpt.add_argument("--verbose", choices=("auto", "0", "1", "2"), default="auto", help="Keras progress output")


def _setting(args, name):
    value = getattr(args, name)
    return PAPER_DEFAULTS[name] if value is None else value


def _configure_logging():
    logger = logging.getLogger("albert_tf")
    if not any(isinstance(h, logging.StreamHandler) for h in logger.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        logger.addHandler(handler)
    logger.setLevel(logging.INFO)


SAMPLE_CORPUS = os.path.join(os.path.dirname(os.path.dirname(__file__)), "resources", "sample", "sotu")
SAMPLE_SETTINGS = dict(
    model_dir="albert-tf-sample",
    vocab_size=3000,
    max_seq_length=128,
    max_predictions_per_seq=20,
    dupe_factor=2,
    steps=300,
    batch_size=32,
    learning_rate=0.002,
    checkpoint_every=100,
)


def _default_sample_run(args) -> int:
    """The job `albert-tf pretrain` runs without `--data`: the whole chain on the bundled sample.

    SentencePiece vocabulary (the original recipe) on 12 State of the Union addresses, SOP + n-gram
    instances through the Beam pipeline, then a tiny ALBERT pretrained with LAMB for a few minutes
    on CPU. Every step reuses its output when it is already complete, and training resumes from the
    newest checkpoint, so re-running continues (or just reports) instead of starting over.
    `--model-dir`, `--steps`, `--batch-size` and the other training flags apply as usual.
    """
    from albert_tf.cli import CommandError
    from albert_tf.config import AlbertConfig
    from albert_tf.data.beam_pipeline import PipelineConfig, TokenizerSpec, make_pretraining_data, read_metadata
    from albert_tf.data.pretraining_instances import InstanceConfig
    from albert_tf.data.tfrecords import list_files, make_pretraining_dataset
    from albert_tf.tokenization import train_sentencepiece
    from albert_tf.training.pretraining import PretrainingError, PretrainingRunConfig, run_pretraining

    settings = dict(SAMPLE_SETTINGS)
    model_dir = args.model_dir or settings["model_dir"]
    seq, predictions = settings["max_seq_length"], settings["max_predictions_per_seq"]
    if args.config:
        raise CommandError("the sample run (no --data) trains its own tiny model: --config needs --data")
    if (args.max_seq_length or seq) != seq or (args.max_predictions_per_seq or predictions) != predictions:
        raise CommandError("the sample run makes its own records: --max-seq-length/--max-predictions-per-seq need --data")
    _configure_logging()
    inputs = os.path.join(SAMPLE_CORPUS, "*.txt")
    work = os.path.join(model_dir, "sample_data")
    os.makedirs(work, exist_ok=True)

    spm_prefix = os.path.join(work, "spm")
    if not os.path.exists(spm_prefix + ".model"):
        print(f"[1/3] SentencePiece vocabulary ({settings['vocab_size']} pieces) on {SAMPLE_CORPUS}")
        train_sentencepiece(sorted(glob.glob(inputs)), spm_prefix, settings["vocab_size"], seed=args.seed)
    else:
        print(f"[1/3] vocabulary: reusing {spm_prefix}.model")

    records = os.path.join(work, "records")
    try:
        read_metadata(records)
        print(f"[2/3] pretraining records: reusing {records}")
    except Exception:  # absent or incomplete: (re)make them; the pipeline only moves complete output in
        print(f"[2/3] SOP + n-gram instances (Beam DirectRunner, dupe factor {settings['dupe_factor']}) -> {records}")
        summary = make_pretraining_data(
            inputs,
            records,
            PipelineConfig(
                instance=InstanceConfig(max_seq_length=seq, max_predictions_per_seq=predictions),
                tokenizer=TokenizerSpec(spm_model=spm_prefix + ".model"),
                dupe_factor=settings["dupe_factor"],
                seed=args.seed,
                input_format="paragraphs",
                num_shards=2,
            ),
            overwrite=True,
        )
        print(f"      {summary}")

    steps = args.steps or settings["steps"]
    config = PretrainingRunConfig(
        model_dir=model_dir,
        model_config=AlbertConfig(
            vocab_size=settings["vocab_size"],
            embedding_size=64,
            hidden_size=128,
            num_hidden_layers=4,
            num_attention_heads=2,
            intermediate_size=512,
            max_position_embeddings=seq,
        ),
        batch_size=args.batch_size or settings["batch_size"],
        max_seq_length=seq,
        max_predictions_per_seq=predictions,
        num_train_steps=steps,
        num_warmup_steps=args.warmup_steps if args.warmup_steps is not None else steps // 10,
        learning_rate=args.learning_rate if args.learning_rate != PAPER_LEARNING_RATE else settings["learning_rate"],
        optimizer=args.optimizer,
        precision=args.precision,
        jit_compile=args.jit_compile,
        strategy=args.strategy,
        checkpoint_every_n_steps=args.checkpoint_every or settings["checkpoint_every"],
        keep_checkpoints=args.keep_checkpoints or 3,
        seed=args.seed,
        log_every=args.log_every,
        verbose=2 if args.verbose == "auto" else int(args.verbose),
    )
    files = list_files(os.path.join(records, "*.tfrecord"))
    print(f"[3/3] pretraining a tiny ALBERT (E=64, H=128, L=4, sharing all) for {steps} steps -> {model_dir}")

    def dataset_fn():
        return make_pretraining_dataset(
            files, seq, predictions, config.batch_size, is_training=True, seed=config.seed
        )

    try:
        result = run_pretraining(config, dataset_fn)
    except PretrainingError as e:
        raise CommandError(str(e)) from None
    _print_summary(result)
    return 0


def _run_config(args):
    from albert_tf.cli import CommandError
    from albert_tf.config import ConfigError, load_config
    from albert_tf.training.pretraining import PretrainingError, PretrainingRunConfig

    if not _setting(args, "model_dir"):
        raise CommandError("--model-dir is required with --data (checkpoints, logs and models go there)")
    try:
        albert_config = load_config(_setting(args, "config"))
    except ConfigError as e:
        raise CommandError(str(e)) from None
    steps = _setting(args, "steps")
    warmup = args.warmup_steps
    if warmup is None:
        # The original's 3125 of 125000 steps is 2.5%; shorter runs keep that proportion.
        warmup = min(PAPER_DEFAULTS["warmup_steps"], int(steps * 0.025)) if isinstance(steps, int) else 0
    try:
        return PretrainingRunConfig(
            model_dir=args.model_dir,
            model_config=albert_config,
            batch_size=_setting(args, "batch_size"),
            max_seq_length=_setting(args, "max_seq_length"),
            max_predictions_per_seq=_setting(args, "max_predictions_per_seq"),
            num_train_steps=steps,
            num_warmup_steps=warmup,
            learning_rate=args.learning_rate,
            optimizer=args.optimizer,
            weight_decay=args.weight_decay,
            clipnorm=args.clipnorm or None,
            precision=args.precision,
            jit_compile=args.jit_compile,
            steps_per_execution=args.steps_per_execution,
            gradient_accumulation_steps=args.grad_accum,
            strategy=args.strategy,
            tpu=args.tpu,
            checkpoint_every_n_steps=_setting(args, "checkpoint_every"),
            keep_checkpoints=_setting(args, "keep_checkpoints"),
            seed=args.seed,
            sentence_task=args.sentence_task,
            log_every=args.log_every,
            verbose=args.verbose if args.verbose == "auto" else int(args.verbose),
            deterministic_ops=args.deterministic_ops,
        )
    except (PretrainingError, ConfigError) as e:
        raise CommandError(str(e)) from None


def _check_records(path: str, max_seq_length: int, max_predictions_per_seq: int) -> None:
    """Reads the first record of `path` and checks it against the length flags.

    Fixed-length parsing would otherwise fail inside the first train step with a message about
    parsing, not about the flags.
    """
    import tensorflow as tf
    from google.protobuf.message import DecodeError

    from albert_tf.data.tfrecords import FEATURE_NAMES
    from albert_tf.training.pretraining import PretrainingError

    try:
        raw = next(iter(tf.data.TFRecordDataset(path).take(1)), None)
    except tf.errors.OpError as e:
        raise PretrainingError(f"{path} is not a readable TFRecord file: {e.message}") from None
    if raw is None:
        raise PretrainingError(f"{path} holds no records")
    try:
        features = tf.train.Example.FromString(raw.numpy()).features.feature
    except DecodeError:
        raise PretrainingError(f"{path}: the records are not tf.train.Example protos") from None
    missing = [name for name in FEATURE_NAMES if name not in features and name != "token_boundary"]
    if missing:
        raise PretrainingError(f"{path}: the records lack feature(s) {', '.join(missing)}")
    for name, flag, expected in (
        ("input_ids", "--max-seq-length", max_seq_length),
        ("masked_lm_positions", "--max-predictions-per-seq", max_predictions_per_seq),
    ):
        length = len(features[name].int64_list.value)
        if length != expected:
            raise PretrainingError(f"{path}: the records have {length} {name} per example, but {flag} is {expected}")


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


def run(args) -> int:
    from albert_tf.cli import CommandError

    if args.data is None:
        return _default_sample_run(args)
    config = _run_config(args)
    _configure_logging()

    # Strategies must be created before other TensorFlow work; `run_pretraining` does that
    # first, and the data files are only listed (not read) before it.
    from albert_tf.config import ConfigError
    from albert_tf.data.tfrecords import list_files, make_pretraining_dataset
    from albert_tf.training.pretraining import PretrainingError, run_pretraining
    from albert_tf.training.strategies import StrategyError

    try:
        files = list_files(args.data)
    except FileNotFoundError as e:
        raise CommandError(str(e)) from None
    print(f"pretraining on {len(files)} file(s) matching {args.data!r} -> {config.model_dir}")
    checked = []

    def dataset_fn():
        # Here rather than before training: reading a record starts TensorFlow's runtime, which
        # must come after the strategy (multi-worker) is created.
        if not checked:
            _check_records(files[0], config.max_seq_length, config.max_predictions_per_seq)
            checked.append(files[0])
        return make_pretraining_dataset(
            files,
            config.max_seq_length,
            config.max_predictions_per_seq,
            config.batch_size,
            is_training=True,
            seed=config.seed,
            shuffle_buffer_size=args.shuffle_buffer,
        )

    try:
        result = run_pretraining(config, dataset_fn)
    except (PretrainingError, StrategyError, ConfigError) as e:
        # Records that do not match the flags, a checkpoint of another model, no TPU, ...
        raise CommandError(str(e)) from None
    _print_summary(result)
    return 0
