"""Reads and writes. Every function takes a session (or an engine) and plain values."""

from __future__ import annotations

import gc
import math
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from weakref import WeakKeyDictionary

import numpy as np
from sqlalchemy import (
    ColumnElement,
    Connection,
    CursorResult,
    Dialect,
    Double,
    Engine,
    Insert,
    Select,
    Table,
    TextClause,
    bindparam,
    cast,
    delete,
    extract,
    func,
    select,
    text,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import StatementError
from sqlalchemy.orm import InstrumentedAttribute, Session

from app.store.db import write_lock
from app.store.models import RunRow, SampleRow, TargetRow
from app.store.records import RunRecord, SampleRecord
from app.store.targets import target_id

_RUNS: Table = RunRow.__table__  # type: ignore[assignment]
_SAMPLES: Table = SampleRow.__table__  # type: ignore[assignment]


# The run's target is found by name inside the INSERT (an index lookup on the server, no
# round trip and nothing to cache); a target seen for the first time is created and the
# INSERT tried again. Both statements are built once: each run only binds its values.
_RUN_FIELDS = [c for c in _RUNS.c if c.name != "target_id"]


def _sqlite_run_insert() -> Insert:
    fields = [bindparam(f"run_{c.name}", type_=c.type) for c in _RUN_FIELDS]
    of_target = select(TargetRow.id, *fields).where(TargetRow.name == bindparam("target"))
    insert = sqlite_insert(_RUNS).from_select(["target_id", *_RUN_FIELDS], of_target)
    # RETURNING: nothing comes back when the run id is taken (or the target is new).
    return insert.on_conflict_do_nothing(index_elements=["id"]).returning(_RUNS.c.id)


def _postgres_run_insert() -> TextClause:
    """The run and its samples in one statement: one round trip, one message per run.

    The samples travel as one JSON array (one orjson call) that the server unpacks with
    ``jsonb_to_recordset``, instead of an INSERT message per sample. They are inserted
    only with a run row that went in: a run id already stored leaves everything as it was.
    """
    pg = postgresql.dialect()  # type: ignore[no-untyped-call]
    fields = ", ".join(f"CAST(:run_{c.name} AS {c.type.compile(dialect=pg)})" for c in _RUN_FIELDS)
    samples = [c for c in _SAMPLES.c if c.name != "run_id"]
    recordset = ", ".join(f"{c.name} {c.type.compile(dialect=pg)}" for c in samples)
    sql = f"""
        WITH run AS (
            INSERT INTO runs (target_id, {", ".join(c.name for c in _RUN_FIELDS)})
            SELECT targets.id, {fields} FROM targets WHERE targets.name = :target
            ON CONFLICT (id) DO NOTHING RETURNING id
        ), stored AS (
            INSERT INTO samples (run_id, {", ".join(c.name for c in samples)})
            SELECT run.id, {", ".join(f"s.{c.name}" for c in samples)}
            FROM run, jsonb_to_recordset(:samples) AS s({recordset})
        )
        SELECT (SELECT count(*) FROM run) > 0,
               EXISTS (SELECT FROM targets WHERE targets.name = :target)"""
    run_params = [bindparam(f"run_{c.name}", type_=c.type) for c in _RUN_FIELDS]
    return text(sql).bindparams(*run_params, bindparam("samples", type_=postgresql.JSONB()))


_SQLITE_RUN_INSERT = _sqlite_run_insert()
_POSTGRES_RUN_INSERT = _postgres_run_insert()
_SAMPLE_INSERT = _SAMPLES.insert()


def store_run(session: Session, record: RunRecord, now: datetime) -> bool:
    """Store a run with its samples and summary; False if this run id is already stored.

    Idempotent by run id even when two writers race: the run row is inserted with
    ON CONFLICT DO NOTHING and its samples only by the writer whose insert took. A run of
    a target the database does not know yet creates it (``target_id``).
    """
    params = {f"run_{name}": value for name, value in _run_values(record, 0).items()}
    params["target"] = record.target
    insert = _store_postgres if session.get_bind().dialect.name == "postgresql" else _store_sqlite
    stored, target_known = insert(session, record, params)
    if not target_known:
        target_id(session, record.target, now)
        stored, target_known = insert(session, record, params)
    return stored


def _store_postgres(
    session: Session, record: RunRecord, params: dict[str, Any]
) -> tuple[bool, bool]:
    """Compiled once per engine and run as driver SQL: SQLAlchemy's per-execution work on
    the statement (cache lookup, parameter processing, result set-up) cost ~0.07 ms of CPU
    per run, a seventh of the client's share of storing 20 samples (bench/README.md)."""
    params["samples"] = [_sample_document(s) for s in record.samples]
    connection = session.connection()
    statement = _driver_statement(connection.dialect, _POSTGRES_RUN_INSERT)
    result = connection.exec_driver_sql(statement.sql, statement.bind(params))
    stored, target_known = result.one()
    return bool(stored), bool(target_known)


def _store_sqlite(session: Session, record: RunRecord, params: dict[str, Any]) -> tuple[bool, bool]:
    if session.execute(_SQLITE_RUN_INSERT, params).scalar() is None:
        known = session.scalar(select(TargetRow.id).where(TargetRow.name == record.target))
        return False, known is not None
    if record.samples:
        session.execute(_SAMPLE_INSERT, [_sample_values(record.id, s) for s in record.samples])
    return True, True


def _sample_document(sample: SampleRecord) -> dict[str, Any]:
    """A sample as an element of the JSON array ``_POSTGRES_RUN_INSERT`` unpacks."""
    # What UTCDateTime checks for every other write; inside JSON a naive time would be
    # read in the server's time zone. Non-finite totals have no JSON form.
    if sample.started_at.tzinfo is None:
        raise ValueError("naive datetime: phasewatch stores aware UTC times only")
    if not math.isfinite(sample.total_ms):
        raise ValueError(f"sample {sample.idx}: total_ms {sample.total_ms} is not a number")
    return _sample_fields(sample)


def _sample_fields(sample: SampleRecord) -> dict[str, Any]:
    return {
        "idx": sample.idx,
        "started_at": sample.started_at,
        "status": sample.status,
        "error_class": sample.error_class,
        "error": sample.error,
        "http_status": sample.http_status,
        "total_ms": sample.total_ms,
        "phases": sample.phases,
        "provenance": sample.provenance,
        "marks": sample.marks,
        "details": sample.details,
    }


def _run_values(record: RunRecord, target: int) -> dict[str, Any]:
    summary = record.summary()
    total = summary["total"]
    return {
        "id": record.id,
        "target_id": target,
        "vantage": record.vantage,
        "scheduled_at": record.scheduled_at,
        "started_at": record.started_at,
        "finished_at": record.finished_at,
        "status": record.status,
        "n_samples": len(record.samples),
        "n_ok": sum(s.status == "ok" for s in record.samples),
        "n_errors": summary["errors"],
        "n_deadline_exceeded": summary["deadline_exceeded"],
        "dominant_phase": summary["dominant"],
        "total_p50": total.get("p50"),
        "total_p90": total.get("p90"),
        "total_p95": total.get("p95"),
        "total_p99": total.get("p99"),
        "summary": summary,
    }


def _sample_values(run_id: uuid.UUID, sample: SampleRecord) -> dict[str, Any]:
    return {"run_id": run_id, **_sample_fields(sample)}


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
    target has none. 90 days of one target (17,280 runs) with 10 M samples stored: see
    bench/README.md (Query).
    """
    connection = session.connection()
    query = run_chart_query(connection.dialect.name, target, start, end, vantage)
    with _collector_paused():
        columns = [list(column) for column in zip(*_tuples(connection, query), strict=True)]
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


@dataclass(frozen=True, slots=True)
class DriverStatement:
    """A statement compiled for one dialect, to run on the driver's own cursor.

    Its parameters go through their SQLAlchemy types' bind processing (aware UTC times,
    JSON through the engine's serializer), as SQLAlchemy would apply it.
    """

    sql: str
    processors: tuple[tuple[str, Callable[[Any], Any] | None], ...]
    positions: tuple[str, ...] | None  # qmark drivers (SQLite): the names in order
    defaults: dict[str, Any]

    @classmethod
    def compile(cls, statement: Any, dialect: Dialect) -> DriverStatement:
        compiled = statement.compile(dialect=dialect)
        processors = tuple(
            (name, bind.type.dialect_impl(dialect).bind_processor(dialect))
            for bind, name in compiled.bind_names.items()
        )
        positions = tuple(compiled.positiontup) if compiled.positiontup else None
        return cls(compiled.string, processors, positions, dict(compiled.params))

    def bind(self, params: dict[str, Any] | None = None) -> Any:
        """The driver's parameters; a value its type refuses raises ``StatementError``, as
        SQLAlchemy's own execution would."""
        given = self.defaults if params is None else params
        try:
            values = {
                name: given[name] if process is None else process(given[name])
                for name, process in self.processors
            }
        except (TypeError, ValueError) as exc:
            raise StatementError(str(exc), self.sql, None, exc) from exc
        return values if self.positions is None else tuple(values[n] for n in self.positions)


# Statements run often, compiled once per engine's dialect (its JSON serializer is part
# of the bind processing); gone with the engine.
_driver_statements: WeakKeyDictionary[Dialect, dict[TextClause, DriverStatement]] = (
    WeakKeyDictionary()
)


def _driver_statement(dialect: Dialect, statement: TextClause) -> DriverStatement:
    compiled = _driver_statements.setdefault(dialect, {})
    found = compiled.get(statement)
    if found is None:
        found = compiled[statement] = DriverStatement.compile(statement, dialect)
    return found


def _tuples(connection: Connection, query: Select[Any]) -> list[tuple[Any, ...]]:
    """The rows as plain tuples, straight from the driver's cursor.

    For 17,000 rows SQLAlchemy's row objects cost a fifth of the read, and psycopg's text
    format (its default, and SQLAlchemy's) a third more than binary, where numbers are not
    parsed from strings.
    """
    statement = DriverStatement.compile(query, connection.dialect)
    driver = connection.connection.driver_connection
    assert driver is not None  # a connection checked out of the pool has one
    if connection.dialect.name == "postgresql":
        with driver.cursor(binary=True) as cursor:
            cursor.execute(statement.sql, statement.bind())
            return list(cursor.fetchall())
    return list(driver.execute(statement.sql, statement.bind()).fetchall())


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
