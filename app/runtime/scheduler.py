"""One APScheduler job per target. No logic of its own: it decides *when*, the pipeline *what*.

*When* is a target's grid (``app.runs.slots``): the same in every process that probes it
from one vantage, so two replicas name the same slot for the same scheduled run, and the
database keeps one run a slot.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import random
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from apscheduler.events import (
    EVENT_JOB_MAX_INSTANCES,
    EVENT_JOB_MISSED,
    EVENT_JOB_SUBMITTED,
    JobEvent,
    JobSubmissionEvent,
)
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.schedulers.base import STATE_RUNNING
from apscheduler.triggers.base import BaseTrigger

from app import clock
from app.config import Target
from app.runs.slots import Grid, slot_time
from app.runs.waits import cancelled
from app.runtime.skips import LATE, RUNNING, TURN, Skips

log = logging.getLogger(__name__)

RunTarget = Callable[[Target, datetime | None, int | None], Awaitable[Any]]  # due, slot
Owns = Callable[[str, int], bool]  # target, slot
# A run that starts later than this after its time is skipped (and counted), not queued.
MISFIRE_GRACE_S = 60
LATENESS_WINDOW = 10_000


@dataclass(frozen=True)
class Changes:
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    rescheduled: tuple[str, ...] = ()
    updated: tuple[str, ...] = ()

    def __str__(self) -> str:
        """``added a, b; removed c`` as a log line says it; ``no change`` when there is none."""
        parts = [
            f"{what} {', '.join(names)}"
            for what, names in (
                ("added", self.added),
                ("removed", self.removed),
                ("rescheduled", self.rescheduled),
                ("updated", self.updated),
            )
            if names
        ]
        return "; ".join(parts) or "no change"


def first_run_offset(name: str, interval_s: float) -> float:
    """Where in its interval a target first runs: spread by name, the same on every start.

    Two hundred targets on one interval then start evenly spread instead of all at once.
    (The demo's story; the scheduler's grid is ``app.runs.slots.Grid``.)
    """
    digest = hashlib.blake2b(name.encode(), digest_size=8).digest()
    return interval_s * int.from_bytes(digest) / 2**64


class GridTrigger(BaseTrigger):  # type: ignore[misc]
    """A run at each cell of ``grid`` (the next one after the last), up to ``jitter_s``
    late at random, never past its cell. APScheduler's own interval trigger starts its grid
    at the process's start, and adds its jitter to the next time, which then drifts."""

    def __init__(self, grid: Grid, jitter_s: float) -> None:
        self.grid = grid
        self.jitter_s = grid.jitter_bound_s(jitter_s)

    @property
    def interval(self) -> timedelta:
        return timedelta(milliseconds=self.grid.interval_ms)

    def get_next_fire_time(
        self, previous_fire_time: datetime | None, now: datetime
    ) -> datetime | None:
        if previous_fire_time is None:
            start = self.grid.next_start(now)
        else:
            start = self.grid.following(previous_fire_time)
        late = random.uniform(0.0, self.jitter_s) if self.jitter_s else 0.0
        return start + timedelta(seconds=late)


def _everything(_target: str, _slot: int) -> bool:
    return True


