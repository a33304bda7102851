"""serve's web server: its main loop stops as soon as it is told, without ticking to look,
and every response's Date is the current second's, made as the request reads it."""

from __future__ import annotations

import asyncio
import time
from email.utils import formatdate
from typing import Any, cast

import httpx
import pytest
import uvicorn
from fastapi import FastAPI

from app.cli.serving import _DatedState, _Server, bind

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]


def server() -> _Server:
    config = uvicorn.Config(FastAPI(), log_config=None)
    config.load()
    built = _Server(config, cast(Any, None), cast(Any, None))
    built.loop = asyncio.get_running_loop()
    return built


async def test_the_main_loop_ends_at_once_when_told_to_stop() -> None:
    built = server()
    running = asyncio.create_task(built.main_loop())
    await asyncio.sleep(0.05)
    began = time.monotonic()
    built.should_exit = True
    await asyncio.wait_for(running, 1.0)
    assert time.monotonic() - began < 0.5


def dated_at(now: float, headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    return [(b"date", formatdate(int(now), usegmt=True).encode()), *headers]


@pytest.mark.parametrize(
    ("template", "read"),
    [
        ([(b"date", b"old"), (b"server", b"x")], lambda now: dated_at(now, [(b"server", b"x")])),
        ([(b"date", b"old")], lambda now: dated_at(now, [])),
        ([(b"server", b"x")], lambda _now: [(b"server", b"x")]),  # date_header=False: none
        ([], lambda _now: []),
    ],
)
def test_the_default_headers_carry_the_date_of_the_second_they_are_read_in(
    monkeypatch: pytest.MonkeyPatch, template: list[tuple[bytes, bytes]], read: Any
) -> None:
    state, now = _DatedState(), [1_796_601_600.2]
    monkeypatch.setattr(time, "time", lambda: now[0])
    state.default_headers = template  # as uvicorn's tick sets them
    assert state.default_headers == read(now[0])
    now[0] += 0.5  # the same second: the same list, not made again
    assert state.default_headers is state.default_headers == read(now[0])
    now[0] += 3600.0  # an hour idle, no tick between: the next read's own second
    assert state.default_headers == read(now[0])


def seconds_between(before: float, after: float) -> set[bytes]:
    return {formatdate(s, usegmt=True).encode() for s in range(int(before), int(after) + 1)}


async def test_a_response_after_an_idle_spell_carries_the_current_date() -> None:
    """Through uvicorn itself (its protocol reads the headers as a request comes in): a
    test that fails should a pinned uvicorn read them elsewhere, or only at its tick."""
    built = server()
    sock = bind("127.0.0.1", 0)
    serving = asyncio.create_task(built.serve(sockets=[sock]))
    try:
        while not built.started:
            await asyncio.sleep(0.01)
        await asyncio.sleep(2.2)  # idle: no tick renews anything meanwhile
        port = sock.getsockname()[1]
        async with httpx.AsyncClient() as client:
            before = time.time()
            response = await client.get(f"http://127.0.0.1:{port}/openapi.json")
            after = time.time()
        assert response.headers["date"].encode() in seconds_between(before, after)
    finally:
        built.should_exit = True
        await asyncio.wait_for(serving, 5.0)
