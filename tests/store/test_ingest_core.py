"""The pipeline's write (``store_run_on``, a Core connection) stores exactly what
``store_run`` in a Session stores, on SQLite and on PostgreSQL."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from sqlalchemy import Engine, Table, select
from sqlalchemy.orm import Session, sessionmaker

from app.store.db import transaction, write_connection
from app.store.ingest import store_run, store_run_on
from app.store.models import RunRow, SampleRow, TargetRow
from app.store.records import RunRecord, SampleRecord

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def record(target: str) -> RunRecord:
    """Every kind of sample, one time in another zone, documents in every JSON column."""
    started = NOW.astimezone(timezone(timedelta(hours=5, minutes=30)))
    samples = (
        SampleRecord(0, NOW, "ok", 120.5, {"connect": 10.25, "server": 110.25}, {"connect": "m"}),
        SampleRecord(1, started, "deadline_exceeded", 300.0, {"server": 300.0}, marks={"a": 1}),
        SampleRecord(2, NOW, "error", 0.0, {}, error_class="ConnectError", error="refused"),
        SampleRecord(3, NOW, "http_error", 20.0, {"server": 20.0}, http_status=503),
        SampleRecord(4, NOW, "ok", 99.0, {"connect": 9.0, "server": 90.0}, details={"rtt_ms": 1}),
    )
    return RunRecord(
        uuid.uuid4(), target, "eu", NOW, "complete", samples, scheduled_at=NOW, finished_at=NOW
    )


def stored_rows(engine: Engine, run_id: uuid.UUID) -> list[dict[str, Any]]:
    """The run's row and its samples' rows, ids and the target's id aside."""
    runs: Table = RunRow.__table__  # type: ignore[assignment]
    samples: Table = SampleRow.__table__  # type: ignore[assignment]
    with engine.connect() as connection:
        found = [connection.execute(select(runs).where(runs.c.id == run_id)).mappings().one()]
        found += connection.execute(
            select(samples).where(samples.c.run_id == run_id).order_by(samples.c.idx)
        ).mappings()
    skip = {"id", "run_id", "target_id"}
    return [{k: v for k, v in row.items() if k not in skip} for row in found]


@pytest.mark.parametrize("target_known", [True, False], ids=["known-target", "new-target"])
def test_the_pipelines_core_write_stores_what_a_session_stores(
    engine: Engine, sessions: sessionmaker[Session], target_known: bool
) -> None:
    if target_known:
        for name in ("by-session", "by-core"):
            with transaction(sessions) as session:
                row = TargetRow(
                    name=name, kind="http", url="", interval_s=1, config={}, updated_at=NOW
                )
                session.add(row)
    by_session, by_core = record("by-session"), record("by-core")
    with transaction(sessions) as session:
        assert store_run(session, by_session, NOW)
    with write_connection(sessions) as connection:
        assert store_run_on(connection, by_core, NOW)
    with write_connection(sessions) as connection:
        assert not store_run_on(connection, replace(by_core, samples=()), NOW)

    assert stored_rows(engine, by_core.id) == stored_rows(engine, by_session.id)
    assert len(stored_rows(engine, by_core.id)) == 1 + len(by_core.samples)
    with transaction(sessions) as session:
        targets = session.scalars(select(TargetRow.name).order_by(TargetRow.name)).all()
    assert targets == ["by-core", "by-session"]
