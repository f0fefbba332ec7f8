"""TFDV's drift measures between two statistics: L-infinity distance and Jensen-Shannon divergence.

* L-infinity (categorical features): the largest change in any value's share,
  `max_v |p(v) - q(v)|`, from the features' rank histograms (or top values).
* Jensen-Shannon divergence (numeric features): between the features' STANDARD histograms, after
  both are spread over the union of their bucket boundaries (mass uniform within a bucket, as
  TFDV rebuckets them); base 2, so 0 (the same) to 1 (disjoint).
"""

from __future__ import annotations

import math
from typing import Dict, List, Optional, Tuple

Buckets = List[Tuple[float, float, float]]


def value_shares(feature) -> Dict[str, float]:
    """Each value's share of a categorical feature's counts."""
    stats = feature.string_stats
    pairs = [(b.label, b.sample_count) for b in stats.rank_histogram.buckets] or [
        (v.value, v.frequency) for v in stats.top_values]
    total = sum(c for _, c in pairs)
    return {label: count / total for label, count in pairs} if total else {}


def l_infinity(p: Dict[str, float], q: Dict[str, float]) -> Tuple[float, Optional[str]]:
    """The L-infinity distance of two value distributions and the value that changed most."""
    worst, distance = None, 0.0
    for value in sorted(set(p) | set(q)):
        change = abs(p.get(value, 0.0) - q.get(value, 0.0))
        if change > distance:
            worst, distance = value, change
    return distance, worst


def standard_buckets(feature) -> Buckets:
    """(low, high, count) of a numeric feature's STANDARD histogram."""
    from tensorflow_metadata.proto.v0 import statistics_pb2

    for histogram in feature.num_stats.histograms:
        if histogram.type == statistics_pb2.Histogram.STANDARD:
            return [(b.low_value, b.high_value, b.sample_count) for b in histogram.buckets]
    return []


def _widen(buckets: Buckets) -> Buckets:
    # A bucket of one value (all samples equal) is given a unit width, so its mass lands somewhere.
    return [(lo - 0.5, hi + 0.5, c) if hi <= lo else (lo, hi, c) for lo, hi, c in buckets]


def _spread(buckets: Buckets, edges: List[float]) -> List[float]:
    mass = [0.0] * (len(edges) - 1)
    for lo, hi, count in buckets:
        for i in range(len(edges) - 1):
            overlap = min(hi, edges[i + 1]) - max(lo, edges[i])
            if overlap > 0:
                mass[i] += count * overlap / (hi - lo)
    return mass


def jensen_shannon(p_buckets: Buckets, q_buckets: Buckets) -> float:
    """The Jensen-Shannon divergence (base 2) of two histograms."""
    p_buckets, q_buckets = _widen(p_buckets), _widen(q_buckets)
    edges = sorted({x for lo, hi, _ in p_buckets + q_buckets for x in (lo, hi)})
    if len(edges) < 2:
        return 0.0
    p, q = _spread(p_buckets, edges), _spread(q_buckets, edges)
    sp, sq = sum(p), sum(q)
    if not sp or not sq:
        return 0.0 if sp == sq else 1.0
    divergence = 0.0
    for a, b in zip(p, q):
        a, b = a / sp, b / sq
        m = (a + b) / 2
        if a:
            divergence += 0.5 * a * math.log2(a / m)
        if b:
            divergence += 0.5 * b * math.log2(b / m)
    return max(0.0, min(1.0, divergence))
