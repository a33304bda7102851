"""Waits that always end: within a budget, and at a cancellation (app.runs.waits)."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from app.runs.waits import cancelled, within

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

HOUR_S = 3600.0


async def test_within_answers_with_the_result() -> None:
    assert await within(asyncio.sleep(0, result=7), HOUR_S) == 7


async def test_within_raises_timeout_once_the_budget_has_passed() -> None:
    with pytest.raises(TimeoutError):
        await within(asyncio.Event().wait(), 0.01)


async def test_a_wait_cancelled_as_its_answer_lands_ends_cancelled() -> None:
    # Python 3.11's asyncio.wait_for returns the answer here and drops the cancel: a loop
    # being stopped just as its answer came carried on.
    answer = asyncio.get_running_loop().create_future()
    waiting = asyncio.create_task(within(answer, HOUR_S))
    await asyncio.sleep(0)  # the wait has begun
    answer.set_result(1)  # landed, the waiting task not yet woken
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting


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
