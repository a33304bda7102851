"""Run one target: probe → the store stage (a ``Writer``: the run goes to its ``Sink``, or
waits in the spool) → ``after_store`` (alert evaluation, wired by ``build_service``). The
only module that knows the whole flow; where a run goes is the sink's business
(``app.runs.sink``: the database, a push to the server, memory in tests).

Once the writer is started (``serve``, ``phasewatch agent``) it stores on its own thread:
``run`` returns once the run is measured and handed over. Before that, and after it is
closed (the demo, tests), ``run`` stores the run itself, within a budget.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from app import clock
from app.analysis.summary import TIMED
from app.clock import utcnow
from app.config import Target
from app.probe.run import probe_run
from app.probe.sample import Sample
from app.runs.spool import Spool
from app.runs.waits import within
from app.runs.writer import Writer
from app.store.records import RunRecord, RunStatus, SampleRecord

log = logging.getLogger(__name__)

STORE_TIMEOUT_S = 20.0
ERROR_CHARS = 160
ABORT_STORE_TIMEOUT_S = 1.5  # at shutdown, within the 5 s SIGTERM promise


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


async def probe_target(
    target: Target, idle_since: float | None, on_sample: Callable[[Sample], None] | None = None
) -> list[Sample]:
    """One run's samples of ``target`` as ``serve`` probes them: its spec, samples, spacing
    and idle tracking (bench/probe_floor.py probes the same way, for the probe's own CPU)."""
    return await probe_run(
        target.probe_spec(),
        target.samples,
        spacing_s=target.spacing,
        idle_since=idle_since,
        on_sample=on_sample,
    )


@dataclass
class Pipeline:
    writer: Writer  # the store stage, with the sink and the spool
    vantage: str
    clock: Callable[[], datetime] = utcnow
    # Monotonic time each target was last probed: the first request after a quiet spell
    # is tagged as a cold start.
    idle_since: dict[str, float] = field(default_factory=dict)
    failing: Failing = field(default_factory=Failing)

    @property
    def spool(self) -> Spool:
        return self.writer.spool

    async def run(
        self, target: Target, scheduled_at: datetime | None = None, slot: int | None = None
    ) -> RunRecord:
        """Probe ``target`` once (a run of N samples) and store the run whole. ``slot``: the
        scheduler's (``app.runs.slots``), one run a slot is kept.

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
            slot=slot,
        )
        self.spool.begin(run)
        samples: list[Sample] = []
        try:
            await probe_target(target, self.idle_since.get(target.name), samples.append)
        except asyncio.CancelledError:
            await self._keep(self._record(run, samples, RunStatus.ABORTED), ABORT_STORE_TIMEOUT_S)
            raise
        finally:
            self.idle_since[target.name] = clock.monotonic()
        record = self._record(run, samples, RunStatus.COMPLETE)
        self.failing.note(record)
        if await self._keep(record, STORE_TIMEOUT_S):
            await asyncio.to_thread(self.writer.pass_on, record)
        return record

    async def _keep(self, record: RunRecord, budget_s: float) -> bool:
        """Hand ``record`` to the running writer; else store it here within ``budget_s``,
        or spool it: never lose it, never hang.

        A sink that hangs without failing gets the budget; after it the run waits in the
        spool. Should the hung store land after all, the second copy is a no-op. True when
        the sink has the run and it is to be passed on here.
        """
        if self.writer.running:
            await self.writer.submit(record)
            return False
        stored = False
        try:
            stored = await within(asyncio.to_thread(self.writer.deliver, record), budget_s)
        except TimeoutError:
            log.warning("storing run %s took over %s s; spooled", record.id, budget_s)
            if not await asyncio.to_thread(self._spooled, record):
                return False
        except OSError as exc:
            return _not_kept(record, exc)
        self.spool.end(record.id)
        return stored and record.status == RunStatus.COMPLETE

    def _spooled(self, record: RunRecord) -> bool:
        try:
            self.spool.append(record)
        except OSError as exc:
            return _not_kept(record, exc)
        return True

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
            slot=run.slot,
        )


def _not_kept(record: RunRecord, exc: OSError) -> bool:
    # Its journal, if the disk took that, lets the next start recover it.
    log.error("run %s of %s neither stored nor spooled: %s", record.id, record.target, exc)
    return False
