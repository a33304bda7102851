"""Run one target: probe → store (or spool) → ``after_store`` (alert evaluation, wired by
``build_service``). The only module that knows the whole flow.

In ``serve`` the store stage is a ``Writer`` (its own thread): ``run`` returns once the run
is measured and handed over. Without one (the demo, tests) ``run`` stores the run itself.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from app import clock
from app.analysis.summary import TIMED
from app.clock import utcnow
from app.config import Target
from app.probe.run import probe_run
from app.probe.sample import Sample
from app.runs.spool import Spool
from app.runs.writer import Writer
from app.store.db import write_connection
from app.store.ingest import store_run_on
from app.store.records import RunRecord, RunStatus, SampleRecord

log = logging.getLogger(__name__)

STORE_TIMEOUT_S = 20.0
ERROR_CHARS = 160
ABORT_STORE_TIMEOUT_S = 1.5  # at shutdown, within the 5 s SIGTERM promise


def describe(exc: Exception) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _ready() -> threading.Event:
    ready = threading.Event()
    ready.set()
    return ready


def is_transient(exc: Exception) -> bool:
    """The database is away (down, restarting, unreachable), not refusing this run."""
    if isinstance(exc, OperationalError | InterfaceError):
        return True
    return isinstance(exc, DBAPIError) and exc.connection_invalidated


@dataclass
class Failing:
    """Which targets' last run got no answer at all (every sample an error): one log line
    when that starts and one when it stops, instead of one per run or none at all."""

    since: dict[str, datetime] = field(default_factory=dict)

    def note(self, record: RunRecord) -> None:
        answered = any(sample.status in TIMED for sample in record.samples)
        began = self.since.get(record.target)
        if not answered and began is None:
            self.since[record.target] = record.started_at
            log.warning(
                "target %s is failing at %s: %s", record.target, record.vantage, _why(record)
            )
        elif answered and began is not None:
            del self.since[record.target]
            log.info(
                "target %s answers again at %s (failing since %s)",
                record.target,
                record.vantage,
                f"{began:%Y-%m-%d %H:%M:%S}Z",
            )


def _why(record: RunRecord) -> str:
    """The commonest error of the run, on one line and short: an error body can be a page."""
    reasons = Counter(
        " ".join(f"{s.error_class or s.status}: {s.error or ''}".split())[:ERROR_CHARS]
        for s in record.samples
    )
    if not reasons:
        return "the run had no samples"
    reason, count = reasons.most_common(1)[0]
    return f"{len(record.samples)}/{len(record.samples)} samples failed ({count} × {reason})"


@dataclass
class Pipeline:
    sessions: sessionmaker[Session]
    spool: Spool
    vantage: str
    clock: Callable[[], datetime] = utcnow
    # Monotonic time each target was last probed: the first request after a quiet spell
    # is tagged as a cold start.
    idle_since: dict[str, float] = field(default_factory=dict)
    # Called in a thread with each complete run the database now has. Runs that went to
    # the spool are not passed on: the next run stored looks at the last runs anyway.
    after_store: Callable[[RunRecord], object] | None = None
    failing: Failing = field(default_factory=Failing)
    # Set once the database has the schema: until then every run waits in the spool.
    ready: threading.Event = field(default_factory=_ready)
    writer: Writer | None = None
    # Why the last store failed while the database was away; None once one succeeds.
    store_problem: str | None = None

    async def run(self, target: Target, scheduled_at: datetime | None = None) -> RunRecord:
        """Probe ``target`` once (a run of N samples) and store the run whole.

        Cancelled part-way (shutdown), the run is stored as aborted with the samples it
        has, so it is never counted as a complete run.
        """
        run = RunRecord(
            id=uuid.uuid4(),
            target=target.name,
            vantage=self.vantage,
            started_at=self.clock(),
            status=RunStatus.ABORTED,
            scheduled_at=scheduled_at,
        )
        self.spool.begin(run)
        samples: list[Sample] = []
        try:
            await probe_run(
                target.probe_spec(),
                target.samples,
                spacing_s=target.spacing,
                idle_since=self.idle_since.get(target.name),
                on_sample=samples.append,
            )
        except asyncio.CancelledError:
            await self._keep(self._record(run, samples, RunStatus.ABORTED), ABORT_STORE_TIMEOUT_S)
            raise
        finally:
            self.idle_since[target.name] = clock.monotonic()
        record = self._record(run, samples, RunStatus.COMPLETE)
        self.failing.note(record)
        if await self._keep(record, STORE_TIMEOUT_S):
            await self._after_store(record)
        return record

    async def _keep(self, record: RunRecord, budget_s: float) -> bool:
        """Store ``record`` within ``budget_s``, else spool it: never lose it, never hang.

        A database that hangs without failing gets the budget; after it the run waits in
        the spool. Should the hung store land after all, the second copy is a no-op.
        True when the database has the run. With a writer, the run is handed to it.
        """
        if self.writer is not None:
            await self.writer.submit(record)
            return False
        stored = False
        try:
            stored = await asyncio.wait_for(asyncio.to_thread(self.deliver, record), budget_s)
        except TimeoutError:
            log.warning("storing run %s took over %s s; spooled", record.id, budget_s)
            if not await asyncio.to_thread(self._spooled, record):
                return False
        except OSError as exc:
            return _not_kept(record, exc)
        self.spool.end(record.id)
        return stored

    def _spooled(self, record: RunRecord) -> bool:
        try:
            self.spool.append(record)
        except OSError as exc:
            return _not_kept(record, exc)
        return True

    async def _after_store(self, record: RunRecord) -> None:
        """The stored run goes on (to alerting); a failure there never fails the run."""
        if self.after_store is None:
            return
        try:
            await asyncio.to_thread(self.after_store, record)
        except Exception:
            log.exception("after storing run %s of %s", record.id, record.target)

    def _record(self, run: RunRecord, samples: list[Sample], status: str) -> RunRecord:
        return RunRecord(
            id=run.id,
            target=run.target,
            vantage=run.vantage,
            started_at=run.started_at,
            status=status,
            scheduled_at=run.scheduled_at,
            finished_at=self.clock(),
            samples=tuple(SampleRecord.from_sample(s) for s in samples),
        )

    def deliver(self, record: RunRecord) -> bool:
        """Store ``record``, or spool it while the database is away.

        True once the database has the run (stored now, or already there). Raises OSError
        when the database is away and the spool cannot be written either.
        """
        if not self.ready.is_set():
            self.spool.append(record)  # the schema is not there yet
            return False
        if self.spool.has_pending():
            # Runs reach the database in the order they finished: none jumps the queue.
            self.spool.append(record)
            return self.flush() > 0 and not self.spool.has_pending()
        try:
            self.store(record)
        except Exception as exc:
            if not self.transient(exc):
                raise
            log.warning("database unreachable (%s); run %s spooled", exc, record.id)
            self.spool.append(record)
            return False
        return True

    def transient(self, exc: Exception) -> bool:
        """Is the store away for now (the run waits in the spool)? An agent's is the server."""
        return is_transient(exc)

    def store(self, record: RunRecord) -> bool:
        try:
            with write_connection(self.sessions) as connection:
                stored = store_run_on(connection, record, self.clock())
        except Exception as exc:
            if self.transient(exc):
                self.store_problem = describe(exc)
            raise
        self.store_problem = None
        return stored

    def flush(self) -> int:
        """Move spooled runs into the database, oldest first; returns how many left."""
        if not self.ready.is_set():
            return 0
        flushed = self.spool.flush(self.store, self.transient)
        if flushed:
            log.info("%d spooled run(s) stored", flushed)
        return flushed

    def recover_orphans(self) -> int:
        """Runs journalled by processes that died: one cut mid-run becomes an aborted run,
        one that was finished and waiting to be stored is stored as it was."""
        orphans = self.spool.adopt_orphans()
        for orphan in orphans:
            log_orphan(orphan)
            self.deliver(orphan)
            self.spool.end(orphan.id)
        return len(orphans)


def _not_kept(record: RunRecord, exc: OSError) -> bool:
    # Its journal, if the disk took that, lets the next start recover it.
    log.error("run %s of %s neither stored nor spooled: %s", record.id, record.target, exc)
    return False


def log_orphan(orphan: RunRecord) -> None:
    log.warning(
        "run %s of %s was left by a process that died; recorded as %s (%d samples)",
        orphan.id,
        orphan.target,
        orphan.status,
        len(orphan.samples),
    )
