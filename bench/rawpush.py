"""A push client that costs the load generator next to nothing: asyncio streams, one
kept-alive HTTP/1.1 connection per agent, the request's bytes built once (only the sent-at
header is written per push), the answer read by its Content-Length.

``bench.agents_ingest`` drove its agents with a thread and an httpx client each: at 10,000
runs a minute the generator's own CPU and its twenty threads' turns at the interpreter's
lock competed with the server for the machine's two cores, and the rate asked for was not
offered on time. One event loop of coroutines asks much less of both.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime

MAX_HEAD = 65536


class PushError(ConnectionError):
    """The server closed the connection or answered something this client cannot read."""


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes

    def stored(self) -> int:
        """Runs the server stored: ``{"stored": true}`` for one, ``results`` for a batch."""
        if self.status != 200:
            return 0
        found = json.loads(self.body)
        if "results" not in found:
            return 1 if found["stored"] else 0
        return sum(r["outcome"] == "stored" for r in found["results"])


def request_head(host: str, path: str, headers: dict[str, str], length: int) -> bytes:
    """Everything of a POST before its last header (the sent-at time, added per push)."""
    lines = [f"POST {path} HTTP/1.1", f"Host: {host}", f"Content-Length: {length}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n").encode()


class RawPusher:
    """One agent's connection; ``post`` is one request on it, answered before the next.
    A connection the server closed while idle (its keep-alive timeout, 5 s for uvicorn:
    a batching agent may wait longer) is opened again, as httpx's pool would."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.reconnects = 0

    @classmethod
    async def connect(cls, host: str, port: int) -> RawPusher:
        pusher = cls(host, port)
        await pusher._open()
        return pusher

    async def _open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(
            self.host, self.port, limit=MAX_HEAD
        )

    async def post(self, head: bytes, sent_header: str, body: bytes) -> Answer:
        if self.reader is None or self.reader.at_eof():
            await self.close()
            await self._open()
            self.reconnects += 1
        assert self.writer is not None
        sent = f"{sent_header}: {datetime.now(UTC).isoformat()}\r\n\r\n".encode()
        self.writer.write(head + sent + body)
        return await self._answer()

    async def _answer(self) -> Answer:
        assert self.reader is not None
        try:
            raw = await self.reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
            raise PushError(f"no answer's head: {exc}") from None
        status_line, *lines = raw.decode("latin-1").split("\r\n")
        fields = dict(line.split(":", 1) for line in lines if ":" in line)
        named = {name.strip().lower(): value.strip() for name, value in fields.items()}
        if "content-length" not in named:
            raise PushError(f"an answer without Content-Length: {status_line!r}")
        try:
            body = await self.reader.readexactly(int(named["content-length"]))
        except asyncio.IncompleteReadError as exc:
            raise PushError(f"the answer's body was cut: {exc}") from None
        return Answer(int(status_line.split()[1]), body)

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            with contextlib.suppress(ConnectionError):
                await self.writer.wait_closed()
        self.reader = self.writer = None
