"""Blocking work that must never hold the service up: at shutdown, on /healthz, or at exit.

A PostgreSQL that is frozen (SIGSTOP, a paused VM) rather than down keeps its TCP
connections acknowledged, so no socket timeout fires and a call into it waits for as long
as the freeze lasts. Such a call is given a budget and then left behind on its thread;
these threads are daemons, and the executor's shutdown does not wait for them.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from app.runs.waits import within

log = logging.getLogger(__name__)

T = TypeVar("T")


class NoWaitThreadPool(concurrent.futures.ThreadPoolExecutor):
    """A thread pool whose shutdown never waits: a call stuck on a frozen database is left.

    As the event loop's default executor, ``asyncio.run`` would otherwise wait at its end
    for every ``to_thread`` call still in flight.
    """

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        super().shutdown(wait=False, cancel_futures=cancel_futures)


def on_daemon_thread(fn: Callable[[], T], name: str) -> concurrent.futures.Future[T]:
    """Run ``fn`` on a new daemon thread; its result (or error) arrives in the future."""
    future: concurrent.futures.Future[T] = concurrent.futures.Future()

    def work() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(fn())
        except BaseException as exc:  # handed to whoever waits, as an executor does
            future.set_exception(exc)

    threading.Thread(target=work, name=name, daemon=True).start()
    return future


async def bounded(fn: Callable[[], T], budget_s: float, what: str) -> T | None:
    """``fn()`` on a daemon thread, waited for at most ``budget_s``; None (logged) after that."""
    future = on_daemon_thread(fn, what)
    try:
        return await within(asyncio.wrap_future(future), budget_s)
    except TimeoutError:
        log.warning("%s: no answer within %.1f s; left behind", what, budget_s)
        return None


def _read_outcome(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


class Check(Generic[T]):
    """A blocking check asked for often, run once at a time on a daemon thread.

    ``ask`` (a coroutine) and ``wait`` (a caller on a thread of its own) answer within
    their budget or raise TimeoutError; a check that hangs is not started again while it
    hangs, the next calls wait on it (``waiting_s`` says how long).
    """

    def __init__(self, fn: Callable[[], T], name: str) -> None:
        self.fn, self.name = fn, name
        self._future: concurrent.futures.Future[T] | None = None
        self._since = 0.0
        self._starting = threading.Lock()  # two scrapes at once start one check

    @property
    def waiting_s(self) -> float:
        if self._future is None or self._future.done():
            return 0.0
        return time.monotonic() - self._since

    async def ask(self, budget_s: float) -> T:
        future = asyncio.wrap_future(self._current())
        # Past the budget nobody awaits it: its error, when it comes, is read here, not
        # logged by asyncio as "never retrieved" (the caller has said it already).
        future.add_done_callback(_read_outcome)
        return await within(asyncio.shield(future), budget_s)

    def wait(self, budget_s: float) -> T:
        return self._current().result(timeout=budget_s)

    def start(self) -> None:
        """Start the check now if none is in flight (a later ``wait`` finds it going)."""
        self._current()

    def _current(self) -> concurrent.futures.Future[T]:
        """The check in flight, or a new one if none is."""
        with self._starting:
            if self._future is None or self._future.done():
                self._future = on_daemon_thread(self.fn, self.name)
                self._since = time.monotonic()
            return self._future
