"""Hostile endpoints yield a recorded error sample, in time and in bounded memory."""

from __future__ import annotations

import ssl
import time
import tracemalloc

import pytest

from app.analysis.summary import summarize
from app.demo.sim.process import LoopLag
from app.probe.client import make_client, probe_once
from app.probe.sample import Sample, Status
from app.probe.spec import Kind, ProbeSpec
from tests import hostile

pytestmark = pytest.mark.anyio
SLACK_S = 0.1
BODY = {"model": "m", "stream": True, "messages": []}


async def probe(url: str, **spec: object) -> tuple[Sample, float]:
    """One sample, and the seconds it took; never past the cut-off by more than the slack
    and how late this event loop woke meanwhile (a loaded machine's share)."""
    probe_spec = ProbeSpec(url=url, kind=Kind.OPENAI, method="POST", body=BODY, **spec)  # type: ignore[arg-type]
    async with make_client(probe_spec) as client, LoopLag() as lag:
        began = time.perf_counter()
        sample = await probe_once(client, probe_spec)
        elapsed = time.perf_counter() - began
    assert abs(sum(sample.phases.values()) - sample.total_ms) < 0.01
    late_s = lag.percentiles()["max"] / 1000
    assert elapsed <= probe_spec.cutoff_s + SLACK_S + late_s, (elapsed, late_s)
    return sample, elapsed


async def test_http_500_is_an_http_error_with_the_servers_message() -> None:
    async with hostile.serve(hostile.status_500) as url:
        sample, _ = await probe(url, deadline_ms=1500)
    assert sample.status is Status.HTTP_ERROR
    assert sample.http_status == 500
    assert sample.error_class == "HTTP500"
    assert sample.error is not None and "model overloaded" in sample.error


async def test_http_429_keeps_retry_after_in_the_error() -> None:
    async with hostile.serve(hostile.status_429) as url:
        sample, _ = await probe(url, deadline_ms=1500)
    assert sample.status is Status.HTTP_ERROR
    assert sample.error == "429 Too Many Requests: Rate limit reached for requests (retry-after 7)"


async def test_connection_reset_mid_stream_keeps_the_phases_it_reached() -> None:
    async with hostile.serve(hostile.reset_mid_stream) as url:
        sample, _ = await probe(url, deadline_ms=1500)
    assert sample.status is Status.ERROR
    assert sample.error_class in {"ReadError", "RemoteProtocolError"}
    assert sample.marks.first_answer_token is not None
    assert sample.phases["generation"] > 15  # tokens flowed ~20 ms before the reset
    assert sample.total_ms < 1500


async def test_malformed_sse_json_is_a_stream_format_error_not_a_hang() -> None:
    async with hostile.serve(hostile.malformed_json) as url:
        sample, elapsed = await probe(url, deadline_ms=3000)
    assert sample.status is Status.ERROR
    assert sample.error_class == "StreamFormatError"
    assert elapsed < 3.0  # failed at the bad line, before the deadline


async def test_headers_trickling_slower_than_the_deadline_are_cut_at_the_deadline() -> None:
    async with hostile.serve(hostile.trickling_headers) as url:
        sample, _ = await probe(url, deadline_ms=400)
    assert sample.status is Status.DEADLINE_EXCEEDED
    assert sample.error_class == "DeadlineExceeded"
    assert sample.total_ms == 400
    assert sample.marks.response_headers is None


async def test_endless_stream_is_censored_at_the_deadline() -> None:
    async with hostile.serve(hostile.endless_stream) as url:
        sample, _ = await probe(url, deadline_ms=500)
    assert sample.status is Status.DEADLINE_EXCEEDED
    assert sample.total_ms == 500
    assert sample.phases["generation"] > 400
    assert sample.phases["transfer"] == 0


@pytest.mark.parametrize(
    ("deadline_ms", "status", "error_class"),
    [
        (None, Status.TIMEOUT, "HardTimeout"),  # the endpoint hung: a failure of its own
        (800, Status.TIMEOUT, "HardTimeout"),  # a deadline past the timeout is not reached
        (500, Status.DEADLINE_EXCEEDED, "DeadlineExceeded"),  # at the timeout: the deadline's
    ],
    ids=["no-deadline", "deadline-after-timeout", "deadline-at-timeout"],
)
async def test_a_hang_is_cut_at_the_hard_timeout_as_a_timeout_not_a_deadline_miss(
    deadline_ms: float | None, status: Status, error_class: str
) -> None:
    async with hostile.serve(hostile.silent_after_request) as url:
        sample, _ = await probe(url, timeout_s=0.5, deadline_ms=deadline_ms)
    assert sample.status is status
    assert sample.error_class == error_class
    assert sample.total_ms == 500
    summary = summarize([sample], one_run=True)
    # A timeout is a failure (no share of anybody's time, no miss); a cut deadline a miss.
    assert (summary.errors, summary.deadline_exceeded) == (
        (1, 0) if status is Status.TIMEOUT else (0, 1)
    )


async def test_100_mb_body_is_refused_past_the_limit_in_bounded_memory() -> None:
    async with hostile.serve(hostile.huge_body) as url:
        tracemalloc.start()
        try:
            sample, _ = await probe(url, timeout_s=10, max_body_bytes=1024 * 1024)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert sample.status is Status.ERROR
    assert sample.error_class == "BodyTooLarge"
    assert peak < 8 * 1024 * 1024


async def test_plain_http_target_counts_a_huge_body_without_keeping_it() -> None:
    async with hostile.serve(hostile.huge_body) as url:
        tracemalloc.start()
        try:
            spec = ProbeSpec(url=url, kind=Kind.HTTP, timeout_s=10, max_body_bytes=200 * 2**20)
            async with make_client(spec) as client:
                sample = await probe_once(client, spec)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert sample.status is Status.OK
    assert peak < 8 * 1024 * 1024


async def test_tls_failure_is_an_error_sample(server_tls: ssl.SSLContext) -> None:
    # The server's certificate comes from a CA the probe does not trust.
    async with hostile.serve(hostile.status_500, tls=server_tls) as url:
        sample, _ = await probe(url, deadline_ms=1500)
    assert sample.status is Status.ERROR
    assert sample.error_class == "ConnectError"
    assert sample.error is not None and "CERTIFICATE_VERIFY_FAILED" in sample.error
    assert sample.marks.tls_start is not None and sample.marks.tls_end is None
    assert sample.phases["connect"] == pytest.approx(sample.total_ms)
