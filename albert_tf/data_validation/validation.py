"""ExampleValidator's checks: a split's statistics against the schema and the previous span's statistics.

The result is a TFDV `Anomalies` proto (keyed by feature, each with its reasons and severity, the
schema as `baseline`, every drift measured in `drift_skew_info`). Checks, with TFDV's anomaly types:

=====================================  =========  ============================================
SCHEMA_MISSING_COLUMN                  error      a schema feature the data lack
SCHEMA_NEW_COLUMN                      error      a feature the schema does not know
FEATURE_TYPE_LOW_FRACTION_PRESENT      error      too many examples without the feature (for a
                                                  text: without it or with it empty)
ENUM_TYPE_UNEXPECTED_STRING_VALUES     error      values outside the domain (beyond
                                                  `distribution_constraints.min_domain_mass`)
FEATURE_COVERAGE_TOO_LOW               warning    more unknown pieces than the schema allows
INT_TYPE_SMALL_INT / INT_TYPE_BIG_INT  warning    lengths outside the schema's bounds
COMPARATOR_L_INFTY_HIGH                error      a categorical distribution drifted (L-infinity)
COMPARATOR_JENSEN_SHANNON_DIVERGENCE_HIGH  error  a numeric distribution drifted (JS divergence)
NO_DATA_IN_SPAN                        error      the split is empty
UNKNOWN_TYPE ("Texts longer than       warning    more texts longer than `max_seq_length`
max_seq_length")                                  pieces than `max_truncated_fraction`
=====================================  =========  ============================================

The presence of a feature counts ExampleGen's bad rows (rows it could not use: missing in the
statistics), and its message names them. `bad_row_lines` judges the bad rows by the pipeline's
`on_error`: with "raise", any bad row is an error (one line per split and reason, with the count
and the first `file:line`); with "skip", a warning, the schema's presence deciding.

`anomaly_lines` gives one line per anomaly: the feature, what was expected and what was found.
"""

from __future__ import annotations

from typing import List, Optional, Tuple

from tensorflow_metadata.proto.v0 import anomalies_pb2, schema_pb2, statistics_pb2

from albert_tf.data_validation import drift
from albert_tf.data_validation.statistics import (
    NL_STATISTICS,
    PIECE_LENGTH,
    bad_row_counts,
    custom_stat,
    derived_name,
    feature_stats,
)

ERROR = anomalies_pb2.AnomalyInfo.ERROR
WARNING = anomalies_pb2.AnomalyInfo.WARNING
_T = anomalies_pb2.AnomalyInfo


class DataValidationError(ValueError):
    """Error-severity anomalies: the data must not reach the Transform (the message has one line each)."""


def _percent(x: float) -> str:
    return f"{100 * x:.1f} %"


def _add(anomalies, name: str, kind: int, severity: int, short: str, description: str) -> None:
    info = anomalies.anomaly_info[name]
    info.path.step[:] = [name]
    info.reason.add(type=kind, short_description=short, description=description)
    info.severity = max(info.severity, severity)
    info.short_description = short if len(info.reason) == 1 else "Multiple errors"
    info.description = " ".join(r.description for r in info.reason)


def _domain(schema, feature) -> Optional[List[str]]:
    if feature.HasField("string_domain"):
        return list(feature.string_domain.value)
    if feature.domain:
        for domain in schema.string_domain:
            if domain.name == feature.domain:
                return list(domain.value)
    return None


def _source_present(dataset, feature) -> bool:
    if not feature.HasField("validation_derived_source"):
        return True
    return all(feature_stats(dataset, p.step[0]) is not None for p in feature.validation_derived_source.source_path)


