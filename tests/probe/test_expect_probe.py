"""``expect:`` on real loopback servers answering wrong things fast: each is an
``invalid_answer`` sample with its reason (scrubbed), counted as a failure; a right answer
stays ok."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime

import pytest

from app.analysis.detectors import DetectorParams
from app.analysis.detectors.base import Signal
from app.analysis.detectors.failing import failing_finding
from app.analysis.runs import run_from_samples
from app.analysis.summary import summarize
from app.probe.answercheck import Expect
from app.probe.client import make_client, probe_once
from app.probe.sample import Sample, Status
from app.probe.spec import Kind, ProbeSpec
from tests import hostile

pytestmark = pytest.mark.anyio

KEY = "sk-probe-secret-0123456789"
BODY = {"model": "m1", "stream": True, "messages": []}
RIGHT = Expect(
    status=(200,), non_empty=True, model="m1", finish_reason=("stop",), min_output_tokens=2
)


def chunk(content: str | None, *, model: str = "m1", finish: str | None = None) -> bytes:
    delta = {} if content is None else {"content": content}
    payload = {"model": model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return f"data: {json.dumps(payload)}\n\n".encode()


def usage(completion: int) -> bytes:
    payload = {"model": "m1", "choices": [], "usage": {"completion_tokens": completion}}
    return f"data: {json.dumps(payload)}\n\n".encode()


def streaming(*events: bytes) -> hostile.Handler:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await hostile.read_request(reader)
        writer.write(hostile.SSE_HEADERS)
        for event in (*events, b"data: [DONE]\n\n"):
            writer.write(hostile.chunk(event))
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    return handler


async def probe(
    handler: hostile.Handler, expect: Expect | None, kind: Kind = Kind.OPENAI
) -> Sample:
    async with hostile.serve(handler) as url:
        body = BODY if kind is Kind.OPENAI else None
        headers = {"authorization": f"Bearer {KEY}"}
        spec = ProbeSpec(
            url=url,
            kind=kind,
            method="POST" if body else "GET",
            body=body,
            headers=headers,
            timeout_s=10,
            expect=expect,
        )
        async with make_client(spec) as client:
            sample = await probe_once(client, spec)
    assert abs(sum(sample.phases.values()) - sample.total_ms) < 0.01
    return sample


GOOD = (chunk("4"), chunk("2", finish="stop"), usage(2))


async def test_a_right_answer_stays_ok() -> None:
    sample = await probe(streaming(*GOOD), RIGHT)
    assert (sample.status, sample.error) == (Status.OK, None)


@pytest.mark.parametrize(
    ("events", "reason"),
    [
        ((chunk(None), chunk(None, finish="stop"), usage(0)), "empty answer; 0 output tokens"),
        ((chunk("4", model="m2"), chunk("2", finish="stop"), usage(2)), "model 'm2' answered"),
        ((chunk("4"), chunk("2", finish="length"), usage(2)), "finish_reason 'length'"),
        ((chunk("4"), chunk("2")), "no finish_reason, expected [stop]"),
        ((chunk("42", finish="stop"), usage(1)), "1 output tokens, at least 2 expected"),
        ((chunk("42", finish="stop"),), "1 answer chunks (no token count given), at least 2"),
    ],
)
async def test_a_wrong_answer_is_invalid_with_its_reason(
    events: tuple[bytes, ...], reason: str
) -> None:
    sample = await probe(streaming(*events), RIGHT)
    assert sample.status is Status.INVALID_ANSWER
    assert sample.error_class == "InvalidAnswer"
    assert sample.error is not None and reason in sample.error, sample.error
    # It was answered in full: its marks and phases are kept, as measured.
    assert sample.marks.stream_end is not None


async def test_the_reason_never_quotes_the_targets_secret() -> None:
    echo = (chunk(f"your key {KEY} is revoked"), chunk(".", finish="stop"), usage(9))
    sample = await probe(streaming(*echo), Expect(regex="^[0-9]+$"))
    assert sample.status is Status.INVALID_ANSWER
    assert sample.error is not None and "<redacted>" in sample.error
    assert KEY not in sample.error and KEY[:12] not in sample.error


async def test_a_stream_reported_error_stays_an_error_not_an_invalid_answer() -> None:
    error = b'data: {"error": {"message": "overloaded"}}\n\n'
    sample = await probe(streaming(chunk("4"), error), RIGHT)
    assert sample.status is Status.ERROR


async def test_a_plain_http_target_checks_its_status_and_body() -> None:
    async def created(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await hostile.read_request(reader)
        writer.write(b"HTTP/1.1 203 Non-Authoritative\r\ncontent-length: 9\r\n\r\n<p>ok</p>")
        await writer.drain()

    wrong = await probe(created, Expect(status=(200,), regex="healthy"), Kind.HTTP)
    assert wrong.status is Status.INVALID_ANSWER
    assert wrong.error == (
        "status 203, expected [200]; answer '<p>ok</p>' does not match regex 'healthy'"
    )
    right = await probe(created, Expect(status=(200, 203), regex="ok"), Kind.HTTP)
    assert right.status is Status.OK


async def test_invalid_answers_are_failures_for_summaries_and_probe_failing() -> None:
    bad = (chunk("4"), chunk("2", finish="length"), usage(2))
    samples = [await probe(streaming(*bad), RIGHT) for _ in range(2)]
    assert summarize(samples).errors == 2 and summarize(samples).n == 0
    now = datetime(2026, 1, 1, tzinfo=UTC)
    runs = [run_from_samples(f"r{i}", "t", "v", now, samples) for i in range(3)]
    assert runs[0].failed == 2
    finding = failing_finding(runs, DetectorParams())
    assert finding.signal is Signal.HIT
