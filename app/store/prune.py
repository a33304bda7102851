"""Retention: old rows deleted in short batches that leave room for the runs being stored."""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, CursorResult, Engine, delete, select
from sqlalchemy.orm import InstrumentedAttribute, Session

from app.store.db import write_lock
from app.store.models import SampleRow

# The longest a prune batch should hold SQLite's write lock (a run being stored waits that
# long): batches shrink when the machine is slow and grow back when it is not. Not below
# 100 rows: smaller batches would make a backlog take hours behind the pauses between them.
PRUNE_BATCH_BUDGET_S = 0.05
PRUNE_BATCH_FEWEST_ROWS = 100


def prune_samples(
    engine: Engine,
    before: datetime,
    rows_per_batch: int = 500,
    pause_s: float = 0.05,
    budget_s: float = PRUNE_BATCH_BUDGET_S,
) -> int:
    """Delete raw samples older than ``before``, oldest first, in short transactions.

    Summaries stay. Each batch finds its upper edge, the n-th oldest time at or after the
    last batch's edge, through ``ix_samples_started_at`` and deletes the range below it:
    the work per batch stays the same however large the backlog (walking run ids instead
    read ever more of the table as the old rows went). Batches hold at most
    ``rows_per_batch`` rows and are halved while one takes longer than ``budget_s``; the
    pause between them, and on SQLite the process's write lock, let runs being stored in.
    """
    older = SampleRow.started_at < before
    return prune_rows(engine, SampleRow.started_at, older, rows_per_batch, pause_s, budget_s)


def prune_rows(
    engine: Engine,
    column: InstrumentedAttribute[datetime],
    older: ColumnElement[bool],
    rows_per_batch: int = 500,
    pause_s: float = 0.05,
    budget_s: float = PRUNE_BATCH_BUDGET_S,
) -> int:
    """Delete the rows of ``column``'s table that ``older`` picks, oldest ``column`` first,
    in batches as ``prune_samples`` describes; ``column`` must be indexed."""
    deleted, floor, rows = 0, None, rows_per_batch
    while True:
        with write_lock(engine):
            began = time.monotonic()
            with Session(engine) as session, session.begin():
                count, edge = _prune_batch(session, column, older, floor, rows)
            took_s = time.monotonic() - began
        deleted += count
        _checkpoint_outside_the_write_lock(engine)
        if edge is None:
            return deleted
        floor = edge
        rows = next_batch_rows(rows, took_s, budget_s, rows_per_batch)
        time.sleep(pause_s)


def _checkpoint_outside_the_write_lock(engine: Engine) -> None:
    """SQLite: copy the WAL into the database now, while nobody waits for the write lock.

    Otherwise the COMMIT that takes the WAL past 1,000 pages runs the checkpoint itself,
    and a batch that deleted hundreds of rows usually is that COMMIT: a store then waits
    for the checkpoint's writes and fsync too. PASSIVE: it never waits for, or blocks, a
    writer; what it cannot copy yet stays for the next one.
    """
    if engine.dialect.name == "sqlite":
        with engine.connect() as connection:
            connection.exec_driver_sql("PRAGMA wal_checkpoint(PASSIVE)")


def next_batch_rows(rows: int, took_s: float, budget_s: float, most: int) -> int:
    """The next prune batch's size: halved after one over budget, doubled after one well
    within it, between ``PRUNE_BATCH_FEWEST_ROWS`` and ``most``."""
    if took_s > budget_s:
        rows //= 2
    elif took_s < budget_s / 2:
        rows *= 2
    return max(min(rows, most), min(PRUNE_BATCH_FEWEST_ROWS, most))


def _prune_batch(
    session: Session,
    column: InstrumentedAttribute[datetime],
    older: ColumnElement[bool],
    floor: datetime | None,
    rows: int,
) -> tuple[int, datetime | None]:
    """One batch: how many went, and the edge the next batch starts from (None: done)."""
    if floor is not None:
        older = older & (column >= floor)
    edge = session.scalar(select(column).where(older).order_by(column).offset(rows).limit(1))
    table = column.class_
    below = older if edge is None else older & (column < edge)
    count = _deleted(session, table, below)
    if count == 0 and edge is not None:  # more than a batch of rows share one instant
        count = _deleted(session, table, older & (column == edge))
    return count, edge


def _deleted(session: Session, table: Any, where: ColumnElement[bool]) -> int:
    result: CursorResult[Any] = session.execute(delete(table).where(where))  # type: ignore[assignment]
    return result.rowcount
