"""The deadline SLO of a target as of a moment: window sums of its runs' counts, for the
surfaces (target page, API, /metrics). The alert itself judges from the evaluator's
ledger (app/analysis/slo.py); both count the same runs — complete ones, by start time."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import case, func, select
from sqlalchemy.orm import Session

from app.analysis.detectors.deadline import SloStatus, slo_status, spans
from app.analysis.detectors.params import SloParams
from app.analysis.slo import Counts
from app.store.models import RunRow, TargetRow
from app.store.records import RunStatus


def slo_params(config: dict[str, Any]) -> SloParams | None:
    """A target's SLO from its stored config; None for a target without a deadline."""
    if not config.get("deadline_ms"):
        return None
    return SloParams.model_validate((config.get("alerts") or {}).get("slo") or {})


def window_counts(
    session: Session, target_id: int, at: datetime, windows: Sequence[timedelta]
) -> dict[str | None, dict[timedelta, Counts]]:
    """Per vantage (and None: every vantage pooled), the sums over each window ending at ``at``."""
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


def target_slo(session: Session, name: str, at: datetime) -> dict[str | None, SloStatus] | None:
    """The SLO status per vantage (None: pooled) of a target with a deadline."""
    row = session.execute(
        select(TargetRow.id, TargetRow.config).where(TargetRow.name == name)
    ).first()
    if row is None:
        return None
    slo = slo_params(row.config or {})
    if slo is None:
        return None
    counts = window_counts(session, row.id, at, spans(slo))
    return {vantage: slo_status(by_span, slo) for vantage, by_span in counts.items()}
