"""TFX's input spans: `{SPAN}` (and `{VERSION}`) in an input path, resolved to the latest span or a given one.

`task_data: /data/reviews/span-{SPAN}` matches `span-1`, `span-2`, ...; the latest span is used
unless one is asked for, and within a span the latest `{VERSION}` (a re-export of the same span).
`num_spans` > 1 reads a range, TFX's rolling range: the `num_spans` latest spans up to that one
(those that exist), their rows together; the range's last span is the run's span.
A path without `{SPAN}` is span 0. Every artifact of the run records its span, and the
ExampleValidator measures drift against the previous span's statistics.
"""

from __future__ import annotations

import dataclasses
import glob
import re
from typing import List, Optional

SPAN_SPEC, VERSION_SPEC = "{SPAN}", "{VERSION}"
LATEST = -1


class SpanError(FileNotFoundError):
    """No input matches the span pattern (or not the span asked for)."""


@dataclasses.dataclass(frozen=True)
class Span:
    path: str
    span: int
    version: Optional[int] = None


def resolve_spans(pattern: str, span: int = LATEST, num_spans: int = 1) -> List[Span]:
    """The inputs of the `num_spans` spans up to `span` (`LATEST`: the highest), oldest first."""
    if num_spans < 1:
        raise SpanError(f"num_spans must be at least 1, got {num_spans}")
    last = resolve_span(pattern, span)
    if SPAN_SPEC not in pattern or num_spans == 1:
        return [last]
    earlier = sorted({s for s, _, _ in _matches(pattern) if last.span - num_spans < s < last.span})
    return [resolve_span(pattern, s) for s in earlier] + [last]


def _matches(pattern: str):
    regex = re.escape(pattern).replace(re.escape(SPAN_SPEC), r"(?P<span>\d+)").replace(re.escape(VERSION_SPEC), r"(?P<version>\d+)")
    for path in glob.glob(pattern.replace(SPAN_SPEC, "*").replace(VERSION_SPEC, "*")):
        match = re.fullmatch(regex, path)
        if match:
            version = match.groupdict().get("version")
            yield int(match["span"]), int(version) if version is not None else None, path


def resolve_span(pattern: str, span: int = LATEST) -> Span:
    """The input of span `span` (`LATEST`: the highest) of `pattern`, at its latest version."""
    if SPAN_SPEC not in pattern:
        if VERSION_SPEC in pattern:
            raise SpanError(f"{pattern!r} has {VERSION_SPEC} without {SPAN_SPEC}")
        return Span(pattern, 0)
    found = list(_matches(pattern))
    if not found:
        raise SpanError(f"no input matches {pattern!r}")
    wanted = max(s for s, _, _ in found) if span == LATEST else span
    versions = [(v if v is not None else -1, path, v) for s, v, path in found if s == wanted]
    if not versions:
        raise SpanError(f"no span {wanted} matches {pattern!r} (spans found: {', '.join(str(s) for s in sorted({s for s, _, _ in found}))})")
    _, path, version = max(versions)
    return Span(path, wanted, version)
