"""A push body's JSON (``app.agents.server.body.json_of``): read by orjson, and whatever
orjson refuses left to the json module, so every body reads as the json module reads it
(or is refused, 422, where it refuses it)."""

from __future__ import annotations

import gzip
import json
import math
from typing import Any

import pytest

from app.agents.server.body import json_of
from app.agents.server.refusals import Unreadable

BODIES = [
    b'{"id": "x", "samples": [{"total_ms": 1.5, "phases": {"queue": 0}}]}',
    b'{"total_ms": NaN, "other": Infinity}',  # the json module's extension
    b'{"slot": 123456789012345678901234567890}',  # past 64 bits
    b'{"slot": -9223372036854775809, "idx": 18446744073709551615}',  # just past, just in
    b'{"error": "code 1234567890123456789012", "total_ms": 1e400}',
    '{"vantage": "fra-1 é"}'.encode("utf-16"),
    b'\xef\xbb\xbf{"bom": true}',
    b'{"error": "\\ud800 alone"}',
    b'{"a": 1, "a": 2}',
    b"[" * 100_000 + b"]" * 100_000,
    b"{not json",
    b"\xff\xfe\xfa",
]


def _json_module(data: bytes) -> Any:
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        return Unreadable


def _same(a: Any, b: Any) -> bool:
    """Equal, NaN equal to NaN."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True) or (
        isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)
    )


@pytest.mark.parametrize("body", BODIES, ids=range(len(BODIES)))
@pytest.mark.parametrize("gzipped", [False, True])
def test_a_body_reads_as_the_json_module_reads_it(body: bytes, gzipped: bool) -> None:
    expected = _json_module(body)
    sent = gzip.compress(body) if gzipped else body
    if expected is Unreadable:
        with pytest.raises(Unreadable):
            json_of(sent, gzipped)
        return
    assert _same(json_of(sent, gzipped), expected)
