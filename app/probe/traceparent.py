"""W3C Trace Context (``traceparent``) for a probe request: the ids of its sample's span.

With ``propagate: true`` each request carries ``00-<trace id>-<span id>-01``; the span
exported for its sample (``app.export``) takes those ids, so the server's own spans join
the probe's trace as children of the sample.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Mapping

_FORMAT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$")
SAMPLED = "01"


def new_traceparent() -> str:
    """Random ids, never all zero (W3C: an all-zero id is invalid)."""
    trace_id = secrets.randbits(128) or 1
    span_id = secrets.randbits(64) or 1
    return f"00-{trace_id:032x}-{span_id:016x}-{SAMPLED}"


def with_traceparent(headers: Mapping[str, str], traceparent: str | None) -> dict[str, str]:
    """The request's headers, with ``traceparent`` in place of any the target set."""
    if traceparent is None:
        return dict(headers)
    kept = {name: value for name, value in headers.items() if name.lower() != "traceparent"}
    return {**kept, "traceparent": traceparent}


def parse(value: str | None) -> tuple[int, int] | None:
    """The (trace id, span id) of a version-00 header, or None for anything else."""
    found = _FORMAT.match(value or "")
    if found is None:
        return None
    trace_id, span_id = int(found[1], 16), int(found[2], 16)
    return (trace_id, span_id) if trace_id and span_id else None
