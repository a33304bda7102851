"""Building the coarse rollups of periods that have closed (``app.store.rollups.coarse``).

The rollup loop calls ``fold_closed`` when a 15-minute period has closed since its last
fold (and once when it starts, reaching back ``FOLD_LOOKBACK``): a coarse period's row is
then built from its finer rows once, instead of being merged into by every run. Each fold
builds every closed period from where the last one stopped, so the periods folded are the
older ones (the sparklines rely on it). A fold missed (the process stopped for longer than
the lookback) costs reads, not numbers: a read that finds a coarse row missing merges the
finer ones, and the fine rows' prune folds their closed periods before it deletes them
(``fold_before_prune``).
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime, timedelta

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from app.store.db import write_transaction
from app.store.models import RollupRow
from app.store.rollups import coarse
from app.store.rollups.digests import FINE_PERIODS, fine_prune_before, insert_built
from app.store.rollups.keys import RollupKey, period_start

# The first fold of a process reaches back this far: periods closed while no process kept
# the rollups (a restart, a leader's hand-over). Each level scans the keys of the next finer
# rows over it (a 5-minute row a series every 5 minutes), so not days: a period missed
# beyond it is still read right, merged from its finer rows.
FOLD_LOOKBACK = timedelta(hours=6)


def fold_due(last: datetime | None, now: datetime) -> bool:
    """Whether a coarse period has closed since the fold at ``last`` (None: none yet)."""
    finest = coarse.COARSE[0]
    return last is None or period_start(now, finest) > period_start(last, finest)


def fold_before_prune(sessions: sessionmaker[Session], now: datetime) -> int:
    """Fold every closed period of the fine rows the prune at ``now`` is about to delete
    (``fine_prune_before``): a period whose fold was missed (a stop longer than the
    lookback) keeps its numbers once its finer rows are gone. Usually an hour of rows."""
    cut = fine_prune_before(now)
    with sessions() as session:
        oldest = [
            session.scalar(
                select(func.min(RollupRow.period_start)).where(
                    RollupRow.period_s == period, RollupRow.period_start < cut
                )
            )
            for period in FINE_PERIODS
        ]
    found = [start for start in oldest if start is not None]
    return fold_closed(sessions, min(found), cut) if found else 0


def fold_closed(
    sessions: sessionmaker[Session],
    since: datetime,
    now: datetime,
    targets: Collection[int] | None = None,
) -> int:
    """``fold`` in a write transaction of its own; how many rows it built."""
    if targets is not None and not targets:
        return 0
    with write_transaction(sessions) as session:
        return len(fold(session, since, now, targets))


def fold(
    session: Session, since: datetime, now: datetime, targets: Collection[int] | None = None
) -> list[RollupKey]:
    """``coarse.fold`` (of the target ids ``targets``; None: of every target), the rows
    built inserted. In a write transaction."""
    return coarse.fold(session, since, now, insert_built, targets)
