"""A sample's JSON columns stored packed (``app.store.samplepack``, migration 0012): every
value back as it went in, in a fraction of the bytes, and a populated database converted
both ways with every reader answering the same."""

from __future__ import annotations

import importlib.util
import io
import math
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
from sqlalchemy import Engine, select, text
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, sessionmaker

from app.csvio.export import export_samples
from app.store.db import make_engine, make_sessions
from app.store.dbhistory import DatabaseHistory
from app.store.ingest import store_run
from app.store.migrate import downgrade, upgrade
from app.store.models import SampleRow
from app.store.reads.breakdown import breakdown
from app.store.reads.browse import samples_page
from app.store.reads.whatifsamples import load_sample_set
from app.store.records import RunRecord, SampleRecord
from app.store.samplepack import (
    BOOKS,
    COLUMNS,
    SamplePackError,
    as_json,
    pack,
    pack_many,
    unpack,
)
from bench.store_common import Synth

ROOT = Path(__file__).resolve().parents[2]
T0 = datetime(2026, 3, 2, 9, tzinfo=UTC)

TRICKY: list[Any] = [
    {},
    {"connect": 0.0, "network": 1e-7, "queue": 1.5e300, "server": -0.0},
    {"transfer": 3.25, "connect": 12.5},  # not the book's order: kept as given
    {"measured": "measured", "server": "estimated", "x": "server"},
    {"request_id": '"connect"', "error": 'say "null" and true\\false', "flags": []},
    {"remote_address": "[::1]:443", "note": "é ✓ \u0001 \t \n", "unsplit": ["queue", "prefill"]},
    {"tokens": {"prompt": None, "completion": 10**15, "reasoning": 0}, "llm": {"ttft_ms": 1.0}},
    {"usage.queue_time": 1.0, '"usage.': "usage.", "nested": [[], [{}], {"a": [None]}]},
    {"cut": 9_999_999_999, "first_byte": -1, "stream_end": 0},
]


@pytest.mark.parametrize("column", COLUMNS)
@pytest.mark.parametrize("value", TRICKY)
def test_every_value_unpacks_to_what_was_packed_with_its_key_order(column: str, value: Any) -> None:
    back = unpack(column, pack(column, value))

    assert back == value
    assert orjson.dumps(back) == orjson.dumps(value)  # the same keys in the same order


def test_values_are_written_as_the_engines_json_wrote_them_and_old_nans_read_back() -> None:
    assert unpack("phases", pack("phases", {1: np.float64(2.5)})) == {"1": 2.5}
    older = b"\x01{\x01: NaN}"  # the json module's NaN, in a row from before 0012

    assert math.isnan(unpack("phases", older)["connect"])


def test_provenances_packed_once_are_each_still_their_own_past_the_memos_bound() -> None:
    values = [{"connect": "measured", "x": str(n)} for n in range(5000)]
    packed = [pack("provenance", value) for value in values]

    assert [unpack("provenance", p) for p in packed] == values
    assert pack("provenance", values[0]) == packed[0]


def test_the_books_fit_one_byte_codes_and_hold_no_code_or_each_other() -> None:
    for column, book in BOOKS.items():
        assert len(book) <= 31, column
        assert len(set(book)) == len(book), column
        assert all(min(token) >= 0x20 and token.isascii() for token in book), column


def test_a_document_of_another_form_is_refused_with_its_column() -> None:
    with pytest.raises(SamplePackError, match="details: stored in an unknown form"):
        unpack("details", b'{"a": 1}')


def sample_documents() -> list[SampleRecord]:
    synth = Synth(5)
    llm = synth.run("chat", "eu", "llm", T0, 40).samples
    http = synth.run("api", "eu", "http", T0, 40).samples
    return [*llm, *http]


def test_a_probed_samples_documents_take_under_half_of_their_json_text() -> None:
    samples = sample_documents()
    as_json_bytes = sum(len(orjson.dumps(getattr(s, c))) for s in samples for c in COLUMNS)
    packed = sum(len(pack(c, getattr(s, c))) for s in samples for c in COLUMNS)

    assert packed < 0.5 * as_json_bytes


def test_the_migration_holds_a_copy_of_the_first_books() -> None:
    path = ROOT / "migrations" / "versions" / "0012_samples_packed.py"
    spec = importlib.util.spec_from_file_location("migration_0012", path)
    assert spec is not None and spec.loader is not None
    migration = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(migration)

    assert {c: tuple(t.encode() for t in book) for c, book in migration.BOOKS.items()} == BOOKS


def runs() -> list[RunRecord]:
    """LLM and HTTP runs as the probe stores them, and one with awkward text in it."""
    synth = Synth(3)
    found = [
        synth.run(name, "eu", kind, T0 + timedelta(minutes=15 * i), 12, T0)
        for i in range(4)
        for name, kind in (("chat", "llm"), ("api", "http"))
    ]
    odd = SampleRecord(
        0,
        T0 + timedelta(hours=2),
        "error",
        5.0,
        {"connect": 5.0},
        {"connect": "measured"},
        {"connect_start": 0},
        "ConnectError",
        'refused: "connect" null, true',
        None,
        TRICKY[5] | TRICKY[6],
    )
    found.append(synth.run("api", "eu", "http", T0 + timedelta(hours=2), 1, T0))
    return [*found[:-1], RunRecord(found[-1].id, "api", "eu", odd.started_at, "complete", (odd,))]


