"""Deadline cuts leave the client as they found it: the pool gives the next sample a
connection at once, and the cut sample keeps the phases it measured before the cut.

The server is a thread with blocking sockets, so it answers while the probe's event loop is
busy (as a real server in another process does).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

import pytest

from app.probe.client import make_client, probe_once
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


def _serve_connection(conn: socket.socket, answer: bytes, delay_s: float) -> None:
    pending: bytes | None = b""
    with conn:
        try:
            while (pending := _read_request(conn, pending or b"")) is not None:
                time.sleep(delay_s)
                conn.sendall(answer)
        except OSError:
            pass


@contextmanager
def threaded_server(answer: bytes, delay_s: float = 0.0) -> Iterator[str]:
    """Answers every request on every connection with ``answer`` after ``delay_s``."""
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
            args = (conn, answer, delay_s)
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
