"""The simulated network: every ASGI message reaches the wire a fixed one-way time after the
server emitted it, in order and with the spacing between messages kept. A busy host wakes
late, so the wire also notes when each message really left: the truth counts that.

Times are ``loop.time()`` seconds. Deadlines are absolute so that sleeps never add up drift.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

Message = MutableMapping[str, Any]
Send = Callable[[Message], Awaitable[None]]
_BODY = "http.response.body"


@dataclass(frozen=True, slots=True)
class Departure:
    """One message: when the server emitted it and when it really went out."""

    emitted: float
    sent: float


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
        self._pending: deque[_Item | None] = deque()
        self._queued = asyncio.Event()
        self.emitted = 0  # messages so far; departures come in the same order
        self.departures: list[Departure] = []
        # Called just before the response's last part is handed over: after it, a client
        # may already have the whole response. Every earlier part has its departure by then.
        self.before_last: Callable[[], None] | None = None
        self._task = asyncio.create_task(self._run())

    def emit(self, message: Message) -> float:
        """Queue ``message`` for the wire and return the emit time."""
        emitted = now()
        self.emitted += 1
        self._put(_Item(emitted, emitted + self._delay_s, message))
        return emitted

    def _put(self, item: _Item | None) -> None:
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
            await sleep_until(item.due)
            parts = self._with_same_instant(item)
            message = _joined(parts)
            if _is_last(message) and self.before_last is not None:
                self.before_last()
            await self._send(message)
            # Once the server has written it to the socket: its own send path is its time.
            sent = now()
            self.departures += [Departure(part.emitted, sent) for part in parts]

    def _with_same_instant(self, first: _Item) -> list[_Item]:
        """``first`` with the body parts queued behind it for the same instant."""
        parts = [first]
        while first.message["type"] == _BODY and _is_body_due(self._pending, first.due):
            item = self._pending.popleft()
            assert item is not None
            parts.append(item)
        return parts

    async def close(self) -> None:
        """Wait until everything emitted so far is on the wire."""
        self._put(None)
        await self._task

    def abort(self) -> None:
        if self._task.done() and not self._task.cancelled():
            self._task.exception()  # retrieved, so asyncio does not log it as lost
        self._task.cancel()


def _joined(parts: list[_Item]) -> Message:
    if len(parts) == 1:
        return parts[0].message
    body = b"".join(part.message.get("body", b"") for part in parts)
    return {"type": _BODY, "body": body, "more_body": parts[-1].message.get("more_body", False)}


def _is_last(message: Message) -> bool:
    return message["type"] == _BODY and not message.get("more_body", False)


@dataclass(frozen=True, slots=True)
class _Item:
    emitted: float
    due: float
    message: Message


def _is_body_due(pending: deque[_Item | None], due: float) -> bool:
    item = pending[0] if pending else None
    return item is not None and item.due == due and item.message["type"] == _BODY
