"""What the probe sends: who it says it is, and a body made afresh for every request."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from app import __version__
from app.probe.run import probe_run
from app.probe.spec import Kind, ProbeSpec
from tests import hostile

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def recording() -> AsyncIterator[tuple[str, list[tuple[bytes, bytes]]]]:
    """A server answering every request with a small JSON answer; it keeps (head, body)."""
    seen: list[tuple[bytes, bytes]] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            seen.append((head, await reader.readexactly(length)))
            body = b'{"choices": [{"message": {"content": "hi"}}]}'
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n")
            writer.write(b"content-length: %d\r\n\r\n%s" % (len(body), body))
            await writer.drain()

    async with hostile.serve(handler) as url:
        yield url, seen


def header(head: bytes, name: bytes) -> bytes | None:
    for line in head.split(b"\r\n")[1:]:
        key, _, value = line.partition(b":")
        if key.strip().lower() == name:
            return value.strip()
    return None


async def test_every_request_names_phasewatch_and_its_version() -> None:
    async with recording() as (url, seen):
        await probe_run(ProbeSpec(url=url), 2)
    assert [header(head, b"user-agent") for head, _ in seen] == [
        f"phasewatch/{__version__}".encode()
    ] * 2


async def test_a_targets_own_user_agent_wins() -> None:
    async with recording() as (url, seen):
        await probe_run(ProbeSpec(url=url, headers={"User-Agent": "my-probe/2"}), 1)
    assert header(seen[0][0], b"user-agent") == b"my-probe/2"


async def test_openai_kinds_send_it_too() -> None:
    async with recording() as (url, seen):
        spec = ProbeSpec(url=url, kind=Kind.OPENAI, method="POST", body={"messages": []})
        await probe_run(spec, 1)
    assert header(seen[0][0], b"user-agent") == f"phasewatch/{__version__}".encode()
