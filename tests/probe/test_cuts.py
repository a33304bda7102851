"""Deadline cuts leave the client as they found it: the pool gives the next sample a
connection at once, and the cut sample keeps the phases it measured before the cut.

The server is a thread with blocking sockets, so it answers while the probe's event loop is
busy (as a real server in another process does).
"""

from __future__ import annotations

import itertools
import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

import pytest

from app.probe.client import make_client, probe_once
from app.probe.run import probe_run
from app.probe.sample import Status
from app.probe.spec import Kind, ProbeSpec

pytestmark = pytest.mark.anyio

_EVENT = b"data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": "t"}}]}).encode()
# ~190 KB of token events, all sent at once: the probe spends milliseconds decoding what is
# already in its buffer, without a loop turn, so a deadline passing meanwhile fires only at
# the next suspension, which is inside the response's close.
BIG_STREAM = (_EVENT + b"\n\n") * 3000 + b"data: [DONE]\n\n"


def _answer(body: bytes, content_type: str) -> bytes:
    head = f"HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\ncontent-length: {len(body)}\r\n"
    return head.encode() + b"\r\n" + body


def _read_request(conn: socket.socket, pending: bytes) -> bytes | None:
    while b"\r\n\r\n" not in pending:
        data = conn.recv(65536)
        if not data:
            return None
        pending += data
    head, pending = pending.split(b"\r\n\r\n", 1)
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    while len(pending) < length:
        pending += conn.recv(65536)
    return pending[length:]


def _serve_connection(conn: socket.socket, answer: bytes, delays: Iterator[float]) -> None:
    pending: bytes | None = b""
    with conn:
        try:
            while (pending := _read_request(conn, pending or b"")) is not None:
                time.sleep(next(delays))
                conn.sendall(answer)
        except OSError:
            pass


@contextmanager
def threaded_server(answer: bytes, *delays_s: float) -> Iterator[str]:
    """Answers every request with ``answer``, the n-th after the n-th of ``delays_s``
    (cycled; none: at once), on any connection."""
    delays = itertools.cycle(delays_s or (0.0,))
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.05)  # a closed listener does not wake a blocked accept()
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.settimeout(None)
            args = (conn, answer, delays)
            threading.Thread(target=_serve_connection, args=args, daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1/chat/completions"
    finally:
        stop.set()
        listener.close()
        thread.join(5)


def stream_spec(url: str, **fields: object) -> ProbeSpec:
    spec = ProbeSpec(url=url, kind=Kind.OPENAI, method="POST", body={"stream": True})
    return replace(spec, **fields)  # type: ignore[arg-type]


async def test_a_cut_while_the_answer_closes_leaves_the_pool_a_connection() -> None:
    """Deadlines swept across the decoding of a body already received: some cuts land in
    the response's close, where httpcore's clean-up (shielded from anyio's cancellation,
    not from asyncio's) used to stop half-way and keep the connection checked out, so every
    later sample of the run waited in the pool for the whole deadline."""
    delay_s = 0.010
    with threaded_server(_answer(BIG_STREAM, "text/event-stream"), delay_s) as url:
        async with make_client(stream_spec(url)) as client:
            warm = await probe_once(client, stream_spec(url))
            assert warm.status is Status.OK
            end_ms = warm.total_ms
            cut = 0
            for step in range(1, 25):
                spec = stream_spec(url, deadline_ms=delay_s * 1000 + step * end_ms / 20)
                sample = await probe_once(client, spec)
                cut += sample.status is Status.DEADLINE_EXCEEDED
                # Every sample got a connection: its request went out.
                assert sample.marks.request_start is not None, (step, sample.marks)
            after = await probe_once(client, stream_spec(url, timeout_s=5.0))
    assert cut > 0
    assert after.status is Status.OK
    assert after.phases["connect"] < 0.2 * after.total_ms


JSON_ANSWER = json.dumps({"choices": [{"index": 0, "message": {"content": "hi"}}]}).encode()


@pytest.mark.parametrize("reused", [False, True], ids=["fresh", "pooled"])
async def test_a_cut_before_the_headers_keeps_the_round_trip_as_network(reused: bool) -> None:
    """No answer by the deadline: network is still the kernel's round trip of the socket
    the request went out on (read as it closed; on a pooled connection, as the sample
    before left it), not 0 with all the head in queue."""
    delays = (0.0, 0.5) if reused else (0.5,)
    with threaded_server(_answer(JSON_ANSWER, "application/json"), *delays) as url:
        spec = stream_spec(url, body={"messages": []}, deadline_ms=100)
        *before, sample = await probe_run(spec, 2 if reused else 1)
    assert [s.status for s in before] == [Status.OK] * len(before)
    assert sample.status is Status.DEADLINE_EXCEEDED
    assert sample.connection_reused is reused
    assert sample.rtt_ms is not None and sample.rtt_ms > 0
    assert sample.phases["network"] == pytest.approx(sample.rtt_ms)
    assert sample.provenance["network"] == "estimated"


async def test_a_cut_stream_keeps_the_round_trip_as_network() -> None:
    head = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
    )
    with threaded_server(head, 0.0) as url:  # headers, then nothing: no token by the deadline
        spec = stream_spec(url, deadline_ms=100)
        async with make_client(spec) as client:
            sample = await probe_once(client, spec)
    assert sample.status is Status.DEADLINE_EXCEEDED
    assert sample.marks.response_headers is not None
    assert sample.rtt_ms is not None and sample.rtt_ms > 0
    assert sample.phases["network"] == pytest.approx(sample.rtt_ms)


