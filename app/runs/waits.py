"""Waits that always end: within a budget, and at a cancellation.

Not ``asyncio.wait_for``: on Python 3.11 a cancellation that lands as the awaited thing
finishes is dropped (its result returned), so a loop being stopped carried on past its
cancel. And a task that swallows its cancellation anyway is named and left, never waited
for without end.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Collection
from typing import Any, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")
CANCEL_GRACE_S = 0.25  # a cancelled task ends at its next await: microseconds


async def within(awaitable: Awaitable[T], budget_s: float) -> T:
    """``awaitable``'s result, or TimeoutError once ``budget_s`` has passed (it is
    cancelled then); a cancellation of the caller always ends the wait."""
    async with asyncio.timeout(max(0.0, budget_s)):
        return await awaitable


async def cancelled(
    tasks: Collection[asyncio.Task[Any]], budget_s: float = CANCEL_GRACE_S, what: str = "loop"
) -> None:
    """Cancel ``tasks`` and wait ``budget_s`` at most for them to end. One still running
    then has swallowed its cancellation: it is named (``what`` and its name) and left."""
    for task in tasks:
        task.cancel()
    if not tasks:
        return
    done, running = await asyncio.wait(tasks, timeout=budget_s)
    for task in done:
        if not task.cancelled():
            task.exception()  # retrieved, as gather(return_exceptions=True) did
    for task in running:
        log.warning("stopping: %s %s did not end when cancelled; left", what, task.get_name())
