"""The running service: the pieces ``create_app`` wires, and their background loops.

Loops: the replica's lease (which targets it probes, evaluates and keeps the rollups of:
``app.replicas``), leadership (who keeps retention), the spool flusher (runs waiting for the
database, and journals left by dead processes), the targets-file reloader (SIGHUP or a
change on disk), health (is the spool writable), and, once the database has the schema
(``readiness``), the upkeep (``app.runtime.upkeep``) and the claim of evaluations other
replicas ask of this one.

Nothing here waits on the database unbounded where it matters: start waits at most
``START_WAIT_S`` and then probes its share into the spool (on PostgreSQL a process that
has not reached the database yet owns nothing until it has: ``app.replicas.membership``),
and stop (``stopping``) keeps every step within its budget, so SIGTERM ends ``serve``
within 5 s whatever the database does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from app.alerts.engine import AlertEngine
from app.alerts.sender import Sender
from app.config import (
    ConfigError,
    ResolvedSettings,
    Settings,
    Target,
    TargetsFile,
    load_targets,
)
from app.config.placement import probed_here
from app.export.exporter import RunExporter
from app.notifiers import build_notifiers
from app.replicas.evaluation import OwnerEvaluation
from app.replicas.membership import Replicas
from app.runs.dbsink import DatabaseSink
from app.runs.pipeline import Pipeline
from app.runs.writer import Writer
from app.runtime.collector import settle_collector
from app.runtime.coverage import Coverage
from app.runtime.health import WAITING_FOR_ELECTION, Health
from app.runtime.memtrim import malloc_trim, trim_loop
from app.runtime.readiness import wait_for_schema
from app.runtime.rules import AlertRules
from app.runtime.scheduler import Watch
from app.runtime.standing import Standing
from app.runtime.stopping import stop_within_budget
from app.runtime.targetsync import sync_targets_file
from app.runtime.upkeep import Upkeep
from app.store.db import Sessions, is_transient
from app.store.leader import Leadership
from app.store.records import RunRecord
from app.store.wakeups import waited

log = logging.getLogger(__name__)

# Spool upkeep: is it writable (health), journals dead processes left, runs to flush.
SPOOL_EVERY_S = 5.0
RELOAD_POLL_S = 2.0
START_WAIT_S = 2.0  # for the database at start; then a leader probes, into the spool


@dataclass
class Service:
    settings: Settings
    resolved: ResolvedSettings
    targets: TargetsFile
    engine: Engine
    sessions: Sessions
    sink: DatabaseSink  # where the runs go: this service's own and the ones agents push
    # What follows each run stored, whoever measured it: alert evaluation, then /metrics
    # (what it returns is not used: alone, ``AlertEngine.evaluate_after`` returns transitions).
    after_store: Callable[[RunRecord], object]
    pipeline: Pipeline
    watch: Watch
    leadership: Leadership
    replicas: Replicas  # which targets this replica probes and evaluates
    standing: Standing  # the lease and the lead, kept by one loop
    evaluation: OwnerEvaluation
    alerts: AlertEngine
    rules: AlertRules
    writer: Writer
    health: Health
    upkeep: Upkeep
    coverage: Coverage  # what the file asks for and nobody probes
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    reload_requested: asyncio.Event = field(default_factory=asyncio.Event)
    sender: Sender | None = None
    exporter: RunExporter | None = None  # OpenTelemetry, when an OTLP endpoint is set
    # False: serve what the database holds, probe nothing (the demo probes on its own clock).
    probing: bool = True
    # Apply migrations once the database answers (``serve``); else wait for the schema.
    migrate: bool = False
    _ready: asyncio.Task[None] | None = None  # the start-up's database work
    _shown: tuple[int, int] | None = None  # (live replicas, targets owned) last logged
    _stopping: asyncio.Future[None] | None = None
    _started: bool = False
    _collector_undo: Callable[[], None] | None = None

    async def start(self) -> None:
        self.writer.ready.clear()  # runs are spooled until the schema is known to be there
        self.writer.start()  # from now on a run is stored on the writer's thread
        await self.writer.recover_orphans()
        self.watch.apply(self._scheduled(self.targets))
        ready = self._ready = asyncio.create_task(self._when_ready(), name="when_ready")
        self.tasks.append(ready)
        lead = self._check_lead()
        both: list[asyncio.Future[Any]] = [ready, lead]
        await asyncio.wait(both, timeout=START_WAIT_S)
        if ready.done():
            ready.result()  # a start that cannot even write the targets fails, as it should
        else:
            log.warning("database not ready within %.0f s; probing into the spool", START_WAIT_S)
        self.watch.start(paused=False)  # a slot not this replica's is passed (``owns``)
        log.info("%s; %d target(s)", self._role(), len(self.watch.targets))
        loops = (self._standing_loop, self._spool_loop, self._reload_loop)
        for loop in loops:  # named: a stop names a loop left running
            self.tasks.append(asyncio.create_task(_forever(loop), name=loop.__name__))
        self.tasks.append(asyncio.create_task(trim_loop(malloc_trim()), name="trim_loop"))
        with contextlib.suppress(ValueError, RuntimeError, NotImplementedError):
            # Only the main thread may own signals (tests build the app in other threads).
            asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, self.reload_requested.set)
        self._collector_undo = settle_collector()  # the cyclic GC set for the long run
        self._started = True

    async def _when_ready(self) -> None:
        """Once the database has the schema: targets, alert state, the spool, upkeep loops."""
        await wait_for_schema(self.engine, self.resolved.database_url, self.migrate, self.health)
        self.writer.ready.set()
        # The lease table is there now: no need to wait for the loop. The lead is known
        # first: a replica alone counts at once only if no *other* process leads, and its
        # own check, running beside, may take the lock just before the lease is written.
        await self._check_lead()
        await self._renew()
        await asyncio.to_thread(sync_targets_file, self.sessions, self.targets)
        await self._restore_alerts()
        self.writer.request_flush()
        loops = self.upkeep.loops()
        if self.replicas.contested:
            loops.append(self.evaluation.claim_loop)
        self.tasks.extend(asyncio.create_task(_forever(f), name=f.__name__) for f in loops)

    async def until_ready(self) -> None:
        """The start-up's database work awaited, or its error (``start`` waits less)."""
        if self._ready is not None:
            await asyncio.shield(self._ready)

    def begin_stop(self) -> None:
        """Start stopping now (SIGTERM), beside the web server's own drain. Not before
        ``start`` is done: the web server calls ``stop`` after a start it interrupted."""
        if self._started and self._stopping is None:
            self._stopping = asyncio.ensure_future(stop_within_budget(self))

    async def stop(self) -> None:
        if self._stopping is None:
            self._stopping = asyncio.ensure_future(stop_within_budget(self))
        await asyncio.shield(self._stopping)
        if self._collector_undo is not None:  # done twice, it does nothing more
            self._collector_undo()

    async def _restore_alerts(self) -> None:
        # Alerting must not keep the watch from starting: the first evaluation tries again.
        try:
            await asyncio.to_thread(self.alerts.restore)
        except Exception as exc:
            if not is_transient(exc):
                log.exception("alert state not restored; retried at the first evaluation")
                return
            log.warning("alert state not restored yet, database unreachable: %s", exc)

    # Leadership and the replica's share ------------------------------------------------

    async def _standing_loop(self) -> None:
        """The lease renewed and the lead checked, together when both are due."""
        if await self.standing.step():
            self._renewed()
        await asyncio.sleep(self.standing.wait_s())

    def _check_lead(self) -> asyncio.Future[bool]:
        return self.standing.check_lead()  # whichever check takes or loses the lead says so

    async def _renew(self) -> None:
        await self.standing.renew()
        self._renewed()

    def _renewed(self) -> None:
        """After a renewal: say so if the share changed."""
        self.evaluation.forget_lost()
        if taken := self.watch.take_passed():
            log.info("replicas: %d slot(s) passed earlier taken over late", len(taken))
        shown = (self.replicas.live(), len(self.replicas.share(self.rules.names())))
        if shown != self._shown and self.replicas.contested and not self.replicas.waiting:
            log.info("replicas: %d live; this one owns %d of the targets", *shown)
            self._shown = shown

    def _role(self) -> str:
        if self.replicas.waiting:
            return WAITING_FOR_ELECTION
        return f"owning {len(self.replicas.share(self.rules.names()))} of the targets"

    async def _spool_loop(self) -> None:
        """Is the spool writable, and journals left by a replica that died beside this one
        (one hop to a thread for both); then a flush if runs wait."""
        await self.writer.hand_over(await asyncio.to_thread(self._spool_checked))
        if self.writer.waiting():
            self.writer.request_flush()
        await asyncio.sleep(SPOOL_EVERY_S)

    def _spool_checked(self) -> list[RunRecord]:
        """Blocking: the spool's check (a small write and fsync), then its orphans adopted."""
        self.health.check_spool()
        return self.writer.spool.adopt_orphans()

    async def _reload_loop(self) -> None:
        path = self.settings.config
        seen = _stamp(path)
        while _stamp(path) == seen:
            if await waited(self.reload_requested, RELOAD_POLL_S):
                break
        self.reload_requested.clear()
        await self.reload()

    async def reload(self) -> None:
        try:
            targets = await asyncio.to_thread(load_targets, self.settings.config)
        except ConfigError as exc:
            more = f" (and {len(exc.problems) - 1} more)" if len(exc.problems) > 1 else ""
            self.coverage.reload_refused(f"{exc.problems[0]}{more}")
            return
        here, refused = self._placed(targets)
        # A running target the new file would stop for a variable unset here: the whole
        # reload is refused, so a typo in one secret never silently stops a target.
        dropped = sorted(name for name in refused if name in self.watch.targets)
        if dropped:
            name = dropped[0]
            self.coverage.reload_refused(f"target {name} would stop: {refused[name]}")
            return
        if self.writer.ready.is_set():  # else the database gets them once it is ready
            await asyncio.to_thread(sync_targets_file, self.sessions, targets)
        self.coverage.refused_here(refused)
        changes = self.watch.apply(here)
        if self.sender is not None:
            self.sender.notifiers = build_notifiers(targets.notifiers)
        if self.settings.resolved(targets) != self.resolved:
            log.warning("vantage, database or retention changed: takes effect on restart")
        self.targets = self.rules.targets = targets
        self.coverage.reloaded()
        log.info("targets reloaded: %s", changes)

    def _scheduled(self, targets: TargetsFile) -> list[Target]:
        here, refused = self._placed(targets)
        self.coverage.refused_here(refused)
        return here

    def _placed(self, targets: TargetsFile) -> tuple[list[Target], dict[str, str]]:
        """The targets to probe here, and those refused here (by name: why)."""
        if not self.probing:
            return [], {}
        # Targets listing vantages run here only if this one is listed (the rest at agents).
        return probed_here(targets.targets, self.resolved.vantage, os.environ, server=True)

    async def prune(self, now: datetime) -> None:
        """Raw samples past the retention, and the fine rollups past theirs."""
        await self.upkeep.prune(now)


async def _forever(step: Callable[[], Awaitable[None]]) -> None:
    """Run ``step`` again and again; a failing step is logged and retried, never fatal."""
    while True:
        try:
            await step()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("background step %s failed; retrying", step.__name__)
            await asyncio.sleep(1.0)


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_mtime_ns, stat.st_size
