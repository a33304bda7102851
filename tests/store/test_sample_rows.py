"""A run's samples stored as they were given, on SQLite and on PostgreSQL, alone or in a
batch: every column of every sample, whatever it holds."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta, timezone

import pytest
from sqlalchemy import Engine, select
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session, sessionmaker

from app.store.db import write_connection
from app.store.ingest import Ingested, ingest_many_on, ingest_run_on
from app.store.models import SampleRow
from app.store.records import RunRecord, SampleRecord

NOW = datetime(2026, 12, 7, 23, 0, 3, 123456, tzinfo=UTC)
PLAIN = SampleRecord(0, NOW, "ok", 12.5, {"connect": 2.0, "server": 10.5})
FIELDS = [
    "idx",
    "started_at",
    "status",
    "error_class",
    "error",
    "http_status",
    "total_ms",
    "phases",
    "provenance",
    "marks",
    "details",
]

SAMPLES = {
    "plain ok": [PLAIN],
    "failed, no phases, no status": [
        SampleRecord(0, NOW, "error", 3.0, {}, error_class="ConnectError", error="refused")
    ],
    "every document filled": [
        SampleRecord(
            0,
            NOW,
            "ok",
            41.0,
            {"queue": 1.0, "prefill": 30.0, "generation": 10.0},
            provenance={"queue": "estimated", "prefill": "measured"},
            marks={"request_sent": 1_000, "first_byte": 31_000, "stream_end": 41_000},
            http_status=200,
            details={"http_version": "HTTP/2", "tokens": {"prompt": 12, "completion": 51}},
        )
    ],
    "text with quotes, backslashes, braces and non-ASCII": [
        SampleRecord(
            0,
            NOW,
            "http_error",
            8.0,
            {},
            error_class="HTTP503",
            http_status=503,
            error='{"a": "b\\\\c"} ,NULL, « naïve » 東京 \t\n',
            details={"k": 'x"y\\z{}'},
        )  # fmt: skip
    ],
    "a time in another zone, microseconds kept": [
        SampleRecord(0, NOW.astimezone(timezone(timedelta(hours=9))), "ok", 1.0, {"server": 1.0})
    ],
    "many samples, mixed": [
        SampleRecord(k, NOW + timedelta(seconds=k), s, float(k), {"server": float(k)} if k else {})
        for k, s in enumerate(["ok", "timeout", "ok", "deadline_exceeded", "invalid_answer"])
    ],
    "no samples": [],
}


def run(samples: list[SampleRecord]) -> RunRecord:
    return RunRecord(uuid.uuid4(), "api", "local", NOW, "complete", tuple(samples), NOW, NOW)


def stored(sessions: sessionmaker[Session], run_id: uuid.UUID) -> list[tuple[object, ...]]:
    with sessions() as session:
        rows = session.scalars(select(SampleRow).where(SampleRow.run_id == run_id))
        return sorted(tuple(getattr(row, f) for f in FIELDS) for row in rows)


def given(record: RunRecord) -> list[tuple[object, ...]]:
    return sorted(tuple(getattr(s, f) for f in FIELDS) for s in record.samples)


@pytest.mark.parametrize("samples", SAMPLES.values(), ids=SAMPLES.keys())
def test_each_sample_is_stored_as_given_alone_and_in_a_batch(
    sessions: sessionmaker[Session], samples: list[SampleRecord]
) -> None:
    alone, batched = run(samples), [run(samples), run([PLAIN]), run(samples)]
    with write_connection(sessions) as connection:
        assert ingest_run_on(connection, alone, NOW) is Ingested.STORED
    with write_connection(sessions) as connection:
        assert ingest_many_on(connection, batched, NOW) == [Ingested.STORED] * 3
    for record in [alone, *batched]:
        assert stored(sessions, record.id) == given(record)


def test_a_text_too_long_for_its_column_is_never_cut(
    engine: Engine, sessions: sessionmaker[Session]
) -> None:
    """PostgreSQL refuses it, as its column's type does; SQLite keeps text of any length."""
    long = run([SampleRecord(0, NOW, "error", 3.0, {}, error_class="E" * 101)])
    if engine.dialect.name == "postgresql":
        with pytest.raises(DBAPIError), write_connection(sessions) as connection:
            ingest_run_on(connection, long, NOW)
        assert stored(sessions, long.id) == []
        return
    with write_connection(sessions) as connection:
        assert ingest_run_on(connection, long, NOW) is Ingested.STORED
    assert stored(sessions, long.id) == given(long)
