"""Writing runs fast without changing what is stored: on PostgreSQL a run and its samples in
one statement, on SQLite one writer of the process at a time, target ids cached only once
committed, JSON by orjson; and the lean read of a long window's runs for charts."""

from __future__ import annotations

import gc
import math
import threading
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from sqlalchemy import Engine, event, func, select, update
from sqlalchemy.dialects import sqlite
from sqlalchemy.exc import IntegrityError, OperationalError, StatementError
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import NullPool

from app.store.db import (
    is_transient,
    json_dumps,
    json_dumps_text,
    json_loads,
    make_engine,
    make_sessions,
    write_lock,
    write_transaction,
)
from app.store.ingest import sqlite_time, store_run
from app.store.models import RunRow, SampleRow, TargetRow
from app.store.prune import prune_samples
from app.store.reads.chart import RUN_CHART_COLUMNS, run_chart, run_summaries
from app.store.records import RunRecord, SampleRecord
from tests.runfactory import store_records

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def sample(idx: int, started: datetime = NOW, **fields: Any) -> SampleRecord:
    values: dict[str, Any] = {
        "status": "ok",
        "total_ms": 100.0 + idx,
        "phases": {"connect": 10.0, "server": 70.0 + idx, "transfer": 20.0},
        "provenance": {"connect": "client", "server": "server_timing"},
        "marks": {"request_start": 1_000 * idx, "first_byte": 90_000_000 + idx},
        "details": {"http_version": "HTTP/2", "tokens": {"out": 12}, "server_timing": None},
    }
    return SampleRecord(idx=idx, started_at=started + timedelta(seconds=idx), **values | fields)


def run_of(n: int, target: str = "api", started: datetime = NOW, vantage: str = "eu") -> RunRecord:
    return RunRecord(
        id=uuid.uuid4(),
        target=target,
        vantage=vantage,
        started_at=started,
        status="complete",
        samples=tuple(sample(i, started) for i in range(n)),
        scheduled_at=started,
        finished_at=started + timedelta(seconds=n),
    )


def store(sessions: sessionmaker[Session], record: RunRecord) -> bool:
    (stored,) = store_records(sessions, [record], NOW)
    return stored


def stored_samples(sessions: sessionmaker[Session], run_id: uuid.UUID) -> list[SampleRecord]:
    with sessions() as session:
        rows = session.scalars(
            select(SampleRow).where(SampleRow.run_id == run_id).order_by(SampleRow.idx)
        ).all()
    return [
        SampleRecord(
            idx=r.idx,
            started_at=r.started_at,
            status=r.status,
            total_ms=r.total_ms,
            phases=r.phases,
            provenance=r.provenance,
            marks=r.marks,
            error_class=r.error_class,
            error=r.error,
            http_status=r.http_status,
            details=r.details,
        )
        for r in rows
    ]


# --- storing runs ------------------------------------------------------------------------


@pytest.mark.parametrize("size", [1, 20, 300])
def test_a_run_of_any_size_is_stored_exactly_as_given(
    sessions: sessionmaker[Session], size: int
) -> None:
    record = run_of(size)
    odd = replace(record.samples[0], error='it\'s \\ a\ttab\nand "quotes"', http_status=503)
    record = replace(record, samples=(odd, *record.samples[1:]))

    assert store(sessions, record)
    assert not store(sessions, record)

    assert stored_samples(sessions, record.id) == list(record.samples)
    with sessions() as session:
        row = session.get(RunRow, record.id)
    assert row is not None and row.summary == record.summary()


def test_a_run_failing_midway_leaves_nothing_not_even_its_new_target(
    sessions: sessionmaker[Session],
) -> None:
    record = run_of(20, target="brand-new")
    broken = replace(record, samples=(*record.samples, record.samples[-1]))  # an index twice

    with pytest.raises(IntegrityError):
        store(sessions, broken)

    with sessions() as session:
        counts = [session.scalar(select(func.count()).select_from(t)) for t in (RunRow, SampleRow)]
        targets = session.scalar(select(func.count()).select_from(TargetRow))
    assert (counts, targets) == ([0, 0], 0)
    assert store(sessions, record)