def _timed_stream() -> bytes:
    """A stream whose server says how long it queued and prefilled (Server-Timing)."""
    body = (_EVENT + b"\n\n") * 3 + b"data: [DONE]\n\n"
    head = (
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
        f"server-timing: queue;dur=10, prefill;dur=10\r\ncontent-length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def test_a_cut_keeps_the_network_an_earlier_sample_measured_against_the_server() -> None:
    """The server accounts for its queue and prefill, so an answered sample measures network
    (time to first token minus them); a cut one never gets that account, and takes the
    run's last measured network instead of the kernel's loopback round trip."""
    with threaded_server(_timed_stream(), 0.040, 0.5) as url:
        answered, cut = await probe_run(stream_spec(url, deadline_ms=200), 2)
    assert answered.status is Status.OK and cut.status is Status.DEADLINE_EXCEEDED
    assert answered.provenance["network"] == "measured"
    assert answered.phases["network"] > 10  # 40 ms to the first token, 20 ms accounted for
    assert cut.phases["network"] == pytest.approx(answered.phases["network"])
    assert cut.phases["queue"] == pytest.approx(200 - cut.phases["network"] - cut.phases["connect"])


async def test_a_pooled_connection_s_round_trip_is_not_its_server_s_time() -> None:
    """Past its first exchanges the server ACKs each request only with its answer (delayed
    ACK), so the kernel's smoothed RTT of a pooled connection climbs toward the server's
    time, request by request; the least RTT it has seen stays the wire's."""
    with threaded_server(_answer(JSON_ANSWER, "application/json"), 0.030) as url:
        samples = await probe_run(ProbeSpec(url=url), 6)
    assert all(s.status is Status.OK for s in samples)
    assert all(s.connection_reused for s in samples[1:])
    rtts = [s.rtt_ms for s in samples]
    assert all(rtt is not None and rtt < 5.0 for rtt in rtts), rtts  # loopback, not 30 ms


@pytest.mark.parametrize(("cooldown", "pause"), [(None, 0.2), (0.5, 0.5), (0.0, 0.0)])
async def test_a_cut_is_followed_by_a_cool_down(cooldown: float | None, pause: float) -> None:
    """Before the next sample: the deadline by default (a server that keeps working on a
    cancelled request has had that long again to finish it), or the target's cool-down."""
    with threaded_server(_answer(JSON_ANSWER, "application/json"), 0.4, 0.0) as url:
        spec = ProbeSpec(url=url, deadline_ms=200, cooldown_s=cooldown)
        cut, after = await probe_run(spec, 2)
    assert cut.status is Status.DEADLINE_EXCEEDED and after.status is Status.OK
    gap = (after.started_at - cut.started_at).total_seconds()
    assert gap >= 0.2 + pause  # the deadline, then the pause (a lower bound: load adds)
