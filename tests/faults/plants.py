"""Secrets planted in what a server answers, at a chosen offset around each cut the probe makes.

A ``Plant`` is one place a response can put text into a sample (the error body's message,
the status line's reason, a header kept as a detail, a Server-Timing name, a stream's error
event, ...). ``Plant.response(text)`` is the raw HTTP/1.1 answer that carries ``text``
there; ``cut_at`` is the offset in ``text`` at which the probe cuts what it keeps, so a
secret planted at ``cut_at - len(secret) .. cut_at`` straddles the cut.

The secret and the filler around it share no character, and nothing the probe writes
itself (``401 Unauthorized``, ``HTTP401``, ``not JSON``, ``<redacted>``, timestamps, class
names) holds two characters of the secret's alphabet in a row: so any two characters of the secret
found in a sample are a leak, however the cut fell.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from app.probe.readers import ERROR_EXCERPT_BYTES
from app.probe.spec import Kind, ProbeSpec
from tests import hostile

# Capitals that start no word or acronym the probe, the API or a row writes (HTTP, JSON,
# OK, UUID, SSL, ...), and - _.
SECRET_ALPHABET = "BFGKMQVWXYZ-_"
FILLER_ALPHABET = "abcdefghijklmnopqrstuvwxyz .,;:!?"
BODY = {"model": "m", "stream": True, "messages": []}
SECRET = "ZK-QWMB-KXY_VGXFYZ-BBFG_WQXZMK-KQ"
FILLER = "lorem ipsum dolor sit amet, consectetur adipiscing elit; "
secrets = st.text(SECRET_ALPHABET, min_size=8, max_size=64)
# A letter first: header values and bodies are stripped, which would move the secret.
fillers = st.builds(
    str.__add__, st.sampled_from("abcdefg"), st.text(FILLER_ALPHABET, min_size=0, max_size=40)
)
_CLOSE = b"connection: close\r\n"


def response(status: bytes, headers: Iterable[tuple[bytes, bytes]], body: bytes = b"") -> bytes:
    lines = b"".join(name + b": " + value + b"\r\n" for name, value in headers)
    head = b"HTTP/1.1 " + status + b"\r\n" + lines + _CLOSE
    return head + b"content-length: %d\r\n\r\n" % len(body) + body


def sse(*events: bytes) -> bytes:
    body = b"".join(events)
    return response(b"200 OK", [(b"content-type", b"text/event-stream")], body)


def _json_message(text: str) -> bytes:
    body = json.dumps({"error": {"message": text, "code": "bad_key"}}).encode()
    return response(b"401 Unauthorized", [(b"content-type", b"application/json")], body)


def _text_body(text: str) -> bytes:
    return response(b"401 Unauthorized", [(b"content-type", b"text/plain")], text.encode())


def _reason(text: str) -> bytes:
    return response(b"401 " + text.encode(), [])


def _retry_after(text: str) -> bytes:
    return response(b"429 Too Many Requests", [(b"retry-after", text.encode())], b"m")


def _request_id(text: str) -> bytes:
    return response(b"200 OK", [(b"x-request-id", text.encode())])


def _timing_name(text: str) -> bytes:
    # The probe keeps metric names lower-cased: the secret must go in either case.
    timing = f"{text};dur=5, {text.lower()}x;dur=1, total;dur=3".encode()
    return response(b"200 OK", [(b"server-timing", timing)])


def _timing_desc(text: str) -> bytes:
    return response(b"200 OK", [(b"server-timing", f'total;dur=3;desc="{text}"'.encode())])


def _stream_error(text: str) -> bytes:
    event = json.dumps({"error": {"message": text, "type": "server_error"}})
    return sse(b"data: " + event.encode() + b"\n\n")


def _not_json(text: str) -> bytes:
    return sse(b"data: " + text.encode() + b"\n\n")


def _redirect_to(text: str) -> bytes:
    return response(b"307 Temporary Redirect", [(b"location", b"/" + text.encode())])


@dataclass(frozen=True)
class Plant:
    name: str
    response: Callable[[str], bytes]
    # Where in the planted text the probe cuts (None: nothing is cut there).
    cut_at: int | None
    # The sample field that must hold what was planted, for evidence that it was read.
    field: str
    kind: Kind = Kind.HTTP
    # What goes around the secret: filler, blanks before it (a body may start with any
    # number), or nothing (a Server-Timing name is one token).
    lead: str = "filler"

    def spec(self, url: str, secret: str) -> ProbeSpec:
        headers = secret_headers(secret)
        if self.kind is Kind.HTTP:
            return ProbeSpec(url=url, headers=headers)
        return ProbeSpec(url=url, kind=self.kind, method="POST", body=BODY, headers=headers)

    def offsets(self, secret: str) -> range:
        """Every offset that puts the secret across the cut, and two either side."""
        if self.cut_at is None:
            return range(0, 3)
        return range(max(0, self.cut_at - len(secret) - 2), self.cut_at + 3)

    def text(self, secret: str, offset: int, filler: str) -> str:
        if self.lead == "bare":
            return secret
        size = (self.cut_at or 0) + len(secret) + 64
        before = " " * offset if self.lead == "blank" else _repeat(filler, offset)
        return before + secret + _repeat(filler[::-1], size - offset)


def _repeat(pattern: str, size: int) -> str:
    return (pattern * (size // len(pattern) + 1))[:size]


PLANTS = (
    Plant("json error message", _json_message, 300, "error"),
    Plant("text error body", _text_body, 300, "error"),
    # A body of blanks up to the secret: what is kept of it (64 KiB) ends inside the secret.
    Plant("error body cap", _text_body, ERROR_EXCERPT_BYTES, "error", lead="blank"),
    Plant("status reason", _reason, 500 - len("401 "), "error"),
    Plant(
        "retry-after", _retry_after, 500 - len("429 Too Many Requests: m (retry-after "), "error"
    ),
    Plant("request id", _request_id, 200, "request_id"),
    Plant("server-timing name", _timing_name, None, "server_timing", lead="bare"),
    Plant("server-timing desc", _timing_desc, None, "server_timing"),
    Plant("stream error event", _stream_error, 500, "error", kind=Kind.OPENAI),
    Plant("stream not json", _not_json, 80, "error", kind=Kind.OPENAI),
    Plant("redirect location", _redirect_to, 500 - len("307 to /"), "error", kind=Kind.OPENAI),
)


def secret_headers(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}", "x-api-key": secret}


def leaks(secret: str, document: Any) -> list[str]:
    """Every two characters in a row of ``secret`` that ``document`` (as JSON) holds."""
    text = document if isinstance(document, str) else json.dumps(document)
    pairs = {secret[i : i + 2] for i in range(len(secret) - 1)}
    return sorted(pair for pair in pairs if pair in text)


class Answers:
    """A loopback server that answers each request with the next planned response."""

    def __init__(self) -> None:
        self.planned: list[bytes] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await hostile.read_request(reader)
        writer.write(self.planned.pop(0))
        await writer.drain()


@asynccontextmanager
async def answering() -> AsyncIterator[tuple[Answers, str]]:
    answers = Answers()
    async with hostile.serve(answers.handle) as url:
        yield answers, url


@contextmanager
def answering_in_thread() -> Iterator[tuple[Answers, str]]:
    """``answering`` on a loop of its own, for callers that run their own (the CLI)."""
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()
    started: list[tuple[Answers, str]] = []
    ready = threading.Event()

    async def run() -> None:
        async with answering() as found:
            started.append(found)
            ready.set()
            await stop.wait()

    thread = threading.Thread(target=loop.run_until_complete, args=(run(),), daemon=True)
    thread.start()
    try:
        assert ready.wait(10), "the answering server did not start"
        yield started[0]
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(10)
        loop.close()