def test_a_naive_sample_time_is_refused(sessions: sessionmaker[Session]) -> None:
    record = run_of(20)
    naive = replace(record.samples[3], started_at=NOW.replace(tzinfo=None))
    record = replace(record, samples=(*record.samples[:3], naive, *record.samples[4:]))

    with pytest.raises((StatementError, ValueError), match="naive datetime"):
        store(sessions, record)
    with sessions() as session:
        assert session.scalar(select(func.count()).select_from(RunRow)) == 0


def statements_sent(engine: Engine) -> list[str]:
    sent: list[str] = []

    def note(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        sent.append(statement)

    event.listen(engine, "before_cursor_execute", note)
    return sent


def test_a_run_of_a_known_target_is_one_statement_on_postgresql_three_on_sqlite(
    sessions: sessionmaker[Session], engine: Engine
) -> None:
    store(sessions, run_of(2, target="api"))  # creates the target
    sent = statements_sent(engine)

    for _ in range(3):
        store(sessions, run_of(20, target="api"))

    # SQLite: the run, its series' newest (series_latest), then the samples at once.
    per_run = 1 if engine.dialect.name == "postgresql" else 3
    assert len(sent) == 3 * per_run
    with sessions() as session:
        runs = session.scalar(select(func.count()).select_from(RunRow))
        samples = session.scalar(select(func.count()).select_from(SampleRow))
        targets = session.scalars(select(TargetRow.name)).all()
    assert (runs, samples, targets) == (4, 62, ["api"])


def test_a_run_id_already_stored_under_another_target_stays_as_it_was(
    sessions: sessionmaker[Session],
) -> None:
    record = run_of(2, target="api")
    assert store(sessions, record)

    assert not store(sessions, replace(record, target="other", samples=record.samples[:1]))

    with sessions() as session:
        row = session.get(RunRow, record.id)
        names = session.scalars(select(TargetRow.name).order_by(TargetRow.name)).all()
    assert row is not None and row.n_samples == 2
    assert stored_samples(sessions, record.id) == list(record.samples)
    # The second call found the run id taken before it needed the new target.
    assert names in (["api"], ["api", "other"])


def test_a_target_created_in_a_transaction_that_rolled_back_is_not_remembered(
    sessions: sessionmaker[Session], engine: Engine
) -> None:
    record = run_of(2, target="fleeting")
    with pytest.raises(RuntimeError), write_transaction(sessions) as session:
        store_run(session, record, NOW)
        raise RuntimeError("the transaction fails after the target was created")

    # Had its id been cached, this run would point at a target row that does not exist.
    assert store(sessions, run_of(2, target="fleeting"))
    with sessions() as session:
        assert session.scalars(select(TargetRow.name)).all() == ["fleeting"]


# --- the SQLite write lock ---------------------------------------------------------------


def within_while_held(engine: Engine) -> float:
    """How long to hold the lock and watch: on SQLite, long enough that a writer not
    waiting for it would have finished; on PostgreSQL, long enough for a busy machine."""
    return 0.3 if engine.dialect.name == "sqlite" else 20.0


def test_writers_of_one_sqlite_database_take_turns_in_the_process(
    sessions: sessionmaker[Session], engine: Engine
) -> None:
    stored = threading.Event()

    def writer() -> None:
        store(sessions, run_of(3))
        stored.set()

    with write_lock(engine):
        thread = threading.Thread(target=writer)
        thread.start()
        stored_while_held = stored.wait(within_while_held(engine))
    thread.join(10)

    assert stored.is_set()
    # SQLite: the writer waited for the lock; PostgreSQL locks rows, and nothing waited.
    assert stored_while_held == (engine.dialect.name == "postgresql")


def test_engines_on_one_sqlite_file_share_its_write_lock(engine: Engine, db_url: str) -> None:
    other = make_engine(db_url)
    try:
        with write_lock(engine):
            taken = threading.Event()

            def take() -> None:
                with write_lock(other):
                    taken.set()

            thread = threading.Thread(target=take)
            thread.start()
            taken_while_held = taken.wait(within_while_held(engine))
        thread.join(10)
    finally:
        other.dispose()

    assert taken.is_set()
    assert taken_while_held == (engine.dialect.name == "postgresql")


def test_a_prune_batch_waits_for_a_writer_holding_the_lock(
    sessions: sessionmaker[Session], engine: Engine
) -> None:
    cutoff = NOW - timedelta(days=30)
    store(sessions, run_of(4, started=cutoff - timedelta(days=1)))
    done = threading.Event()

    def prune() -> None:
        prune_samples(engine, cutoff, rows_per_batch=2, pause_s=0)
        done.set()

    with write_lock(engine):
        thread = threading.Thread(target=prune)
        thread.start()
        finished_while_held = done.wait(within_while_held(engine))
    thread.join(10)

    assert done.is_set()
    assert finished_while_held == (engine.dialect.name == "postgresql")
    with sessions() as session:
        assert session.scalar(select(func.count()).select_from(SampleRow)) == 0


def test_the_pipelines_writes_queue_behind_a_prune_batch_not_sqlites_busy_handler(
    sessions: sessionmaker[Session], engine: Engine
) -> None:
    """A run stored while another thread's write transaction holds the database waits in
    our lock, not in SQLite's busy handler (which polls at 1, 2, 5, 10, 15, 20 ms...): on
    SQLite none of the writer's statements reaches the database before the holder commits
    (without the lock its INSERT does, and sits in the busy handler). How soon after the
    commit it goes ahead is a speed, not checked here."""
    store(sessions, run_of(1))  # warm: target known, connection open
    holding, release, committed = threading.Event(), threading.Event(), threading.Event()
    early: list[str] = []  # the writer's statements sent while the holder had not committed

    def hold() -> None:
        with write_transaction(sessions) as session:
            session.execute(update(RunRow).values(vantage="held"))
            holding.set()
            release.wait(30)
        committed.set()

    def sent(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if threading.current_thread() is writer and not committed.is_set():
            early.append(statement)

    stored = threading.Event()
    writer = threading.Thread(target=lambda: (store(sessions, run_of(3)), stored.set()))
    holder = threading.Thread(target=hold)
    event.listen(engine, "before_cursor_execute", sent)
    try:
        holder.start()
        assert holding.wait(10)
        writer.start()
        stored_while_held = stored.wait(within_while_held(engine))
        release.set()
        holder.join(10)
        writer.join(10)
    finally:
        release.set()
        event.remove(engine, "before_cursor_execute", sent)

    assert stored.is_set()
    if engine.dialect.name == "sqlite":
        assert (stored_while_held, early) == (False, [])
    else:  # PostgreSQL locks rows: the insert went ahead
        assert stored_while_held


# --- JSON ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        {},
        {"connect": 1.5, "nested": {"a": [1, 2.25, None, True]}, "text": "é \\ \" ' \n"},
        {"tokens": 12, "ratio": 0.1 + 0.2, "tiny": 5e-324, "big": 1.7976931348623157e308},
    ],
)
def test_json_round_trips_exactly(value: dict[str, Any]) -> None:
    assert json_loads(json_dumps(value)) == value
    assert json_loads(json_dumps_text(value)) == value


