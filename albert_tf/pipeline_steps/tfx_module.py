"""A TFX user module: `run_fn(fn_args)` trains and exports an ALBERT classifier for TFX's Trainer.

Use it as `Trainer(module_file=".../albert_tf/pipeline_steps/tfx_module.py", ...)` (or
`run_fn="albert_tf.pipeline_steps.tfx_module.run_fn"`) on ExampleGen output whose tf.Examples hold
the raw text and a string label. TFX calls `run_fn` with its `FnArgs`; the fields used are

* `train_files`, `eval_files`: TFRecord files or globs of tf.Examples (gzipped `*.gz`, as TFX's
  ExampleGen writes them, or plain);
* `serving_model_dir`: where the SavedModel goes (TF Serving's signatures, raw text in);
* `model_run_dir`: the fine-tuning run's own files (the `albert-tf finetune` layout, logs);
* `train_steps`: optimizer updates (None or 0: `custom_config["epochs"]` passes, counted in full
  batches as `albert-tf finetune` counts them);
* `base_model` (optional): the latest blessed model's serving directory, which TFX's Trainer
  passes when a `LatestBlessedModelStrategy` Resolver feeds its `base_model` input: the run then
  warm-starts from it (its encoder and classifier head; `albert_tf.pipeline_steps.warm_start`),
  and `custom_config["tokenizer"]` must be the vocabulary it was trained with;
* `custom_config`: a dict with
    - `tokenizer` (required): a SentencePiece `.model` or WordPiece `vocab.txt` path;
    - `lower_case` (default True), `max_seq_length` (128);
    - `albert_config`: a preset name, an `albert_config.json` path or a dict (default: the
      configuration stored with `init`, else "base-v2"), its vocab_size the tokenizer's;
    - `init`: any checkpoint `albert_tf.checkpoints.any_format.init_encoder` reads (default: none);
    - `labels` (default: those of the train files, sorted), `text_feature` ("text"),
      `text_b_feature` (None), `label_feature` ("label");
    - `strategy` ("default"), `precision` ("float32"), `model_name` ("albert"), `seed` (12345);
    - `epochs`, `batch_size`, `learning_rate`, `pooling` ("mean"/"cls"), `bias_correction`,
      `warmup_fraction`: default as `albert-tf finetune --task classification` resolves them
      (`albert_tf.training.finetuning_config.resolve_finetuning_config`: the recipe for the model's size,
      else 3 epochs, batch 32, 10 % warmup).
"""

from __future__ import annotations

import glob
import os
import shutil
import tempfile
from typing import Any, Dict, List, Sequence

from albert_tf import file_io
from albert_tf.pipeline_steps import example_gen, vocab_gen
from albert_tf.pipeline_steps.staging import write_summary

REQUIRED_CONFIG = ("tokenizer",)


def _expand(patterns) -> List[str]:
    patterns = [patterns] if isinstance(patterns, str) else list(patterns or [])
    files: List[str] = []
    for pattern in patterns:
        matched = sorted(glob.glob(pattern)) or (sorted(glob.glob(os.path.join(pattern, "*"))) if os.path.isdir(pattern) else [])
        if not matched:
            raise FileNotFoundError(f"no example files match {pattern!r}")
        files.extend(f for f in matched if os.path.isfile(f))
    return files


def read_tf_examples(patterns, text_feature: str, text_b_feature, label_feature: str) -> List[Dict[str, str]]:
    """Rows {"text", "text_b"?, "label"} from TFRecord files of tf.Examples (gzipped or not)."""
    import tensorflow as tf

    rows = []
    for path in _expand(patterns):
        compression = "GZIP" if path.endswith(".gz") else ""
        for index, record in enumerate(tf.data.TFRecordDataset(path, compression_type=compression).as_numpy_iterator()):
            features = tf.train.Example.FromString(record).features.feature

            def text(name, required=True):
                # Labels may be int64 features (TFX's usual schema); they become their decimal strings.
                feature = features[name] if name in features else None
                if feature is not None and feature.bytes_list.value:
                    return feature.bytes_list.value[0].decode("utf-8", errors="replace")
                if feature is not None and feature.int64_list.value:
                    return str(feature.int64_list.value[0])
                if required:
                    raise ValueError(f"{path}: record {index} has no feature {name!r} (bytes or int64)")
                return None

            rows.append({
                example_gen.TEXT_FEATURE: text(text_feature),
                example_gen.TEXT_B_FEATURE: text(text_b_feature) if text_b_feature else None,
                example_gen.LABEL_FEATURE: text(label_feature),
            })
    if not rows:
        raise ValueError(f"no examples in {patterns}")
    return rows


def _vocab_dir(directory: str, tokenizer: str, lower_case: bool) -> str:
    """A VocabGen-shaped directory for a given tokenizer file."""
    if not os.path.isfile(tokenizer):
        raise FileNotFoundError(f"custom_config['tokenizer'] not found: {tokenizer}")
    from albert_tf.tokenization.resolve import kind_of_file

    kind = kind_of_file(tokenizer)
    os.makedirs(directory, exist_ok=True)
    shutil.copyfile(tokenizer, os.path.join(directory, os.path.basename(tokenizer)))
    info = {"type": kind, "file": os.path.basename(tokenizer), "lower_case": bool(lower_case)}
    write_summary(directory, {**info, "vocab_size": _vocab_size(os.path.join(directory, info["file"]), kind, lower_case)})
    return directory


