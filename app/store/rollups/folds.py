"""Building the coarse rollups of periods that have closed (``app.store.rollups.coarse``).

The rollup loop calls ``fold_closed`` when an hour has passed since its last fold (and once
when it starts, reaching back ``FOLD_LOOKBACK``): a coarse period's row is then built from
its finer rows once, instead of being merged into by every run. A fold missed (the process
stopped for longer than the lookback) costs reads, not numbers: a read that finds a coarse
row missing merges the finer ones.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import Select, select
from sqlalchemy.orm import Session, sessionmaker

from app.store.db import write_transaction
from app.store.models import RollupRow
from app.store.rollups import coarse
from app.store.rollups.digests import insert_built
from app.store.rollups.keys import RollupKey, period_start

FOLD_LOOKBACK = timedelta(days=2)


def fold_due(last: datetime | None, now: datetime) -> bool:
    """Whether an hour (and so perhaps a coarse period) has closed since the fold at ``last``."""
    return last is None or period_start(now, 3600) > period_start(last, 3600)


def fold_closed(sessions: sessionmaker[Session], since: datetime, now: datetime) -> int:
    """``fold`` in a write transaction of its own; how many rows it built."""
    with write_transaction(sessions) as session:
        return len(fold(session, since, now))


def fold(session: Session, since: datetime, now: datetime) -> list[RollupKey]:
    """Build the coarse rows of periods closed by ``now``, from the day of ``since`` on,
    that have finer rows but no row yet, finest period first (a 6-hour row is built from
    the hours built just before it); the keys built. In a write transaction."""
    coarse.serialized(session)
    built = []
    for period in coarse.COARSE:
        lo, hi = period_start(since, 86400), period_start(now, period)
        if lo >= hi:
            continue
        under = _under(session, coarse.FINER[period], period, lo, hi)
        digests = coarse.resolved(session, under - _keys(session, period, lo, hi))
        insert_built(session, digests, now)
        built += sorted(digests)
    return built


def _under(session: Session, finer: int, period: int, lo: datetime, hi: datetime) -> set[RollupKey]:
    """The keys of ``period`` that have rows of ``finer`` in [lo, hi)."""
    return {
        (t, v, period, period_start(start, period))
        for t, v, start in session.execute(_key_query(finer, lo, hi))
    }


def _keys(session: Session, period: int, lo: datetime, hi: datetime) -> set[RollupKey]:
    return {(t, v, period, start) for t, v, start in session.execute(_key_query(period, lo, hi))}


def _key_query(period: int, lo: datetime, hi: datetime) -> Select[int, str, datetime]:
    return select(RollupRow.target_id, RollupRow.vantage, RollupRow.period_start).where(
        RollupRow.period_s == period,
        RollupRow.period_start >= lo,
        RollupRow.period_start < hi,
    )
