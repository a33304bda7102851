"""Every run digest and rollup row as plain tuples, and the same rows made again from
scratch: rollup tests compare what one path wrote with what another (or a rebuild) writes."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session, sessionmaker

from app.store.models import RollupRow, RunDigestRow
from app.store.rollups.catchup import catch_up
from app.store.rollups.folds import fold_closed

Rows = tuple[list[Any], list[Any]]


def rollup_rows(sessions: sessionmaker[Session]) -> Rows:
    """Digests (run id, target id, digest) by run, and rollups (target id, vantage,
    period, start, runs, n, total p50, digest) by target, vantage, period and start."""
    key = (RollupRow.target_id, RollupRow.vantage, RollupRow.period_s, RollupRow.period_start)
    with sessions() as session:
        digests = session.execute(
            select(RunDigestRow.run_id, RunDigestRow.target_id, RunDigestRow.digest).order_by(
                RunDigestRow.run_id
            )
        ).all()
        rollups = session.execute(
            select(
                *key, RollupRow.runs, RollupRow.n, RollupRow.total_p50, RollupRow.digest
            ).order_by(*key)
        ).all()
    return [tuple(row) for row in digests], [tuple(row) for row in rollups]


def thrown_away(sessions: sessionmaker[Session]) -> None:
    """Every digest and rollup row deleted."""
    with sessions.begin() as session:
        session.execute(delete(RollupRow))
        session.execute(delete(RunDigestRow))


def rebuilt(
    sessions: sessionmaker[Session], since: datetime, caught_up_to: datetime, folded_to: datetime
) -> Rows:
    """Every row thrown away and made again by one pass over every target: the runs since
    ``since`` caught up to ``caught_up_to``, the closed periods folded to ``folded_to``."""
    thrown_away(sessions)
    catch_up(sessions, since, caught_up_to)
    fold_closed(sessions, since, folded_to)
    return rollup_rows(sessions)
