"""The simulated network: every ASGI message reaches the wire a fixed one-way time after the
server emitted it, in order and with the spacing between messages kept.

Times are ``loop.time()`` seconds. Deadlines are absolute so that sleeps never add up drift.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Message = MutableMapping[str, Any]
Send = Callable[[Message], Awaitable[None]]
_BODY = "http.response.body"


def now() -> float:
    return asyncio.get_running_loop().time()


async def sleep_until(deadline: float) -> None:
    # Not even sleep(0) when the deadline has passed: a yield here would let the clock run
    # on between two events that the simulation treats as one instant.
    delay = deadline - now()
    if delay > 0:
        await asyncio.sleep(delay)


class Wire:
    """One request's outgoing messages, each sent ``delay_s`` after its ``emit``.

    Body parts emitted at the very same instant leave in one write, as a server's socket
    would send them. Only a virtual clock (``app.demo.virtual``) stands still between two
    emits; on the real clock every part is a write of its own.
    """

    def __init__(self, send: Send, delay_s: float) -> None:
        self._send = send
        self._delay_s = delay_s
        self._pending: deque[tuple[float, Message] | None] = deque()
        self._queued = asyncio.Event()
        self._task = asyncio.create_task(self._run())

    def emit(self, message: Message) -> float:
        """Queue ``message`` for the wire and return the emit time."""
        emitted = now()
        self._put((emitted + self._delay_s, message))
        return emitted

    def _put(self, item: tuple[float, Message] | None) -> None:
        self._pending.append(item)
        self._queued.set()

    async def _run(self) -> None:
        while True:
            while not self._pending:
                self._queued.clear()
                await self._queued.wait()
            item = self._pending.popleft()
            if item is None:
                return
            due, message = item
            await sleep_until(due)
            await self._send(self._with_same_instant(due, message))

    def _with_same_instant(self, due: float, message: Message) -> Message:
        """``message`` with the body parts queued behind it for the same instant."""
        if message["type"] != _BODY:
            return message
        parts = [message]
        while self._pending and _is_body_due(self._pending[0], due):
            item = self._pending.popleft()
            assert item is not None
            parts.append(item[1])
        if len(parts) == 1:
            return message
        body = b"".join(part.get("body", b"") for part in parts)
        return {"type": _BODY, "body": body, "more_body": parts[-1].get("more_body", False)}

    async def close(self) -> None:
        """Wait until everything emitted so far is on the wire."""
        self._put(None)
        await self._task

    def abort(self) -> None:
        if self._task.done() and not self._task.cancelled():
            self._task.exception()  # retrieved, so asyncio does not log it as lost
        self._task.cancel()


def _is_body_due(item: tuple[float, Message] | None, due: float) -> bool:
    return item is not None and item[0] == due and item[1]["type"] == _BODY
