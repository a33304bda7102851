"""Stopping within the budget: the background loops, cancelled, are waited for a bounded
time (app.runtime.stopping)."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from app.runtime.stopping import cancelled

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

HOUR_S = 3600.0


async def test_cancelled_loops_end_and_a_loop_that_swallows_its_cancellation_is_left(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def swallows_once() -> None:
        # As Python 3.11's wait_for did when the cancellation met the end of its wait.
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(HOUR_S)
        await asyncio.sleep(HOUR_S)

    async def failed() -> None:
        raise ValueError("its own error, logged by the loop")

    ends = asyncio.create_task(asyncio.sleep(HOUR_S), name="ends")
    stays = asyncio.create_task(swallows_once(), name="stays")
    fails = asyncio.create_task(failed(), name="fails")
    await asyncio.sleep(0)  # each has begun
    try:
        await asyncio.wait_for(cancelled([ends, stays, fails], 0.05), 30.0)
        assert ends.cancelled() and fails.done() and not stays.done()
        assert "loop stays did not end when cancelled" in caplog.text
        assert "ends" not in caplog.text and "fails" not in caplog.text
    finally:
        stays.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await stays


async def test_no_loops_nothing_to_wait_for() -> None:
    await cancelled([], 0.05)
