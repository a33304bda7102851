"""Storing a finished run: the run row, its samples and summary, idempotent by run id and
by slot: a run whose (target, vantage, slot) another run holds is not stored either (two
replicas that probed one scheduled run: ``app.runs.slots``). A run without a slot (NULL)
never collides on it, on SQLite or PostgreSQL."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from enum import Enum
from typing import Any

from sqlalchemy import Connection, Insert, Table, TextClause, bindparam, select, text
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import StatementError
from sqlalchemy.orm import Session

from app.store.models import RunRow, SampleRow, TargetRow
from app.store.rawdriver import DriverStatement, driver_statement, first_rows, run_driver
from app.store.records import RunRecord, SampleRecord
from app.store.sampledocs import sample_documents, sample_fields
from app.store.samplepack import COLUMNS as PACKED
from app.store.samplepack import pack_many
from app.store.serieslatest import KEPT, postgres_upsert_from, sqlite_upsert
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
    # RETURNING: nothing comes back when the run id or its slot is taken (or the target is
    # new). No conflict target: DO NOTHING then covers every unique index, both keys.
    return insert.on_conflict_do_nothing().returning(_RUNS.c.id, _RUNS.c.target_id)


def _postgres_run_insert() -> TextClause:
    """The run and its samples in one statement: one round trip, one message per run.

    The samples travel as one JSON array (one orjson call) that the server unpacks with
    ``jsonb_to_recordset``, instead of an INSERT message per sample. They are inserted
    only with a run row that went in: a run id or a slot already stored leaves everything
    as it was (ON CONFLICT with no target: any unique index). So is its series' newest run
    (``app.store.serieslatest``).
    """
    pg = postgresql.dialect()  # type: ignore[no-untyped-call]
    fields = ", ".join(f"CAST(:run_{c.name} AS {c.type.compile(dialect=pg)})" for c in _RUN_FIELDS)
    samples = [c for c in _SAMPLES.c if c.name != "run_id"]
    recordset = ", ".join(f"{c.name} {c.type.compile(dialect=pg)}" for c in samples)
    sql = f"""
        WITH run AS (
            INSERT INTO runs (target_id, {", ".join(c.name for c in _RUN_FIELDS)})
            SELECT targets.id, {fields} FROM targets WHERE targets.name = :target
            ON CONFLICT DO NOTHING RETURNING id, {", ".join(KEPT)}
        ), latest AS ({postgres_upsert_from("run")}
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
_SQLITE_LATEST_UPSERT = sqlite_upsert()


class Ingested(Enum):
    """What storing a run did."""

    STORED = "stored"
    REPLAYED = "replayed"  # this run id was stored already: nothing changed
    SLOT_TAKEN = "slot_taken"  # another run of its (target, vantage) holds its slot


def store_run(session: Session, record: RunRecord, now: datetime) -> bool:
    """Store a run with its samples and summary; False if this run id, or another run of
    its slot, is already stored."""
    return ingest_run(session, record, now) is Ingested.STORED


def store_run_on(connection: Connection, record: RunRecord, now: datetime) -> bool:
    """``store_run`` on a Core connection in a transaction."""
    return ingest_run_on(connection, record, now) is Ingested.STORED


def ingest_run(session: Session, record: RunRecord, now: datetime) -> Ingested:
    """Store a run with its samples and summary, and say whether it went in.

    Idempotent by run id and by slot even when two writers race: the run row is inserted
    with ON CONFLICT DO NOTHING and its samples only by the writer whose insert took. A run
    of a target the database does not know yet creates it (``target_id``).
    """
    return _store(session.connection(), record, lambda: target_id(session, record.target, now))


def ingest_run_on(connection: Connection, record: RunRecord, now: datetime) -> Ingested:
    """``ingest_run`` on a Core connection in a transaction, the database sink's (a Session's
    begin and commit cost about a 20-sample run's store on SQLite, ``bench.store_ingest``)."""

    def create_target() -> None:
        # Rare (a target known only by its runs): a Session joining this transaction.
        with Session(bind=connection) as session:
            target_id(session, record.target, now)

    return _store(connection, record, create_target)


_RUN_KNOWN = select(_RUNS.c.id).where(_RUNS.c.id == bindparam("id"))


def store_alone_on(connection: Connection, record: RunRecord) -> bool:
    """PostgreSQL's one statement, on an autocommit connection: True when the run went in;
    False when nothing was written (``ingest_run_on`` in a transaction then says why)."""
    return _store_postgres(connection, record, _params(record))[0]


def _params(record: RunRecord) -> dict[str, Any]:
    return {f"run_{k}": v for k, v in _run_values(record, 0).items()} | {"target": record.target}


def _store(
    connection: Connection, record: RunRecord, create_target: Callable[[], object]
) -> Ingested:
    params = _params(record)
    insert = _store_postgres if connection.dialect.name == "postgresql" else _store_sqlite
    stored, target_known = insert(connection, record, params)
    if not target_known:
        create_target()
        stored, target_known = insert(connection, record, params)
    return _ingested(connection, record, stored)


def _ingested(connection: Connection, record: RunRecord, stored: bool) -> Ingested:
    """What the run's insert did, ``stored`` or not (then a read says why)."""
    if stored:
        return Ingested.STORED
    if record.slot is None or connection.scalar(_RUN_KNOWN, {"id": record.id}) is not None:
        return Ingested.REPLAYED
    return Ingested.SLOT_TAKEN


def ingest_many_on(
    connection: Connection, records: Sequence[RunRecord], now: datetime
) -> list[Ingested]:
    """``ingest_run_on`` of each of ``records`` in turn, in the caller's transaction. On
    PostgreSQL their statements go to the server together (``first_rows``: one round trip
    a batch, not one a run), in order, so a run sees the runs before it as it would stored
    one by one; a run of a target the database does not know yet goes ``ingest_run_on``'s
    way after them (its target created, the statement again)."""
    if connection.dialect.name != "postgresql" or len(records) < 2:
        return [ingest_run_on(connection, record, now) for record in records]
    params = [_params(r) | {"samples": sample_documents(r.samples)} for r in records]
    found = first_rows(connection, _POSTGRES_RUN_INSERT, params)
    return [
        _ingested(connection, record, bool(row[0]))
        if row is not None and row[1]
        else ingest_run_on(connection, record, now)
        for record, row in zip(records, found, strict=True)
    ]


def _store_postgres(
    connection: Connection, record: RunRecord, params: dict[str, Any]
) -> tuple[bool, bool]:
    """Compiled once per engine and run as driver SQL: SQLAlchemy's per-execution work (cache
    lookup, parameters, result set-up) was much of storing a run (``bench.store_ingest``)."""
    params["samples"] = sample_documents(record.samples)
    stored, target_known = run_driver(connection, _POSTGRES_RUN_INSERT, params).one()
    return bool(stored), bool(target_known)


_TARGET_KNOWN = select(TargetRow.id).where(TargetRow.name == bindparam("name"))


def _store_sqlite(
    connection: Connection, record: RunRecord, params: dict[str, Any]
) -> tuple[bool, bool]:
    """Both statements compiled once per engine and run as driver SQL, for the reason
    ``_store_postgres`` gives; the samples by one executemany of plain tuples."""
    target = run_driver(connection, _SQLITE_RUN_INSERT, params).first()
    if target is None:
        known = connection.scalar(_TARGET_KNOWN, {"name": record.target})
        return False, known is not None
    run_driver(connection, _SQLITE_LATEST_UPSERT, _latest_params(params, target[1]))
    if record.samples:
        samples = driver_statement(connection.dialect, _SAMPLE_INSERT)
        connection.exec_driver_sql(samples.sql, _sqlite_rows(samples, record))
    return True, True


def _latest_params(params: dict[str, Any], target: int) -> dict[str, Any]:
    """The upsert's values from the run's (``run_<column>``)."""
    found = {f"latest_{name}": params[f"run_{name}"] for name in KEPT if name != "target_id"}
    return found | {"latest_target_id": target, "latest_run_id": params["run_id"]}


def _sqlite_rows(statement: DriverStatement, record: RunRecord) -> list[tuple[Any, ...]]:
    """The samples as the driver's tuples, in ``_SAMPLE_INSERT``'s column order: the run id
    processed once, the JSON columns packed (what their type's processor does), the times
    through theirs."""
    run_id = dict(statement.processors)["run_id"]
    assert run_id is not None
    when = sqlite_time
    run, samples = run_id(record.id), record.samples
    try:
        packed = [pack_many(name, [getattr(s, name) for s in samples]) for name in PACKED]
        return [
            (
                run,
                s.idx,
                when(s.started_at),
                s.status,
                s.error_class,
                s.error,
                s.http_status,
                s.total_ms,
                *documents,
            )
            for s, *documents in zip(samples, *packed, strict=True)
        ]
    except (TypeError, ValueError) as exc:
        raise StatementError(str(exc), statement.sql, None, exc) from exc


def sqlite_time(value: datetime) -> str:
    """What ``UTCDateTime`` binds on SQLite (SQLAlchemy's DATETIME text, in UTC), from
    ``isoformat`` in C instead of a format string over seven attributes."""
    if value.tzinfo is UTC:  # the clock's: the same text without its "+00:00"
        return value.isoformat(" ", "microseconds")[:-6]
    if value.tzinfo is None:
        raise ValueError("naive datetime: phasewatch stores aware UTC times only")
    return value.astimezone(UTC).replace(tzinfo=None).isoformat(" ", "microseconds")


def _run_values(record: RunRecord, target: int) -> dict[str, Any]:
    summary = record.summary()
    total = summary["total"]
    return {
        "id": record.id,
        "target_id": target,
        "vantage": record.vantage,
        "scheduled_at": record.scheduled_at,
        "slot": record.slot,
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
    return {"run_id": run_id, **sample_fields(sample)}
