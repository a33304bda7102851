"""Where a window must start for its newest runs to hold at most so many timed samples: the
bound a what-if request keeps to (app/web/whatifrequest.py), read from the runs' own counts."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.store.models import RunRow
from app.store.reads.browse import where_run_of
from app.store.records import RunStatus


def newest_start(
    session: Session,
    target: int,
    vantage: str | None,
    since: datetime,
    until: datetime,
    limit: int,
) -> datetime:
    """``since``, or the start of the oldest run that still fits when the complete runs of
    [since, until) hold more than ``limit`` timed (ok or deadline-cut) samples. Reads at most
    ``limit`` + 1 runs, newest first: every counted run holds a sample. Runs that started at
    the same instant stay together; a newest run alone above ``limit`` is kept whole."""
    timed = RunRow.n_ok + RunRow.n_deadline_exceeded
    query = select(RunRow.started_at, timed).where(
        RunRow.status == RunStatus.COMPLETE,
        RunRow.started_at >= since,
        RunRow.started_at < until,
        timed > 0,
    )
    query = where_run_of(query, target, vantage).order_by(RunRow.started_at.desc())
    held = 0
    start: datetime | None = None
    for started_at, count in session.execute(query.limit(limit + 1)):
        held += count
        if held > limit:
            return start or started_at
        start = started_at
    return since
