"""An asyncio event loop on a virtual clock that jumps over idle time.

Everything else is real: sockets, the selector, threads. The clock stands still while the
loop works; when a non-blocking poll finds nothing ready and a timer is pending, the clock
jumps to that timer instead of sleeping (trio's ``MockClock(autojump_threshold=0)``). So a
simulated request that takes seconds of ``asyncio.sleep`` costs only the CPU it uses.

Why a jump is safe:
- loopback TCP delivers inside ``send()``: once a poll finds nothing ready, no byte
  written by this loop is still on its way to a socket this loop reads. Only Nagle's
  algorithm would hold bytes back (until the previous segment's ACK, possibly a delayed-ACK
  timeout later), so every TCP socket the loop watches gets ``TCP_NODELAY``, as asyncio
  gives the sockets it creates itself: the simulation adds its own network delays, and a
  loopback artefact of real milliseconds has no place on a virtual clock;
- work in other threads (``run_in_executor``, so ``asyncio.to_thread``) is not instant: while
  any is running the clock does not jump, the loop blocks until something is ready, so a
  timeout guarding that work cannot fire early and a schedule cannot run ahead of it;
- a wake-up from another thread (``call_soon_threadsafe``) arrives on the self-pipe, which
  the poll sees.

``speed`` caps the pace: the clock never runs more than ``speed`` virtual seconds per real
second ahead of where it started (None: as fast as the CPU allows).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import selectors
import socket
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")
Events = list[tuple[selectors.SelectorKey, int]]


class VirtualClock:
    """Virtual seconds, readable from any thread; only the loop's thread moves it."""

    def __init__(self, start: float = 0.0, speed: float | None = None) -> None:
        if speed is not None and speed <= 0:
            raise ValueError("speed must be positive")
        self.start = start
        self.speed = speed
        self._now = start
        self._real_start = time.monotonic()

    def now(self) -> float:
        return self._now

    def now_ns(self) -> int:
        return round(self._now * 1e9)

    def advance(self, seconds: float) -> None:
        self._now += max(0.0, seconds)

    def pace_from_here(self) -> None:
        """Measure ``speed`` from now on (not from whatever came before, such as a start-up)."""
        self.start, self._real_start = self._now, time.monotonic()

    def real_wait_before(self, target: float) -> float:
        """Real seconds to wait before the clock may reach ``target`` at this speed."""
        if self.speed is None:
            return 0.0
        due = self._real_start + (target - self.start) / self.speed
        return max(0.0, due - time.monotonic())


class _JumpingSelector(selectors.BaseSelector):
    """The loop's selector: real polls, and a clock jump where the loop would sleep."""

    def __init__(self, loop: VirtualEventLoop, inner: selectors.BaseSelector) -> None:
        self._loop = loop
        self._inner = inner

    def select(self, timeout: float | None = None) -> Events:
        events = self._inner.select(0)
        if events or timeout == 0:
            return events
        if timeout is None or self._loop.threads_busy:
            # Nothing to jump to, or a thread's result is due first: wait for it for real.
            return self._inner.select(None)
        clock = self._loop.clock
        pause = clock.real_wait_before(clock.now() + timeout)
        if pause > 0:
            events = self._inner.select(pause)
            if events:
                return events
        clock.advance(timeout)
        return []

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        key = self._inner.register(fileobj, events, data)
        _no_delay(key.fd)
        return key

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        return self._inner.unregister(fileobj)

    def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._inner.modify(fileobj, events, data)

    def close(self) -> None:
        self._inner.close()

    def get_map(self) -> Any:
        return self._inner.get_map()


def _no_delay(fd: int) -> None:
    """``TCP_NODELAY`` on ``fd`` if it is a TCP socket; anything else is left alone."""
    try:
        sock = socket.socket(fileno=fd)  # the same descriptor, not a copy
    except OSError:
        return  # not a socket (the loop's self-pipe is a socket pair, so rarely)
    try:
        if sock.type == socket.SOCK_STREAM and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except OSError:
        pass
    finally:
        sock.detach()  # the descriptor stays open: it is not ours


class VirtualEventLoop(asyncio.SelectorEventLoop):
    """A selector event loop whose ``time()`` is a ``VirtualClock``."""

    def __init__(self, clock: VirtualClock | None = None) -> None:
        self.clock = clock or VirtualClock()
        self.threads_busy = 0
        super().__init__(_JumpingSelector(self, selectors.DefaultSelector()))

    def time(self) -> float:
        return self.clock.now()

    def run_in_executor(  # type: ignore[override]
        self,
        executor: concurrent.futures.Executor | None,
        func: Callable[..., T],
        *args: Any,
    ) -> asyncio.Future[T]:
        future = super().run_in_executor(executor, func, *args)
        self.threads_busy += 1
        future.add_done_callback(self._thread_done)
        return future

    def _thread_done(self, _future: asyncio.Future[Any]) -> None:
        self.threads_busy -= 1