def _vocab_size(path: str, kind: str, lower_case: bool) -> int:
    from albert_tf.tasks.resources import load_tokenizer

    return int(load_tokenizer(kind, path, lower_case).vocab_size)


def _albert_config(value, init, vocab_size: int):
    from albert_tf.checkpoints.any_format import config_from_init
    from albert_tf.config import AlbertConfig, load_config

    if isinstance(value, dict):
        config = AlbertConfig(**{"vocab_size": vocab_size, **value})
    elif value:
        config = load_config(value)
    else:
        config = (config_from_init(init) if init else None) or load_config("base-v2")
    return config.replace(vocab_size=vocab_size) if config.vocab_size < vocab_size else config


def _base_model(path, vocab_dir: str):
    """The base model of a warm-started run (TFX's `fn_args.base_model`), checked against the
    run's vocabulary; None when there is none."""
    if not path:
        return None
    from albert_tf.weight_index import is_export
    from albert_tf.pipeline_steps.warm_start import base_tokenizer

    if not is_export(path):
        raise ValueError(f"base_model {path} is not an albert-tf export (no assets/export.json)")
    with open(base_tokenizer(path)[0], "rb") as a, open(vocab_gen.tokenizer_file(vocab_dir), "rb") as b:
        if a.read() != b.read():
            raise ValueError(f"base_model {path} was trained with another vocabulary than custom_config's tokenizer; "
                             "pass the base model's (its assets/ holds it)")
    return path


def _given(config: Dict[str, Any], key: str, kind):
    """`config[key]` as `kind`, None when it is not given (the resolver's default then)."""
    value = config.get(key)
    return None if value is None else kind(value)


def run_fn(fn_args) -> Dict[str, Any]:
    """Trains on `fn_args.train_files`, selects on `eval_files`, exports to `serving_model_dir`."""
    from albert_tf.data.features import examples_dataset
    from albert_tf.pipeline_steps import transform, trainer
    from albert_tf.pipeline_steps.settings import finetuning_config

    config: Dict[str, Any] = dict(getattr(fn_args, "custom_config", None) or {})
    missing = [k for k in REQUIRED_CONFIG if k not in config]
    if missing:
        raise ValueError(f"custom_config lacks {', '.join(missing)} (see albert_tf.pipeline_steps.tfx_module)")
    text_b = config.get("text_b_feature")
    read = lambda files: read_tf_examples(files, config.get("text_feature", "text"), text_b, config.get("label_feature", "label"))  # noqa: E731
    train_rows, eval_rows = read(fn_args.train_files), read(fn_args.eval_files)
    labels: Sequence[str] = config.get("labels") or sorted({r[example_gen.LABEL_FEATURE] for r in train_rows})
    run_dir = getattr(fn_args, "model_run_dir", None) or tempfile.mkdtemp(prefix="albert_tfx_")
    os.makedirs(run_dir, exist_ok=True)
    vocab_dir = _vocab_dir(os.path.join(run_dir, "vocab"), config["tokenizer"], config.get("lower_case", True))
    tokenizer = vocab_gen.load_tokenizer(vocab_dir)
    seq = int(config.get("max_seq_length", 128))
    albert_config = _albert_config(config.get("albert_config"), config.get("init"), tokenizer.vocab_size)
    train_features = transform.encode_finetuning_features(train_rows, tokenizer, labels, seq, "train_files")
    eval_features = transform.encode_finetuning_features(eval_rows, tokenizer, labels, seq, "eval_files")
    training_dir = os.path.join(run_dir, "training")
    if os.path.isdir(training_dir):
        shutil.rmtree(training_dir)  # a retried Trainer starts over in its own run directory
    base = _base_model(getattr(fn_args, "base_model", None), vocab_dir)
    finetuning = finetuning_config(
        albert_config, max_seq_length=seq, num_train_steps=getattr(fn_args, "train_steps", None) or None,
        num_epochs=_given(config, "epochs", float), batch_size=_given(config, "batch_size", int),
        learning_rate=_given(config, "learning_rate", float), pooling=config.get("pooling"),
        bias_correction=_given(config, "bias_correction", bool),
        warmup_proportion=_given(config, "warmup_fraction", float), strategy=config.get("strategy"),
        precision=config.get("precision"), seed=_given(config, "seed", int),
    )
    summary = trainer.train_classifier(
        examples_dataset(train_features),
        examples_dataset(eval_features),
        finetuning,
        num_train=len(train_rows),
        labels=list(labels),
        pair=bool(text_b),
        vocab_dir=vocab_dir,
        output_dir=training_dir,
        albert_config=albert_config,
        model_name=config.get("model_name", "albert"),
        init=config.get("init") or base,
        warm_start=base,
    )
    serving_model_dir = fn_args.serving_model_dir
    if os.path.isdir(serving_model_dir) and os.listdir(serving_model_dir):
        raise FileExistsError(f"serving_model_dir {serving_model_dir} is not empty")
    with file_io.staged_directory(serving_model_dir, create=False) as staging:
        shutil.copytree(os.path.join(training_dir, summary["candidate"]), staging)
    summary["serving_model_dir"] = serving_model_dir
    return summary
