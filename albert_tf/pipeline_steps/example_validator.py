"""ExampleValidator: each split's statistics against the schema and the previous span's, as TFDV `Anomalies`.

Output layout (TFX's)::

    Split-train/SchemaDiff.pb       Anomalies (binary; `.pbtxt` beside it as text)
    Split-eval/SchemaDiff.pb
    report.html                     the statistics of every split side by side, the anomalies, the drift
    summary.json                    span, previous span, one line per anomaly, the report's path

The statistics store keeps each validated span's statistics (`spans/<span>/Split-<split>/`), the
baseline of the next span's drift: the previous span is the highest one stored below this one.
A span is stored only once it passed, so an anomalous span never becomes a baseline.

An anomaly of error severity raises `DataValidationError` (after the output is written, so the
report can be read), with one line per anomaly: the pipeline stops before the Transform and
nothing is trained or pushed. Warnings are printed (`WARNING: ...`) and the run goes on.

ExampleGen's bad rows (rows it could not use, counted in the statistics as missing values) are
judged by `on_error`: "skip" (the default) lets the schema's presence decide (a feature missing
in more than `1 - presence.min_fraction` of the rows is an error) and warns of any bad row;
"raise" makes any bad row an error, one line per split and reason naming the count and the
first `file:line`. A share of texts longer than `max_seq_length` pieces (which the Transform
truncates) above `max_truncated_fraction` is a warning. The report shows both.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Tuple

from albert_tf import file_io
from albert_tf.pipeline_steps import example_gen
from albert_tf.pipeline_steps.staging import read_summary, staged_directory, write_summary

ANOMALIES_FILE = "SchemaDiff.pb"
ANOMALIES_TEXT_FILE = "SchemaDiff.pbtxt"
REPORT_FILE = "report.html"
SPANS_SUBDIR = "spans"


def _stored_spans(store: str) -> List[int]:
    root = os.path.join(store, SPANS_SUBDIR)
    if not store or not os.path.isdir(root):
        return []
    return sorted(int(n) for n in os.listdir(root) if n.isdigit())


def previous_span(store: str, span: int) -> Optional[int]:
    """The highest span below `span` whose statistics the store holds, or None."""
    earlier = [s for s in _stored_spans(store) if s < span]
    return earlier[-1] if earlier else None


def _store_span(store: str, span: int, statistics_dir: str) -> str:
    from albert_tf.pipeline_steps.statistics_gen import stats_dir

    final = os.path.join(store, SPANS_SUBDIR, str(span))
    with file_io.staged_directory(final, overwrite=True) as staging:
        for split in example_gen.SPLITS:
            file_io.copy_tree(stats_dir(statistics_dir, split), example_gen.split_dir(staging, split))
    return final


ON_ERROR = ("skip", "raise")


def run_example_validator(statistics_dir: str, schema_dir: str, output_dir: str, *, store: str = "",
                          on_error: str = "skip", max_truncated_fraction: float = 0.05) -> Dict[str, Any]:
    """Validates every split; writes the anomalies and the report; returns the summary.

    Args:
        on_error: "skip": bad rows pass within the schema's presence; "raise": any bad row is an error.
        max_truncated_fraction: Warn above this share of texts longer than `max_seq_length`.

    Raises:
        DataValidationError: an anomaly of error severity (one line each in the message).
    """
    if on_error not in ON_ERROR:
        raise ValueError(f"on_error must be 'skip' or 'raise', got {on_error!r}")
    from google.protobuf import text_format

    from albert_tf.data_validation.report import render_html
    from albert_tf.data_validation.schema import load_schema
    from albert_tf.data_validation.statistics import load_statistics
    from albert_tf.data_validation.validation import (
        ERROR,
        DataValidationError,
        anomaly_lines,
        bad_row_lines,
        severity_name,
        validate_statistics,
    )
    from albert_tf.pipeline_steps.statistics_gen import load_split_statistics

    info = read_summary(statistics_dir)
    span = int(info.get("span", 0))
    schema = load_schema(schema_dir)
    previous = previous_span(store, span)
    datasets, results, lines, row_lines = {}, {}, [], []
    for split in example_gen.SPLITS:
        dataset = load_split_statistics(statistics_dir, split)
        old = None
        if previous is not None:
            old = load_statistics(example_gen.split_dir(os.path.join(store, SPANS_SUBDIR, str(previous)), split)).datasets[0]
        results[split] = validate_statistics(dataset, schema, old, baseline=f"span {previous}",
                                             max_truncated_fraction=max_truncated_fraction)
        datasets[split] = dataset
        row_lines += [(severity, f"{split}: {line}") for severity, line in bad_row_lines(dataset, on_error)]
        lines += [(severity, f"{split}: {line}") for severity, line in anomaly_lines(results[split])]
    lines = sorted(row_lines, key=lambda sl: -sl[0]) + lines
    for split in example_gen.SPLITS:
        datasets[f"corpus {split}"] = load_split_statistics(statistics_dir, split, "corpus")
    errors = [line for severity, line in lines if severity == ERROR]
    warnings = [line for severity, line in lines if severity != ERROR]
    with staged_directory(output_dir) as staging:
        for split, anomalies in results.items():
            directory = example_gen.split_dir(staging, split)
            os.makedirs(directory)
            with open(os.path.join(directory, ANOMALIES_FILE), "wb") as f:
                f.write(anomalies.SerializeToString())
            with open(os.path.join(directory, ANOMALIES_TEXT_FILE), "w", encoding="utf-8") as f:
                f.write(text_format.MessageToString(anomalies))
        baseline = f"drift against span {previous}" if previous is not None else "no earlier span stored: no drift check"
        rows = [f"{severity_name(s)}: bad rows: {line}" for s, line in row_lines]
        with open(os.path.join(staging, REPORT_FILE), "w", encoding="utf-8") as f:
            f.write(render_html(f"Data validation, span {span}", datasets, results, notes=[baseline, *rows]))
        summary = {
            "span": span, "previous_span": previous, "passed": not errors,
            "anomalies": [{"severity": severity_name(s), "line": line} for s, line in lines],
            "on_error": on_error, "max_truncated_fraction": max_truncated_fraction,
            "report": os.path.join(os.path.abspath(output_dir), REPORT_FILE),
            "line": _line(span, previous, info.get("examples", {}), errors, warnings),
        }
        write_summary(staging, summary)
    for line in warnings:
        print(f"WARNING: data validation: {line}", flush=True)
    if errors:
        for line in errors:
            print(f"ERROR: data validation: {line}", flush=True)
        raise DataValidationError(
            f"span {span}: {len(errors)} anomal{'y' if len(errors) == 1 else 'ies'} of error severity "
            f"(report: {summary['report']}):\n" + "\n".join(errors))
    if store:
        _store_span(store, span, statistics_dir)
    return summary


def _line(span: int, previous: Optional[int], counts: Dict[str, int], errors, warnings) -> str:
    examples = ", ".join(f"{s} {counts[s]}" for s in example_gen.SPLITS if s in counts)
    against = f"drift vs span {previous}" if previous is not None else "first span, no drift baseline"
    verdict = "no anomalies" if not errors and not warnings else f"{len(errors)} errors, {len(warnings)} warnings"
    return f"span {span} ({examples} examples; schema checked, {against}): {verdict}"


def is_valid(validation_dir: str) -> Tuple[bool, str]:
    summary = read_summary(validation_dir)
    return bool(summary["passed"]), summary["line"]
