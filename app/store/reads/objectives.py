"""A target's objectives (``alerts.objectives``) as of a moment, for the surfaces (target
page, API, /metrics): each objective's budget left and burn rate per window, and goodput
(the share of requests meeting every objective at once) per window.

The alerts judge from the evaluator's ledgers (app.alerts.objectiveledgers); both count
the same runs — complete ones by start time, but those inside a maintenance window — and
the same samples (app.analysis.objectives). Availability comes from the run rows; a
latency objective and goodput from the raw samples (a run whose samples were pruned
counts for availability only).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import numpy as np
from pydantic import ValidationError
from sqlalchemy import ColumnElement, not_, select
from sqlalchemy.orm import Session, sessionmaker

from app.analysis.detectors.deadline import SloStatus, label, slo_status, spans
from app.analysis.detectors.params import DetectorParams
from app.analysis.maintenance import MaintenanceWindow
from app.analysis.objectives import (
    AVAILABILITY,
    CUT,
    Objective,
    Seen,
    Tally,
    goodput,
    readings,
    share,
    tally,
)
from app.analysis.slo import Counts
from app.analysis.summary import TIMED
from app.clock import utcnow
from app.store.historyrows import samples_of
from app.store.models import RunRow, TargetRow
from app.store.reads.slo import in_windows
from app.store.records import RunStatus

GOODPUT = "goodput"  # the key of goodput's tallies beside the objectives'


@dataclass(frozen=True, slots=True)
class ObjectivesStatus:
    """Each objective's SLO now (by metric), and goodput's share per window (None: no
    request in it)."""

    slos: dict[str, SloStatus]
    below_ms: dict[str, float | None]
    goodput: dict[str, float | None]

    def to_json(self) -> dict[str, Any]:
        return {
            "objectives": [
                {"metric": metric, "below_ms": self.below_ms[metric], **status.to_json()}
                for metric, status in self.slos.items()
            ],
            "goodput": self.goodput,
        }


def objectives_of(config: dict[str, Any]) -> DetectorParams | None:
    """A target's detector settings from its stored config when it has objectives; None
    without (or with a config this version cannot read)."""
    try:
        params = DetectorParams.model_validate(config.get("alerts") or {})
    except ValidationError:
        return None
    return params if params.objectives else None


def target_objectives(
    session: Session, name: str, at: datetime, maintenance: Sequence[MaintenanceWindow] = ()
) -> dict[str | None, ObjectivesStatus] | None:
    """Per vantage (None: pooled); None for a target without objectives."""
    row = session.execute(
        select(TargetRow.id, TargetRow.config).where(TargetRow.name == name)
    ).first()
    params = None if row is None else objectives_of(row.config or {})
    if row is None or params is None:
        return None
    windows = spans(params.slo)
    kept_out = in_windows(session, row.id, name, at - max(windows), at, maintenance)
    tallies = _run_tallies(session, row.id, at, max(windows), params.objective_list(), kept_out)
    by_vantage = _sums(tallies, at, windows)
    return {vantage: _status(params, sums) for vantage, sums in by_vantage.items()}


# (started_at, vantage, {metric or GOODPUT: Tally}) per run
RunTallies = list[tuple[datetime, str, dict[str, Tally]]]


def _run_tallies(
    session: Session,
    target_id: int,
    at: datetime,
    reach: timedelta,
    objectives: tuple[Objective, ...],
    kept_out: ColumnElement[bool] | None,
) -> RunTallies:
    runs = session.execute(
        select(RunRow.id, RunRow.started_at, RunRow.vantage, RunRow.n_samples, RunRow.n_ok).where(
            RunRow.target_id == target_id,
            RunRow.status == RunStatus.COMPLETE,
            RunRow.started_at >= at - reach,
            RunRow.started_at < at,
            *([] if kept_out is None else [not_(kept_out)]),
        )
    ).all()
    latency = any(o.metric != AVAILABILITY for o in objectives)
    known = {run.id: MEMO.get(run.id, objectives) for run in runs}
    missing = [run_id for run_id, found in known.items() if found is None] if latency else []
    samples = _samples(session, missing)
    found: RunTallies = []
    for run_id, started, vantage, n, ok in runs:
        counted = known[run_id]
        if counted is None:
            counted = _tallies(objectives, n, ok, samples.get(run_id), latency)
            MEMO.put(run_id, objectives, counted)
        found.append((started, vantage, counted))
    return found


def _tallies(
    objectives: tuple[Objective, ...],
    n: int,
    ok: int,
    samples: list[Seen] | None,
    latency: bool,
) -> dict[str, Tally]:
    """One run's tallies: every objective's, and goodput's. A run whose samples were
    pruned counts for availability only (its counts say how many failed)."""
    if not latency:
        return {o.metric: tally(o, n, ok, {}) for o in objectives} | {GOODPUT: Tally(n, n - ok)}
    if samples is None:
        return {o.metric: tally(o, n, ok, {}) for o in objectives if o.metric == AVAILABILITY}
    timed = [seen for seen in samples if seen[0] in TIMED]
    reads = readings(timed)
    cut = np.array([seen[0] == CUT for seen in timed], dtype=np.bool_)
    found = {o.metric: tally(o, n, ok, reads) for o in objectives}
    return found | {GOODPUT: goodput(objectives, n, reads, cut)}


class TallyMemo:
    """Each run's tallies by (run id, objectives): a stored run never changes, so what it
    counts against the same objectives is worked out from its samples once, and a
    30-day window read again (each scrape, each page) reads only its new runs' samples.
    Bounded: past ``size`` runs the oldest entries go first."""

    def __init__(self, size: int = 200_000) -> None:
        self.size = size
        self._held: dict[tuple[uuid.UUID, tuple[Objective, ...]], dict[str, Tally]] = {}
        self._lock = threading.Lock()

    def get(self, run_id: uuid.UUID, objectives: tuple[Objective, ...]) -> dict[str, Tally] | None:
        return self._held.get((run_id, objectives))

    def put(
        self, run_id: uuid.UUID, objectives: tuple[Objective, ...], found: dict[str, Tally]
    ) -> None:
        with self._lock:
            self._held[(run_id, objectives)] = found
            while len(self._held) > self.size:
                del self._held[next(iter(self._held))]


# One for the process, as a cache of facts that never change (a pure function's memo).
MEMO = TallyMemo()


def _samples(session: Session, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, list[Seen]]:
    return {
        run_id: [(s.status, s.total_ms, s.marks, s.details) for s in samples]
        for run_id, samples in samples_of(session, ids).items()
    }


Sums = dict[str, dict[timedelta, Counts]]  # metric or GOODPUT → window → counts


def _sums(
    tallies: RunTallies, at: datetime, windows: Sequence[timedelta]
) -> dict[str | None, Sums]:
    """Per vantage (and None: pooled), each metric's counts over each window."""
    vantages = sorted({vantage for _, vantage, _ in tallies})
    found: dict[str | None, Sums] = {}
    for where in [*vantages, None]:
        mine = [t for t in tallies if where is None or t[1] == where]
        ages = np.array([(at - started).total_seconds() for started, _, _ in mine])
        metrics = {metric for _, _, counted in mine for metric in counted}
        found[where] = {metric: _by_window(mine, metric, ages, windows) for metric in metrics}
    return found


