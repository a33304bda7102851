"""Runs and samples as the API lists them: newest first, paged by a keyset cursor."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy import ColumnElement, Select, func, select
from sqlalchemy.orm import Session

from app.store.models import RunRow, SampleRow, TargetRow
from app.store.partitions import days_of_runs
from app.store.reads.paging import Keyset, count_of, keyset_page

Q = TypeVar("Q", bound=Select[*tuple[Any, ...]])


def _index(text: str) -> int:
    if not text.isdigit():
        raise ValueError(text)
    return int(text)


RUNS = Keyset((RunRow.started_at, RunRow.id), (uuid.UUID,))
SAMPLES = Keyset((SampleRow.started_at, SampleRow.run_id, SampleRow.idx), (uuid.UUID, _index))


def runs_page(
    session: Session,
    span: tuple[datetime, datetime],
    target: int | None,
    vantage: str | None,
    cursor: str | None,
    limit: int,
) -> tuple[list[tuple[RunRow, str]], str | None]:
    """Runs that started in [start, end) with their target's name, and the next cursor."""
    query = where_run_of(_runs().where(*_started_in(span)), target, vantage)
    rows, after = keyset_page(
        session, query, RUNS, cursor, limit, lambda row: (row[0].started_at, row[0].id)
    )
    return [(run, name) for run, name in rows], after


def runs_count(
    session: Session, span: tuple[datetime, datetime], target: int | None, vantage: str | None
) -> int:
    """How many runs ``runs_page`` pages through: an index range count of the window."""
    query = where_run_of(select(RunRow.id).where(*_started_in(span)), target, vantage)
    return count_of(session, query)


def _started_in(span: tuple[datetime, datetime]) -> tuple[ColumnElement[bool], ...]:
    return RunRow.started_at >= span[0], RunRow.started_at < span[1]


def run_with_target(session: Session, run_id: uuid.UUID) -> tuple[RunRow, str] | None:
    found = session.execute(_runs().where(RunRow.id == run_id)).first()
    return None if found is None else (found[0], found[1])


def samples_of(session: Session, run_id: uuid.UUID) -> list[SampleRow]:
    """A run's samples in the order they were taken."""
    days = days_of_runs(session.get_bind().dialect.name, [run_id])
    query = select(SampleRow).where(SampleRow.run_id == run_id, *days).order_by(SampleRow.idx)
    return list(session.scalars(query))


def samples_page(
    session: Session,
    span: tuple[datetime, datetime],
    target: int | None,
    vantage: str | None,
    cursor: str | None,
    limit: int,
) -> tuple[list[tuple[SampleRow, str, str]], str | None]:
    """Samples taken in [start, end) with their target and vantage, and the next cursor."""
    query = (
        select(SampleRow, TargetRow.name, RunRow.vantage)
        .join(RunRow, RunRow.id == SampleRow.run_id)
        .join(TargetRow, TargetRow.id == RunRow.target_id)
        .where(SampleRow.started_at >= span[0], SampleRow.started_at < span[1])
    )
    query = where_run_of(query, target, vantage)
    rows, after = keyset_page(
        session, query, SAMPLES, cursor, limit, lambda r: (r[0].started_at, r[0].run_id, r[0].idx)
    )
    return [(sample, name, v) for sample, name, v in rows], after


def samples_count(
    session: Session, span: tuple[datetime, datetime], target: int | None, vantage: str | None
) -> int:
    """How many samples ``samples_page`` pages through."""
    query = select(SampleRow.idx).where(
        SampleRow.started_at >= span[0], SampleRow.started_at < span[1]
    )
    if target is not None or vantage is not None:
        query = where_run_of(query.join(RunRow, RunRow.id == SampleRow.run_id), target, vantage)
    return count_of(session, query)


def has_runs_from(session: Session, target: int, vantage: str) -> bool:
    query = select(RunRow.id).where(RunRow.target_id == target, RunRow.vantage == vantage)
    return session.scalar(query.limit(1)) is not None


def vantages_since(session: Session, target: str, since: datetime) -> list[str]:
    """The vantages that ran ``target`` since ``since``, by name."""
    found = session.scalars(
        select(RunRow.vantage)
        .join(TargetRow, RunRow.target_id == TargetRow.id)
        .where(TargetRow.name == target, RunRow.started_at >= since)
        .distinct()
    )
    return sorted(found)


def first_run_at(session: Session, target: int) -> datetime | None:
    return session.scalar(select(func.min(RunRow.started_at)).where(RunRow.target_id == target))


def _runs() -> Select[RunRow, str]:
    return select(RunRow, TargetRow.name).join(TargetRow, TargetRow.id == RunRow.target_id)


def where_run_of(query: Q, target: int | None, vantage: str | None) -> Q:
    """``query`` kept to the runs of one target and one vantage, where they are given."""
    if target is not None:
        query = query.where(RunRow.target_id == target)
    if vantage is not None:
        query = query.where(RunRow.vantage == vantage)
    return query
