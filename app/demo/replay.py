"""Replay the story (``app.demo.story``) in compressed time, on the production code paths.

A thread of its own runs a ``VirtualEventLoop``: the simulated endpoints (hypercorn on
loopback), the probe (httpx over real sockets), the pipeline, the store and the alert
engine all run as in ``serve``; only the clock is virtual and the endpoints simulated. The
probe's marks, the runs' timestamps and detection's "now" all read the virtual clock:
simulated time starts ``END_H`` hours before the replay does, so the story ends about now.

Each (target, vantage) is a task: before each run it sets the endpoint as the story says
for that hour, then runs ``Pipeline.run``, which stores the run and evaluates alerts in a
worker thread. The loop's clock does not jump while that thread works, so a run's store
and evaluation are done before the simulated time moves on.

    replay = Replay(database_url, workdir, speed, on_transition)
    targets = replay.start()    # the sims listen, the targets are in the database
    replay.go()                 # the story begins
    replay.finished.wait()      # or replay.stop() at any time
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import asdict
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from app import clock
from app.alerts.engine import AlertEngine
from app.alerts.evaluate import Evaluator
from app.alerts.identity import Transition
from app.alerts.state import State
from app.config import Target, TargetsFile
from app.demo import story
from app.demo.sim.core import SimConfig
from app.demo.sim.network import sleep_until
from app.demo.sim.server import SimServer
from app.demo.virtual import VirtualClock, VirtualEventLoop
from app.runs.dbsink import DatabaseSink
from app.runs.pipeline import Pipeline
from app.runs.spool import Spool
from app.runs.writer import Writer
from app.runtime.rules import AlertRules
from app.runtime.scheduler import first_run_offset
from app.runtime.targetsync import target_values
from app.store.db import make_engine, make_sessions
from app.store.dbhistory import DatabaseHistory
from app.store.records import RunRecord
from app.store.rollups.catchup import catch_up
from app.store.targets import sync_targets

log = logging.getLogger(__name__)

START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0
# The transition, and the story hour it happened at (``story.py`` speaks in hours).
OnTransition = Callable[[Transition, float], None]
Sessions = sessionmaker[Session]


class Replay:
    def __init__(
        self,
        database_url: str,
        workdir: Path,
        speed: float | None,
        on_transition: OnTransition,
    ) -> None:
        self.database_url = database_url
        self.workdir = workdir
        self.on_transition = on_transition
        self.clock = VirtualClock(speed=speed)
        self.targets: TargetsFile | None = None
        self.urls: dict[str, str] = {}  # each sim's base URL, once it listens
        # Called with each stored run after its evaluation, as serve's after_store hook is
        # (the dashboard's /metrics); given to ``go``.
        self._observe_run: Callable[[RunRecord], object] | None = None
        self._ended: tuple[datetime, datetime] | None = None  # simulated and real end
        self.transitions: list[Transition] = []
        self.finished = threading.Event()
        self.error: BaseException | None = None
        self._origin = clock.wall()
        self._story_start = self.clock.now()
        self._ready = threading.Event()
        self._go = threading.Event()
        self._loop: VirtualEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._thread = threading.Thread(target=self._run, name="demo-replay", daemon=True)

    # Control, from any thread ----------------------------------------------------------

    def start(self) -> TargetsFile:
        """Start the sims and write the targets; returns once they are in the database."""
        self._thread.start()
        if not self._ready.wait(START_TIMEOUT_S):
            raise RuntimeError("the demo's simulated endpoints did not start in time")
        if self.error is not None:
            raise self.error
        assert self.targets is not None
        return self.targets

    def go(self, observe_run: Callable[[RunRecord], object] | None = None) -> None:
        """Begin the story: its first hour is ``story.END_H`` hours before now. Each run
        stored is then passed to ``observe_run`` (the dashboard's /metrics), if given."""
        self._observe_run = observe_run
        self._origin = clock.wall() - timedelta(hours=story.END_H)
        self._go.set()

    def stop(self) -> None:
        """Cancel what runs (a run in flight is stored as aborted) and wait for the thread."""
        loop, task = self._loop, self._task
        if loop is not None and task is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(task.cancel)
            except RuntimeError:
                pass  # the loop closed meanwhile: nothing left to cancel
        self._go.set()  # a replay stopped before it began must not wait on
        self._thread.join(STOP_TIMEOUT_S)

    def now(self) -> datetime:
        """Simulated UTC time; readable from any thread."""
        return self._origin + timedelta(seconds=self.clock.now() - self._story_start)

    def dashboard_now(self) -> datetime:
        """The dashboard's clock: the story's while it plays (so its last hour is the story's
        last hour, and numbers show from the first run), then on from its end at real pace
        (a clock that stopped would never let a run grow old)."""
        if self._ended is None:
            return self.now()
        simulated, real = self._ended
        return simulated + (clock.wall() - real)

    def at_hour(self, hour: float) -> datetime:
        """The simulated time of the story's ``hour``."""
        return self._origin + timedelta(hours=hour)

    def story_hour(self, at: datetime) -> float:
        """The hour of the story (0 … ``story.END_H``) that simulated time ``at`` falls in."""
        return (at - self._origin) / timedelta(hours=1)

    # The replay's thread ---------------------------------------------------------------

    def _run(self) -> None:
        loop = self._loop = VirtualEventLoop(self.clock)
        try:
            with asyncio.Runner(loop_factory=lambda: loop) as runner:
                runner.run(self._main())
        except asyncio.CancelledError:
            pass
        except BaseException as exc:
            self.error = exc
            log.exception("the demo's replay failed")
        finally:
            self._ended = (self.now(), clock.wall())
            self._ready.set()
            self.finished.set()

    async def _main(self) -> None:
        self._task = asyncio.current_task()
        async with AsyncExitStack() as stack:
            sims = {
                endpoint.name: await stack.enter_async_context(
                    SimServer(endpoint.config_at(0.0), http2=False)
                )
                for endpoint in story.ENDPOINTS
            }
            self.urls = {name: sim.url for name, sim in sims.items()}
            targets = demo_targets(self.urls)
            engine = make_engine(self.database_url)
            stack.callback(engine.dispose)
            sessions = make_sessions(engine)
            await asyncio.to_thread(_write_targets, sessions, targets)
            self.targets = targets
            self._ready.set()
            await asyncio.to_thread(self._go.wait)
            self._story_start = self.clock.now()
            self.clock.pace_from_here()
            await self._replay(sessions, targets, sims)

    async def _replay(
        self, sessions: Sessions, targets: TargetsFile, sims: dict[str, SimServer]
    ) -> None:
        rules = AlertRules(targets)
        history = DatabaseHistory(sessions)
        alerts = AlertEngine(
            sessions, Evaluator(history, rules.params_for), lambda _name: [], clock=self.now
        )

        def after_store(record: RunRecord) -> None:
            for transition in alerts.evaluate_after(record):
                if _announced(transition):
                    self.transitions.append(transition)
                    self.on_transition(transition, self.story_hour(transition.at))
            # Digested at once, not by the dashboard's rollup loop: its 10 s are hours of
            # the story, and the overview reads digests.
            catch_up(sessions, record.started_at, self.now())
            if self._observe_run is not None:
                self._observe_run(record)

        with clock.use(self.clock.now_ns, self.now):
            streams = [
                self._stream(
                    target, sims[target.name], self._pipeline(sessions, vantage, after_store)
                )
                for target in targets.targets
                for vantage in story.VANTAGES
            ]
            await asyncio.gather(*streams)

    def _pipeline(
        self, sessions: Sessions, vantage: str, after_store: Callable[[RunRecord], None]
    ) -> Pipeline:
        spool = Spool(self.workdir / "spool" / vantage)
        writer = Writer(DatabaseSink(sessions, self.now), spool, after_store=after_store)
        return Pipeline(writer, vantage, clock=self.now)

    async def _stream(self, target: Target, sim: SimServer, pipeline: Pipeline) -> None:
        endpoint = story.endpoint(target.name)
        offset = first_run_offset(target.name, target.interval)
        start_h, end_h = endpoint.probed_from_h, endpoint.probed_until_h
        for hour in story.run_hours(offset, target.interval, start_h, end_h):
            await sleep_until(self._story_start + hour * story.HOUR_S)
            sim.reconfigure(**_settings(endpoint.config_at(hour)))
            await pipeline.run(target, scheduled_at=self.now())


def demo_targets(urls: dict[str, str]) -> TargetsFile:
    """The story's targets file, pointed at the sims' URLs."""
    return TargetsFile.model_validate(demo_targets_file(urls))


def demo_targets_file(urls: dict[str, str]) -> dict[str, Any]:
    """The same as the data of a targets file, as ``phasewatch demo`` writes it out."""
    targets = [
        {"name": name, "url": f"{urls[name]}/v1/chat/completions", **fields}
        for name, fields in story.TARGETS.items()
    ]
    return {"targets": targets}


def _write_targets(sessions: Sessions, targets: TargetsFile) -> None:
    with sessions.begin() as session:
        sync_targets(session, target_values(targets.targets), clock.wall())


def _settings(config: SimConfig) -> dict[str, Any]:
    """A config's fields less its seed: a reconfigured sim keeps its random stream."""
    fields = asdict(config)
    fields.pop("seed")
    return fields


def _announced(transition: Transition) -> bool:
    """Into firing, or resolved after firing: what a person is told about."""
    if transition.before is transition.after:
        return False
    return transition.after is State.FIRING or transition.before is State.FIRING
