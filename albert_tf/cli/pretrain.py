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
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import glob
import json
import logging
import os
import sys

NAME = "pretrain"
HELP = "Pretrain ALBERT (masked LM + sentence-order prediction) on pretraining TFRecords; resumable."

# With --data and no --config: the paper's model and run settings (`albert_tf.config.PRETRAINING_PRESETS`)
# where a GPU or TPU is found, else the CPU size, whose run settings fit a small machine's memory.
DEFAULT_CONFIG = "base-v2"
CPU_DEFAULT_CONFIG = "small"
# Run settings named as `PretrainingRunConfig` spells them, flags that differ here.
FLAG_ALIASES = {"model_config": "config", "gradient_accumulation_steps": "grad_accum"}


# As `albert_tf.training.strategies.STRATEGY_NAMES` / `PRECISIONS`, spelled out because importing
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
    from albert_tf.data.on_the_fly import masking_record
    from albert_tf.data.pretraining_instances import InstanceConfig
    from albert_tf.data.tfrecords import list_files
    from albert_tf.tokenization import train_sentencepiece
    from albert_tf.training.pretraining import PretrainingError, PretrainingRunConfig, TokenizerFile, run_pretraining

    settings = dict(SAMPLE_SETTINGS)
    model_dir = args.model_dir or settings["model_dir"]
    seq, predictions = settings["max_seq_length"], settings["max_predictions_per_seq"]
    if args.config:
        raise CommandError("the sample run (no --data) trains its own tiny model: --config needs --data")
    if (args.max_seq_length or seq) != seq or (args.max_predictions_per_seq or predictions) != predictions:
        raise CommandError("the sample run makes its own records: --max-seq-length/--max-predictions-per-seq need --data")
    if args.spm_model or args.vocab_file:
        raise CommandError("the sample run trains its own vocabulary: --spm-model/--vocab-file need --data")
    _check_masking_flags(args)
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
        model_config=AlbertConfig.preset("tiny", vocab_size=settings["vocab_size"], max_position_embeddings=seq),
        batch_size=args.batch_size or settings["batch_size"],
        max_seq_length=seq,
        max_predictions_per_seq=predictions,
        num_train_steps=steps,
        num_warmup_steps=args.warmup_steps if args.warmup_steps is not None else steps // 10,
        learning_rate=args.learning_rate if args.learning_rate is not None else settings["learning_rate"],
        optimizer=args.optimizer,
        precision=args.precision,
        jit_compile=args.jit_compile,
        strategy=args.strategy,
        checkpoint_every_n_steps=args.checkpoint_every or settings["checkpoint_every"],
        keep_checkpoints=args.keep_checkpoints or 3,
        seed=args.seed,
        log_every=args.log_every,
        verbose=2 if args.verbose == "auto" else int(args.verbose),
        tokenizer=TokenizerFile("sentencepiece", spm_prefix + ".model", lower_case=True),
    )
    files = list_files(os.path.join(records, "*.tfrecord"))
    masking = None
    if args.masking == "on-the-fly":
        from albert_tf.data.on_the_fly import MaskingConfig

        masking = MaskingConfig.from_tokenizer(
            spm_prefix + ".model", InstanceConfig(seq, predictions), masked_lm_prob=args.masked_lm_prob
        )
    print(f"[3/3] pretraining a tiny ALBERT (E=64, H=128, L=4, sharing all) for {steps} steps -> {model_dir}")
    config = dataclasses.replace(config, masking=masking_record(masking))
    if masking is not None:
        print(f"      {_describe_masking(masking)}")

    try:
        result = run_pretraining(config, _dataset_fn(files, config, masking, args.shuffle_buffer))
    except PretrainingError as e:
        raise CommandError(str(e)) from None
    _print_summary(result)
    return 0


