"""serve's web server: its main loop stops as soon as it is told, without ticking ten times
a second to look."""

from __future__ import annotations

import asyncio
import time
from typing import Any, cast

import pytest
import uvicorn
from fastapi import FastAPI

from app.cli.serving import TICK_S, _Server

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]


def server() -> _Server:
    config = uvicorn.Config(FastAPI(), log_config=None)
    config.load()
    built = _Server(config, cast(Any, None), cast(Any, None))
    built.loop = asyncio.get_running_loop()
    return built


async def test_the_main_loop_ends_at_once_when_told_to_stop_not_at_its_next_tick() -> None:
    built = server()
    running = asyncio.create_task(built.main_loop())
    await asyncio.sleep(0.05)
    began = time.monotonic()
    built.should_exit = True
    await asyncio.wait_for(running, TICK_S)
    assert time.monotonic() - began < TICK_S / 2


async def test_the_main_loop_renews_the_date_header_at_each_tick() -> None:
    built = server()
    running = asyncio.create_task(built.main_loop())
    await asyncio.sleep(0.05)
    first = built.server_state.default_headers
    built.server_state.default_headers = []
    await asyncio.sleep(TICK_S + 0.5)
    renewed = [name for name, _ in built.server_state.default_headers]
    assert b"date" in renewed
    assert renewed == [name for name, _ in first]
    built.should_exit = True
    await asyncio.wait_for(running, TICK_S)
