"""The simulated network: every ASGI message reaches the wire a fixed one-way time after the
server emitted it, in order and with the spacing between messages kept.

Times are ``loop.time()`` seconds. Deadlines are absolute so that sleeps never add up drift.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Message = MutableMapping[str, Any]
Send = Callable[[Message], Awaitable[None]]


def now() -> float:
    return asyncio.get_running_loop().time()


async def sleep_until(deadline: float) -> None:
    # Not even sleep(0) when the deadline has passed: a yield here would let the clock run
    # on between two events that the simulation treats as one instant.
    delay = deadline - now()
    if delay > 0:
        await asyncio.sleep(delay)


class Wire:
    """One request's outgoing messages, each sent ``delay_s`` after its ``emit``."""

    def __init__(self, send: Send, delay_s: float) -> None:
        self._send = send
        self._delay_s = delay_s
        self._queue: asyncio.Queue[tuple[float, Message] | None] = asyncio.Queue()
        self._task = asyncio.create_task(self._run())

    def emit(self, message: Message) -> float:
        """Queue ``message`` for the wire and return the emit time."""
        emitted = now()
        self._queue.put_nowait((emitted + self._delay_s, message))
        return emitted

    async def _run(self) -> None:
        while (item := await self._queue.get()) is not None:
            due, message = item
            await sleep_until(due)
            await self._send(message)

    async def close(self) -> None:
        """Wait until everything emitted so far is on the wire."""
        self._queue.put_nowait(None)
        await self._task

    def abort(self) -> None:
        if self._task.done() and not self._task.cancelled():
            self._task.exception()  # retrieved, so asyncio does not log it as lost
        self._task.cancel()