def _record_lengths(path: str, record: bytes):
    """`(max_seq_length, max_predictions_per_seq)` of one serialized pretraining record.

    Fixed-length parsing of records that do not match the settings would otherwise fail inside
    the first train step, with a message about parsing rather than about the data.
    """
    import tensorflow as tf
    from google.protobuf.message import DecodeError

    from albert_tf.data.tfrecords import FEATURE_NAMES
    from albert_tf.training.pretraining import PretrainingError

    try:
        features = tf.train.Example.FromString(record).features.feature
    except DecodeError:
        raise PretrainingError(f"{path}: the records are not tf.train.Example protos") from None
    missing = [name for name in FEATURE_NAMES if name not in features and name != "token_boundary"]
    if missing:
        raise PretrainingError(f"{path}: the records lack feature(s) {', '.join(missing)}")
    return len(features["input_ids"].int64_list.value), len(features["masked_lm_positions"].int64_list.value)


_LENGTHS = (
    ("max_seq_length", "--max-seq-length", "input_ids"),
    ("max_predictions_per_seq", "--max-predictions-per-seq", "masked_lm_positions"),
)


def _check_flags_against_metadata(args, data) -> None:
    from albert_tf.cli import CommandError

    for name, flag, _ in _LENGTHS:
        stated, given = getattr(data, name), getattr(args, name)
        if stated is not None and given is not None and given != stated:
            raise CommandError(
                f"{flag} {given} contradicts {data.metadata_path}: the records have {name} {stated} "
                "(leave the flag out)"
            )


def _lengths(args, data, first):
    """The records' `(max_seq_length, max_predictions_per_seq)`: the metadata's, else the first
    record's; a flag that says otherwise is an error (`_check_flags_against_metadata` first)."""
    from albert_tf.cli import CommandError

    path, record = first
    found = _record_lengths(path, record)
    lengths = []
    for index, (name, flag, feature) in enumerate(_LENGTHS):
        stated, given = getattr(data, name), getattr(args, name)
        if stated is not None and found[index] != stated:
            raise CommandError(
                f"{path}: the records have {found[index]} {feature} per example, but {data.metadata_path} says {stated}"
            )
        expected = given if given is not None else found[index]
        if found[index] != expected:
            raise CommandError(
                f"{path}: the records have {found[index]} {feature} per example, but {flag} is {expected}"
            )
        lengths.append(expected)
    return tuple(lengths)


def _tokenizer(args, data):
    """`(TokenizerFile, vocab_size)` of the tokenizer the data was made with, from the flags or
    the metadata (None: unknown)."""
    import tensorflow as tf

    from albert_tf.cli import CommandError
    from albert_tf.tokenization.resolve import python_tokenizer
    from albert_tf.training.pretraining import TokenizerFile

    if args.spm_model and args.vocab_file:
        raise CommandError("pass --spm-model or --vocab-file, not both")
    stated = data.tokenizer or {}
    lower_case = args.lower_case if args.lower_case is not None else bool(stated.get("lower_case", True))
    if args.spm_model:
        kind, path, source = "sentencepiece", args.spm_model, "--spm-model"
    elif args.vocab_file:
        kind, path, source = "wordpiece", args.vocab_file, "--vocab-file"
    elif stated.get("spm_model") or stated.get("vocab_file"):
        kind = "sentencepiece" if stated.get("spm_model") else "wordpiece"
        path, source = stated.get("spm_model") or stated.get("vocab_file"), data.metadata_path
    else:
        return None
    if not tf.io.gfile.exists(path):
        where = "" if source.startswith("--") else f", named by {source},"
        raise CommandError(f"tokenizer file {path}{where} not found (pass --spm-model or --vocab-file)")
    try:
        loaded = python_tokenizer(kind, path)
    except (OSError, RuntimeError, ValueError) as e:
        raise CommandError(f"{path} is not a {kind} tokenizer: {e}") from None
    if data.vocab_size is not None and loaded.vocab_size != data.vocab_size:
        raise CommandError(
            f"{source} {path} has {loaded.vocab_size} tokens, but {data.metadata_path} says the records were made "
            f"with {data.vocab_size}: it is not the data's tokenizer"
        )
    return TokenizerFile(kind, path, lower_case), loaded.vocab_size


def _check_masking_flags(args) -> None:
    from albert_tf.cli import CommandError

    if args.masked_lm_prob is None:
        return
    if args.masking != "on-the-fly":
        raise CommandError("--masked-lm-prob applies to --masking on-the-fly (offline records carry their masks)")
    if not 0 < args.masked_lm_prob <= 1:
        raise CommandError(f"--masked-lm-prob must be in (0, 1], got {args.masked_lm_prob:g}")


