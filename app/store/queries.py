"""Reads and writes. Every function takes a session (or an engine) and plain values."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, Insert, Select, delete, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from app.config import Target
from app.store.models import RunRow, SampleRow, TargetRow
from app.store.records import RunRecord, SampleRecord

UNKNOWN_KIND = "unknown"


def sync_targets(session: Session, targets: Iterable[Target], now: datetime) -> dict[str, int]:
    """Make the targets table say what the file says; targets gone from it become inactive."""
    rows = {row.name: row for row in session.scalars(select(TargetRow))}
    wanted = {target.name: target for target in targets}
    for name, target in wanted.items():
        row = rows.get(name) or TargetRow(name=name)
        row.kind, row.url, row.interval_s = target.kind.value, target.url, target.interval
        row.config, row.active, row.updated_at = target.public(), True, now
        session.add(row)
    for name, row in rows.items():
        if name not in wanted and row.active:
            row.active, row.updated_at = False, now
    session.flush()
    return {row.name: row.id for row in session.scalars(select(TargetRow))}


def target_id(session: Session, name: str, now: datetime) -> int:
    """The id of a target, created bare if only its runs are known (imports, agents).

    Two writers may create the same bare target at once: ON CONFLICT DO NOTHING lets the
    second wait for the first and then find its row, instead of failing on the unique name.
    """
    found = session.scalar(select(TargetRow.id).where(TargetRow.name == name))
    if found is not None:
        return found
    bare = {"name": name, "kind": UNKNOWN_KIND, "url": "", "interval_s": 0.0, "config": {}}
    values = {**bare, "active": False, "updated_at": now}
    session.execute(_insert_unless_present(session, TargetRow, values, key="name"))
    return session.scalars(select(TargetRow.id).where(TargetRow.name == name)).one()


def _insert_unless_present(
    session: Session, entity: type[Any], values: dict[str, Any], key: str
) -> Insert:
    """INSERT ... ON CONFLICT (key) DO NOTHING, which both our databases speak."""
    insert = pg_insert if session.get_bind().dialect.name == "postgresql" else sqlite_insert
    return insert(entity).values(values).on_conflict_do_nothing(index_elements=[key])


def store_run(session: Session, record: RunRecord, now: datetime) -> bool:
    """Store a run with its samples and summary; False if this run id is already stored.

    Idempotent by run id even when two writers race: the run row is inserted with
    ON CONFLICT DO NOTHING and its samples only by the writer whose insert took.
    """
    values = _run_values(record, target_id(session, record.target, now))
    statement = _insert_unless_present(session, RunRow, values, key="id").returning(RunRow.id)
    # RETURNING, not rowcount: through the ORM, psycopg reports a rowcount of -1 whether the
    # row went in or not.
    if session.scalar(statement) is None:
        return False
    if record.samples:
        insert_samples = SampleRow.__table__.insert()  # type: ignore[attr-defined]
        session.execute(insert_samples, [_sample_values(record.id, s) for s in record.samples])
    return True


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
    return {
        "run_id": run_id,
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


def prune_samples(engine: Engine, before: datetime, runs_per_batch: int = 20) -> int:
    """Delete raw samples older than ``before``, a few runs per short transaction.

    Summaries stay. Small batches keep each transaction (and SQLite's write lock) short,
    so a run being stored never waits long behind the pruning.
    """
    deleted = 0
    while True:
        with Session(engine) as session, session.begin():
            runs = session.scalars(
                select(SampleRow.run_id)
                .where(SampleRow.started_at < before)
                .distinct()
                .limit(runs_per_batch)
            ).all()
            if not runs:
                return deleted
            result = session.execute(
                delete(SampleRow).where(SampleRow.run_id.in_(runs), SampleRow.started_at < before)
            )
            deleted += result.rowcount  # type: ignore[attr-defined]
