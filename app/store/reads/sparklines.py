"""The overview's sparklines: each pair's hourly end-to-end median, from the hourly rollups
(and, for the hours not folded into one yet, their finer rollups merged)."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime, timedelta
from typing import Any, TypeVar

from sqlalchemy import Select, select
from sqlalchemy.orm import Session

from app.store.inlists import padded
from app.store.models import RollupRow, TargetRow
from app.store.rollups.coarse import resolved
from app.store.rollups.digests import POOLED, period_start

Q = TypeVar("Q", bound=Select[*tuple[Any, ...]])
HOUR = timedelta(hours=1)
Point = tuple[str, str, datetime, float | None]  # target name, vantage, hour, p50


def sparklines(
    session: Session,
    now: datetime,
    hours: int = 24,
    series: Collection[tuple[int, str]] | None = None,
) -> dict[tuple[str, str], list[float | None]]:
    """Hourly end-to-end p50 per (target, vantage), oldest first, the current hour last; of
    ``series`` (target id, vantage: a page's) when given, and perhaps a few more of their
    targets and vantages."""
    first = period_start(now, 3600) - timedelta(hours=hours - 1)
    columns = (RollupRow.target_id, TargetRow.name, RollupRow.vantage, RollupRow.period_start)
    query = _of(_rows(select(*columns, RollupRow.total_p50), 3600), first, series)
    rows = session.execute(query).all()
    points: list[Point] = [(n, v, at, p50) for _, n, v, at, p50 in rows]
    folded: dict[tuple[int, str], datetime] = {}
    for target, _, vantage, at, _ in rows:
        folded[(target, vantage)] = max(at + HOUR, folded.get((target, vantage), at + HOUR))
    points += _unfolded(session, _since(first, series, folded), series, folded)
    lines: dict[tuple[str, str], list[float | None]] = {}
    for name, vantage, at, p50 in points:
        index = int((at - first).total_seconds() // 3600)
        if 0 <= index < hours:
            lines.setdefault((name, vantage), [None] * hours)[index] = p50
    return lines


def _rows(query: Q, period: int) -> Q:
    return (
        query.join(TargetRow, TargetRow.id == RollupRow.target_id)
        .where(RollupRow.period_s == period)
        .where(RollupRow.vantage != POOLED)
    )


def _of(query: Q, first: datetime, series: Collection[tuple[int, str]] | None) -> Q:
    query = query.where(RollupRow.period_start >= first)
    if series is None:
        return query
    # Both leading columns of the rollups' key given, so the read is a range of the key
    # per series: with the target alone, both databases chose (period_s, period_start)
    # and read every series' hours (1.7 s on SQLite at 10,000; bench/README.md).
    targets, vantages = {t for t, _ in series}, {v for _, v in series}
    query = query.where(RollupRow.target_id.in_(padded(sorted(targets))))
    return query.where(RollupRow.vantage.in_(padded(sorted(vantages))))


def _since(
    first: datetime,
    series: Collection[tuple[int, str]] | None,
    folded: dict[tuple[int, str], datetime],
) -> datetime:
    """Where hours not folded yet may begin: after each series' newest hourly row (the fold
    builds every closed hour in turn: app.store.rollups.folds), or at ``first`` for a series
    without one."""
    if not folded or (series is not None and any(pair not in folded for pair in series)):
        return first
    return min(folded.values())


def _unfolded(
    session: Session,
    since: datetime,
    series: Collection[tuple[int, str]] | None,
    folded: dict[tuple[int, str], datetime],
) -> list[Point]:
    """The hours from ``since`` on with 5-minute rollups (which every run is merged into)
    but no hourly one, merged from their finer rollups: the same p50 as the hourly row."""
    columns = (RollupRow.target_id, TargetRow.name, RollupRow.vantage, RollupRow.period_start)
    query = _of(_rows(select(*columns), 300), since, series)
    names, keys = {}, set()
    for target, name, vantage, at in session.execute(query):
        hour = period_start(at, 3600)
        if hour >= folded.get((target, vantage), since):
            names[target] = name
            keys.add((target, vantage, 3600, hour))
    found = resolved(session, keys)
    return [(names[t], v, at, d.summary().total.get("p50")) for (t, v, _, at), d in found.items()]