def test_json_keys_become_strings_and_nan_written_before_still_reads() -> None:
    assert json_loads(json_dumps({1: "a"})) == {"1": "a"}
    assert math.isnan(json_loads('{"x": NaN}')["x"])


# --- the chart read --------------------------------------------------------------------------


def test_run_chart_gives_the_chart_columns_of_a_targets_runs_oldest_first(
    sessions: sessionmaker[Session],
) -> None:
    hours = [3, 0, 2, 1]
    runs = [run_of(2, started=NOW + timedelta(hours=h)) for h in hours]
    runs.append(run_of(2, started=NOW + timedelta(hours=1.5, milliseconds=7), vantage="us"))
    runs.append(run_of(2, started=NOW + timedelta(hours=1), target="other"))
    for record in runs:
        store(sessions, record)
    end = NOW + timedelta(hours=3)

    with sessions() as session:
        chart = run_chart(session, "api", NOW + timedelta(hours=1), end)
        full = run_summaries(session, "api", NOW + timedelta(hours=1), end)
        one_vantage = run_chart(session, "api", NOW, end, vantage="us")
        unknown = run_chart(session, "nobody", NOW, end)

    assert len(chart) == len(full) == 3
    assert chart.time == pytest.approx([f.started_at.timestamp() for f in full], abs=1e-6)
    assert chart.time[1] - chart.time[0] == pytest.approx(1800.007, abs=1e-6)
    for column in [c.key for c in RUN_CHART_COLUMNS[1:]]:
        assert getattr(chart, column) == [getattr(f, column) for f in full], column
    assert chart.vantage == ["eu", "us", "eu"]
    assert one_vantage.vantage == ["us"]
    assert len(unknown) == 0 and unknown.total_p99 == []


