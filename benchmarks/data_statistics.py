"""Benchmark: the StatisticsGen computation against the pretraining-data step, on the same input.

Input: the full shared State of the Union corpus (``../shared/data/en/sotu``, a document per file)
and every Rotten Tomatoes snippet (``../shared/data/en/rotten_tomatoes/{train,dev,test}.tsv``),
with a 4k-piece SentencePiece model trained on the corpus (`bench_common.train_sample_spm`).

* ``statistics``: `albert_tf.data_validation.statistics.generate_statistics` over two TFRecord
  splits of tf.Examples (the corpus's documents, the snippets with their labels), on the
  in-memory FnApiRunner, as the pipeline's StatisticsGen runs it (tokenizer pieces counted);
* ``pretraining data``: `albert_tf.data.beam_pipeline.make_pretraining_data` on the same texts
  (the documents, and the snippets as one more document file), on the same runner, with the
  cheapest settings (``dupe_factor=1``, 128 tokens), as the pipeline's Transform runs it.

Each is timed end to end (reading to files written; imports and the tokenizer's training
excluded), `--rounds` times alternating, and the table gives every round. Run as
``python benchmarks/data_statistics.py`` (about a minute on 2 cores).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_common  # noqa: E402

DATA = bench_common.SOTU.parents[1]


def _inputs(work: Path, sotu: Path, rt: Path):
    """The TFRecord splits for the statistics and the text files for the pretraining step."""
    from albert_tf.data.tables import read_table
    from albert_tf.data.tfrecords import frame_record
    from albert_tf.data_validation.records import serialize_bytes_example

    documents = sorted(str(p) for p in sotu.glob("*.txt"))
    texts = work / "texts"
    texts.mkdir()
    corpus_records, snippets = [], []
    for path in documents:
        text = Path(path).read_text(encoding="utf-8")
        corpus_records.append(serialize_bytes_example({"text": [text.encode()], "source": [Path(path).name.encode()]}))
        (texts / Path(path).name).write_text(text, encoding="utf-8")
    texts_rt = []
    for name in ("train", "dev", "test"):
        # The project's table reader: the files have quoted snippets spanning lines.
        for example in read_table(str(rt / f"{name}.tsv"), text_column="text", text_b_column=None, label_column="label"):
            snippets.append(serialize_bytes_example({"text": [example.text_a.encode()], "label": [example.label.encode()]}))
            texts_rt.append(" ".join(example.text_a.split()))
    # The snippets, one per paragraph line, as one more document for the pretraining reader.
    (texts / "rotten_tomatoes.txt").write_text("\n".join(texts_rt) + "\n", encoding="utf-8")
    splits = {}
    for name, records in (("corpus", corpus_records), ("rotten_tomatoes", snippets)):
        path = work / f"{name}.tfrecord"
        path.write_bytes(b"".join(frame_record(r) for r in records))
        splits[name] = str(path)
    characters = sum(len(Path(p).read_text(encoding="utf-8")) for p in texts.glob("*.txt"))
    return splits, str(texts / "*.txt"), len(corpus_records), len(snippets), characters


def _statistics(splits, spm: str, out: Path) -> float:
    from albert_tf.data_validation.statistics import generate_statistics
    from albert_tf.tokenization import SentencePieceTokenizer

    start = time.perf_counter()
    generate_statistics(splits, {name: str(out / name) for name in splits},
                        tokenizer_factory=functools.partial(SentencePieceTokenizer, spm, lower_case=True))
    return time.perf_counter() - start


def _pretraining(pattern: str, spm: str, out: Path) -> float:
    from albert_tf.data.beam_pipeline import PipelineConfig, TokenizerSpec, make_pretraining_data
    from albert_tf.data.pretraining_instances import InstanceConfig

    start = time.perf_counter()
    make_pretraining_data(pattern, str(out), PipelineConfig(
        instance=InstanceConfig(max_seq_length=128, max_predictions_per_seq=20),
        tokenizer=TokenizerSpec(spm_model=spm, lower_case=True), dupe_factor=1, seed=12345,
        input_format="paragraphs"), runner="DirectRunner")
    return time.perf_counter() - start


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--data", type=Path, default=DATA, help="the shared data folder (default ../shared/data)")
    args = parser.parse_args(argv)
    sotu, rt = args.data / "en" / "sotu", args.data / "en" / "rotten_tomatoes"
    if not sotu.is_dir() or not rt.is_dir():
        print(f"needs {sotu} and {rt}")
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        splits, pattern, documents, snippets, characters = _inputs(work, sotu, rt)
        spm = bench_common.train_sample_spm(work, bench_common.sentence_files(work, sorted(sotu.glob("*.txt"))))
        rows = {"statistics": [], "pretraining data": []}
        for round_ in range(args.rounds):
            rows["statistics"].append(_statistics(splits, spm, work / f"stats-{round_}"))
            rows["pretraining data"].append(_pretraining(pattern, spm, work / f"records-{round_}"))
    print(f"input: {documents} SOTU documents + {snippets} Rotten Tomatoes snippets, {characters / 1e6:.1f} M characters; "
          f"load average {os.getloadavg()[0]:.2f}")
    print("| job | seconds per round | best | M characters/s (best) |")
    print("|---|---|---|---|")
    for job, times in rows.items():
        print(f"| {job} | {', '.join(f'{t:.1f}' for t in times)} | {min(times):.1f} | {characters / 1e6 / min(times):.2f} |")
    ratio = min(rows["statistics"]) / min(rows["pretraining data"])
    print(f"statistics / pretraining data: {ratio:.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "characters": characters, "ratio": ratio}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