def _by_window(
    tallies: RunTallies, metric: str, ages: Any, windows: Sequence[timedelta]
) -> dict[timedelta, Counts]:
    """One metric's sums over each window, by arrays (a 30-day window holds thousands of
    runs, read at every scrape)."""
    pairs = [counted.get(metric, NONE) for _, _, counted in tallies]
    counted = np.array([p.counted for p in pairs], dtype=np.int64)
    bad = np.array([p.bad for p in pairs], dtype=np.int64)
    has = np.array([metric in c for _, _, c in tallies], dtype=np.bool_)
    found = {}
    for span in windows:
        inside = has & (ages <= span.total_seconds())
        found[span] = Counts(
            int(counted[inside].sum()),
            int(bad[inside].sum()),
            int(inside.sum()),
            int((inside & (bad > 0)).sum()),
        )
    return found


NONE = Tally(0, 0)


def _status(params: DetectorParams, sums: Sums) -> ObjectivesStatus:
    slos, below = {}, {}
    for objective in params.objective_list():
        slo = params.slo.model_copy(update={"objective": objective.target})
        slos[objective.metric] = slo_status(sums.get(objective.metric, {}), slo)
        below[objective.metric] = objective.below_ms
    good = sums.get(GOODPUT, {})
    return ObjectivesStatus(
        slos,
        below,
        {label(span): _share(good.get(span, Counts())) for span in spans(params.slo)},
    )


def _share(counts: Counts) -> float | None:
    found = share(counts.timed, counts.censored)
    return None if found is None else round(float(np.round(found, 4)), 4)


def run_objectives(
    session: Session, run: RunRow, samples: list[Seen] | None
) -> tuple[dict[str, Tally], float | None] | None:
    """One run against its target's objectives (as its config says now), and its goodput;
    None for a target without objectives."""
    config = session.scalar(select(TargetRow.config).where(TargetRow.id == run.target_id))
    params = objectives_of(config or {})
    if params is None:
        return None
    objectives = params.objective_list()
    latency = any(o.metric != AVAILABILITY for o in objectives)
    found = _tallies(objectives, run.n_samples, run.n_ok, samples, latency)
    good = found.pop(GOODPUT, None)
    return found, None if good is None else share(good.counted, good.bad)


ObjectivesRow = tuple[str, str, ObjectivesStatus]  # target, vantage, its objectives now


def objective_statuses(
    sessions: sessionmaker[Session], windows: Callable[[], Sequence[MaintenanceWindow]] = list
) -> list[ObjectivesRow]:
    """Every active target with objectives, per vantage seen in its budget window."""
    now, kept_out = utcnow(), windows()
    with sessions() as session:
        names = session.scalars(select(TargetRow.name).where(TargetRow.active)).all()
        found = [(name, target_objectives(session, name, now, kept_out) or {}) for name in names]
    return [
        (name, vantage, status)
        for name, by_vantage in found
        for vantage, status in sorted(by_vantage.items(), key=lambda item: str(item[0]))
        if vantage is not None
    ]


def target_objective_list(session: Session, name: str) -> tuple[Objective, ...]:
    """A target's objectives as the analysis takes them (none: an empty tuple)."""
    config = session.scalar(select(TargetRow.config).where(TargetRow.name == name))
    params = objectives_of(config or {})
    return () if params is None else params.objective_list()
