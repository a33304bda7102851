"""Each series' newest run from ``series_latest`` (``app.store.serieslatest``): one small row
per (target, vantage), read whole for ten thousand series in milliseconds."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

from sqlalchemy import ColumnElement, Double, cast, extract, func, select
from sqlalchemy.orm import Session

from app.store.inlists import padded
from app.store.models import RunRow, TargetRow
from app.store.rawdriver import tuples
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


class SeriesRank(NamedTuple):
    """What ranks a series on the overview, as the driver gives it (no row objects, the
    time as epoch seconds: 10,000 datetimes parsed cost more than the rest of the read)."""

    target_id: int
    target: str
    vantage: str
    started_s: float
    n_samples: int
    n_errors: int
    n_deadline_exceeded: int
    interval_s: float


def series_ranks(session: Session) -> list[SeriesRank]:
    """Every series' newest run's counts, its target's name and interval, in no order."""
    connection = session.connection()
    started = _epoch(connection.dialect.name)
    query = select(L.target_id, TargetRow.name, L.vantage, started, L.n_samples, L.n_errors,
                   L.n_deadline_exceeded, TargetRow.interval_s)  # fmt: skip
    query = query.join(TargetRow, TargetRow.id == L.target_id)
    return [SeriesRank(*row) for row in tuples(connection, query)]


def _epoch(dialect: str) -> ColumnElement[float]:
    if dialect == "postgresql":
        return cast(extract("epoch", L.started_at), Double)
    return (func.julianday(L.started_at) - 2440587.5) * 86400.0  # the Unix epoch's day