def _metadata(data) -> dict:
    """The data's ``metadata.json`` ({} without one); `find_pretraining_data` has checked it is an object."""
    import tensorflow as tf

    if not data.metadata_path:
        return {}
    with tf.io.gfile.GFile(data.metadata_path, "r") as f:
        return json.load(f)


def _record_has_masks(record: bytes) -> bool:
    import tensorflow as tf

    weights = tf.train.Example.FromString(record).features.feature["masked_lm_weights"].float_list.value
    return any(w > 0 for w in weights)


def _check_offline_records_are_masked(args, data, metadata, first) -> None:
    """Offline masking of unmasked records (``--masked-lm-prob 0`` data) would train no masked LM."""
    from albert_tf.cli import CommandError

    if args.masking != "offline":
        return
    stated = (metadata.get("instance_config") or {}).get("masked_lm_prob")
    if stated == 0:
        raise CommandError(
            f"{data.metadata_path} says the records are unmasked (masked_lm_prob 0): pass --masking on-the-fly"
        )
    path, record = first
    if stated is None and not _record_has_masks(record):
        raise CommandError(f"{path}: the records have no masked positions (unmasked data?): pass --masking on-the-fly")


def _masking_config(args, data, metadata, lengths, tokenizer):
    """The `MaskingConfig` of ``--masking on-the-fly``: the metadata's settings, the tokenizer's ids
    (else the metadata's ``vocab`` entry)."""
    from albert_tf.cli import CommandError
    from albert_tf.data.on_the_fly import MaskingConfig

    instance = dict(metadata.get("instance_config") or {})
    instance.update(max_seq_length=lengths[0], max_predictions_per_seq=lengths[1])
    stated = metadata.get("vocab") if isinstance(metadata.get("vocab"), dict) else {}
    ids = ("cls_id", "sep_id", "mask_id")
    try:
        if tokenizer is not None:
            masking = MaskingConfig.from_tokenizer(tokenizer, instance, masked_lm_prob=args.masked_lm_prob)
        elif all(k in stated for k in ("vocab_size",) + ids):
            masking = MaskingConfig.from_instance_config(instance, stated, args.masked_lm_prob)
        else:
            raise CommandError(
                "--masking on-the-fly needs the data's vocabulary (the [CLS], [SEP] and [MASK] ids and its size): "
                "pass --spm-model or --vocab-file"
            )
    except (ValueError, TypeError) as e:
        raise CommandError(f"--masking on-the-fly: {e}") from None
    differing = [f"{k} {getattr(masking, k)}" for k in ids if k in stated and stated[k] != getattr(masking, k)]
    if tokenizer is not None and differing:
        raise CommandError(
            f"{tokenizer.path} has {', '.join(differing)}, but {data.metadata_path} says the records were made with "
            f"{', '.join(f'{k} {stated[k]}' for k in ids if k in stated)}: it is not the data's tokenizer"
        )
    return masking


def _describe_masking(masking) -> str:
    order = "shorter favored" if masking.favor_shorter_ngram else "longer favored"
    words = "whole words" if masking.do_whole_word_mask else "single pieces"
    return (
        f"masking on the fly: rate {masking.masked_lm_prob:g}, n-grams up to {masking.ngram} ({order}), {words}; "
        f"[MASK] id {masking.mask_id}, random ids below {masking.vocab_size}"
    )


def _dataset_fn(files, config, masking, shuffle_buffer: int):
    """`run_pretraining`'s ``dataset_fn``: the records' own masks, or fresh ones with `masking`."""

    def dataset_fn():
        if masking is None:
            from albert_tf.data.tfrecords import make_pretraining_dataset

            return make_pretraining_dataset(
                files,
                config.max_seq_length,
                config.max_predictions_per_seq,
                config.batch_size,
                is_training=True,
                seed=config.seed,
                shuffle_buffer_size=shuffle_buffer,
            )
        from albert_tf.data.on_the_fly import make_on_the_fly_dataset

        return make_on_the_fly_dataset(
            files, config.batch_size, masking, seed=config.seed, shuffle_buffer_size=shuffle_buffer
        )

    return dataset_fn


