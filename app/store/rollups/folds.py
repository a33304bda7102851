"""Building the coarse rollups of periods that have closed (``app.store.rollups.coarse``).

The rollup loop calls ``fold_closed`` when a 15-minute period has closed since its last
fold (and once when it starts, reaching back ``FOLD_LOOKBACK``): a coarse period's row is
then built from its finer rows once, instead of being merged into by every run. Each fold
builds every closed period from where the last one stopped, so the periods folded are the
older ones (the sparklines rely on it). A fold missed (the process stopped for longer than
the lookback) costs reads, not numbers: a read that finds a coarse row missing merges the
finer ones, and the fine rows' prune folds their closed periods before it deletes them
(``fold_before_prune``). Each fold also writes the quantiles of the 5-minute rows closed
since the last (``summarize_closed``): merged into by each run, they are written without
them while open (app.store.rollups.values).
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from app.analysis.digest import Digest
from app.store.db import write_transaction
from app.store.inlists import padded
from app.store.models import RollupRow
from app.store.rollups import coarse
from app.store.rollups.digests import (
    FINE_PERIODS,
    fine_prune_before,
    insert_built,
    rollup_values,
    write_rows,
)
from app.store.rollups.keys import RollupKey, period_start

# The first fold of a process reaches back this far: periods closed while no process kept
# the rollups (a restart, a leader's hand-over). Each level scans the keys of the next finer
# rows over it (a 5-minute row a series every 5 minutes), so not days: a period missed
# beyond it is still read right, merged from its finer rows.
FOLD_LOOKBACK = timedelta(hours=6)
FINEST = FINE_PERIODS[0]  # merged into by each run; its quantiles written once it closed


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
    """``fold`` in a write transaction of its own, then ``summarize_closed`` in another;
    how many rows the fold built. Apart: the fold holds the coarse rows' writers' lock
    (``coarse.serialized``), which a catch-up takes after locking the fine rows of a late
    run, so a fold that locked fine rows too could wait on one that waits on it."""
    if targets is not None and not targets:
        return 0
    with write_transaction(sessions) as session:
        built = len(fold(session, since, now, targets))
    with write_transaction(sessions) as session:
        summarize_closed(session, since, now, targets)
    return built


def fold(
    session: Session, since: datetime, now: datetime, targets: Collection[int] | None = None
) -> list[RollupKey]:
    """``coarse.fold`` (of the target ids ``targets``; None: of every target), the rows
    built inserted. In a write transaction."""
    return coarse.fold(session, since, now, insert_built, targets)


def summarize_closed(
    session: Session, since: datetime, now: datetime, targets: Collection[int] | None = None
) -> int:
    """Write the quantiles of the 5-minute rows that were written while their period was
    open (app.store.rollups.values) and have closed since the period holding ``since``:
    found once from their sketches. Locked in key order, as a late run's merge locks them,
    and never under the coarse writers' lock (``fold_closed``). In a write transaction of
    its own; how many rows."""
    columns = [RollupRow.target_id, RollupRow.vantage, RollupRow.period_s, RollupRow.period_start]
    query = (
        select(*columns, RollupRow.digest)
        .where(
            RollupRow.period_s == FINEST,
            RollupRow.period_start >= period_start(since, FINEST),
            RollupRow.period_start < period_start(now, FINEST),
            RollupRow.total_p50.is_(None),
            RollupRow.n > 0,  # a row of failures alone has no p50, written or not
        )
        .order_by(*columns)
        .with_for_update()
    )
    if targets is not None:
        query = query.where(RollupRow.target_id.in_(padded(sorted(targets))))
    rows: list[Any] = list(session.execute(query))
    found: dict[RollupKey, Any] = {(r[0], r[1], r[2], r[3]): r[4] for r in rows}
    keys = sorted(found)
    write_rows(session, keys, [rollup_values(Digest.from_json(found[k]), now) for k in keys])
    return len(keys)
