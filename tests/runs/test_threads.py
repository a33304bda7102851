"""A blocking call given a budget on a daemon thread, and a check asked once at a time."""

from __future__ import annotations

import threading

import pytest

from app.runs.threads import Check, bounded

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]
NEVER_S = 3600.0


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