def check_schema(anomalies, dataset, schema, name: str, feature, stats) -> None:
    """The schema's checks of one feature (presence, domain, coverage, bounds)."""
    total = dataset.num_examples
    if stats.type == statistics_pb2.FeatureNameStatistics.INT:
        num = stats.num_stats
        if feature.HasField("int_domain") and num.common_stats.num_non_missing:
            if feature.int_domain.HasField("min") and num.min < feature.int_domain.min:
                _add(anomalies, name, _T.INT_TYPE_SMALL_INT, WARNING, "Out-of-range values",
                     f"{name}: expected at least {feature.int_domain.min}, found {num.min:g}.")
            if feature.int_domain.HasField("max") and num.max > feature.int_domain.max:
                _add(anomalies, name, _T.INT_TYPE_BIG_INT, WARNING, "Out-of-range values",
                     f"{name}: expected at most {feature.int_domain.max}, found {num.max:g}.")
        return
    common = stats.string_stats.common_stats
    empty = custom_stat(stats, "empty_count")
    present = common.num_non_missing - (int(empty.num) if empty is not None else 0)
    if feature.HasField("presence") and total:
        fraction = present / total
        if fraction < feature.presence.min_fraction:
            what = "missing or empty" if empty is not None else "missing"
            _add(anomalies, name, _T.FEATURE_TYPE_LOW_FRACTION_PRESENT, ERROR, "Column dropped",
                 f"{name}: expected at most {_percent(1 - feature.presence.min_fraction)} of the examples {what} "
                 f"(presence.min_fraction {feature.presence.min_fraction:g}), found {_percent(1 - fraction)} "
                 f"({total - present} of {total}{_bad_rows_note(dataset, name)}).")
    domain = _domain(schema, feature)
    if domain is not None:
        shares = drift.value_shares(stats)
        unexpected = {v: s for v, s in shares.items() if v not in domain}
        outside = sum(unexpected.values())
        allowed = 1 - (feature.distribution_constraints.min_domain_mass if feature.HasField("distribution_constraints") else 1.0)
        if unexpected and outside > allowed + 1e-12:
            found = ", ".join(f"{v!r} ({_percent(s)})" for v, s in sorted(unexpected.items(), key=lambda kv: -kv[1])[:5])
            limit = f" (at most {_percent(allowed)} outside it)" if allowed else ""
            _add(anomalies, name, _T.ENUM_TYPE_UNEXPECTED_STRING_VALUES, ERROR, "Unexpected string values",
                 f"{name}: expected values in {{{', '.join(repr(v) for v in domain)}}}{limit}, found {found}.")
    nl = custom_stat(stats, NL_STATISTICS)
    if nl is not None and feature.HasField("natural_language_domain"):
        nl_stats = statistics_pb2.NaturalLanguageStatistics()
        nl.any.Unpack(nl_stats)
        minimum = feature.natural_language_domain.coverage.min_coverage
        if common.num_non_missing and nl_stats.feature_coverage < minimum:
            _add(anomalies, name, _T.FEATURE_COVERAGE_TOO_LOW, WARNING, "Low coverage",
                 f"{name}: expected at least {_percent(minimum)} of the pieces known to the tokenizer, "
                 f"found {_percent(nl_stats.feature_coverage)}.")


def _bad_rows_note(dataset, name: str) -> str:
    """"; 10 rows ExampleGen could not use: empty or missing text 10 (the first at f:200)" for `name`."""
    from albert_tf.data.tables import BAD_ROW_REASONS

    found = []
    for stats in dataset.features:
        for reason, count, first in bad_row_counts(stats):
            if (stats.path.step[0] if stats.path.step else stats.name) == name or reason == "malformed_row":
                found.append(f"{BAD_ROW_REASONS.get(reason, reason)} {count} (the first at {first})")
    if not found:
        return ""
    return "; rows ExampleGen could not use: " + ", ".join(found)


def bad_row_lines(dataset, on_error: str = "skip") -> List[Tuple[int, str]]:
    """(severity, line) for each reason of ExampleGen's bad rows recorded in `dataset`: an error
    with `on_error` "raise" (any bad row stops the run), else a warning (the presence decides)."""
    from albert_tf.data.tables import BAD_ROW_REASONS

    lines = []
    total = dataset.num_examples
    for stats in dataset.features:
        name = stats.path.step[0] if stats.path.step else stats.name
        for reason, count, first in bad_row_counts(stats):
            what = f"{count} of {total} rows with {BAD_ROW_REASONS.get(reason, reason)}"
            where = f" in {name!r}" if reason != "malformed_row" else ""
            if on_error == "raise":
                lines.append((ERROR, f"{what}{where}, the first at {first}: on_error is raise "
                                     f"(skip leaves them out within the schema's presence.min_fraction)."))
            else:
                lines.append((WARNING, f"{what}{where} left out by ExampleGen, the first at {first}."))
    return lines


def _check_length(anomalies, dataset, name: str, stats, max_truncated_fraction: Optional[float]) -> None:
    fraction = custom_stat(stats, "too_long_fraction")
    if max_truncated_fraction is None or fraction is None or fraction.num <= max_truncated_fraction:
        return
    length = int(custom_stat(stats, "max_seq_length").num)
    count = int(custom_stat(stats, "too_long_count").num)
    pieces = feature_stats(dataset, derived_name(name, PIECE_LENGTH))
    mean = f", {pieces.num_stats.mean:.0f} pieces on average" if pieces is not None else ""
    _add(anomalies, name, _T.UNKNOWN_TYPE, WARNING, "Texts longer than max_seq_length",
         f"{name}: {_percent(fraction.num)} of the texts ({count}) are longer than max_seq_length {length} "
         f"pieces{mean}, and are truncated; expected at most {_percent(max_truncated_fraction)} "
         f"(max_truncated_fraction).")


def _check_drift(anomalies, name: str, feature, stats, previous, baseline: str) -> None:
    old = feature_stats(previous, name) if previous is not None else None
    if old is not None and feature.HasField("drift_comparator"):
        compare(anomalies, name, feature.drift_comparator, old, stats, f"drift from {baseline}", skew=False)


