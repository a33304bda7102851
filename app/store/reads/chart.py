"""Runs of one target for a chart: their summaries, or the chart's columns straight from
``ix_runs_chart``."""

from __future__ import annotations

import gc
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from sqlalchemy import ColumnElement, Double, Select, cast, extract, func, select
from sqlalchemy.orm import Session

from app.store.models import RunRow, TargetRow
from app.store.rawdriver import tuples


def run_summaries(
    session: Session,
    target: str,
    start: datetime,
    end: datetime,
    vantage: str | None = None,
) -> Sequence[RunRow]:
    """Runs of one target in [start, end), oldest first: summaries only, no samples."""
    query: Select[RunRow] = (
        select(RunRow)
        .join(TargetRow, RunRow.target_id == TargetRow.id)
        .where(TargetRow.name == target, RunRow.started_at >= start, RunRow.started_at < end)
        .order_by(RunRow.started_at)
    )
    if vantage is not None:
        query = query.where(RunRow.vantage == vantage)
    return session.scalars(query).all()


# What a chart draws of each run; ``ix_runs_chart`` holds exactly these (models.py).
RUN_CHART_COLUMNS = (
    RunRow.started_at,
    RunRow.vantage,
    RunRow.status,
    RunRow.n_ok,
    RunRow.n_errors,
    RunRow.n_deadline_exceeded,
    RunRow.dominant_phase,
    RunRow.total_p50,
    RunRow.total_p90,
    RunRow.total_p95,
    RunRow.total_p99,
)
# 1970-01-01 as a Julian day: SQLite's date functions count in those.
_UNIX_EPOCH_JULIAN_DAY = 2440587.5


@dataclass(frozen=True, slots=True)
class RunChart:
    """One target's runs as columns, oldest first, as a chart (uPlot) takes them."""

    time: list[float]  # start of the run, seconds since 1970-01-01 UTC (ms on SQLite)
    vantage: list[str]
    status: list[str]
    n_ok: list[int]
    n_errors: list[int]
    n_deadline_exceeded: list[int]
    dominant_phase: list[str | None]
    total_p50: list[float | None]
    total_p90: list[float | None]
    total_p95: list[float | None]
    total_p99: list[float | None]

    def __len__(self) -> int:
        return len(self.time)


def run_chart(
    session: Session,
    target: str,
    start: datetime,
    end: datetime,
    vantage: str | None = None,
) -> RunChart:
    """What a chart draws of one target's runs in [start, end); for long windows.

    The per-run columns of ``ix_runs_chart`` (no per-phase ``summary``: use
    ``run_summaries`` for that, on short windows), served from that index without touching
    the table. Runs that start at the same instant come in no particular order; an unknown
    target has none. Its speed over 90 days of one target: ``bench.store_query``.
    """
    connection = session.connection()
    query = run_chart_query(connection.dialect.name, target, start, end, vantage)
    with _collector_paused():
        columns = [list(column) for column in zip(*tuples(connection, query), strict=True)]
    if not columns:
        return RunChart(*([] for _ in RUN_CHART_COLUMNS))
    if connection.dialect.name == "sqlite":
        columns[0] = np.round(columns[0], 3).tolist()  # see _epoch_seconds
    return RunChart(*columns)


def run_chart_query(
    dialect: str, target: str, start: datetime, end: datetime, vantage: str | None = None
) -> Select[Any]:
    """The statement ``run_chart`` runs on ``dialect`` (benchmarks show its plan)."""
    if start.tzinfo is None or end.tzinfo is None:
        raise ValueError("naive datetime: the window must be aware UTC times")
    target_id_of = select(TargetRow.id).where(TargetRow.name == target).scalar_subquery()
    query = (
        select(_epoch_seconds(dialect), *RUN_CHART_COLUMNS[1:])
        .where(RunRow.target_id == target_id_of)
        .where(RunRow.started_at >= start, RunRow.started_at < end)
        .order_by(RunRow.started_at)
    )
    return query if vantage is None else query.where(RunRow.vantage == vantage)


@contextmanager
def _collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off while a read builds ~200,000 objects that hold no
    cycles: left on, its young-generation passes over them take a sixth of the read."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:  # whoever found it on turns it back on
            gc.enable()


def _epoch_seconds(dialect: str) -> ColumnElement[float]:
    """``started_at`` as seconds since the epoch, computed by the database: a float per row
    is far cheaper to fetch than a datetime object."""
    if dialect == "postgresql":
        return cast(extract("epoch", RunRow.started_at), Double)
    # Whole milliseconds inside (SQLite's date functions count in them), but the float
    # arithmetic leaves microseconds of noise: ``run_chart`` rounds it off.
    return (func.julianday(RunRow.started_at) - _UNIX_EPOCH_JULIAN_DAY) * 86400.0
