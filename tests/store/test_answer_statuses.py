"""An ``invalid_answer`` sample is stored as it is and counted with the run's errors, and a
sample's connect split and address family are kept in its details: SQLite and PostgreSQL
(the status is a plain string column: no migration)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.store.models import RunRow, SampleRow
from app.store.records import RunRecord, SampleRecord
from tests.runfactory import store_records

T0 = datetime(2026, 1, 1, tzinfo=UTC)
PHASES = {"connect": 3.0, "network": 1.0, "server": 5.0, "transfer": 1.0}


def test_invalid_answers_are_stored_and_counted_as_errors(
    sessions: sessionmaker[Session],
) -> None:
    split = {"dns": 1.0, "tcp": 0.5, "tls": 1.5}
    samples = tuple(
        SampleRecord(
            idx=i,
            started_at=T0 + timedelta(seconds=i),
            status=status,
            total_ms=10.0,
            phases=PHASES,
            error_class="InvalidAnswer" if status == "invalid_answer" else None,
            error="finish_reason 'length', expected [stop]" if status == "invalid_answer" else None,
            details={"connect_split": split if i == 0 else None, "address_family": "ipv6"},
        )
        for i, status in enumerate(("ok", "invalid_answer", "invalid_answer"))
    )
    record = RunRecord(uuid.uuid4(), "chat", "eu", T0, "complete", samples, finished_at=T0)
    assert store_records(sessions, [record], T0) == [True]
    with sessions() as session:
        run = session.scalars(select(RunRow)).one()
        rows = session.scalars(select(SampleRow).order_by(SampleRow.idx)).all()
    assert (run.n_samples, run.n_ok, run.n_errors) == (3, 1, 2)
    assert [row.status for row in rows] == ["ok", "invalid_answer", "invalid_answer"]
    assert rows[1].error == "finish_reason 'length', expected [stop]"
    assert rows[0].details == {"connect_split": split, "address_family": "ipv6"}
    assert rows[1].details["connect_split"] is None
