"""StatisticsGen: TFDV statistics of every split, computed with Beam on the data step's runner.

Output layout (TFX's StatisticsGen layout, one folder per split)::

    Split-train/FeatureStats.pb      DatasetFeatureStatisticsList (binary; `.pbtxt` beside it as text)
    Split-eval/FeatureStats.pb
    corpus/Split-{train,eval}/FeatureStats.pb   the pretraining corpus's documents
    summary.json                     span, examples per split

The labelled splits are what the ExampleValidator checks; the corpus's statistics are recorded
and shown. Pieces are counted with the run's tokenizer (VocabGen's output), which also gives the
unknown-piece rate and, with `max_seq_length`, the share of examples longer than the model's
sequence (`too_long_fraction` of the text). The rows ExampleGen could not use (its summary's
`bad_rows`) are counted in the labelled splits' statistics as examples missing the feature they
lack (`data_validation.statistics.account_bad_rows`).
"""

from __future__ import annotations

import functools
import os
from typing import Any, Dict, Optional, Sequence

from albert_tf.pipeline_steps import example_gen, vocab_gen
from albert_tf.pipeline_steps.staging import read_summary, staged_directory, write_summary

CORPUS_SUBDIR = "corpus"


def stats_dir(statistics_dir: str, split: str, dataset: str = "examples") -> str:
    root = statistics_dir if dataset == "examples" else os.path.join(statistics_dir, CORPUS_SUBDIR)
    return example_gen.split_dir(root, split)


def run_statistics_gen(
    corpus_dir: str,
    examples_dir: str,
    vocab_dir: str,
    output_dir: str,
    *,
    beam_runner: str = "DirectRunner",
    beam_args: Optional[Sequence[str]] = None,
    max_seq_length: Optional[int] = None,
) -> Dict[str, Any]:
    """Writes every split's statistics into `output_dir`; returns the summary.

    `max_seq_length`: the Transform's sequence length, against which texts are measured (None: not measured).
    """
    from albert_tf.data_validation.statistics import StatsOptions, generate_statistics

    info = read_summary(examples_dir)
    with staged_directory(output_dir) as staging:
        splits, outputs = {}, {}
        for split in example_gen.SPLITS:
            splits[f"examples/{split}"] = os.path.join(example_gen.split_dir(examples_dir, split), example_gen.EXAMPLES_FILE)
            outputs[f"examples/{split}"] = stats_dir(staging, split)
            splits[f"corpus/{split}"] = os.path.join(example_gen.split_dir(corpus_dir, split), example_gen.CORPUS_FILE)
            outputs[f"corpus/{split}"] = stats_dir(staging, split, CORPUS_SUBDIR)
        bad_rows = info.get("bad_rows") or {}
        generate_statistics(
            splits, outputs, tokenizer_factory=functools.partial(vocab_gen.load_tokenizer, vocab_dir),
            options=StatsOptions(), runner=beam_runner, pipeline_args=list(beam_args or []),
            bad_rows={f"examples/{s}": rows for s, rows in bad_rows.items()},
            # Examples are measured against the sequence; corpus documents are split before it.
            split_options={f"examples/{s}": StatsOptions(max_seq_length=max_seq_length or None) for s in example_gen.SPLITS},
        )
        summary = {"span": info.get("span", 0), "version": info.get("version"), "examples": info["counts"],
                   "splits": list(example_gen.SPLITS),
                   "bad_rows": {s: rows.get("bad", 0) for s, rows in bad_rows.items()}}
        write_summary(staging, summary)
    return summary


def load_split_statistics(statistics_dir: str, split: str, dataset: str = "examples"):
    """The `DatasetFeatureStatistics` of one split of a StatisticsGen output."""
    from albert_tf.data_validation.statistics import load_statistics

    return load_statistics(stats_dir(statistics_dir, split, dataset)).datasets[0]
