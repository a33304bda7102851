"""The server's side of ``phasewatch agent``, one object per app: what each agent is
assigned, what the server has seen of it (``VantageBook``), the runs it pushes (checked,
stored, then evaluated and counted as probed ones are), and its gauges on /metrics.

Pushes are decompressed, parsed and stored on worker threads, at most ``STORE_THREADS`` at
once: the event loop only moves bytes, and twenty agents pushing together queue here
instead of each taking a connection (beyond the pool's, a new one) and the interpreter's
lock from the others. While a push is served, background work holds back
(``app.runtime.foreground``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import TypeVar

from app.agents.server.access import PushCheck, may_speak_as
from app.agents.server.assignments import Assignments
from app.agents.server.body import Body, wire_body
from app.agents.server.book import VantageBook
from app.agents.server.collector import VantageCollector
from app.agents.server.evaluations import Evaluations
from app.agents.server.ingest import After, Database, store_many, store_one
from app.agents.server.refusals import OverLimit
from app.agents.wire import AgentStatus, Assignment, BatchAnswer, PushAnswer, PushOutcome
from app.clock import utcnow
from app.config.placement import shortest_interval
from app.runs.threads import NoWaitThreadPool
from app.runtime.service import Service
from app.store.records import RunRecord

STORE_THREADS = 4
T = TypeVar("T")
Store = Callable[[Database, PushCheck, After, bytes, bool], T]


class Agents:
    def __init__(
        self, service: Service, book: VantageBook, count: Callable[[RunRecord], object]
    ) -> None:
        """``count``: /metrics' count of one run (``RunMetrics.observe_run``), for a pushed
        run whose evaluation a newer one took over (see ``Evaluations``)."""
        self.service = service
        self.book = book
        self.assignments = Assignments()
        self.foreground = service.upkeep.foreground
        self.evaluations = Evaluations(service.after_store, count, self.foreground)
        self.database = Database(service.sink, service.writer.ready)
        self.collector = VantageCollector(
            book, self.shortest_interval, lambda: service.targets.vantage_silent_after
        )
        # A pool of its own rather than anyio's ``to_thread`` (a Python queue and condition
        # a call): the event loop's hand-off is a C queue's put (bench/README.md, push7).
        self.threads = NoWaitThreadPool(STORE_THREADS, thread_name_prefix="push")

    def close(self) -> None:
        """The push threads end once their push is stored (a stop does not wait for them)."""
        self.threads.shutdown()

    def may_speak_as(self, vantage: str, token: str) -> bool:
        return may_speak_as(self.service.targets, vantage, token)

    def shortest_interval(self, vantage: str) -> float | None:
        return shortest_interval(self.service.targets.targets, vantage)

    def assignment(self, vantage: str, version: str | None) -> Assignment:
        """What ``vantage`` probes; fetching it counts as being seen."""
        seen = self.book.get(vantage)
        self.book.reported(vantage, utcnow(), seen.refused, seen.pending, version)
        return self.assignments.get(self.service.targets, vantage)[0]

    def reported(self, vantage: str, status: AgentStatus, version: str | None) -> None:
        """What the agent refused to probe (a variable it lacks), what its spool holds, and
        the due runs it skipped (of the targets this server knows: bounded label values)."""
        names = {target.name for target in self.service.targets.targets}
        skipped = {
            name: {str(reason): n for reason, n in reasons.items()}
            for name, reasons in status.skipped.items()
            if name in names
        }
        self.book.reported(vantage, utcnow(), status.refused, status.pending, version, skipped)

    async def push_run(
        self, vantage: str, body: Body, sent_at: datetime | None, version: str | None
    ) -> PushAnswer:
        """Store one run; a replay stores nothing."""
        push = await self._received(vantage, body)
        stored = await self._stored(store_one, push)
        self.book.pushed(vantage, push.at, sent_at, version)
        return PushAnswer(stored=stored, config=push.config)

    async def push_batch(
        self, vantage: str, body: Body, sent_at: datetime | None, version: str | None
    ) -> BatchAnswer:
        """Store several runs; each run's outcome, in order."""
        push = await self._received(vantage, body)
        results = await self._stored(store_many, push)
        accepted = sum(r.outcome != PushOutcome.REFUSED for r in results)
        self.book.pushed(vantage, push.at, sent_at, version, accepted)
        return BatchAnswer(results=results, config=push.config)

    async def _received(self, vantage: str, body: Body) -> _Received:
        """What either push does first: admit the vantage, read the body, and note what its
        runs are checked against."""
        if not self.book.admit(vantage, time.monotonic()):
            raise OverLimit("over this vantage's push limit")
        data, gzipped = await wire_body(body)
        at = utcnow()
        current, names = self.assignments.get(self.service.targets, vantage)
        return _Received(at, current.version, PushCheck(vantage, names), data, gzipped)

    async def _stored(self, store: Store[T], push: _Received) -> T:
        """``store`` on a push thread, while background work holds back."""
        work = partial(
            store, self.database, push.check, self.evaluations.submit, push.data, push.gzipped
        )
        with self.foreground.serving():
            return await asyncio.get_running_loop().run_in_executor(self.threads, work)


@dataclass(frozen=True)
class _Received:
    at: datetime  # when the body was read
    config: str  # the assignment's version then
    check: PushCheck
    data: bytes
    gzipped: bool