def _default_config(strategy: str) -> str:
    if strategy == "tpu":
        return DEFAULT_CONFIG
    import tensorflow as tf

    return DEFAULT_CONFIG if tf.config.list_physical_devices("GPU") else CPU_DEFAULT_CONFIG


def _model_config(args):
    from albert_tf.cli import CommandError
    from albert_tf.config import ConfigError, load_config

    try:
        return load_config(args.config or DEFAULT_CONFIG)
    except ConfigError as e:
        raise CommandError(str(e)) from None


def _run_config(args, albert_config, lengths, tokenizer, vocab_size):
    from albert_tf.cli import CommandError
    from albert_tf.config import ConfigError, pretraining_preset
    from albert_tf.training.pretraining import PretrainingError, PretrainingRunConfig

    preset = pretraining_preset(args.config or DEFAULT_CONFIG)
    if vocab_size is not None:
        if preset.vocab_from_data:
            albert_config = albert_config.replace(vocab_size=vocab_size)
        elif vocab_size > albert_config.vocab_size:
            raise CommandError(
                f"the data's vocabulary has {vocab_size} tokens, but the model's vocab_size is "
                f"{albert_config.vocab_size}"
            )

    def setting(flag, preset_value):
        value = getattr(args, flag)
        return preset_value if value is None else value

    steps = setting("steps", preset.num_train_steps)
    warmup = args.warmup_steps if args.warmup_steps is not None else preset.warmup_for(steps)
    try:
        config = PretrainingRunConfig(
            model_dir=args.model_dir,
            model_config=albert_config,
            batch_size=setting("batch_size", preset.batch_size),
            max_seq_length=lengths[0],
            max_predictions_per_seq=lengths[1],
            num_train_steps=steps,
            num_warmup_steps=warmup,
            learning_rate=setting("learning_rate", preset.learning_rate),
            optimizer=args.optimizer,
            weight_decay=args.weight_decay,
            clipnorm=args.clipnorm or None,
            precision=args.precision,
            jit_compile=args.jit_compile,
            steps_per_execution=args.steps_per_execution,
            gradient_accumulation_steps=args.grad_accum,
            strategy=args.strategy,
            tpu=args.tpu,
            checkpoint_every_n_steps=setting("checkpoint_every", preset.checkpoint_every_n_steps),
            keep_checkpoints=setting("keep_checkpoints", preset.keep_checkpoints),
            seed=args.seed,
            sentence_task=args.sentence_task,
            log_every=args.log_every,
            verbose=args.verbose if args.verbose == "auto" else int(args.verbose),
            deterministic_ops=args.deterministic_ops,
            tokenizer=tokenizer,
        )
        config.albert_config()  # the lengths against the model's positions, before anything runs
    except (PretrainingError, ConfigError) as e:
        raise CommandError(str(e)) from None
    return config


def _is_chief_process(strategy: str) -> bool:
    """Whether this process writes the model directory (`strategies.is_chief` before TensorFlow)."""
    if strategy != "multi_worker":
        return True
    try:
        tf_config = json.loads(os.environ.get("TF_CONFIG") or "{}")
    except json.JSONDecodeError:
        return False
    task, cluster = tf_config.get("task") or {}, tf_config.get("cluster") or {}
    if not task:
        return True
    return task.get("type") == "chief" or (
        task.get("type") == "worker" and int(task.get("index", 0)) == 0 and "chief" not in cluster
    )


@contextlib.contextmanager
def _no_trace_on_failure(model_dir: str, chief: bool):
    """Removes `model_dir` if this run created it and fails before it holds a checkpoint.

    A directory that existed is left alone (the run writes into it only after its checks), and
    one holding a checkpoint is kept: rerunning the command resumes from it.
    """
    import tensorflow as tf

    from albert_tf.training.pretraining import CHECKPOINT_NAME, CHECKPOINT_SUBDIR

    existed = tf.io.gfile.exists(model_dir)
    try:
        yield
    except BaseException:
        if chief and not existed and tf.io.gfile.exists(model_dir):
            if not tf.io.gfile.glob(os.path.join(model_dir, CHECKPOINT_SUBDIR, f"{CHECKPOINT_NAME}-*.index")):
                tf.io.gfile.rmtree(model_dir)
        raise


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

    with _logging_to_stderr():
        if args.data is None:
            return _default_sample_run(args)
        if not args.model_dir:
            raise CommandError("--model-dir is required with --data (checkpoints, logs and models go there)")
        return _run_on_data(args)


