"""The coarse rollups (15 min, 1 h, 6 h, 1 day): built when their period closes, not merged
per run.

A run used to be merged into ten rollup rows (five periods, its vantage and pooled), each
read, merged, summarised and written back: the rollups' main cost in ``serve``
(bench/fleet.py). Now a run is merged into its 5-minute rows only; a coarse row is built
once its period has closed, from the rows of the next finer period (``FINER``), by the
rollup loop's fold (app.store.rollups.folds) or by the catch-up itself for a run of a
period already closed (a late push, an import).

The one rule every writer keeps: **a coarse row that exists counts every run counted**, so
a run whose coarse row exists is merged into it as before, and a read that finds a coarse
row missing merges the finer rows instead (``resolved``, recursively): folded or not, every
read gives the same numbers (sketches merge exactly). Writers of coarse rows take one
advisory lock on PostgreSQL (``serialized``), so a fold never reads finer rows a catch-up
has merged into but not committed; SQLite has one writer.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Collection, Iterable
from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, Select, and_, or_, select, text
from sqlalchemy.orm import Session

from app.analysis.digest import Digest, merge_digests
from app.store.inlists import padded
from app.store.models import RollupRow
from app.store.rollups.keys import RollupKey, period_start

COARSE = (900, 3600, 21600, 86400)  # finest first: each is built from the one before
FINER = {900: 300, 3600: 900, 21600: 3600, 86400: 21600}
# The rollups' writers' advisory lock on PostgreSQL (any constant no other lock uses).
_LOCK = 0x50575231
# More distinct ranges than this are read as one span (a read's buckets rarely make more
# than three: the empty ones before a target existed, the open tail, a pause).
_MAX_RANGES = 16


def is_coarse(key: RollupKey) -> bool:
    return key[2] in FINER


def closed(key: RollupKey, now: datetime) -> bool:
    return key[3] + timedelta(seconds=key[2]) <= now


def serialized(session: Session) -> None:
    """Hold the rollups' writers' lock until the transaction ends (PostgreSQL; SQLite has
    one writer already)."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _LOCK})


def resolved(session: Session, keys: Collection[RollupKey]) -> dict[RollupKey, Digest]:
    """The digest of each coarse key merged from its finer rows (where one of those is
    missing too, from its own finer rows); keys with nothing under them are left out."""
    found: dict[RollupKey, Digest] = {}
    by_period: dict[int, list[RollupKey]] = defaultdict(list)
    for key in keys:
        if is_coarse(key):
            by_period[key[2]].append(key)
    for period, mine in by_period.items():
        found.update(_resolved_level(session, period, mine))
    return found


def _resolved_level(
    session: Session, period: int, keys: list[RollupKey]
) -> dict[RollupKey, Digest]:
    finer = FINER[period]
    children = {key: _children(key, finer) for key in keys}
    rows = _rows(session, finer, keys, period)
    wanted = {child for kids in children.values() for child in kids}
    deeper = resolved(session, wanted - rows.keys()) if finer in FINER else {}
    found = {}
    for key, kids in children.items():
        parts = [rows[k] if k in rows else deeper[k] for k in kids if k in rows or k in deeper]
        if parts:
            found[key] = parts[0] if len(parts) == 1 else merge_digests(parts)
    return found


def _children(key: RollupKey, finer: int) -> list[RollupKey]:
    target, vantage, period, start = key
    step = timedelta(seconds=finer)
    return [(target, vantage, finer, start + i * step) for i in range(period // finer)]


def _rows(
    session: Session, finer: int, keys: list[RollupKey], period: int
) -> dict[RollupKey, Digest]:
    """The rows of period ``finer`` under ``keys`` (of ``period``), read in one query."""
    if not keys:
        return {}
    series = {(key[0], key[1]) for key in keys}
    query = select(
        RollupRow.target_id,
        RollupRow.vantage,
        RollupRow.period_start,
        RollupRow.digest,
    ).where(
        RollupRow.period_s == finer,
        RollupRow.target_id.in_(padded(sorted({t for t, _ in series}))),
        RollupRow.vantage.in_(padded(sorted({v for _, v in series}))),
        _within(_ranges(key[3] for key in keys), period),
    )
    return {
        (t, v, finer, start): Digest.from_json(digest)
        for t, v, start, digest in session.execute(query)
        if (t, v) in series
    }


def _ranges(starts: Iterable[datetime]) -> list[datetime]:
    return sorted(set(starts))


def _within(starts: list[datetime], period: int) -> ColumnElement[bool]:
    """period_start within the periods beginning at ``starts``, as a few ranges."""
    step = timedelta(seconds=period)
    spans: list[list[datetime]] = []
    for start in starts:
        if spans and spans[-1][1] >= start:
            spans[-1][1] = start + step
        else:
            spans.append([start, start + step])
    if len(spans) > _MAX_RANGES:
        spans = [[spans[0][0], spans[-1][1]]]
    column = RollupRow.period_start
    return or_(*(and_(column >= lo, column < hi) for lo, hi in spans))


Insert = Callable[[Session, dict[RollupKey, Digest], datetime], None]


def fold(
    session: Session,
    since: datetime,
    now: datetime,
    insert: Insert,
    targets: Collection[int] | None = None,
) -> list[RollupKey]:
    """Build the coarse rows of periods closed by ``now`` that hold ``since`` or begin after
    it and have finer rows but no row yet, finest period first (an hour is built from the
    quarters built just before it), each period's rows ``insert``-ed before the next is
    built from them; the keys built. Of the target ids ``targets`` (None: every target's).
    In a write transaction."""
    if targets is not None and not targets:
        return []
    serialized(session)
    built = []
    for period in COARSE:
        lo, hi = period_start(since, period), period_start(now, period)
        if lo >= hi:
            continue
        under = _under(session, FINER[period], period, lo, hi, targets)
        digests = resolved(session, under - _keys(session, period, lo, hi, targets))
        insert(session, digests, now)
        built += sorted(digests)
    return built


Targets = Collection[int] | None  # target ids; None: every target


def _under(
    session: Session, finer: int, period: int, lo: datetime, hi: datetime, targets: Targets
) -> set[RollupKey]:
    """The keys of ``period`` that have rows of ``finer`` in [lo, hi)."""
    return {
        (t, v, period, period_start(start, period))
        for t, v, start in session.execute(_key_query(finer, lo, hi, targets))
    }


def _keys(
    session: Session, period: int, lo: datetime, hi: datetime, targets: Targets
) -> set[RollupKey]:
    query = _key_query(period, lo, hi, targets)
    return {(t, v, period, start) for t, v, start in session.execute(query)}


def _key_query(
    period: int, lo: datetime, hi: datetime, targets: Targets
) -> Select[int, str, datetime]:
    query = select(RollupRow.target_id, RollupRow.vantage, RollupRow.period_start).where(
        RollupRow.period_s == period,
        RollupRow.period_start >= lo,
        RollupRow.period_start < hi,
    )
    if targets is not None:
        query = query.where(RollupRow.target_id.in_(padded(sorted(targets))))
    return query
