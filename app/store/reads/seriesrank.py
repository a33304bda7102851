"""The overview's ranking in SQL: one page of the fleet's series, filtered and sorted by the
database from ``series_latest`` (one small row per (target, vantage)), and the counts the
page shows, so that a page reads its own rows and not ten thousand.

The orders are the overview's own (``app.web.pages.overviewpaging``): "worst" is the newest
run's share of errors and deadline misses, then stale series, then by name; alerts rank
before all of it, but they are few and live in another table, so the caller ranks the
alerted series itself and leaves them out of the database's ranking (``SeriesFilter``).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, NamedTuple

from sqlalchemy import (
    CTE,
    ColumnElement,
    Double,
    Select,
    and_,
    case,
    cast,
    func,
    not_,
    select,
    true,
    tuple_,
)
from sqlalchemy.orm import Session

from app.store.inlists import padded
from app.store.models import TargetRow
from app.store.serieslatest import SeriesLatestRow

L = SeriesLatestRow
STALE_AFTER_INTERVALS = 2  # as app.web.pages.view.is_stale
UNKNOWN_STALE_AFTER_S = 3600.0  # no interval known: the overview's window
Only = Literal["all", "missing", "stale"]
Order = Literal["worst", "name"]
RankQuery = Select[int, str, str, float, int, int, int, float]  # SeriesRank's columns


# The series' target, through ``+ 0``: SQLite would otherwise fetch each target by its row
# id, reading its wide row (``serieslatest.TARGETS_BRIEF`` says why that matters); this way
# it scans that index (by name, as the name order wants) and finds each target's series by
# series_latest's key. PostgreSQL hashes the join either way.
_TARGET = L.target_id == TargetRow.id + 0


class SeriesRank(NamedTuple):
    """What ranks a series on the overview; its newest run's time in epoch seconds."""

    target_id: int
    target: str
    vantage: str
    started_s: float
    n_samples: int
    n_errors: int
    n_deadline_exceeded: int
    interval_s: float


@dataclass(frozen=True, slots=True)
class SeriesFilter:
    """The series kept: every word (lower case) within "target vantage", those with misses
    or stale only, and never the series in ``leave_out`` ((target id, vantage): ranked
    apart by the caller)."""

    words: tuple[str, ...] = ()
    only: Only = "all"
    leave_out: frozenset[tuple[int, str]] = frozenset()


@dataclass(frozen=True, slots=True)
class FleetCounts:
    series: int
    targets: int
    stale: int


@dataclass(frozen=True, slots=True)
class RankedSlice:
    rows: list[SeriesRank]  # the slice asked for, in order
    matching: int  # every series the filter keeps
    fleet: FleetCounts


def series_ranks(session: Session, targets: Collection[str] | None = None) -> list[SeriesRank]:
    """Every series' newest run's counts, its target's name and interval (of the targets
    named only, when given), in no order."""
    query = _ranks(_dialect(session))
    if targets is not None:
        query = query.where(TargetRow.name.in_(padded(sorted(targets))))
    return _read(session, query)


def ranked_slice(
    session: Session, now: datetime, where: SeriesFilter, order: Order, offset: int, limit: int
) -> RankedSlice:
    """The series ``where`` keeps, in ``order``, from ``offset`` on, at most ``limit``; how
    many it keeps; and the summary line's counts. On PostgreSQL one statement that reads
    the fleet once; on SQLite, in-process and its scans cheap, one statement each (its
    materialised fleet cost more than the scans it saved: bench/README.md, "One pass")."""
    if _dialect(session) == "postgresql":
        return _one_pass(session, now.timestamp(), where, order, offset, limit)
    return _by_statements(session, now.timestamp(), where, order, offset, limit)


def fleet_counts(session: Session, now: datetime) -> FleetCounts:
    """Series, targets with a series, and stale series: the overview's summary line."""
    return ranked_slice(session, now, SeriesFilter(), "name", 0, 0).fleet


def _one_pass(
    session: Session, now_s: float, where: SeriesFilter, order: Order, offset: int, limit: int
) -> RankedSlice:
    """The fleet (every series joined to its target, with its filter, misses and staleness
    worked out) as a materialised CTE, counted by one branch and sorted and cut by the
    other; the page outer-joined to the counts' one row, so an empty page still brings
    them (before, the counts, the filter's count and the page each read the fleet)."""
    fleet = _fleet(now_s, where)
    page = select(*_rank_columns(fleet), fleet.c.missed, fleet.c.stale).where(fleet.c.kept)
    page_sq = page.order_by(*_order(fleet.c, order, "C")).offset(offset).limit(limit).subquery()
    counts = select(
        func.count(),
        func.count(func.distinct(fleet.c.target_id)),
        func.count().filter(fleet.c.stale),
        func.count().filter(fleet.c.kept),
    ).subquery("counts")
    query = select(counts, *_rank_columns(page_sq)).select_from(counts.outerjoin(page_sq, true()))
    rows = session.execute(query.order_by(*_order(page_sq.c, order, "C"))).all()
    series, targets, stale, matching = rows[0][:4]
    found = [SeriesRank(*row[4:]) for row in rows if row[4] is not None]
    return RankedSlice(found, matching, FleetCounts(series, targets, stale))


