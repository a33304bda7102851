"""``Workers``: heavy reads (what-ifs) computed in worker processes, at most ``workers`` at
once and ``queue`` more waiting for one; past that a call is ``Busy`` at once (the API's 429
with ``Retry-After``).

Why processes: the scheduler, the probes and the web server share one event loop, and a
what-if's Python between its numpy calls holds the GIL for seconds; eight of them in the
server's threads made its 1 s probe run 66 times in 150 s and /healthz answer in 6.6 s. A
worker process has its own GIL and heap: the server's schedule and memory never see its work,
and it runs at a lower priority (``NICE``) so that on a busy machine the probes come first.

A worker is spawned (no fork of a process with threads) at its first call and serves calls
one at a time over a pipe. One that dies (killed, out of memory) fails its call with
``WorkerLost`` and is replaced at the next; ``close`` ends every worker at once, mid-call or
not, so that a stop never waits for a what-if.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import multiprocessing
import os
import pickle
import time
from collections.abc import Callable
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import Any, TypeVar

from app.runs.threads import NoWaitThreadPool

T = TypeVar("T")
log = logging.getLogger(__name__)

NICE = 5  # added to a worker's niceness: the server's probes first
END_S = 1.0  # a worker ends within this after SIGTERM, or is killed
FIRST_GUESS_S = 5.0  # a call's duration before one was measured (for Retry-After)


class Busy(Exception):
    """Every worker is busy and the queue full; try again in ``retry_after_s``."""

    def __init__(self, retry_after_s: int) -> None:
        super().__init__(f"every worker is busy and the queue full: try again in {retry_after_s} s")
        self.retry_after_s = retry_after_s


class WorkerLost(Exception):
    """The worker died during the call (killed, out of memory); the next call gets a new one."""


class Worker:
    """One spawned process that runs the calls sent to it, one at a time."""

    def __init__(self) -> None:
        context = multiprocessing.get_context("spawn")
        self._conn, theirs = context.Pipe()
        self.process: BaseProcess = context.Process(
            target=serve_calls, args=(theirs,), name="phasewatch-worker", daemon=True
        )
        self.process.start()
        theirs.close()

    def call(self, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
        """``fn(*args)`` in the worker: its value, or the exception it raised (blocks)."""
        try:
            self._conn.send((fn, args))
            wait([self._conn, self.process.sentinel])
            ok, value = self._conn.recv()
        except (EOFError, OSError):
            self.process.join(END_S)
            raise WorkerLost(f"the worker ended (exit code {self.process.exitcode})") from None
        if not ok:
            raise value
        return value  # type: ignore[no-any-return]

    def alive(self) -> bool:
        return self.process.is_alive()

    def end(self) -> None:
        self.process.terminate()
        self.process.join(END_S)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(END_S)
        self._conn.close()


def serve_calls(conn: Connection) -> None:
    """A worker's life: each call received, answered (value or exception), until the server
    closes its end (or dies)."""
    with contextlib.suppress(OSError):
        os.nice(NICE)
    while True:
        try:
            fn, args = conn.recv()
        except (EOFError, OSError):
            return
        conn.send(_answer(fn, args))


def _answer(fn: Callable[..., Any], args: tuple[Any, ...]) -> tuple[bool, Any]:
    try:
        return True, fn(*args)
    except Exception as exc:
        try:  # the server raises it again: it must cross the pipe whole
            pickle.loads(pickle.dumps(exc))
        except Exception:
            return False, RuntimeError(f"{type(exc).__name__}: {exc}")
        return False, exc


class Workers:
    """At most ``workers`` calls at once, each in a worker process, and ``queue`` more
    waiting; used from one event loop."""

    def __init__(self, workers: int, queue: int) -> None:
        self.workers, self.queue = workers, queue
        self.admitted = 0  # running and waiting
        self.refused = 0  # Busy, since start
        self.lost = 0  # WorkerLost, since start
        self._idle: list[Worker] = []
        self._every: set[Worker] = set()
        self._started = 0
        self._turn: asyncio.Condition | None = None
        # The threads that wait for the workers' answers, and start and end them: their own,
        # never the default executor's that the service's other blocking calls need; two a
        # worker, so that ending one never waits behind the call it cuts short.
        self._threads = NoWaitThreadPool(2 * workers, thread_name_prefix="worker-wait")
        self._typical_s = FIRST_GUESS_S
        self._closed = False
        self._refusing = False

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in a worker process; ``fn`` and its arguments are pickled."""
        if self._closed or self.admitted >= self.workers + self.queue:
            self._refuse()
        self.admitted += 1
        try:
            worker = await self._take()
            answered = False  # a worker cancelled mid-call is ended, not given the next
            try:
                value = await self._timed(worker, fn, args)
                answered = True
                return value
            except Exception as exc:
                answered = not isinstance(exc, WorkerLost)  # it raised: it still serves
                raise
            finally:
                await self._give_back(worker if answered else None, worker)
        finally:
            self.admitted -= 1

    def _refuse(self) -> None:
        if not self._refusing:  # one line a streak, not one a request
            log.warning(
                "%d heavy read(s) running or waiting (%d workers, %d queued at most):"
                " refusing more (429) until one ends",
                self.admitted,
                self.workers,
                self.queue,
            )
        self._refusing = True
        self.refused += 1
        raise Busy(self.retry_after_s())

    def retry_after_s(self) -> int:
        """When a place is likely free: the calls ahead, at the typical call's duration."""
        rounds = max(1, math.ceil(self.admitted / self.workers))
        return max(1, math.ceil(rounds * self._typical_s))

    async def _timed(self, worker: Worker, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
        began = time.monotonic()
        try:
            return await self._blocking(worker.call, fn, args)
        except WorkerLost:
            if self._closed:
                raise WorkerLost("the server is stopping") from None
            self.lost += 1
            log.warning("a worker died during a call; the next call gets a new one")
            raise
        finally:
            took = time.monotonic() - began
            self._typical_s = 0.8 * self._typical_s + 0.2 * took
            self._refusing = False

    async def _blocking(self, call: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._threads, call, *args)

    async def _take(self) -> Worker:
        turn = self._condition()
        async with turn:
            await turn.wait_for(lambda: bool(self._idle) or self._started < self.workers)
            if self._closed:
                raise WorkerLost("the server is stopping")
            if self._idle:
                return self._idle.pop()
            self._started += 1
        try:
            worker = await self._blocking(Worker)
        except BaseException:
            await self._give_back(None, None)
            raise
        self._every.add(worker)
        return worker

    async def _give_back(self, serving: Worker | None, taken: Worker | None) -> None:
        """``serving``: the worker ready for the next call; else ``taken`` (if any) is ended."""
        turn = self._condition()
        async with turn:
            kept = serving is not None and serving.alive() and not self._closed
            if kept and serving is not None:
                self._idle.append(serving)
            else:
                self._started -= 1
                if taken is not None:
                    self._every.discard(taken)
            turn.notify()
        if kept or taken is None:
            return
        if self._closed:
            taken.end()  # ended already by close: this only reaps it
        else:
            await self._blocking(taken.end)

    def _condition(self) -> asyncio.Condition:
        if self._turn is None:
            self._turn = asyncio.Condition()
        return self._turn

    def close(self) -> None:
        """Ends every worker now, busy or not (a call in flight fails with WorkerLost): a
        stop never waits for a what-if. Calls after this are Busy."""
        self._closed = True
        for worker in list(self._every):
            worker.end()
        self._idle.clear()
        self._threads.shutdown(wait=False)
