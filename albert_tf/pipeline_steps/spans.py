"""TFX's input spans: `{SPAN}` (and `{VERSION}`) in an input path, resolved to the latest span or a given one.

`task_data: /data/reviews/span-{SPAN}` matches `span-1`, `span-2`, ...; the latest span is used
unless one is asked for, and within a span the latest `{VERSION}` (a re-export of the same span).
A path without `{SPAN}` is span 0. Every artifact of the run records its span, and the
ExampleValidator measures drift against the previous span's statistics.
"""

from __future__ import annotations

import dataclasses
import glob
import re
from typing import Optional

SPAN_SPEC, VERSION_SPEC = "{SPAN}", "{VERSION}"
LATEST = -1


class SpanError(FileNotFoundError):
    """No input matches the span pattern (or not the span asked for)."""


@dataclasses.dataclass(frozen=True)
class Span:
    path: str
    span: int
    version: Optional[int] = None


def resolve_span(pattern: str, span: int = LATEST) -> Span:
    """The input of span `span` (`LATEST`: the highest) of `pattern`, at its latest version."""
    if SPAN_SPEC not in pattern:
        if VERSION_SPEC in pattern:
            raise SpanError(f"{pattern!r} has {VERSION_SPEC} without {SPAN_SPEC}")
        return Span(pattern, 0)
    regex = re.escape(pattern).replace(re.escape(SPAN_SPEC), r"(?P<span>\d+)").replace(re.escape(VERSION_SPEC), r"(?P<version>\d+)")
    found = []
    for path in glob.glob(pattern.replace(SPAN_SPEC, "*").replace(VERSION_SPEC, "*")):
        match = re.fullmatch(regex, path)
        if match:
            version = match.groupdict().get("version")
            found.append((int(match["span"]), int(version) if version is not None else None, path))
    if not found:
        raise SpanError(f"no input matches {pattern!r}")
    wanted = max(s for s, _, _ in found) if span == LATEST else span
    versions = [(v if v is not None else -1, path, v) for s, v, path in found if s == wanted]
    if not versions:
        raise SpanError(f"no span {wanted} matches {pattern!r} (spans found: {', '.join(str(s) for s in sorted({s for s, _, _ in found}))})")
    _, path, version = max(versions)
    return Span(path, wanted, version)
