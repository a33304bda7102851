"""Bounded waits: a budget that ends them, and a cancellation that always does."""

from __future__ import annotations

import asyncio
import threading

import pytest

from app.runs.threads import Check, bounded, within

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]
NEVER_S = 3600.0


async def test_within_answers_with_the_result() -> None:
    assert await within(asyncio.sleep(0, result=7), NEVER_S) == 7


async def test_within_raises_timeout_once_the_budget_has_passed() -> None:
    with pytest.raises(TimeoutError):
        await within(asyncio.Event().wait(), 0.01)


async def test_a_wait_cancelled_as_its_answer_lands_ends_cancelled() -> None:
    # Python 3.11's asyncio.wait_for returns the answer here and drops the cancel: a loop
    # being stopped just as its answer came carried on.
    answer = asyncio.get_running_loop().create_future()
    waiting = asyncio.create_task(within(answer, NEVER_S))
    await asyncio.sleep(0)  # the wait has begun
    answer.set_result(1)  # landed, the waiting task not yet woken
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting


async def test_bounded_gives_none_for_a_call_past_its_budget() -> None:
    release = threading.Event()
    try:
        assert await bounded(lambda: release.wait(NEVER_S), 0.01, "a hung call") is None
    finally:
        release.set()


async def test_a_check_past_its_budget_raises_and_is_not_started_twice() -> None:
    release, calls = threading.Event(), []

    def hangs() -> bool:
        calls.append(1)
        return release.wait(NEVER_S)

    check = Check(hangs, "a hung check")
    try:
        for _ in range(2):
            with pytest.raises(TimeoutError):
                await check.ask(0.01)
        assert len(calls) == 1
        assert check.waiting_s > 0.0
    finally:
        release.set()
    assert await check.ask(NEVER_S) is True
