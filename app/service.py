"""The running service: the pieces ``create_app`` wires, and their background loops.

Loops: leadership (who schedules), the spool flusher (runs waiting for the database), the
targets-file reloader (SIGHUP or a change on disk), retention (prunes raw samples), the
outbox sender (notifications; every process sends, PostgreSQL row locks keep it once).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from sqlalchemy import Engine
from sqlalchemy.exc import IntegrityError

from app.alerts.engine import AlertEngine
from app.alerts.notifiers import KINDS, build_notifiers, names_for
from app.alerts.notifiers.sender import Sender
from app.analysis.detectors import DetectorParams
from app.config import (
    ConfigError,
    ResolvedSettings,
    Settings,
    Target,
    TargetsFile,
    load_targets,
)
from app.pipeline import Pipeline, is_transient, utcnow
from app.scheduler import Watch
from app.store.leader import Leadership
from app.store.queries import prune_samples, sync_targets
from app.store.rollups import CATCH_UP_EVERY_S, catch_up, prune_fine_rollups

log = logging.getLogger(__name__)

FLUSH_EVERY_S = 5.0
RELOAD_POLL_S = 2.0
PRUNE_EVERY_S = 3600.0
ROLLUP_LOOKBACK = timedelta(days=2)
SEND_EVERY_S = 2.0
SYNC_ATTEMPTS = 3
STOP_GRACE_S = 3.0  # runs in flight get this long at shutdown; the rest of 5 s is storing
DEFAULT_PARAMS = DetectorParams()


@dataclass
class AlertRules:
    """Each target's detector settings and notifiers, as the targets file last said.

    Targets known only by their runs (imports, agents) get the defaults and every notifier.
    """

    targets: TargetsFile

    def params_for(self, name: str) -> DetectorParams:
        target = self._target(name)
        return target.alerts if target is not None else DEFAULT_PARAMS

    def notifiers_for(self, name: str) -> list[str]:
        target = self._target(name)
        return names_for(target.notifiers if target is not None else [], self.targets.notifiers)

    def wants_refresh(self, notifier: str) -> bool:
        config = self.targets.notifiers.get(notifier)
        return config is None or KINDS[config.type].refreshes

    def _target(self, name: str) -> Target | None:
        return next((t for t in self.targets.targets if t.name == name), None)


@dataclass
class Service:
    settings: Settings
    resolved: ResolvedSettings
    targets: TargetsFile
    engine: Engine
    pipeline: Pipeline
    watch: Watch
    leadership: Leadership
    alerts: AlertEngine
    rules: AlertRules
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    reload_requested: asyncio.Event = field(default_factory=asyncio.Event)
    sender: Sender | None = None
    # False: serve what the database holds, probe nothing (the demo probes on its own clock).
    probing: bool = True

    async def start(self) -> None:
        await asyncio.to_thread(self._sync_targets, self.targets)
        await asyncio.to_thread(self.pipeline.recover_orphans)
        await self._restore_alerts()
        self.watch.apply(self._scheduled(self.targets))
        leading = await asyncio.to_thread(self.leadership.check)
        self.watch.start(paused=not leading)
        log.info(
            "%s; %d target(s)", "leading" if leading else "standing by", len(self.watch.targets)
        )
        loops = [
            self._leader_loop,
            self._flush_loop,
            self._reload_loop,
            self._rollup_loop,
            self._prune_loop,
        ]
        if self.sender is not None:
            loops.append(self._send_loop)
        for loop in loops:
            self.tasks.append(asyncio.create_task(_forever(loop)))
        with contextlib.suppress(ValueError, RuntimeError, NotImplementedError):
            # Only the main thread may own signals (tests build the app in other threads).
            asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, self.reload_requested.set)
        # Start-up's objects (modules, config, engine) live for the process: out of the
        # cyclic GC's sight, a large read's many new objects no longer make it walk them all.
        gc.freeze()

    async def stop(self) -> None:
        if self.sender is not None:
            self.sender.stop()  # a send in flight is dropped; its row stays pending
        await self.watch.stop(STOP_GRACE_S)
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        await asyncio.to_thread(self.leadership.release)
        self.engine.dispose()
        self.pipeline.spool.close()

    async def _restore_alerts(self) -> None:
        # Alerting must not keep the watch from starting: the first evaluation tries again.
        try:
            await asyncio.to_thread(self.alerts.restore)
        except Exception as exc:
            if not is_transient(exc):
                log.exception("alert state not restored; retried at the first evaluation")
                return
            log.warning("alert state not restored yet, database unreachable: %s", exc)

    # Leadership -------------------------------------------------------------------

    async def _leader_loop(self) -> None:
        await asyncio.sleep(self.settings.leader_check_s)
        was = self.leadership.leading
        now = await asyncio.to_thread(self.leadership.check)
        if now and not was:
            log.info("took the lead: scheduling probes")
            self.watch.resume()
        elif was and not now:
            log.warning("lost the lead: standing by")
            self.watch.pause()

    # Spool ------------------------------------------------------------------------

    async def _flush_loop(self) -> None:
        await asyncio.sleep(FLUSH_EVERY_S)
        # A replica that died beside this one, on the same spool directory, leaves some.
        await asyncio.to_thread(self.pipeline.recover_orphans)
        if self.pipeline.spool.has_pending():
            await asyncio.to_thread(self.pipeline.flush)

    # Reload -----------------------------------------------------------------------

    async def _reload_loop(self) -> None:
        path = self.settings.config
        seen = _stamp(path)
        while _stamp(path) == seen and not self.reload_requested.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.reload_requested.wait(), RELOAD_POLL_S)
        self.reload_requested.clear()
        await self.reload()

    async def reload(self) -> None:
        try:
            targets = await asyncio.to_thread(load_targets, self.settings.config)
        except ConfigError as exc:
            for problem in exc.problems:
                log.error("reload refused, keeping the running targets: %s", problem)
            return
        await asyncio.to_thread(self._sync_targets, targets)
        changes = self.watch.apply(self._scheduled(targets))
        if self.sender is not None:
            self.sender.notifiers = build_notifiers(targets.notifiers)
        if self.settings.resolved(targets) != self.resolved:
            log.warning("vantage, database or retention changed: takes effect on restart")
        self.targets = self.rules.targets = targets
        log.info("targets reloaded: %s", changes)

    def _scheduled(self, targets: TargetsFile) -> list[Target]:
        return list(targets.targets) if self.probing else []

    def _sync_targets(self, targets: TargetsFile) -> None:
        try:
            self._write_targets(targets)
        except Exception as exc:
            if not is_transient(exc):
                raise
            log.warning("targets table not updated, database unreachable: %s", exc)

    def _write_targets(self, targets: TargetsFile) -> None:
        for attempt in range(SYNC_ATTEMPTS):
            try:
                with self.pipeline.sessions.begin() as session:
                    sync_targets(session, targets.targets, utcnow())
                return
            except IntegrityError:
                # Replicas starting (or reloading) together insert the same new target;
                # the loser waited for the winner's commit, so its next try finds the row.
                if attempt == SYNC_ATTEMPTS - 1:
                    raise

    # Rollups and retention ----------------------------------------------------------

    async def _rollup_loop(self) -> None:
        # The first pass reaches back over all raw samples: runs stored while no process
        # kept rollups (an upgrade, an import) are added while their samples are there.
        await self._catch_up(utcnow() - self._retention())
        while True:
            await asyncio.sleep(CATCH_UP_EVERY_S)
            await self._catch_up(utcnow() - ROLLUP_LOOKBACK)

    async def _catch_up(self, since: datetime) -> None:
        try:
            added = await asyncio.to_thread(catch_up, self.pipeline.sessions, since, utcnow())
        except Exception as exc:
            if not is_transient(exc):
                raise
            log.warning("rollups not kept up, database unreachable: %s", exc)
            return
        if added:
            log.debug("%d run(s) added to the rollups", added)

    def _retention(self) -> timedelta:
        return timedelta(days=self.resolved.raw_retention_days)

    async def _prune_loop(self) -> None:
        await self.prune(utcnow())
        await asyncio.sleep(PRUNE_EVERY_S)

    async def prune(self, now: datetime) -> None:
        """Raw samples past the retention, and the fine rollups past theirs."""
        cutoff = now - self._retention()
        # A run's samples are about to go: its digest must exist first, or history loses it.
        await self._catch_up(cutoff - timedelta(days=1))
        if deleted := await self._pruned(prune_samples, cutoff):
            log.info("pruned %d raw samples older than %s", deleted, cutoff.date())
        if deleted := await self._pruned(prune_fine_rollups, now):
            log.info("pruned %d 5- and 15-minute rollups past their keeping", deleted)

    async def _pruned(self, prune: Callable[[Engine, datetime], int], at: datetime) -> int:
        try:
            return await asyncio.to_thread(prune, self.engine, at)
        except Exception as exc:
            if not is_transient(exc):
                raise
            return 0

    # Notifications ----------------------------------------------------------------

    async def _send_loop(self) -> None:
        assert self.sender is not None
        try:
            handled = await self.sender.run_once()
        except Exception as exc:
            if not is_transient(exc):
                raise
            log.warning("outbox not sent, database unreachable: %s", exc)
            handled = 0
        if handled < self.sender.batch:  # a full batch: more may be due at once
            await asyncio.sleep(SEND_EVERY_S)


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
