"""Goodput in CSV: per sample, whether it met every objective of its target (``good``) and
each one (``met_<metric>``); goodput is the share of ``true`` in ``good``. An import keeps
the file's verdicts, so export → import → export is byte-identical; a file without the
columns (an older export) imports as before."""

from __future__ import annotations

import io
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine, delete, select, update
from sqlalchemy.orm import Session, sessionmaker

from app.csvio.export import export_samples
from app.csvio.goodput import GOODPUT_COLUMNS
from app.csvio.importer import import_samples
from app.csvio.layout import CsvImportError
from app.store.db import transaction
from app.store.models import RunRow, SampleRow, TargetRow
from app.store.records import RunRecord, SampleRecord
from app.store.serieslatest import SeriesLatestRow
from tests.runfactory import store_records

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
OBJECTIVES = {"ttft_ms": {"p": 99, "below": 300}, "availability": {"target": 99.5}}
RUN = "0b9ac1b6-3b0e-4c36-9a5c-0e8f1c1f9e01"


def sample(idx: int, status: str, total: float, ttft: float | None = None) -> SampleRecord:
    marks = {} if ttft is None else {"first_answer_token": int(ttft * 1e6)}
    phases = {"queue": total} if ttft is None else {"queue": ttft, "generation": total - ttft}
    at = T0 + timedelta(seconds=idx)
    return SampleRecord(idx, at, status, total, phases, marks=marks)


def runs() -> list[RunRecord]:
    chat = (
        sample(0, "ok", 500.0, 200.0),  # every objective met
        sample(1, "ok", 500.0, 400.0),  # its first token late
        sample(2, "deadline_exceeded", 1000.0),  # cut before its first token
        sample(3, "error", 30.0),  # not answered
    )
    web = (sample(0, "ok", 10.0),)
    return [
        RunRecord(uuid.uuid4(), target, "eu", T0, "complete", samples=rows)
        for target, rows in (("chat", chat), ("web", web))
    ]


def stored(sessions: sessionmaker[Session]) -> None:
    store_records(sessions, runs(), T0)
    with sessions.begin() as session:
        session.execute(
            update(TargetRow)
            .where(TargetRow.name == "chat")
            .values(config={"alerts": {"objectives": OBJECTIVES}})
        )


def export_text(engine: Engine) -> str:
    out = io.StringIO()
    export_samples(engine, out)
    return out.getvalue()


def column(text: str, name: str, target: str) -> list[str]:
    head, *rows = (line.split(",") for line in text.splitlines())
    return [row[head.index(name)] for row in rows if row[1] == target]


def empty(sessions: sessionmaker[Session]) -> None:
    with transaction(sessions) as session:
        for table in (SampleRow, RunRow, SeriesLatestRow, TargetRow):
            session.execute(delete(table))


def test_each_row_says_whether_it_met_every_objective_and_each_one(
    engine: Engine, sessions: sessionmaker[Session]
) -> None:
    stored(sessions)
    text = export_text(engine)
    assert text.splitlines()[0].endswith("," + ",".join(GOODPUT_COLUMNS))
    assert column(text, "good", "chat") == ["true", "false", "false", "false"]
    assert column(text, "met_ttft_ms", "chat") == ["true", "false", "false", ""]
    assert column(text, "met_availability", "chat") == ["true", "true", "false", "false"]
    assert column(text, "met_end_to_end_ms", "chat") == [""] * 4  # not an objective of chat
    # A target without objectives is not judged.
    assert set(column(text, "good", "web")) == {""}
    good = [cell == "true" for cell in column(text, "good", "chat")]
    assert sum(good) / len(good) == 0.25  # goodput, as the docs say to work it out


@pytest.mark.parametrize("objectives_after", [False, True])
def test_export_import_export_keeps_the_verdicts_byte_identical(
    engine: Engine, sessions: sessionmaker[Session], objectives_after: bool
) -> None:
    """Imported samples have no marks to judge again: the file's verdicts are kept, whether
    the importing database knows the target's objectives or not."""
    stored(sessions)
    first = export_text(engine)
    empty(sessions)
    assert import_samples(engine, io.StringIO(first)).samples_stored == 5
    if objectives_after:
        with sessions.begin() as session:
            chat = update(TargetRow).where(TargetRow.name == "chat")
            session.execute(chat.values(config={"alerts": {"objectives": OBJECTIVES}}))
    assert export_text(engine) == first
    with Session(engine) as session:
        details = session.scalars(select(SampleRow.details).order_by(SampleRow.started_at))
        kept = [d.get("goodput") for d in details]
    assert {"good": False, "met": {"ttft_ms": False, "availability": True}} in kept
    assert None in kept  # web's sample: nothing to keep


def test_a_file_without_the_columns_imports_and_exports_without_them(
    engine: Engine, sessions: sessionmaker[Session]
) -> None:
    older = f"""\
timestamp,target,vantage,run_id,status,total_ms,server_ms
2024-05-01T12:00:00.000000Z,web,eu,{RUN},ok,100.5,99.0
"""
    assert import_samples(engine, io.StringIO(older)).samples_stored == 1
    assert export_text(engine) == older


def test_another_tools_file_with_only_a_good_column_is_read_and_exported_in_full(
    engine: Engine,
) -> None:
    text = f"""\
timestamp,target,vantage,run_id,status,total_ms,server_ms,good
2024-05-01T12:00:00.000000Z,chat,eu,{RUN},ok,100.5,99.0,true
2024-05-01T12:00:01.000000Z,chat,eu,{RUN},ok,100.5,99.0,
"""
    assert import_samples(engine, io.StringIO(text)).samples_stored == 2
    again = export_text(engine)
    assert column(again, "good", "chat") == ["true", ""]
    assert column(again, "met_ttft_ms", "chat") == ["", ""]


@pytest.mark.parametrize(
    ("cells", "line", "problem"),
    [
        (("yes", ""), 2, "good"),
        (("true", "1"), 2, "met_ttft_ms"),
    ],
)
def test_a_verdict_cell_other_than_true_false_or_empty_is_refused_with_its_column(
    engine: Engine, cells: tuple[str, str], line: int, problem: str
) -> None:
    text = f"""\
timestamp,target,vantage,run_id,status,total_ms,server_ms,good,met_ttft_ms
2024-05-01T12:00:00.000000Z,chat,eu,{RUN},ok,100.5,99.0,{cells[0]},{cells[1]}
"""
    with pytest.raises(CsvImportError) as refused:
        import_samples(engine, io.StringIO(text))
    assert [(p.line, p.column) for p in refused.value.problems] == [(line, problem)]