@pytest.fixture
def populated(empty_db_url: str) -> Iterator[tuple[Engine, sessionmaker[Session]]]:
    upgrade(empty_db_url)
    engine = make_engine(empty_db_url)
    sessions = make_sessions(engine)
    with sessions.begin() as session:
        for record in runs():
            assert store_run(session, record, T0)
    yield engine, sessions
    engine.dispose()


def every_read(sessions: sessionmaker[Session]) -> dict[str, Any]:
    """What the readers of samples answer: rows (the API's /samples), the samples' pages,
    history (backtests, objectives), breakdown, what-if sets, the CSV export."""
    start, end = T0 - timedelta(hours=1), T0 + timedelta(hours=3)
    with sessions() as session:
        rows = session.scalars(select(SampleRow).order_by(SampleRow.run_id, SampleRow.idx))
        columns = ("run_id", "idx", "status", "total_ms", "error", *COLUMNS)
        stored = [[getattr(row, c) for c in columns] for row in rows]
        page, _ = samples_page(session, (start, end), None, None, None, 1000)
        found = breakdown(session, "chat", start, end)
        whatif = load_sample_set(session, "chat", None, start, end, ("tpot_ms", "stall_ms"))
    assert whatif is not None
    history = DatabaseHistory(sessions).window("chat", "eu", start, end)
    out = io.StringIO()
    export_samples(sessions.kw["bind"], out)
    return {
        "rows": stored,
        "page": [(s.run_id, s.idx, s.phases, s.marks, s.details) for s, _, _ in page],
        "breakdown": found,
        "history": [(r.run_id, r.totals.tolist(), r.phases.tolist()) for r in history],
        # as text: NaN (no such phase) equals itself there
        "whatif": str([whatif.run, whatif.ms, whatif.censored, sorted(whatif.rhythm.items())]),
        "csv": out.getvalue(),
    }


def stored_json(engine: Engine) -> list[list[Any]]:
    """The four columns as the database's JSON holds them (before 0012, or unpacked)."""
    with engine.connect() as connection:
        query = f"SELECT {', '.join(COLUMNS)} FROM samples ORDER BY run_id, idx"
        rows = connection.execute(text(query)).all()
    return [[v if isinstance(v, dict) else orjson.loads(v) for v in row] for row in rows]


def test_the_migration_converts_a_populated_database_both_ways_and_reads_stay_the_same(
    empty_db_url: str, populated: tuple[Engine, sessionmaker[Session]]
) -> None:
    engine, sessions = populated
    before = every_read(sessions)
    values = [row[-len(COLUMNS) :] for row in before["rows"]]

    downgrade(empty_db_url, "0011")
    assert stored_json(engine) == values  # JSON again, every value as stored

    upgrade(empty_db_url)
    assert every_read(sessions) == before
    with engine.connect() as connection:
        kinds = connection.execute(text("SELECT details FROM samples")).scalars().all()
    assert all(isinstance(kind, bytes) and kind[:1] == b"\x01" for kind in kinds)


def test_a_stored_document_is_the_bytes_pack_makes_on_either_database(
    populated: tuple[Engine, sessionmaker[Session]],
) -> None:
    # PostgreSQL packs on the server (samplepack.pack_sql), SQLite in Python (pack).
    engine, sessions = populated
    with sessions() as session:
        stored = session.execute(select(SampleRow).order_by(SampleRow.run_id, SampleRow.idx))
        expected = [[pack(c, getattr(row, c)) for c in COLUMNS] for (row,) in stored]
    with engine.connect() as connection:
        query = f"SELECT {', '.join(COLUMNS)} FROM samples ORDER BY run_id, idx"
        raw = [[bytes(v) for v in row] for row in connection.execute(text(query))]

    assert raw == expected


def test_the_database_reads_a_packed_column_as_json(
    populated: tuple[Engine, sessionmaker[Session]],
) -> None:
    engine, sessions = populated
    dialect = engine.dialect.name
    with sessions() as session:
        query = select(*(as_json(getattr(SampleRow, c), c, dialect) for c in COLUMNS))
        in_sql = session.execute(query.order_by(SampleRow.run_id, SampleRow.idx)).all()
        stored = session.execute(
            select(*(getattr(SampleRow, c) for c in COLUMNS)).order_by(
                SampleRow.run_id, SampleRow.idx
            )
        ).all()
        split = as_json(SampleRow.details, "details", dialect)["rtt_ms"].as_float()
        rtts = session.scalars(select(split).order_by(SampleRow.run_id, SampleRow.idx)).all()

    assert [tuple(row) for row in in_sql] == [tuple(row) for row in stored]
    expected = [row[3].get("rtt_ms") for row in stored]
    assert [None if r is None else float(r) for r in rtts] == expected
    assert any(r is not None and not math.isnan(r) for r in rtts)


def test_sqlite_connections_unpack_in_sql_and_refuse_what_is_not_packed(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'x.db'}")
    query = text("SELECT samplepack_json('provenance', :data)")
    try:
        with engine.connect() as connection:
            got = connection.execute(query, {"data": pack("provenance", TRICKY[3])}).scalar()
            assert got is not None and orjson.loads(got) == TRICKY[3]
            with pytest.raises(OperationalError, match="user-defined function raised"):
                connection.execute(query, {"data": b'{"a": 1}'})
    finally:
        engine.dispose()


@pytest.mark.parametrize("column", COLUMNS)
@pytest.mark.parametrize("count", [0, 1, 2, len(TRICKY)])
def test_packed_together_each_value_is_packed_as_alone(column: str, count: int) -> None:
    values = TRICKY[:count]
    assert pack_many(column, values) == [pack(column, value) for value in values]
