"""A reference client with next to no software of its own: a blocking socket and a stopwatch.

It sends one streaming chat completion over plain HTTP/1.1 (request line, headers and body
in one ``sendall``, as curl sends a small POST) and stamps every ``recv``. Comparing the
probe with it tells what of the probe's error against the sim's truth is the probe's own,
and what is the sim's and the kernel's (which no client can remove).
"""

from __future__ import annotations

import json
import re
import socket
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from bench.common import STREAM_BODY

_TOKEN = b'"content":"tok'
_END = b"\r\n0\r\n\r\n"
_USAGE = re.compile(rb'"queue_time":([0-9.e-]+),"prompt_time":([0-9.e-]+)')
_REQUEST_ID = re.compile(rb"\r\nx-request-id: ([^\r]+)\r\n", re.IGNORECASE)


@dataclass(frozen=True)
class RawSample:
    request_id: str
    phases: dict[str, float]  # network, queue, prefill, generation, transfer (ms)


class RawClient:
    """One kept-alive connection; ``probe()`` is one request on it."""

    def __init__(self, url: str, timeout_s: float = 10.0) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        body = json.dumps(STREAM_BODY, separators=(",", ":")).encode()
        head = (
            f"POST /v1/chat/completions HTTP/1.1\r\nhost: {self.host}:{self.port}\r\n"
            f"content-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
        )
        self.request = head.encode() + body
        self.sock = socket.create_connection((self.host, self.port), timeout=timeout_s)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def close(self) -> None:
        self.sock.close()

    def probe(self) -> RawSample:
        start = time.perf_counter_ns()
        self.sock.sendall(self.request)
        received, first, last = bytearray(), 0, 0
        while not received.endswith(_END):
            chunk = self.sock.recv(65536)
            now = time.perf_counter_ns()
            if not chunk:
                raise ConnectionError("the server closed the connection mid-response")
            had = received.count(_TOKEN)
            received += chunk
            if received.count(_TOKEN) > had:
                first, last = first or now, now
        return _sample(bytes(received), start, first, last, time.perf_counter_ns())


def _sample(raw: bytes, start: int, first: int, last: int, end: int) -> RawSample:
    usage, request_id = _USAGE.search(raw), _REQUEST_ID.search(raw)
    if usage is None or request_id is None or not first:
        raise ValueError("no usage timing, request id or token in the response")
    queue, prefill = (float(v) * 1000 for v in usage.groups())
    ms = 1e-6
    phases = {
        "network": (first - start) * ms - queue - prefill,
        "queue": queue,
        "prefill": prefill,
        "generation": (last - first) * ms,
        "transfer": (end - last) * ms,
    }
    return RawSample(request_id.group(1).decode(), phases)