def compare(anomalies, name: str, comparator, old, stats, what: str, skew: bool) -> None:
    """Measures `stats` against `old` with `comparator` (a drift or skew `FeatureComparator`)."""
    info = None
    if comparator.HasField("infinity_norm"):
        p, q = drift.value_shares(old), drift.value_shares(stats)
        distance, value = drift.l_infinity(p, q)
        threshold = comparator.infinity_norm.threshold
        info = (anomalies_pb2.DriftSkewInfo.Measurement.L_INFTY, distance, threshold)
        if distance > threshold:
            _add(anomalies, name, _T.COMPARATOR_L_INFTY_HIGH, ERROR, "High L-infinity distance between current and previous",
                 f"{name}: {what}: expected an L-infinity distance of at most {threshold:g}, found "
                 f"{distance:.3f} ({value!r}: {_percent(p.get(value, 0))} -> {_percent(q.get(value, 0))}).")
    elif comparator.HasField("jensen_shannon_divergence"):
        divergence = drift.jensen_shannon(drift.standard_buckets(old), drift.standard_buckets(stats))
        threshold = comparator.jensen_shannon_divergence.threshold
        info = (anomalies_pb2.DriftSkewInfo.Measurement.JENSEN_SHANNON_DIVERGENCE, divergence, threshold)
        if divergence > threshold:
            _add(anomalies, name, _T.COMPARATOR_JENSEN_SHANNON_DIVERGENCE_HIGH, ERROR,
                 "High Jensen-Shannon divergence between current and previous",
                 f"{name}: {what}: expected a Jensen-Shannon divergence of at most {threshold:g}, found "
                 f"{divergence:.3f} (mean {old.num_stats.mean:.1f} -> {stats.num_stats.mean:.1f}, median "
                 f"{old.num_stats.median:g} -> {stats.num_stats.median:g}).")
    if info is not None:
        record = anomalies.drift_skew_info.add()
        record.path.step[:] = [name]
        (record.skew_measurements if skew else record.drift_measurements).add(type=info[0], value=info[1], threshold=info[2])


def validate_statistics(dataset, schema: schema_pb2.Schema, previous=None, baseline: str = "the previous span",
                        max_truncated_fraction: Optional[float] = None):
    """The `Anomalies` of one split's `DatasetFeatureStatistics` against `schema` and, for drift, `previous`.

    Args:
        dataset: The split's statistics.
        schema: The schema to check against (inferred or pinned).
        previous: The same split's statistics of the previous span, or None (no drift check).
        baseline: How the messages name `previous`.
        max_truncated_fraction: Warn when a larger share of the texts is longer than the
            statistics' `max_seq_length`; None: no check.
    """
    anomalies = anomalies_pb2.Anomalies(anomaly_name_format=anomalies_pb2.Anomalies.SERIALIZED_PATH)
    anomalies.baseline.CopyFrom(schema)
    if dataset.num_examples == 0:
        anomalies.data_missing = True
        info = anomalies.dataset_anomaly_info
        info.severity = ERROR
        info.reason.add(type=_T.NO_DATA_IN_SPAN, short_description="No data",
                        description=f"{dataset.name}: expected examples, found none.")
        info.description = info.reason[0].description
        return anomalies
    known = {f.name for f in schema.feature}
    for feature in schema.feature:
        stats = feature_stats(dataset, feature.name)
        if stats is None:
            if _source_present(dataset, feature) and not feature.HasField("validation_derived_source"):
                _add(anomalies, feature.name, _T.SCHEMA_MISSING_COLUMN, ERROR, "Column dropped",
                     f"{feature.name}: expected in every example, found in none.")
            continue
        check_schema(anomalies, dataset, schema, feature.name, feature, stats)
        _check_length(anomalies, dataset, feature.name, stats, max_truncated_fraction)
        _check_drift(anomalies, feature.name, feature, stats, previous, baseline)
    for stats in dataset.features:
        name = stats.path.step[0] if stats.path.step else stats.name
        if name not in known:
            _add(anomalies, name, _T.SCHEMA_NEW_COLUMN, ERROR, "New column",
                 f"{name}: expected no such feature (not in the schema), found it in "
                 f"{_percent(_present(stats) / dataset.num_examples)} of the examples.")
    return anomalies


def _present(stats) -> int:
    common = stats.num_stats.common_stats if stats.HasField("num_stats") else stats.string_stats.common_stats
    return common.num_non_missing


def anomaly_lines(anomalies, prefix: str = "") -> List[Tuple[int, str]]:
    """(severity, line) for every reason of every anomaly, errors first, then by feature."""
    lines = []
    if anomalies.HasField("dataset_anomaly_info"):
        for reason in anomalies.dataset_anomaly_info.reason:
            lines.append((anomalies.dataset_anomaly_info.severity, prefix + reason.description))
    for name in sorted(anomalies.anomaly_info):
        info = anomalies.anomaly_info[name]
        for reason in info.reason:
            lines.append((info.severity, prefix + reason.description))
    return sorted(lines, key=lambda sl: -sl[0])


def severity_name(severity: int) -> str:
    return anomalies_pb2.AnomalyInfo.Severity.Name(severity)
