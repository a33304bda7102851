"""An independent client with next to no software of its own: a blocking socket and a
stopwatch. One request line, headers and body in one ``sendall`` (as curl sends a small
POST), a stamp on every ``recv``; a token is a server-sent event with non-empty content,
timed by the ``recv`` that brought its first byte."""

from __future__ import annotations

import json
import re
import socket
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

_TOKEN = re.compile(rb'"content": ?"(?!")')
_MS = 1e-6


@dataclass(frozen=True)
class RawAnswer:
    status: int
    headers: dict[str, str]
    head_ms: float  # the response headers complete, from the request's first byte out
    first_token_ms: float | None
    last_token_ms: float | None
    end_ms: float  # the body complete


class RawClient:
    """One kept-alive connection to ``url``'s host."""

    def __init__(self, url: str, timeout_s: float = 30.0) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.sock = socket.create_connection((self.host, self.port), timeout=timeout_s)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def close(self) -> None:
        self.sock.close()

    def post_json(self, path: str, body: Any) -> RawAnswer:
        data = json.dumps(body).encode()
        head = (
            f"POST {path} HTTP/1.1\r\nhost: {self.host}:{self.port}\r\n"
            f"content-type: application/json\r\ncontent-length: {len(data)}\r\n\r\n"
        )
        return self._exchange(head.encode() + data)

    def get(self, path: str) -> RawAnswer:
        return self._exchange(
            f"GET {path} HTTP/1.1\r\nhost: {self.host}:{self.port}\r\n\r\n".encode()
        )

    def _exchange(self, request: bytes) -> RawAnswer:
        start = time.perf_counter_ns()
        self.sock.sendall(request)
        received, stamps = bytearray(), []
        head_end, head_at, length = -1, 0, None
        while head_end < 0 or not _complete(received, head_end, length):
            chunk = self.sock.recv(65536)
            now = time.perf_counter_ns()
            if not chunk:
                raise ConnectionError("the server closed the connection mid-answer")
            stamps.append((len(received), now))
            received += chunk
            if head_end < 0 and (head_end := received.find(b"\r\n\r\n")) >= 0:
                head_at, length = now, _length(bytes(received[:head_end]))
        return _answer(bytes(received), head_end, stamps, (start, head_at, now))


def _length(head: bytes) -> int | None:
    """The content length, or None for a chunked body."""
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    return None


def _complete(received: bytearray, head_end: int, length: int | None) -> bool:
    body = len(received) - head_end - 4
    return body >= length if length is not None else received.endswith(b"0\r\n\r\n")


def _answer(
    raw: bytes, head_end: int, stamps: list[tuple[int, int]], times: tuple[int, int, int]
) -> RawAnswer:
    start, head_at, end = times
    lines = raw[:head_end].decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in lines[1:])}
    tokens = [_arrival(stamps, match.start()) for match in _TOKEN.finditer(raw, head_end)]
    return RawAnswer(
        status=int(lines[0].split()[1]),
        headers=headers,
        head_ms=(head_at - start) * _MS,
        first_token_ms=(tokens[0] - start) * _MS if tokens else None,
        last_token_ms=(tokens[-1] - start) * _MS if tokens else None,
        end_ms=(end - start) * _MS,
    )


def _arrival(stamps: list[tuple[int, int]], offset: int) -> int:
    """When the byte at ``offset`` arrived: the stamp of the recv that brought it."""
    arrived = stamps[0][1]
    for first_byte, at in stamps:
        if first_byte > offset:
            break
        arrived = at
    return arrived
