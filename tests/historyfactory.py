"""Generated history for dashboard tests, and a server to show it: several targets, vantages, days.

Each target has a daily rhythm: in its busy hours (14:00–19:59 UTC) the queue swells, so the
dominant phase moves from generation to queue and back every day, the hour-of-day heatmap
shows the busy hours, and the overview's sparkline has a shape. Runs go through
``store_run`` and ``catch_up`` (samples, summary, digests and rollups, as the pipeline
stores them); one target gets a fired
``dominant_shift`` alert written as the alert engine writes it (row, transitions, summary).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import numpy as np
from sqlalchemy.orm import Session, sessionmaker

from app.alerts.identity import Identity
from app.alerts.summary import summarize_alert
from app.config import Target
from app.probe.spec import Kind
from app.runtime.targetsync import target_values
from app.store.models import AlertRow, AlertTransitionRow
from app.store.records import RunRecord
from app.store.rollups.catchup import catch_up
from app.store.targets import sync_targets
from tests.apiapp import Lifespan, serving
from tests.runfactory import make_run, record_of, store_records

BUSY_HOURS = range(14, 20)
LLM_QUIET = {
    "connect": 5.0,
    "network": 30.0,
    "queue": 40.0,
    "prefill": 40.0,
    "generation": 160.0,
    "transfer": 5.0,
}
HTTP_QUIET = {"connect": 4.0, "network": 20.0, "server": 60.0, "transfer": 8.0}
BUSY_QUEUE_FACTOR = 8.0  # queue 40 → 320 ms: larger than generation's 160
VANTAGE_RTT = {"eu": 1.0, "us": 2.5}  # network and connect scale with distance


@dataclass(frozen=True)
class Fleet:
    """What to generate. ``now`` is the end of history (the newest run is one interval before)."""

    now: datetime
    targets: tuple[str, ...] = ("chat-prod", "chat-edge", "search-api")
    vantages: tuple[str, ...] = ("eu", "us")
    days: float = 8.0
    interval: timedelta = timedelta(hours=1)
    samples: int = 20
    seed: int = 7
    http_targets: frozenset[str] = frozenset({"search-api"})
    alert_target: str | None = "chat-prod"
    # Per target: samples of each run cut at the deadline; how long ago its runs stopped.
    censored: Mapping[str, int] = field(default_factory=dict)
    stopped: Mapping[str, timedelta] = field(default_factory=dict)


@dataclass
class Filled:
    """What was written: counts to check pages against, and the alert's id and explanation."""

    fleet: Fleet
    runs: dict[tuple[str, str], list[RunRecord]] = field(default_factory=dict)
    alert_id: str | None = None
    alert_summary: str | None = None

    def newest(self, target: str, vantage: str) -> RunRecord:
        return self.runs[(target, vantage)][-1]


def medians_at(target: str, vantage: str, at: datetime, http: bool) -> dict[str, float]:
    """A target's phase medians at an hour: busy hours queue (or the server) more."""
    base = dict(HTTP_QUIET if http else LLM_QUIET)
    busy_phase = "server" if http else "queue"
    if at.hour in BUSY_HOURS:
        base[busy_phase] *= BUSY_QUEUE_FACTOR
    distance = VANTAGE_RTT.get(vantage, 1.0)
    base["network"] *= distance
    base["connect"] *= distance
    if target.endswith("edge"):
        base["network"] *= 0.5
    return base


def run_times(fleet: Fleet) -> list[datetime]:
    """Every interval, the newest a third of an interval before ``now``: inside any window
    of one interval, and never stale."""
    count = int(timedelta(days=fleet.days) / fleet.interval)
    first = fleet.now - count * fleet.interval + fleet.interval / 3
    return [first + i * fleet.interval for i in range(count)]


def targets_of(fleet: Fleet) -> list[Target]:
    return [
        Target(
            name=name,
            kind=Kind.HTTP if name in fleet.http_targets else Kind.OPENAI,
            url=f"http://127.0.0.1:9/{name}",
            interval=fleet.interval.total_seconds(),
        )
        for name in fleet.targets
    ]


