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
from app.analysis.objectives import AVAILABILITY, Objective, Tally, goodput, share, tally
from app.analysis.runs import run_from_samples
from app.analysis.slo import Counts
from app.clock import utcnow
from app.store.models import RunRow, SampleRow, TargetRow
from app.store.reads.slo import in_windows
from app.store.records import RunStatus, SampleRecord

IDS_PER_QUERY = 500
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
    samples = _samples(session, [run.id for run in runs]) if latency else {}
    return [
        (started, vantage, _tallies(objectives, n, ok, samples.get(run_id), latency))
        for run_id, started, vantage, n, ok in runs
    ]


def _tallies(
    objectives: tuple[Objective, ...],
    n: int,
    ok: int,
    records: list[SampleRecord] | None,
    latency: bool,
) -> dict[str, Tally]:
    """One run's tallies: every objective's, and goodput's. A run whose samples were
    pruned counts for availability only (its counts say how many failed)."""
    if not latency:
        return {o.metric: tally(o, n, ok, {}) for o in objectives} | {GOODPUT: Tally(n, n - ok)}
    if records is None:
        return {o.metric: tally(o, n, ok, {}) for o in objectives if o.metric == AVAILABILITY}
    run = run_from_samples("", "", "", datetime.min, records)
    found = {o.metric: tally(o, n, ok, run.readings) for o in objectives}
    return found | {GOODPUT: goodput(objectives, n, run.readings, run.cut_mask())}


def _samples(session: Session, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, list[SampleRecord]]:
    found: dict[uuid.UUID, list[SampleRecord]] = {}
    for first in range(0, len(ids), IDS_PER_QUERY):
        rows = session.execute(
            select(
                SampleRow.run_id,
                SampleRow.idx,
                SampleRow.started_at,
                SampleRow.status,
                SampleRow.total_ms,
                SampleRow.phases,
                SampleRow.marks,
            )
            .where(SampleRow.run_id.in_(ids[first : first + IDS_PER_QUERY]))
            .order_by(SampleRow.run_id, SampleRow.idx)
        )
        for run_id, idx, started, status, total_ms, phases, marks in rows:
            record = SampleRecord(idx, started, status, total_ms, phases, marks=marks)
            found.setdefault(run_id, []).append(record)
    return found


Sums = dict[str, dict[timedelta, Counts]]  # metric or GOODPUT → window → counts


def _sums(
    tallies: RunTallies, at: datetime, windows: Sequence[timedelta]
) -> dict[str | None, Sums]:
    found: dict[str | None, Sums] = {}
    for started, vantage, counted in tallies:
        for where in (vantage, None):
            sums = found.setdefault(where, {})
            for metric, one in counted.items():
                by_window = sums.setdefault(metric, {})
                run = Counts(one.counted, one.bad, 1, int(one.bad > 0))
                for span in windows:
                    if started >= at - span:
                        by_window[span] = by_window.get(span, Counts()) + run
    return found


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
    session: Session, run: RunRow, records: list[SampleRecord] | None
) -> tuple[dict[str, Tally], float | None] | None:
    """One run against its target's objectives (as its config says now), and its goodput;
    None for a target without objectives."""
    config = session.scalar(select(TargetRow.config).where(TargetRow.id == run.target_id))
    params = objectives_of(config or {})
    if params is None:
        return None
    objectives = params.objective_list()
    latency = any(o.metric != AVAILABILITY for o in objectives)
    found = _tallies(objectives, run.n_samples, run.n_ok, records, latency)
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
