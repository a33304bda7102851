"""The pipeline's store stage: each finished run goes to the ``Sink`` (app.runs.sink), or
waits in the spool while the sink is away, and once stored is passed on (``after_store``:
alert evaluation, then metrics).

Started, the writer works on a thread of its own, so a sink that hangs never holds the
scheduler: a probe job ends when its run is measured, whatever the database does. Finished
runs wait on a bounded queue, journalled whole (so a crash meanwhile loses nothing). When
the queue is full (the sink has hung for a while) a run goes straight to the backlog,
behind which the queued ones then line up. Runs that wait (``app.runs.backlog``: the spool,
then those held in memory while the spool cannot take them) are flushed oldest first in
batches, and a run that comes meanwhile goes behind them: none jumps the queue, and a backlog
drains faster than runs come. Not started (the demo, tests) or closed, it stores on the
caller's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from app.runs.backlog import Backlog, Placed
from app.runs.sink import Sink, SinkAway, SinkRefused
from app.runs.spool import Spool
from app.runs.threads import NoWaitThreadPool
from app.store.records import RunRecord, RunStatus

log = logging.getLogger(__name__)

CAPACITY = 256  # runs; 200 targets every 10 s fill it in 13 s of a hung database
BATCH_MAX = 32  # stored runs waiting to be passed on, at most
FLUSH_RUNS = 50  # a spool flush hands the sink at most this many runs at once,
FLUSH_BYTES = 4 << 20  # and at most this much of their JSON
_FLUSH, _STOP = "flush", "stop"
ORPHAN = "run %s of %s was left by a process that died; recorded as %s (%d samples)"


def _ready() -> threading.Event:
    ready = threading.Event()
    ready.set()
    return ready


@dataclass
class Writer:
    sink: Sink
    spool: Spool
    # Called with each complete run the sink now has. Runs that went to the spool are not
    # passed on: the next run stored looks at the last runs anyway.
    after_store: Callable[[RunRecord], object] | None = None
    capacity: int = CAPACITY
    flush_runs: int = FLUSH_RUNS
    flush_bytes: int = FLUSH_BYTES
    # Set while the sink may be tried: ``serve`` clears it until the database has the
    # schema, and every run waits in the spool meanwhile.
    ready: threading.Event = field(default_factory=_ready)
    current: RunRecord | None = None
    _since: float | None = None  # when the store (or flush) in progress began
    _queue: queue.Queue[RunRecord | str] = field(init=False)
    backlog: Backlog = field(init=False)
    _flush_queued: threading.Event = field(default_factory=threading.Event)
    _abandoned: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    # Journal writes and overflow appends: disk work of their own, never behind the database.
    _disk: NoWaitThreadPool = field(
        default_factory=lambda: NoWaitThreadPool(2, thread_name_prefix="spool")
    )

    def __post_init__(self) -> None:
        self._queue = queue.Queue(self.capacity)
        self.backlog = Backlog(self.spool)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._work, name="writer", daemon=True)
        self._thread.start()

    @property
    def running(self) -> bool:
        """Started and not closed: runs are handed to the writer's thread."""
        return self._thread is not None and not self._abandoned.is_set()

    @property
    def waiting_s(self) -> float:
        """How long the store or flush in progress has waited for the database."""
        since = self._since
        return 0.0 if since is None else time.monotonic() - since

    async def submit(self, record: RunRecord) -> None:
        """Hand a finished run over; returns at once (or after a spool append when full)."""
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._disk, self.spool.begin, record)
        try:
            self._queue.put_nowait(record)
        except queue.Full:
            await loop.run_in_executor(self._disk, self._place, record)

    async def recover_orphans(self) -> int:
        """Hand over the runs journalled by processes that died: one cut mid-run as an
        aborted run, one that was finished and waiting to be stored as it was."""
        return await self.hand_over(await asyncio.to_thread(self.spool.adopt_orphans))

    async def hand_over(self, orphans: list[RunRecord]) -> int:
        """``recover_orphans``' second half: the runs the spool adopted (``adopt_orphans``,
        on a thread of the caller's), logged and submitted."""
        for orphan in orphans:
            n = len(orphan.samples)
            log.warning(ORPHAN, orphan.id, orphan.target, orphan.status, n)
            await self.submit(orphan)
        return len(orphans)

    def queued(self) -> int:
        """Runs waiting for the writer thread (not a flush or stop request)."""
        with self._queue.mutex:
            return sum(isinstance(item, RunRecord) for item in self._queue.queue)

    def waiting(self) -> bool:
        """Runs wait to be flushed (in the spool, or held in memory)."""
        return self.backlog.waiting()

    def request_flush(self) -> None:
        if not self._flush_queued.is_set():
            self._flush_queued.set()
            try:
                self._queue.put_nowait(_FLUSH)
            except queue.Full:
                self._flush_queued.clear()  # busy anyway; the next tick asks again

    def close(self, budget_s: float) -> int:
        """Store what is queued within ``budget_s``; spool the rest. Returns how many were
        spooled here (the run stuck in a store included: a second copy is a no-op)."""
        deadline = time.monotonic() + budget_s
        with contextlib.suppress(queue.Full):
            self._queue.put(_STOP, timeout=budget_s)
        if self._thread is not None:
            self._thread.join(max(0.0, deadline - time.monotonic()))
        self._abandoned.set()
        left = [r for r in self._drain() if isinstance(r, RunRecord)]
        current = self.current
        if current is not None:
            left.append(current)
        spooled = self.backlog.keep_all(left)
        self._disk.shutdown(wait=False)
        return spooled

    def deliver(self, record: RunRecord) -> bool:
        """Store ``record``, or spool it while the sink is away (or not ready).

        True once the sink has the run (stored now, or already there). Raises SinkRefused
        (or any other error) when the sink will never take it. A run neither stored nor
        kept in the backlog is counted lost there.
        """
        if not self.ready.is_set():
            self.backlog.place(record)  # the schema is not there yet
            return False
        if self.sink.batches and self.queued() and self._spooled(record):
            return False  # more runs wait behind this one: it goes in a batch with them
        if self.backlog.waiting():
            # Runs reach the sink in the order they finished: none jumps the queue.
            placed = self.backlog.place(record)
            flushed = self.flush()
            return placed != Placed.LOST and flushed > 0 and not self.backlog.waiting()
        try:
            self.sink.store(record)  # stored now, or there already: the sink has it
        except SinkAway as exc:
            log.warning("%s is away (%s); run %s spooled", self.sink.name, exc, record.id)
            self.backlog.place(record)
            return False
        self.spool.losses.kept()
        return True

    def flush(self) -> int:
        """Move spooled runs to the sink, oldest first; returns how many left."""
        if not self.ready.is_set():
            return 0
        flushed = self.spool.flush(self.sink.store_batch, self.flush_runs, self.flush_bytes)
        if not self.spool.has_pending():  # the held runs come after the spool's
            flushed += self.backlog.flush_held(self.sink.store_batch, self.flush_runs)
        if flushed:
            self.spool.losses.kept()
            log.info("%d spooled run(s) now in %s", flushed, self.sink.name)
        return flushed

    def pass_on(self, record: RunRecord) -> None:
        """``after_store``; a failure there never fails the run."""
        if self.after_store is None:
            return
        try:
            self.after_store(record)
        except Exception:
            log.exception("after storing run %s of %s", record.id, record.target)

    def _spooled(self, record: RunRecord) -> bool:
        if self.backlog.held():
            return False  # then it waits behind them, in memory
        try:
            self.spool.append(record)
        except OSError:
            return False  # then stored alone
        return True

    # On the writer thread ---------------------------------------------------------

    def _work(self) -> None:
        """Store each run as it comes; pass the stored ones on once no run waits to be
        stored (or ``BATCH_MAX`` wait to be passed on), so a store never queues behind the
        evaluations of the runs before it. A run's target seen among those waiting to be
        passed on passes them on first: each evaluation sees its target's history up to
        its own run, as if passed on at once. Runs not taken yet stay in the queue, where
        ``close`` finds them."""
        waiting: list[RunRecord] = []
        while True:
            if waiting and (self._queue.empty() or len(waiting) >= BATCH_MAX):
                waiting = self._after_all(waiting)
            item = self._queue.get()
            if not isinstance(item, RunRecord) or any(r.target == item.target for r in waiting):
                waiting = self._after_all(waiting)
            if item == _STOP:
                return
            if item == _FLUSH:
                self._flush_queued.clear()
                self._flush_now()
            elif isinstance(item, RunRecord) and self._keep(item):
                waiting.append(item)

    def _after_all(self, stored: list[RunRecord]) -> list[RunRecord]:
        for record in stored:
            self.pass_on(record)
        return []

    def _keep(self, record: RunRecord) -> bool:
        """Store (or spool) ``record``; True when it is stored and complete, to be passed
        on (as ``after_store`` promises)."""
        if self._abandoned.is_set():
            self.backlog.keep_all([record])  # shutdown gave up on the database
            return False
        self.current, self._since = record, time.monotonic()
        try:
            stored = self.deliver(record)
        except Exception as exc:  # never stored: refused (its reason says why), or unexpected
            self._reject(record, exc)
            stored = False
        finally:
            self.current, self._since = None, None
        self.spool.end(record.id)
        return stored and record.status == RunStatus.COMPLETE

    def _flush_now(self) -> None:
        if self._abandoned.is_set():
            return
        self._since = time.monotonic()
        try:
            self.flush()
        except Exception:
            log.exception("flushing the spool failed; retried at the next tick")
        finally:
            self._since = None

    def _place(self, record: RunRecord) -> None:
        self.backlog.place(record)
        self.spool.end(record.id)

    def _reject(self, record: RunRecord, exc: Exception) -> None:
        refused = isinstance(exc, SinkRefused)  # only the unexpected get a traceback
        why = f"{self.sink.name} refused it: {exc}" if refused else repr(exc)
        log.error("run %s set aside in rejected.jsonl (%s)", record.id, why, exc_info=not refused)
        try:
            self.spool.reject(record)
        except OSError as exc:
            self.spool.losses.told(1, f"run {record.id} could not be set aside either: {exc}")

    def _drain(self) -> list[RunRecord | str]:
        items: list[RunRecord | str] = []
        while True:
            try:
                items.append(self._queue.get_nowait())
            except queue.Empty:
                return items