def generate(fleet: Fleet) -> Iterator[RunRecord]:
    rng = np.random.default_rng(fleet.seed)
    for name in fleet.targets:
        http = name in fleet.http_targets
        until = fleet.now - fleet.stopped.get(name, timedelta(0))
        censored = fleet.censored.get(name, 0)
        for vantage in fleet.vantages:
            for at in (at for at in run_times(fleet) if at < until):
                medians = medians_at(name, vantage, at, http)
                run = make_run(
                    rng,
                    at,
                    medians,
                    n=fleet.samples,
                    censored=censored,
                    target=name,
                    vantage=vantage,
                )
                yield record_of(run)


def fill(sessions: sessionmaker[Session], fleet: Fleet) -> Filled:
    """Write the fleet's targets, runs and (optionally) its alert; commit in batches."""
    filled = Filled(fleet)
    with sessions.begin() as session:
        sync_targets(session, target_values(targets_of(fleet)), fleet.now)
    batch: list[RunRecord] = []
    for record in generate(fleet):
        filled.runs.setdefault((record.target, record.vantage), []).append(record)
        batch.append(record)
        if len(batch) >= 200:
            _store(sessions, batch, fleet.now)
            batch = []
    _store(sessions, batch, fleet.now)
    # Digests and rollups for all runs at once: as the pipeline's store hook would have
    # written them, but merged per rollup row instead of once per run (much faster).
    catch_up(sessions, run_times(fleet)[0], fleet.now)
    if fleet.alert_target is not None:
        with sessions.begin() as session:
            filled.alert_id, filled.alert_summary = add_fired_alert(
                session, fleet.alert_target, fleet.vantages[0], fleet.now
            )
    return filled


def _store(sessions: sessionmaker[Session], records: list[RunRecord], now: datetime) -> None:
    store_records(sessions, records, now)


def add_fired_alert(
    session: Session,
    target: str,
    vantage: str,
    now: datetime,
    numbers: Mapping[str, float] | None = None,
) -> tuple[str, str]:
    """A ``dominant_shift`` (generation → queue) that went pending then firing: as the
    engine writes it, so the engine restores it and can acknowledge it."""
    identity = Identity("dominant_shift", target, vantage, "vantage", "generation", "queue")
    values = dict(
        numbers
        or {
            "from_share_pct": 58.0,
            "from_share_before_pct": 58.0,
            "to_share_pct": 61.0,
            "lead_pp": 22.0,
            "lead_low_pp": 14.0,
            "lead_high_pp": 30.0,
        }
    )
    summary = summarize_alert(identity, values)
    alert_id = uuid.uuid4()
    opened, fired = now - timedelta(hours=3), now - timedelta(hours=2)
    session.add(
        AlertRow(
            id=alert_id,
            kind=identity.kind,
            target=target,
            vantage=vantage,
            scope=identity.scope,
            from_phase=identity.from_phase,
            to_phase=identity.to_phase,
            severity=identity.severity,
            state="firing",
            streak=2,
            opened_at=opened,
            fired_at=fired,
            resolved_at=None,
            summary=summary,
            numbers=values,
            updated_at=fired,
        )
    )
    session.flush()
    for at, before, after in ((opened, "inactive", "pending"), (fired, "pending", "firing")):
        session.add(
            AlertTransitionRow(
                alert_id=alert_id,
                at=at,
                before=before,
                after=after,
                summary=summary,
                numbers=values,
            )
        )
    return str(alert_id), summary


class Server:
    """An app under uvicorn on a free loopback port, in a thread (``apiapp.serving``, the one
    launcher). Lifespan off by default: nothing is scheduled or probed, so pages show
    exactly the generated history."""

    def __init__(self, app: Any, lifespan: Lifespan = "off") -> None:
        self.app = app
        self.base = ""
        self._lifespan = lifespan
        self._stack = ExitStack()

    def __enter__(self) -> Server:
        self.base = self._stack.enter_context(serving(self.app, self._lifespan))
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stack.close()
        self.app.state.service.engine.dispose()
