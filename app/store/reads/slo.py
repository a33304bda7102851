"""The deadline SLO of a target as of a moment: window sums of its runs' counts, for the
surfaces (target page, API, /metrics). The alert itself judges from the evaluator's
ledger (app/analysis/slo.py); both count the same runs — complete ones, by start time, but
those inside a maintenance window of the target (app.analysis.maintenance)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, and_, case, func, not_, or_, select
from sqlalchemy.orm import Session, sessionmaker

from app.analysis.detectors.deadline import SloStatus, slo_status, spans
from app.analysis.detectors.params import SloParams
from app.analysis.maintenance import MaintenanceWindow, merged, spans_between
from app.analysis.slo import Counts
from app.clock import utcnow
from app.store.models import RunRow, TargetRow
from app.store.records import RunStatus


def slo_params(config: dict[str, Any]) -> SloParams | None:
    """A target's SLO from its stored config; None for a target without a deadline."""
    if not config.get("deadline_ms"):
        return None
    return SloParams.model_validate((config.get("alerts") or {}).get("slo") or {})


def window_counts(
    session: Session,
    target_id: int,
    at: datetime,
    windows: Sequence[timedelta],
    kept_out: ColumnElement[bool] | None = None,
) -> dict[str | None, dict[timedelta, Counts]]:
    """Per vantage (and None: every vantage pooled), the sums over each window ending at
    ``at``; ``kept_out``: the runs left out (those in maintenance windows)."""
    timed = RunRow.n_ok + RunRow.n_deadline_exceeded
    columns = []
    for span in windows:
        inside = RunRow.started_at >= at - span
        columns += [
            func.sum(case((inside, timed), else_=0)),
            func.sum(case((inside, RunRow.n_deadline_exceeded), else_=0)),
            func.sum(case((inside, 1), else_=0)),
            func.sum(case((inside & (RunRow.n_deadline_exceeded > 0), 1), else_=0)),
        ]
    rows = session.execute(
        select(RunRow.vantage, *columns)
        .where(
            RunRow.target_id == target_id,
            RunRow.status == RunStatus.COMPLETE,
            RunRow.started_at >= at - max(windows),
            RunRow.started_at < at,
            *([] if kept_out is None else [not_(kept_out)]),
        )
        .group_by(RunRow.vantage)
    ).all()
    found = {row[0]: _by_window(row[1:], windows) for row in rows}
    vantages = list(found.values())
    found[None] = {span: sum((v[span] for v in vantages), Counts()) for span in windows}
    return found


def _by_window(sums: Sequence[Any], windows: Sequence[timedelta]) -> dict[timedelta, Counts]:
    values = [int(value or 0) for value in sums]
    return {span: Counts(*values[4 * i : 4 * i + 4]) for i, span in enumerate(windows)}


SloRow = tuple[str, str, SloStatus]  # target, vantage, its SLO now


def target_slo(
    session: Session, name: str, at: datetime, maintenance: Sequence[MaintenanceWindow] = ()
) -> dict[str | None, SloStatus] | None:
    """The SLO status per vantage (None: pooled) of a target with a deadline; the runs in
    ``maintenance`` windows of the target are not counted."""
    row = session.execute(
        select(TargetRow.id, TargetRow.config).where(TargetRow.name == name)
    ).first()
    if row is None:
        return None
    slo = slo_params(row.config or {})
    if slo is None:
        return None
    reach = max(spans(slo))
    kept_out = in_windows(session, row.id, name, at - reach, at, maintenance)
    counts = window_counts(session, row.id, at, spans(slo), kept_out)
    return {vantage: slo_status(by_span, slo) for vantage, by_span in counts.items()}


def in_windows(
    session: Session,
    target_id: int,
    name: str,
    a: datetime,
    b: datetime,
    maintenance: Sequence[MaintenanceWindow],
) -> ColumnElement[bool] | None:
    """A condition true for the target's runs in [a, b) inside one of its windows at their
    vantage; None when no window covers the target."""
    covering = [w for w in maintenance if w.covers(name, None)]
    if not covering:
        return None
    vantages = session.scalars(
        select(RunRow.vantage)
        .where(RunRow.target_id == target_id, RunRow.started_at >= a, RunRow.started_at < b)
        .distinct()
    ).all()
    terms = []
    for vantage in vantages:
        mine = [w for w in covering if w.covers(name, vantage)]
        for start, end in merged(sorted(s for w in mine for s in spans_between(w, a, b))):
            inside = and_(RunRow.started_at >= start, RunRow.started_at < end)
            terms.append(and_(RunRow.vantage == vantage, inside))
    return or_(*terms) if terms else None


def slo_statuses(
    sessions: sessionmaker[Session], windows: Callable[[], Sequence[MaintenanceWindow]] = list
) -> list[SloRow]:
    """Every active target with a deadline, per vantage seen in its budget window."""
    now, kept_out = utcnow(), windows()
    with sessions() as session:
        names = session.scalars(select(TargetRow.name).where(TargetRow.active)).all()
        found = [(name, target_slo(session, name, now, kept_out) or {}) for name in names]
    return [
        (name, vantage, status)
        for name, by_vantage in found
        for vantage, status in sorted(by_vantage.items(), key=lambda item: str(item[0]))
        if vantage is not None
    ]
