"""The connect split in CSV: its three columns after the phases when some sample has one,
empty for a reused connection, and back into the sample's details on import — export →
import → export byte-identical, on SQLite and PostgreSQL."""

from __future__ import annotations

import io
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine, delete, select
from sqlalchemy.orm import Session, sessionmaker

from app.csvio.export import export_samples
from app.csvio.importer import import_samples
from app.csvio.layout import CsvImportError
from app.store.db import transaction
from app.store.models import RunRow, SampleRow, TargetRow
from app.store.records import RunRecord, SampleRecord
from app.store.serieslatest import SeriesLatestRow
from tests.runfactory import store_records

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
PHASES = {"connect": 3.5, "network": 1.0, "server": 8.0, "transfer": 0.5}


def sample(idx: int, split: dict[str, float] | None, status: str = "ok") -> SampleRecord:
    details = {"connect_split": split, "address_family": "ipv4"}
    return SampleRecord(
        idx=idx,
        started_at=T0 + timedelta(seconds=idx),
        status=status,
        total_ms=13.0,
        phases=PHASES,
        details=details,
    )


def export_text(engine: Engine) -> str:
    out = io.StringIO()
    export_samples(engine, out)
    return out.getvalue()


def test_the_split_is_exported_imported_and_exported_the_same(
    engine: Engine, sessions: sessionmaker[Session]
) -> None:
    split = {"dns": 0.25, "tcp": 1 / 3, "tls": 3.5 - 0.25 - 1 / 3}
    samples = (sample(0, split), sample(1, None), sample(2, split, "invalid_answer"))
    run = RunRecord(uuid.uuid4(), "web", "eu", T0, "complete", samples)
    store_records(sessions, [run], T0)
    first = export_text(engine)
    lines = first.splitlines()
    assert lines[0].endswith(
        ",connect_ms,network_ms,transfer_ms,server_ms,connect_dns_ms,connect_tcp_ms,connect_tls_ms"
    )
    assert lines[1].endswith(f",0.25,{1 / 3!r},{split['tls']!r}")
    assert lines[2].endswith(",8.0,,,")  # a reused connection: no split
    assert ",invalid_answer," in lines[3]
    with transaction(sessions) as session:
        for table in (SampleRow, RunRow, SeriesLatestRow, TargetRow):
            session.execute(delete(table))

    import_samples(engine, io.StringIO(first))

    assert export_text(engine) == first
    with sessions() as session:
        stored = session.scalars(select(SampleRow).order_by(SampleRow.idx)).all()
    assert stored[0].details == {"connect_split": split}
    assert stored[0].phases == PHASES  # the split's columns are not phases
    assert stored[1].details == {}


def test_no_split_no_columns(engine: Engine, sessions: sessionmaker[Session]) -> None:
    run = RunRecord(uuid.uuid4(), "web", "eu", T0, "complete", (sample(0, None),))
    store_records(sessions, [run], T0)
    assert export_text(engine).splitlines()[0].endswith(",transfer_ms,server_ms")


def test_a_split_column_alone_is_refused_on_line_one(engine: Engine) -> None:
    text = (
        "timestamp,target,vantage,run_id,status,total_ms,connect_ms,connect_dns_ms\n"
        f"2024-05-01T12:00:00Z,web,eu,{uuid.uuid4()},ok,1.0,1.0,0.5\n"
    )
    with pytest.raises(CsvImportError) as caught:
        import_samples(engine, io.StringIO(text))
    assert [str(p) for p in caught.value.problems] == [
        "1: connect_dns_ms, connect_tcp_ms, connect_tls_ms come together or not at all"
    ]
