"""A self-contained HTML page of the statistics of each split side by side, with the anomalies and drift.

One file, no scripts and no external resources (histograms are inline SVG), so it opens anywhere
and can be attached to a ticket. TFDV's own viewer (Facets) reads the `FeatureStats.pb` files.
"""

from __future__ import annotations

import html
from typing import Dict, List, Optional, Sequence, Tuple

from albert_tf.data_validation import drift
from albert_tf.data.tables import BAD_ROW_REASONS
from albert_tf.data_validation.statistics import bad_row_counts, custom_stat

_STYLE = """body{font:14px sans-serif;margin:2em}table{border-collapse:collapse;margin-bottom:1.5em}
td,th{border:1px solid #ccc;padding:4px 8px;vertical-align:top;text-align:left}th{background:#f3f3f3}
.ERROR{color:#b00020;font-weight:bold}.WARNING{color:#a65e00}.ok{color:#1b5e20}svg{display:block}"""


def _bars(pairs: Sequence[Tuple[str, float]], width: int = 260, height: int = 70) -> str:
    if not pairs:
        return ""
    top = max(c for _, c in pairs) or 1.0
    bar = width / len(pairs)
    rects = "".join(
        f'<rect x="{i * bar:.1f}" y="{height - 14 - (height - 16) * c / top:.1f}" width="{max(bar - 1, 1):.1f}" '
        f'height="{(height - 16) * c / top:.1f}" fill="#4f7cac"><title>{html.escape(label)}: {c:g}</title></rect>'
        for i, (label, c) in enumerate(pairs))
    first, last = html.escape(pairs[0][0]), html.escape(pairs[-1][0])
    return (f'<svg width="{width}" height="{height}">{rects}<text x="0" y="{height - 2}" font-size="10">{first}</text>'
            f'<text x="{width}" y="{height - 2}" font-size="10" text-anchor="end">{last}</text></svg>')


def _cell(feature, num_examples: int) -> str:
    if feature is None:
        return "<td>absent</td>"
    rows: List[str] = []
    if feature.HasField("num_stats"):
        n = feature.num_stats
        rows.append(f"mean {n.mean:.1f}, median {n.median:g}, min {n.min:g}, max {n.max:g}, std {n.std_dev:.1f}")
        buckets = drift.standard_buckets(feature)
        rows.append(_bars([(f"{lo:g}-{hi:g}", c) for lo, hi, c in buckets]))
        quantiles = [b for h in n.histograms if h.type == 1 for b in h.buckets]
        if quantiles:
            rows.append("deciles " + " ".join(f"{b.low_value:g}" for b in quantiles) + f" {quantiles[-1].high_value:g}")
    else:
        s = feature.string_stats
        c = s.common_stats
        rows.append(f"present {c.num_non_missing} of {num_examples}, unique {s.unique}, avg length {s.avg_length:.1f}")
        for name in ("empty_count", "unknown_piece_rate", "control_char_count", "invalid_text_count"):
            custom = custom_stat(feature, name)
            if custom is not None:
                rows.append(f"{name.replace('_', ' ')}: {custom.num:g}")
        too_long = custom_stat(feature, "too_long_fraction")
        if too_long is not None:
            rows.append(f"longer than max_seq_length {custom_stat(feature, 'max_seq_length').num:g} pieces: "
                        f"{100 * too_long.num:.1f} % ({custom_stat(feature, 'too_long_count').num:g})")
        for reason, count, first in bad_row_counts(feature):
            rows.append(html.escape(f"bad rows ({BAD_ROW_REASONS.get(reason, reason)}): {count}, the first at {first}"))
        top = custom_stat(feature, "top_pieces")
        if top is not None:
            rows.append("top pieces: " + html.escape(", ".join(f"{b.label} ({b.sample_count:g})" for b in top.rank_histogram.buckets[:10])))
        if s.rank_histogram.buckets:
            total = sum(b.sample_count for b in s.rank_histogram.buckets) or 1.0
            rows.append(html.escape(", ".join(f"{b.label}: {100 * b.sample_count / total:.1f} %" for b in s.rank_histogram.buckets[:10])))
            rows.append(_bars([(b.label, b.sample_count) for b in s.rank_histogram.buckets[:20]]))
    return "<td>" + "<br>".join(rows) + "</td>"


def _name(feature) -> str:
    return feature.path.step[0] if feature.path.step else feature.name


def render_html(title: str, datasets: Dict[str, object], anomalies: Optional[Dict[str, object]] = None,
                notes: Sequence[str] = ()) -> str:
    """The page: `datasets` ({split: DatasetFeatureStatistics}) side by side; `anomalies` ({split: Anomalies})."""
    from albert_tf.data_validation.validation import anomaly_lines, severity_name

    splits = list(datasets)
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
             f"<style>{_STYLE}</style></head><body><h1>{html.escape(title)}</h1>"]
    parts += [f"<p>{html.escape(n)}</p>" for n in notes]
    if anomalies is not None:
        parts.append("<h2>Anomalies</h2>")
        for split, result in anomalies.items():
            lines = anomaly_lines(result)
            if not lines:
                parts.append(f"<p class='ok'>{html.escape(split)}: no anomalies</p>")
            for severity, line in lines:
                name = severity_name(severity)
                parts.append(f"<p class='{name}'>{html.escape(split)}: {name}: {html.escape(line)}</p>")
            drifts = [(d.path.step[0], m) for d in result.drift_skew_info for m in d.drift_measurements]
            if drifts:
                parts.append("<p>drift: " + html.escape("; ".join(
                    f"{name} {m.value:.3f} (threshold {m.threshold:g})" for name, m in drifts)) + "</p>")
    parts.append("<h2>Statistics</h2><table><tr><th>feature</th>")
    parts += [f"<th>{html.escape(s)} ({datasets[s].num_examples} examples)</th>" for s in splits]
    parts.append("</tr>")
    names = sorted({_name(f) for d in datasets.values() for f in d.features})
    for name in names:
        parts.append(f"<tr><th>{html.escape(name)}</th>")
        for split in splits:
            dataset = datasets[split]
            feature = next((f for f in dataset.features if _name(f) == name), None)
            parts.append(_cell(feature, dataset.num_examples))
        parts.append("</tr>")
    parts.append("</table></body></html>")
    return "".join(parts)
