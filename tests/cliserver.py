"""Loopback servers for tests that run `phasewatch probe` as a subprocess.

The server runs on an event loop of its own thread (the CLI under test is another process),
answers each request with the next canned response (the last one again once they run out)
and keeps what it was sent, so a test can check the request as the server saw it.
"""

from __future__ import annotations

import asyncio
import os
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests import hostile

ROOT = Path(__file__).parent.parent
_CLOSE = b"connection: close\r\n"


def response(status: bytes, content_type: bytes = b"text/plain", body: bytes = b"") -> bytes:
    """A whole HTTP/1.1 answer that closes its connection (the next request opens one)."""
    head = b"HTTP/1.1 " + status + b"\r\ncontent-type: " + content_type + b"\r\n" + _CLOSE
    return head + b"content-length: %d\r\n\r\n" % len(body) + body


OK = response(b"200 OK", body=b"fine")


@dataclass(frozen=True, slots=True)
class Received:
    method: str
    headers: dict[str, str]  # names lower-cased
    body: bytes


@dataclass
class Recorder:
    answers: Sequence[bytes]
    received: list[Received] = field(default_factory=list)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        pairs = (line.partition(":") for line in head[1:] if line)
        headers = {name.strip().lower(): value.strip() for name, _, value in pairs}
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        self.received.append(Received(head[0].split(" ")[0], headers, body))
        writer.write(self.answers[min(len(self.received), len(self.answers)) - 1])
        await writer.drain()


@contextmanager
def serving(*answers: bytes, tls: ssl.SSLContext | None = None) -> Iterator[tuple[Recorder, str]]:
    """A server answering ``answers`` in turn, and its URL."""
    recorder = Recorder(answers or (OK,))
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()
    urls: list[str] = []
    ready = threading.Event()

    async def run() -> None:
        async with hostile.serve(recorder.handle, tls) as url:
            urls.append(url)
            ready.set()
            await stop.wait()

    thread = threading.Thread(target=loop.run_until_complete, args=(run(),), daemon=True)
    thread.start()
    try:
        assert ready.wait(10), "the test server did not start"
        yield recorder, urls[0]
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(10)
        loop.close()


def probe(*args: str) -> subprocess.CompletedProcess[str]:
    """``phasewatch probe ARGS`` in a fresh process, as a shell or a CI script runs it."""
    command = [sys.executable, "-m", "app", "probe", *args]
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    return subprocess.run(command, capture_output=True, text=True, timeout=60, cwd=ROOT, env=env)