def _by_statements(
    session: Session, now_s: float, where: SeriesFilter, order: Order, offset: int, limit: int
) -> RankedSlice:
    """The fleet's counts, the filter's (when one is given) and the page (when it holds any
    of the series kept), a statement each."""
    stale = case((_stale("sqlite", now_s), 1), else_=0)
    query = select(func.count(), func.count(func.distinct(L.target_id)), func.sum(stale))
    series, targets, stale_count = session.execute(query.join(TargetRow, _TARGET)).one()
    conditions = _conditions("sqlite", now_s, where)
    if where.words or where.only != "all":
        counted = select(func.count()).select_from(L).join(TargetRow, _TARGET)
        matching = session.scalar(counted.where(*conditions)) or 0
    else:  # every series but those left out (each of them has one)
        matching = series - len(where.leave_out)
    found = []
    if limit > 0 and offset < matching:
        columns = {"target": TargetRow.name, "vantage": L.vantage, "missed": _missed(),
                   "stale": _stale("sqlite", now_s)}  # fmt: skip
        page = _ranks("sqlite").where(*conditions).order_by(*_order(columns, order))
        found = _read(session, page.offset(offset).limit(limit))
    return RankedSlice(found, matching, FleetCounts(series, targets, stale_count or 0))


def _fleet(now_s: float, where: SeriesFilter) -> CTE:
    kept = and_(true(), *_conditions("postgresql", now_s, where))
    query = _ranks("postgresql").add_columns(
        kept.label("kept"), _missed().label("missed"), _stale("postgresql", now_s).label("stale")
    )
    # Read by both branches: materialised (as PostgreSQL does a CTE named twice anyway).
    return query.cte("fleet").prefix_with("MATERIALIZED")


def _rank_columns(source: Any) -> list[ColumnElement[Any]]:
    """The columns of ``SeriesRank`` in its order, from the fleet CTE or the page."""
    return [source.c[name] for name in SeriesRank._fields]


def _order(columns: Any, order: Order, collate: str | None = None) -> list[ColumnElement[Any]]:
    """Worst first: the misses' share, then stale; then by target and vantage, in code
    point order as Python sorts them (``overviewpaging``): SQLite's BINARY is that order;
    PostgreSQL's database collation may be a language's, so its names are compared
    ``COLLATE "C"`` (a byte compare, cheaper than strcoll too)."""
    names = [columns["target"], columns["vantage"]]
    keys = [name.collate(collate) if collate else name for name in names]
    if order == "worst":
        keys = [columns["missed"].desc(), columns["stale"].desc(), *keys]
    return keys


def _dialect(session: Session) -> str:
    return session.get_bind().dialect.name


def _ranks(dialect: str) -> RankQuery:
    query = select(L.target_id, TargetRow.name.label("target"), L.vantage,
                   _started_s(dialect).label("started_s"), L.n_samples, L.n_errors,
                   L.n_deadline_exceeded, TargetRow.interval_s)  # fmt: skip
    return query.join(TargetRow, _TARGET)


def _read(session: Session, query: RankQuery) -> list[SeriesRank]:
    return [SeriesRank(*row) for row in session.execute(query)]


def _conditions(dialect: str, now_s: float, where: SeriesFilter) -> list[ColumnElement[bool]]:
    text = func.lower(TargetRow.name + " " + L.vantage)
    found = [text.contains(word, autoescape=True) for word in where.words]
    if where.only == "missing":
        found.append(_missed() > 0)
    elif where.only == "stale":
        found.append(_stale(dialect, now_s))
    if where.leave_out:
        pairs = padded(sorted(where.leave_out))
        found.append(not_(tuple_(L.target_id, L.vantage).in_(pairs)))
    return found


def _missed() -> ColumnElement[float]:
    """The newest run's errors and deadline misses, a share of its samples (as
    ``overviewpaging.missed_share``: the same division in doubles, 0 with no samples)."""
    missed = cast(L.n_errors + L.n_deadline_exceeded, Double)
    return case((L.n_samples > 0, missed / cast(L.n_samples, Double)), else_=0.0)


def _stale(dialect: str, now_s: float) -> ColumnElement[bool]:
    """No run for two intervals, or for the window with no interval known (``is_stale``)."""
    age = now_s - _started_s(dialect)
    known = and_(TargetRow.interval_s.is_not(None), TargetRow.interval_s > 0)
    return case(
        (known, age > STALE_AFTER_INTERVALS * TargetRow.interval_s),
        else_=age > UNKNOWN_STALE_AFTER_S,
    )


def _started_s(dialect: str) -> ColumnElement[float]:
    if dialect == "postgresql":
        # date_part is a double already; EXTRACT's numeric (PostgreSQL 14 on) took 3× as long
        # a row, and its cast to double rounds to the same value (bench/README.md, "One pass").
        return func.date_part("epoch", L.started_at, type_=Double)
    return (func.julianday(L.started_at) - 2440587.5) * 86400.0  # the Unix epoch's day