@pytest.mark.parametrize("collector_on", [True, False])
def test_run_chart_leaves_the_garbage_collector_as_it_found_it(
    sessions: sessionmaker[Session], collector_on: bool
) -> None:
    store(sessions, run_of(2, started=NOW))
    was_on = gc.isenabled()
    try:
        gc.enable() if collector_on else gc.disable()
        with sessions() as session:
            assert len(run_chart(session, "api", NOW, NOW + timedelta(hours=1))) == 1
        assert gc.isenabled() is collector_on
    finally:
        gc.enable() if was_on else gc.disable()


def test_run_chart_refuses_a_naive_window(sessions: sessionmaker[Session]) -> None:
    naive = NOW.replace(tzinfo=None)
    with pytest.raises(ValueError, match="naive datetime"), sessions() as session:
        run_chart(session, "api", naive, naive + timedelta(hours=1))


# --- PostgreSQL connections that died while idle ----------------------------------------------


def kill_pooled_connections(engine: Engine) -> None:
    """Ends, from another connection, the server processes of the engine's pooled ones,
    and waits until they are gone (``pg_terminate_backend`` only signals them without a
    timeout): their connections are dropped, not being dropped."""
    with engine.connect() as connection:
        mine = connection.exec_driver_sql("SELECT pg_backend_pid()").scalar()
    admin = make_engine(engine.url.render_as_string(hide_password=False), poolclass=NullPool)
    with admin.connect() as connection:
        connection.exec_driver_sql(
            "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE pid = %(pid)s",
            {"pid": mine},
        )
    admin.dispose()


def test_an_idle_connection_the_server_dropped_is_replaced_before_use(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("app.store.pooled.PING_AFTER_IDLE_S", 0.0)
    engine = make_engine(postgres_url, pool_size=1)
    try:
        kill_pooled_connections(engine)

        with engine.connect() as connection:
            assert connection.exec_driver_sql("SELECT 1").scalar() == 1
    finally:
        engine.dispose()


def test_a_connection_in_steady_use_is_not_pinged_and_its_loss_is_transient(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("app.store.pooled.PING_AFTER_IDLE_S", 3600.0)
    engine = make_engine(postgres_url, pool_size=1)
    sessions = make_sessions(engine)
    try:
        kill_pooled_connections(engine)

        with pytest.raises(OperationalError) as failed:
            store(sessions, run_of(2))
        assert is_transient(failed.value)
        assert store(sessions, run_of(2))  # the pool has replaced the dead connection
    finally:
        engine.dispose()


@pytest.mark.parametrize(
    "at",
    [
        datetime(2026, 3, 1, 12, 0, tzinfo=UTC),
        datetime(2026, 3, 1, 12, 0, 0, 1, tzinfo=UTC),
        datetime(2026, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC),
        datetime(2026, 3, 1, 17, 30, 5, 123_456, tzinfo=timezone(timedelta(hours=5, minutes=30))),
        datetime(999, 1, 2, 3, 4, 5, tzinfo=UTC),
    ],
)
def test_sqlite_time_is_what_the_column_type_binds_on_sqlite(at: datetime) -> None:
    dialect = sqlite.dialect()  # type: ignore[no-untyped-call]
    process = SampleRow.__table__.c.started_at.type.dialect_impl(dialect).bind_processor(dialect)
    assert sqlite_time(at) == process(at)


def test_sqlite_time_refuses_a_naive_time() -> None:
    with pytest.raises(ValueError, match="naive datetime"):
        sqlite_time(datetime(2026, 3, 1, 12, 0))
