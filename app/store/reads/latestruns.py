"""Each series' newest run from ``series_latest`` (``app.store.serieslatest``): one small row
per (target, vantage), read whole for ten thousand series in milliseconds."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.store.inlists import padded
from app.store.models import RunRow, TargetRow
from app.store.serieslatest import SeriesLatestRow

L = SeriesLatestRow
MANY = 1000  # more targets than this are read whole and picked here: no IN list of 10,000


@dataclass(frozen=True, slots=True)
class LatestRun:
    """A series and its newest run's counts: what ranks it on the overview."""

    target_id: int
    target: str
    vantage: str
    started_at: datetime
    status: str
    n_samples: int
    n_errors: int
    n_deadline_exceeded: int


def latest_runs(session: Session, targets: Collection[int] | None = None) -> list[LatestRun]:
    """Every series' newest run (of ``targets`` only, by id, when given), in no order."""
    query = select(L.target_id, TargetRow.name, L.vantage, L.started_at, L.status, L.n_samples,
                   L.n_errors, L.n_deadline_exceeded)  # fmt: skip
    query = query.join(TargetRow, TargetRow.id == L.target_id)
    if targets is not None and len(targets) <= MANY:
        query = query.where(L.target_id.in_(padded(sorted(targets))))
    found = [LatestRun(*row) for row in session.execute(query)]
    if targets is None or len(targets) <= MANY:
        return found
    wanted = set(targets)
    return [run for run in found if run.target_id in wanted]


def latest_times(session: Session) -> dict[tuple[int, str], datetime]:
    """(target id, vantage) → its newest run's start, for every series that has run."""
    query = select(L.target_id, L.vantage, L.started_at)
    return {(target, vantage): at for target, vantage, at in session.execute(query)}


def vantage_latest(session: Session, vantage: str, names: list[str]) -> datetime | None:
    """The newest run at ``vantage`` among the targets named; None if none ran there."""
    query = (
        select(L.started_at)
        .join(TargetRow, TargetRow.id == L.target_id)
        .where(L.vantage == vantage, TargetRow.name.in_(padded(names)))
        .order_by(L.started_at.desc())
    )
    return session.scalar(query.limit(1))


def last_runs(
    session: Session, now: datetime, known: dict[tuple[int, str], datetime] | None = None
) -> dict[tuple[int, str], datetime]:
    """(target id, vantage) -> its latest run before ``now``, for every series that has run.

    Any run counts, complete or not, digested or not: a run shows its age at once. One read
    of ``series_latest``; a series whose newest run is not before ``now`` (a ``now`` in the
    past) costs one index seek for the latest that is. ``known`` are times the caller
    already has (the later of the two wins).
    """
    found = dict(known or {})
    for key, at in latest_times(session).items():
        before = at if at < now else _latest_before(session, *key, now)
        if before is not None:
            found[key] = max(before, found.get(key, before))
    return found


def _latest_before(session: Session, target: int, vantage: str, now: datetime) -> datetime | None:
    query = select(func.max(RunRow.started_at)).where(
        RunRow.target_id == target, RunRow.vantage == vantage, RunRow.started_at < now
    )
    return session.scalar(query)