def _run_on_data(args) -> int:
    # Strategies must be created before other TensorFlow work; `run_pretraining` does that
    # first. Until then the data is only listed and read with the record reader, which does not
    # start TensorFlow's runtime.
    import tensorflow as tf

    from albert_tf.cli import CommandError
    from albert_tf.config import ConfigError
    from albert_tf.data.on_the_fly import masking_record
    from albert_tf.data.tfrecords import PretrainingDataError, find_pretraining_data, first_record, scan_record_files
    from albert_tf.training.pretraining import PretrainingError, run_pretraining
    from albert_tf.training.memory import TrainingMemoryError
    from albert_tf.training.strategies import StrategyError

    _check_masking_flags(args)
    if args.config is None:
        args.config = _default_config(args.strategy)
        print(f"no --config: {args.config}" + (
            " (no GPU or TPU found: the CPU size; --config base-v2 is the paper's model and recipe)"
            if args.config == CPU_DEFAULT_CONFIG else ""
        ))
    albert_config = _model_config(args)
    try:
        data = find_pretraining_data(args.data)
        _check_flags_against_metadata(args, data)
        if args.check_records:
            scans = scan_record_files(data.files, data.num_records)
            records = sum(s.num_records for s in scans)
            megabytes = sum(s.num_bytes for s in scans) / 1e6
            print(f"checked {records:,d} records in {len(scans)} file(s) ({megabytes:,.1f} MB)")
            first = next(((s.path, s.first_record) for s in scans if s.first_record is not None), None)
        else:
            first = first_record(data.files)
    except (FileNotFoundError, PretrainingDataError) as e:
        raise CommandError(str(e)) from None
    if first is None:
        raise CommandError(f"{args.data}: the files hold no records")
    try:
        lengths = _lengths(args, data, first)
    except PretrainingError as e:
        raise CommandError(str(e)) from None
    metadata = _metadata(data)
    _check_offline_records_are_masked(args, data, metadata, first)
    found = _tokenizer(args, data)
    tokenizer, vocab_size = found if found else (None, data.vocab_size)
    config = _run_config(args, albert_config, lengths, tokenizer, vocab_size)
    masking = _masking_config(args, data, metadata, lengths, tokenizer) if args.masking == "on-the-fly" else None
    config = dataclasses.replace(config, masking=masking_record(masking))
    files = data.files
    source = f" ({data.metadata_path})" if data.metadata_path else ""
    print(f"pretraining on {len(files)} file(s) matching {args.data!r}{source} -> {config.model_dir}")
    print(
        f"length {config.max_seq_length}, {config.max_predictions_per_seq} predictions, batch {config.batch_size}, "
        f"{config.num_train_steps:,d} steps ({config.num_warmup_steps:,d} warmup), "
        f"{config.optimizer} lr {config.learning_rate:g}"
    )
    if masking is not None:
        print(_describe_masking(masking))
    if tokenizer is None:
        print(
            "note: no tokenizer is known for this data, so the outputs carry none; pass --spm-model or "
            "--vocab-file and `albert-tf finetune --init` will need no tokenizer flag"
        )
    dataset_fn = _dataset_fn(files, config, masking, args.shuffle_buffer)

    try:
        with _no_trace_on_failure(config.model_dir, _is_chief_process(config.strategy)):
            result = run_pretraining(config, dataset_fn)
    except TrainingMemoryError as e:
        raise CommandError(e.for_cli(FLAG_ALIASES)) from None
    except (PretrainingError, StrategyError, ConfigError) as e:
        # A checkpoint of another model, another tokenizer in a resumed run, no TPU, ...
        raise CommandError(str(e)) from None
    except tf.errors.DataLossError as e:
        # The files changed after the check (or it was skipped): find the damaged one.
        try:
            scan_record_files(files)
        except PretrainingDataError as damaged:
            raise CommandError(str(damaged)) from None
        raise CommandError(f"reading the records failed: {e.message.strip().splitlines()[0]}") from None
    _print_summary(result)
    return 0
