"""What the probe sends: who it says it is, and a body made afresh for every request."""

from __future__ import annotations

import asyncio
import json
import re
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


async def test_a_body_with_a_nonce_is_new_for_every_request_and_i_counts() -> None:
    body = {"messages": [{"role": "user", "content": "{{nonce}} sample {{ i }} of the run"}]}
    async with recording() as (url, seen):
        spec = ProbeSpec(url=url, kind=Kind.OPENAI, method="POST", body=body)
        samples = await probe_run(spec, 3)
    assert all(s.status.value == "ok" for s in samples)
    contents = [json.loads(sent)["messages"][0]["content"] for _, sent in seen]
    nonces = [content.split()[0] for content in contents]
    assert len(set(nonces)) == 3 and all(re.fullmatch("[0-9a-f]{16}", n) for n in nonces)
    assert [content.split(" ", 1)[1] for content in contents] == [
        f"sample {i} of the run" for i in range(3)
    ]


@pytest.mark.parametrize(
    "body",
    [b'{"prompt": "{{nonce}}"}', '{"prompt": "{{nonce}}"}'],
    ids=["bytes", "text"],
)
async def test_a_body_given_as_text_is_templated_too(body: bytes | str) -> None:
    async with recording() as (url, seen):
        await probe_run(ProbeSpec(url=url, method="POST", body=body), 2)
    prompts = [json.loads(sent)["prompt"] for _, sent in seen]
    assert prompts[0] != prompts[1] and "{{" not in prompts[0]


async def test_other_braces_and_bodies_without_placeholders_go_as_they_are() -> None:
    body = {"prompt": "{{name}} and {{ nonce"}
    async with recording() as (url, seen):
        spec = ProbeSpec(url=url, method="POST", body=body)
        assert not spec.templated
        await probe_run(spec, 1)
    assert json.loads(seen[0][1]) == body
