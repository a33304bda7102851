"""One probe: send one request, read the answer as it arrives, turn the marks into a Sample.

This is the probe's only seam to the network: everything goes through the
``httpx.AsyncClient`` given to ``probe_once``, built by ``make_client``.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import ssl
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import anyio
import certifi
import httpx

from app import __version__, clock
from app.probe import answers, connection, outcome, redirects, responses, template
from app.probe.compat import use_network_backend
from app.probe.kinds import KINDS, Answer
from app.probe.net.backend import AsyncioBackend
from app.probe.readers import BodyReader, ErrorBodyReader, Findings
from app.probe.redact import Redactor
from app.probe.rtt import Earlier, response_stream, stream_rtt_ms
from app.probe.sample import Sample, Status
from app.probe.servertiming import timing_from_headers
from app.probe.spec import ProbeSpec
from app.probe.trace import TraceRecorder
from app.probe.traceparent import new_traceparent, with_traceparent

log = logging.getLogger(__name__)
# Every probe request names us (a target's own User-Agent header wins): an operator reading
# their access log can tell the probe's traffic from their users'.
USER_AGENT = f"phasewatch/{__version__}"
# Samples cut by our own clock (a deadline, the hard timeout): their phases end at the cut.
CUT = frozenset({Status.DEADLINE_EXCEEDED, Status.TIMEOUT})


def make_client(spec: ProbeSpec, *, connections: int = 1) -> httpx.AsyncClient:
    """A pooled client, as a production client holds its connections across requests."""
    # httpx's own timeouts sit just past our cut-off, so the cut-off is what fires.
    timeout = httpx.Timeout(spec.timeout_s + 1.0)
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    transport = httpx.AsyncHTTPTransport(
        verify=_verify(spec.verify), http2=spec.http2, limits=limits, trust_env=False
    )
    use_network_backend(transport, AsyncioBackend())
    return httpx.AsyncClient(
        transport=transport,
        timeout=timeout,
        follow_redirects=False,
        trust_env=False,
        headers={"user-agent": USER_AGENT},
    )


async def warm_up() -> None:
    """Load what httpx loads lazily on its first request (anyio's asyncio backend).

    Otherwise the first request of a process pays for those imports inside ``connect``.
    """
    await anyio.sleep(0)


@functools.cache
def _verify(verify: bool | str) -> bool | ssl.SSLContext:
    """One TLS context per setting, for the whole process: building one parses the CA
    bundle, CPU that fifty clients starting together would spend blocking
    (bench.probe_concurrency)."""
    if verify is False:
        return False
    if isinstance(verify, str):
        return ssl.create_default_context(cafile=verify)
    return ssl.create_default_context(cafile=certifi.where())


@dataclass(slots=True)
class _Exchange:
    """What one request/response has shown so far; filled in as it happens."""

    recorder: TraceRecorder
    redactor: Redactor
    index: int = 0  # the sample's in its run: {{i}} in the body
    findings: Findings = field(default_factory=Findings)
    response: httpx.Response | None = None
    # Until an answer says otherwise (a cut before it), what the request asked for.
    streaming: bool = False
    traceparent: str | None = None  # sent with the request (``propagate: true``)
    keeper: answers.Keeper | None = None  # the answer's bytes, for ``expect:`` (app.probe.answers)

    def kernel_rtt_ms(self) -> float | None:
        """The RTT of the socket this request went out on, open or closed (a cut one is
        closed by now): the response's connection, else the one made for the request."""
        stream = response_stream(self.response) or self.recorder.fresh_stream
        return stream_rtt_ms(stream)


async def probe_once(
    client: httpx.AsyncClient,
    spec: ProbeSpec,
    index: int = 0,
    *,
    rtt_ms: float | None = None,
    earlier: Earlier | None = None,
    cold_start: bool = False,
) -> Sample:
    """Probe ``spec`` once. Never raises for anything the endpoint does: it is a sample.

    ``rtt_ms`` is the run's round-trip estimate (``rtt: ttfb``); without it the kernel's
    RTT of the request's socket is used, else the one ``earlier`` samples of the run read
    (a request cut before its answer on a pooled connection leaves no socket of its own
    to ask). A cut sample never gets the server's account of its time: the network an
    earlier sample measured against that account, if any, is its estimate.
    """
    started_at = clock.utcnow()
    redactor = Redactor.of(spec.headers)
    exchange = _Exchange(TraceRecorder(clock.now_ns()), redactor, index)
    exchange.streaming = spec.asks_for_stream
    exchange.traceparent = new_traceparent() if spec.propagate else None
    cutoff_ns = int(spec.cutoff_s * 1e9)
    status, error = Status.OK, None
    cutoff = asyncio.timeout(spec.cutoff_s)
    try:
        async with cutoff:
            await _exchange(client, spec, exchange, cutoff)
    except Exception as exc:  # a hostile endpoint must yield a sample, whatever it does
        status, error = Status.ERROR, exc
        if cutoff.expired():
            # When the cut took effect on our clock: the phases end at the deadline itself.
            exchange.recorder.mark("cut")
            error = _cutoff_error(spec)
            status = Status.DEADLINE_EXCEEDED
            if isinstance(error, HardTimeout):
                status = Status.TIMEOUT
    end_ns = cutoff_ns if status in CUT else exchange.recorder.now()
    if status is Status.OK:
        end_ns = exchange.recorder.marks.stream_end or end_ns
        if exchange.response is not None and exchange.response.status_code >= 400:
            status = Status.HTTP_ERROR
    round_trip = _round_trip(exchange, status, rtt_ms, earlier or Earlier())
    sample = _sample(spec, exchange, index, started_at, status, end_ns, round_trip)
    sample.cold_start = cold_start
    outcome.describe(sample, exchange.response, exchange.findings.error, error, redactor)
    answers.judge(sample, spec, exchange.keeper, redactor)
    connection.describe(sample, exchange.recorder.fresh_stream)
    if error is not None:
        # The scrubbed text, never the exception: its message may quote a secret.
        log.debug("probe of %s failed: %s: %s", spec.url, sample.error_class, sample.error)
    responses.unbind(exchange.response)
    return sample


async def _exchange(
    client: httpx.AsyncClient, spec: ProbeSpec, exchange: _Exchange, cutoff: asyncio.Timeout
) -> None:
    recorder = exchange.recorder
    request = _build_request(client, spec, exchange)
    # Time zero is the hand-over to httpx, as curl's clock starts with its transfer:
    # building the request is the probe's work, not the endpoint's (bench.probe_vs_curl).
    recorder.start_ns = clock.now_ns()
    cutoff.reschedule(asyncio.get_running_loop().time() + spec.cutoff_s)
    response = await _send(client, spec, exchange, request)
    exchange.response = response
    try:
        reader = _reader_for(spec, response, exchange)
        marks, start_ns = recorder.marks, recorder.start_ns
        async for chunk in response.aiter_bytes():
            now = clock.now_ns() - start_ns  # recorder.now(), a call less per chunk
            if marks.first_byte is None:
                marks.first_byte = now
            reader.feed(chunk, now)
            if isinstance(reader, ErrorBodyReader) and reader.full:
                break
        reader.close(recorder.now())
        recorder.mark("stream_end")
    finally:
        await response.aclose()


async def _send(
    client: httpx.AsyncClient, spec: ProbeSpec, exchange: _Exchange, request: httpx.Request
) -> httpx.Response:
    """``request`` sent and the redirects it meets followed as ``spec`` says: the final
    response, its body still to read."""
    seen = [request.url]
    response = responses.closed_whole(await client.send(request, stream=True))
    while redirects.is_hop(spec, response):
        exchange.response = response
        try:
            request = redirects.next_request(client, request, response, spec, seen)
        finally:
            await redirects.drain(response)
            responses.unbind(response)
        exchange.recorder.redirected()
        response = responses.closed_whole(await client.send(request, stream=True))
    return response


def _build_request(
    client: httpx.AsyncClient, spec: ProbeSpec, exchange: _Exchange
) -> httpx.Request:
    payload = spec.body
    if spec.templated:
        # Before time zero: not the endpoint's.
        payload = template.render(payload, exchange.index)
    body: dict[str, Any] = {}
    if isinstance(payload, bytes | str):
        body["content"] = payload
    elif payload is not None:
        body["json"] = payload
    return client.build_request(
        spec.method,
        spec.url,
        headers=with_traceparent(spec.headers, exchange.traceparent),
        extensions={"trace": exchange.recorder},
        **body,
    )


def _reader_for(spec: ProbeSpec, response: httpx.Response, exchange: _Exchange) -> BodyReader:
    findings = exchange.findings
    findings.server_timing.merge(timing_from_headers(response.headers, spec.server_timing_map))
    if response.status_code >= 400:
        return ErrorBodyReader(findings, exchange.redactor)
    answer = Answer(exchange.recorder.marks, findings, spec.max_body_bytes)
    reader = KINDS[spec.kind].reader(response, answer)
    if spec.expect is not None:
        reader = exchange.keeper = answers.Keeper(reader)
    exchange.streaming = reader.streaming
    return reader


def _sample(
    spec: ProbeSpec,
    exchange: _Exchange,
    index: int,
    started_at: datetime,
    status: Status,
    end_ns: int,
    round_trip: tuple[float | None, float | None],
) -> Sample:
    """``round_trip``: the RTT, and the network estimate taken from it or from earlier."""
    rtt_ms, network_ms = round_trip
    marks = exchange.recorder.marks
    findings = exchange.findings
    kind, server = KINDS[spec.kind], findings.server_timing
    breakdown = kind.breakdown(marks, end_ns, server, network_ms, streaming=exchange.streaming)
    response = exchange.response
    return Sample(
        index=index,
        started_at=started_at,
        status=status,
        total_ms=end_ns / 1e6,
        phases=breakdown.phases,
        provenance=breakdown.provenance,
        unsplit=breakdown.unsplit,
        flags=breakdown.flags,
        marks=marks,
        http_status=None if response is None else response.status_code,
        http_version=None if response is None else response.http_version,
        connection_reused=exchange.recorder.connection_reused,
        remote_address=outcome.remote_address(response),
        request_id=outcome.request_id(response, exchange.redactor),
        tokens=findings.tokens,
        server_timing=outcome.scrub_timing(findings.server_timing, exchange.redactor),
        rtt_ms=rtt_ms,
        traceparent=exchange.traceparent,
        stream=findings.cadence.stats(marks.cut),
    )


def _round_trip(
    exchange: _Exchange, status: Status, rtt_ms: float | None, earlier: Earlier
) -> tuple[float | None, float | None]:
    """The sample's RTT, and the network estimate its breakdown takes (see probe_once)."""
    if rtt_ms is None:
        rtt_ms = exchange.kernel_rtt_ms()
    if rtt_ms is None:
        rtt_ms = earlier.rtt_ms
    if status in CUT and earlier.network_ms is not None:
        return rtt_ms, earlier.network_ms
    return rtt_ms, rtt_ms


def _cutoff_error(spec: ProbeSpec) -> TimeoutError:
    if spec.deadline_ms is not None and spec.deadline_ms / 1000 <= spec.timeout_s:
        return DeadlineExceeded(f"client deadline of {spec.deadline_ms:g} ms reached")
    return HardTimeout(f"hard timeout of {spec.timeout_s:g} s reached")


class DeadlineExceeded(TimeoutError):
    pass


class HardTimeout(TimeoutError):
    pass
