"""Transform: SOP + n-gram pretraining records (the Beam pipeline) and fine-tuning features.

Output layout::

    pretraining/documents/*.txt                  the corpus train split as the Beam pipeline reads it
    pretraining/records/part-*.tfrecord          original-format pretraining instances + metadata.json
    finetuning/Split-{train,eval}/features.tfrecord   input_ids, input_mask, segment_ids, labels
    summary.json                                 sequence length, labels, feature layout, counts

The pretraining records come from `albert_tf.data.beam_pipeline.make_pretraining_data` on any
Beam runner (DirectRunner's in-memory FnApiRunner locally; Dataflow, Flink or Spark through
`beam_runner` / `beam_args`). Beam guarantees the set of records, not their order (that follows
the runner's bundles, and changed from run to run on the local runner), while the Pretrainer's
batches and so its weights follow the file order: with `deterministic` the shards are rewritten
in an order that depends on the records alone (`canonical_record_order`, one more pass over them).

The fine-tuning features are the training preprocessing of `albert-tf finetune`
(`classification.encode_examples`), so the exported model, which tokenizes in its graph with the
same vocabulary and settings, sees what training saw.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from typing import Any, Dict, List, Optional, Sequence

from albert_tf.pipeline_steps import example_gen, vocab_gen
from albert_tf.pipeline_steps.staging import read_summary, staged_directory, write_summary

FEATURES_FILE = "features.tfrecord"
RECORDS_DIR = os.path.join("pretraining", "records")
# Records per canonical shard are held in memory while it is sorted: about this many bytes.
CANONICAL_SHARD_BYTES = 128 << 20


def _write_documents(corpus_dir: str, directory: str) -> int:
    rows = example_gen.read_split(corpus_dir, "train", example_gen.CORPUS_FILE)
    os.makedirs(directory)
    for index, row in enumerate(rows):
        with open(os.path.join(directory, f"doc-{index:06d}.txt"), "w", encoding="utf-8") as f:
            f.write(row[example_gen.TEXT_FEATURE] + "\n")
    return len(rows)


def _text_examples(rows, source: str):
    from albert_tf.data.tables import TextExample

    return [
        TextExample(r[example_gen.TEXT_FEATURE], r.get(example_gen.TEXT_B_FEATURE), r[example_gen.LABEL_FEATURE], source, i + 1)
        for i, r in enumerate(rows)
    ]


def encode_finetuning_features(rows, tokenizer, labels: Sequence[str], max_seq_length: int, source: str):
    """Feature arrays of labelled rows ({"text", "text_b"?, "label"}) for a classifier of `labels`."""
    from albert_tf.tasks.classification.data import LabelVocab
    from albert_tf.tasks.classification import encode_examples

    return encode_examples(_text_examples(rows, source), tokenizer, seq_length=max_seq_length, label_vocab=LabelVocab(list(labels)))


def _record_key(record: bytes) -> bytes:
    return hashlib.blake2b(record, digest_size=16).digest()


def canonical_record_order(records_dir: str, shard_bytes: int = CANONICAL_SHARD_BYTES) -> List[str]:
    """Rewrites the `part-*.tfrecord` shards of `records_dir` in an order set by the records alone.

    Every record goes to shard `hash(record) mod n` (n from the total size, about `shard_bytes`
    each), and each shard is sorted by that hash, so the same set of records gives the same files
    whatever order and sharding the Beam runner wrote; the hash order also mixes documents. One
    shard at a time is held in memory. `metadata.json` is updated with the new file names.

    Returns:
        The new shard paths, sorted.
    """
    import tensorflow as tf

    from albert_tf.data.pipeline_output import METADATA_FILE, SHARD_SUFFIX

    old = sorted(os.path.join(records_dir, n) for n in os.listdir(records_dir) if n.endswith(SHARD_SUFFIX))
    if not old:
        return []
    count = max(1, math.ceil(sum(os.path.getsize(f) for f in old) / shard_bytes))
    work = os.path.join(records_dir, ".canonical")
    os.makedirs(work)
    buckets = [os.path.join(work, f"bucket-{i:05d}") for i in range(count)]
    if count > 1:
        writers = [tf.io.TFRecordWriter(b) for b in buckets]
        for record in tf.data.TFRecordDataset(old).as_numpy_iterator():
            writers[int.from_bytes(_record_key(record)[:8], "little") % count].write(record)
        for writer in writers:
            writer.close()
        sources = [[b] for b in buckets]
    else:
        sources = [old]
    names = [f"part-{i:05d}-of-{count:05d}{SHARD_SUFFIX}" for i in range(count)]
    for files, name in zip(sources, names):
        records = sorted(tf.data.TFRecordDataset(files).as_numpy_iterator(), key=lambda r: (_record_key(r), r))
        with tf.io.TFRecordWriter(os.path.join(work, name)) as writer:
            for record in records:
                writer.write(record)
    for path in old + buckets:
        if os.path.exists(path):
            os.remove(path)
    for name in names:
        os.rename(os.path.join(work, name), os.path.join(records_dir, name))
    os.rmdir(work)
    metadata_path = os.path.join(records_dir, METADATA_FILE)
    if os.path.isfile(metadata_path):
        with open(metadata_path, encoding="utf-8") as f:
            metadata = json.load(f)
        metadata["files"] = names
        with open(metadata_path, "w", encoding="utf-8") as f:
            f.write(json.dumps(metadata, indent=2) + "\n")
    return [os.path.join(records_dir, n) for n in names]


def run_transform(
    corpus_dir: str,
    examples_dir: str,
    vocab_dir: str,
    output_dir: str,
    *,
    max_seq_length: int = 128,
    max_predictions_per_seq: int = 20,
    dupe_factor: int = 10,
    seed: int = 12345,
    beam_runner: str = "DirectRunner",
    beam_args: Optional[Sequence[str]] = None,
    deterministic: bool = True,
) -> Dict[str, Any]:
    """Writes the pretraining records and the fine-tuning features; returns the summary.

    `deterministic`: rewrite the records in their canonical order (`canonical_record_order`), so
    a re-run with the same inputs and seed gives the same files and the same pretrained model.
    """
    from albert_tf.data.beam_pipeline import PipelineConfig, TokenizerSpec, make_pretraining_data
    from albert_tf.data.pretraining_instances import InstanceConfig
    from albert_tf.data.features import write_features_tfrecord

    vocab = read_summary(vocab_dir)
    tokenizer_path = vocab_gen.tokenizer_file(vocab_dir)
    spec = (
        TokenizerSpec(spm_model=tokenizer_path, lower_case=vocab["lower_case"])
        if vocab["type"] == "sentencepiece"
        else TokenizerSpec(vocab_file=tokenizer_path, lower_case=vocab["lower_case"])
    )
    examples_info = read_summary(examples_dir)
    labels = examples_info["labels"]
    tokenizer = vocab_gen.load_tokenizer(vocab_dir)
    with staged_directory(output_dir) as staging:
        documents = os.path.join(staging, "pretraining", "documents")
        num_documents = _write_documents(corpus_dir, documents)
        run = make_pretraining_data(
            os.path.join(documents, "*.txt"),
            os.path.join(staging, RECORDS_DIR),
            PipelineConfig(
                instance=InstanceConfig(max_seq_length=max_seq_length, max_predictions_per_seq=max_predictions_per_seq),
                tokenizer=spec,
                dupe_factor=dupe_factor,
                seed=seed,
                input_format="paragraphs",
            ),
            runner=beam_runner,
            pipeline_args=list(beam_args or []),
        )
        files = canonical_record_order(os.path.join(staging, RECORDS_DIR)) if deterministic else run.files
        layout, counts = None, {}
        for split in example_gen.SPLITS:
            rows = example_gen.read_split(examples_dir, split)
            source = f"{examples_info['sources'].get(split, split)}"
            features = encode_finetuning_features(rows, tokenizer, labels, max_seq_length, source)
            directory = example_gen.split_dir(os.path.join(staging, "finetuning"), split)
            os.makedirs(directory)
            layout = write_features_tfrecord(features, os.path.join(directory, FEATURES_FILE))
            counts[split] = int(len(features["labels"]))
        summary = {
            "max_seq_length": max_seq_length,
            "max_predictions_per_seq": max_predictions_per_seq,
            "pretraining": {"documents": num_documents, "files": len(files), "counters": run.counters,
                            "canonical_order": deterministic},
            "finetuning": {"counts": counts, "labels": labels, "layout": layout, "pair": examples_info.get("pair", False)},
        }
        write_summary(staging, summary)
    return summary


def pretraining_files(transform_dir: str):
    import glob

    return sorted(glob.glob(os.path.join(transform_dir, RECORDS_DIR, "*.tfrecord")))


def finetuning_dataset(transform_dir: str, split: str):
    """The unbatched dataset of fine-tuning features of `split` ("train" or "eval")."""
    from albert_tf.data.features import features_tfrecord_dataset

    info = read_summary(transform_dir)["finetuning"]
    path = os.path.join(example_gen.split_dir(os.path.join(transform_dir, "finetuning"), split), FEATURES_FILE)
    return features_tfrecord_dataset(path, info["layout"], count=info["counts"][split])
