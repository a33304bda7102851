"""The W3C traceparent a probe request carries with ``propagate: true``."""

from __future__ import annotations

import pytest

from app.probe.traceparent import new_traceparent, parse, with_traceparent


def test_a_new_traceparent_is_version_00_sampled_with_ids_it_parses_back() -> None:
    value = new_traceparent()
    version, trace_id, span_id, flags = value.split("-")
    assert (version, len(trace_id), len(span_id), flags) == ("00", 32, 16, "01")
    assert parse(value) == (int(trace_id, 16), int(span_id, 16))
    assert new_traceparent() != value


@pytest.mark.parametrize(
    "value",
    [
        None,
        "",
        "01-" + "a" * 32 + "-" + "b" * 16 + "-01",  # a version this parser does not know
        "00-" + "0" * 32 + "-" + "b" * 16 + "-01",  # all-zero trace id: invalid
        "00-" + "a" * 32 + "-" + "0" * 16 + "-01",  # all-zero span id: invalid
        "00-" + "A" * 32 + "-" + "b" * 16 + "-01",  # upper case: invalid
        "00-" + "a" * 31 + "-" + "b" * 16 + "-01",
    ],
)
def test_anything_but_a_valid_version_00_header_parses_to_none(value: str | None) -> None:
    assert parse(value) is None


def test_propagation_replaces_a_traceparent_the_target_set_and_keeps_the_rest() -> None:
    headers = {"Authorization": "Bearer x", "TraceParent": "set-by-hand"}
    sent = with_traceparent(headers, "00-tp")
    assert sent == {"Authorization": "Bearer x", "traceparent": "00-tp"}
    assert with_traceparent(headers, None) == headers