class Watch:
    def __init__(
        self,
        run_target: RunTarget,
        vantage: str,
        owns: Owns = _everything,
        max_in_flight: int = 0,
    ) -> None:
        self.run_target = run_target
        self.vantage = vantage
        # At most this many runs probe at once (0: no bound); a due run past it waits its
        # turn. All share one event loop and the process's CPU: when that cannot keep up
        # (a fleet's first runs on a busy machine), every run in flight slows at once, past
        # its interval (each target's next slot skipped), and each sample is timed through
        # a starved loop. Bounded, the runs beyond wait, late, and the rest run at speed.
        self._turns = asyncio.Semaphore(max_in_flight) if max_in_flight > 0 else None
        # Whether this process probes a target's slot (replicas share them: app.replicas);
        # every target has its job everywhere, and a slot another replica owns is passed.
        self.owns = owns
        self.passed = 0  # slots passed to other replicas
        self._passed: dict[str, int] = {}  # each target's latest slot passed
        self.scheduler = AsyncIOScheduler(timezone=UTC)
        self.scheduler.add_listener(self._submitted, EVENT_JOB_SUBMITTED)
        self.scheduler.add_listener(self._skipped, EVENT_JOB_MAX_INSTANCES | EVENT_JOB_MISSED)
        # Due runs skipped, by target and reason (APScheduler's own warning for each is
        # silenced: one line a streak there says it in the targets' terms).
        self.skips = Skips(MISFIRE_GRACE_S)
        self.targets: dict[str, Target] = {}
        self.running: set[asyncio.Task[Any]] = set()
        self.lateness_s: deque[float] = deque(maxlen=LATENESS_WINDOW)
        self._due: dict[str, datetime] = {}

    def start(self, *, paused: bool) -> None:
        self.scheduler.start(paused=paused)

    def on_schedule(self, now: datetime) -> bool:
        """Scheduling, and no due run more than ``MISFIRE_GRACE_S`` overdue: the scheduler
        keeps time (a run it starts late is late, not missing; one later than that it skips,
        and moves on). False while stopped, paused (standing by) or without a job."""
        if self.scheduler.state != STATE_RUNNING:
            return False
        due = [job.next_run_time for job in self.scheduler.get_jobs() if job.next_run_time]
        overdue = max(((now - at).total_seconds() for at in due), default=None)
        return overdue is not None and overdue <= MISFIRE_GRACE_S

    def pause(self) -> None:
        self.scheduler.pause()
        self.skips.forget()  # the slots while paused are no skips

    def resume(self) -> None:
        self.scheduler.resume()

    def apply(self, targets: list[Target], now: datetime | None = None) -> Changes:
        """Make the jobs match ``targets``: add, remove, reschedule, without a restart."""
        now = now or clock.wall()
        wanted = {target.name: target for target in targets}
        removed = tuple(name for name in self.targets if name not in wanted)
        for name in removed:
            self.scheduler.remove_job(name)
            del self.targets[name]
            self.skips.forget(name)
        added, rescheduled, updated = [], [], []
        for name, target in wanted.items():
            old = self.targets.get(name)
            self.targets[name] = target
            if old is None:
                self._add(target, now)
                added.append(name)
            elif (old.interval, old.jitter) != (target.interval, target.jitter):
                self.scheduler.reschedule_job(name, trigger=self._trigger(target))
                self.skips.forget(name)
                rescheduled.append(name)
            elif old != target:
                updated.append(name)  # the job looks the target up by name when it runs
        return Changes(tuple(added), removed, tuple(rescheduled), tuple(updated))

    def _trigger(self, target: Target) -> GridTrigger:
        return GridTrigger(Grid.of(target.name, self.vantage, target.interval), target.jitter)

    def _add(self, target: Target, now: datetime) -> None:
        trigger = self._trigger(target)
        self.scheduler.add_job(
            self._job,
            trigger=trigger,
            args=[target.name],
            id=target.name,
            name=target.name,
            max_instances=1,
            coalesce=True,
            misfire_grace_time=MISFIRE_GRACE_S,
            next_run_time=trigger.get_next_fire_time(None, now),
        )

    def _submitted(self, event: JobSubmissionEvent) -> None:
        self._due[event.job_id] = due = event.scheduled_run_times[-1]
        self._named(event.job_id, due)

    def _skipped(self, event: JobEvent) -> None:
        if event.code == EVENT_JOB_MAX_INSTANCES:
            assert isinstance(event, JobSubmissionEvent)
            self._named(event.job_id, event.scheduled_run_times[-1])
        self.skips.skip(event.job_id, RUNNING if event.code == EVENT_JOB_MAX_INSTANCES else LATE)

    def _named(self, name: str, due: datetime) -> None:
        if (target := self.targets.get(name)) is not None:
            self.skips.named(name, Grid.of(name, self.vantage, target.interval), due)

    async def _job(self, name: str) -> None:
        target = self.targets.get(name)
        if target is None:
            return
        due = self._due.pop(name, None)
        grid = Grid.of(name, self.vantage, target.interval)
        if not self.owns(name, grid.slot(due or clock.wall())):
            self.passed += 1
            self._passed[name] = grid.slot(due or clock.wall())
            self.skips.passed(name)
            return
        self._passed.pop(name, None)
        task = asyncio.current_task()
        assert task is not None
        self.running.add(task)
        try:
            async with self._turn():
                if due is not None and clock.wall() >= grid.following(due):
                    self.skips.skip(name, TURN)  # its cell is over: the next slot is due now
                    return
                self.skips.began(name)
                slot = None
                if due is not None:
                    self.lateness_s.append((clock.wall() - due).total_seconds())
                    slot = grid.slot(due)
                await self.run_target(target, due, slot)
        except asyncio.CancelledError:
            # ``stop`` cut it (the pipeline stored what it had as aborted). Ending here keeps
            # APScheduler from logging the cancellation as a job's error, with its traceback.
            log.info("target %s: the run in flight was cut at stop", name)
        finally:
            self.running.discard(task)

    def _turn(self) -> contextlib.AbstractAsyncContextManager[object]:
        return self._turns if self._turns is not None else contextlib.nullcontext()

    def take_passed(self, now: datetime | None = None) -> list[str]:
        """Probe, late, each slot passed whose cell is not over and that this process owns
        now (its owner's lease turned out to end before it: a replica stopped with SIGTERM);
        the targets so taken."""
        now = now or clock.wall()
        taken = []
        for name, slot in list(self._passed.items()):
            target = self.targets.get(name)
            if target is None or Grid.of(name, self.vantage, target.interval).slot(now) != slot:
                self._passed.pop(name, None)  # gone, or its cell is over: the next is due
            elif self.owns(name, slot):
                del self._passed[name]
                task = asyncio.ensure_future(self._late(target, slot))
                self.running.add(task)
                task.add_done_callback(self.running.discard)
                taken.append(name)
        return taken

    async def _late(self, target: Target, slot: int) -> None:
        with contextlib.suppress(asyncio.CancelledError):
            await self.run_target(target, slot_time(slot), slot)

    async def stop(self, grace_s: float) -> None:
        """Stop scheduling; runs in flight get ``grace_s`` to finish, then are cancelled."""
        if self.scheduler.running:
            self.scheduler.pause()
        running = set(self.running)
        if running:
            done, pending = await asyncio.wait(running, timeout=grace_s)
            await cancelled(pending, what="run")
        if self.scheduler.running:
            self.scheduler.shutdown(wait=False)
