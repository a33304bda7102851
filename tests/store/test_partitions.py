"""PostgreSQL's samples by day (migration 0010, ``app.store.partitions``): days made ahead,
dropped whole past retention, reads and ingest as on one table; the summaries' retention
on both databases."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings, TargetsFile
from app.main import build_service
from app.store.db import make_engine, make_sessions
from app.store.dbhistory import DatabaseHistory
from app.store.ingest import Ingested, ingest_run, store_run
from app.store.migrate import downgrade, upgrade
from app.store.models import RollupRow, RunDigestRow, RunRow, SampleRow
from app.store.partitions import (
    AHEAD_DAYS,
    DEFAULT,
    day_of,
    days_past,
    days_wanted,
    existing_days,
    is_partition,
    is_partitioned,
    keep_partitions,
    partition_name,
)
from app.store.reads.breakdown import breakdown
from app.store.reads.browse import samples_page
from app.store.reads.chart import run_chart
from app.store.reads.timeseries import time_series
from app.store.records import RunRecord
from app.store.retention import summaries_cutoff
from app.store.rollups.digests import add_run
from tests.runfactory import make_run, record_of

D0 = datetime(2026, 3, 2, tzinfo=UTC)  # midnight UTC
ONE_DAY = timedelta(days=1)
only_postgres = pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)


def day(n: int) -> date:
    return (D0 + n * ONE_DAY).date()


@pytest.mark.parametrize(
    ("held", "cutoff", "wanted"),
    [
        ([], D0 - 30 * ONE_DAY, {day(n) for n in range(AHEAD_DAYS + 1)}),
        ([day(-3)], D0 - 30 * ONE_DAY, {day(-3)} | {day(n) for n in range(AHEAD_DAYS + 1)}),
        # A held day wholly before the cutoff gets no partition: its rows are deleted.
        ([day(-3)], D0 - 2 * ONE_DAY, {day(n) for n in range(AHEAD_DAYS + 1)}),
        (
            [day(-3)],
            D0 - 2 * ONE_DAY - timedelta(seconds=1),
            {day(-3)} | {day(0), day(1), day(2), day(3)},
        ),
        ([day(9)], D0, {day(9)} | {day(n) for n in range(AHEAD_DAYS + 1)}),  # days ahead
    ],
)
def test_the_days_wanted_are_today_those_ahead_and_the_defaults_days_within_retention(
    held: list[date], cutoff: datetime, wanted: set[date]
) -> None:
    assert days_wanted(D0 + timedelta(hours=13), cutoff, held) == wanted


@pytest.mark.parametrize(
    ("cutoff", "past"),
    [
        (D0, []),
        (D0 + ONE_DAY - timedelta(microseconds=1), []),  # the day's last instant is kept
        (D0 + ONE_DAY, [day(0)]),
        (D0 + 3 * ONE_DAY + timedelta(hours=5), [day(0), day(1), day(2)]),
    ],
)
def test_a_day_is_dropped_once_its_every_instant_is_before_the_cutoff(
    cutoff: datetime, past: list[date]
) -> None:
    assert days_past([day(n) for n in range(5)], cutoff) == past


def test_partition_names_read_back_and_nothing_else_is_one() -> None:
    assert day_of(partition_name(day(0))) == day(0)
    assert is_partition(DEFAULT) and is_partition("samples_p20260302")
    assert not any(map(is_partition, ["samples", "runs", "samples_p2026", "rollups_p20260302"]))


def records(start: datetime, count: int, every: timedelta, seed: int = 1) -> list[RunRecord]:
    rng = np.random.default_rng(seed)
    return [record_of(make_run(rng, start + i * every, n=10)) for i in range(count)]


def across_midnights() -> list[RunRecord]:
    """Runs every 5 hours over five days, and one whose samples straddle a midnight."""
    straddling = record_of(make_run(np.random.default_rng(9), D0 + ONE_DAY - timedelta(seconds=1)))
    assert straddling.samples[-1].started_at.date() != straddling.started_at.date()
    return [*records(D0, 24, timedelta(hours=5)), straddling]


def store(sessions: sessionmaker[Session], runs: list[RunRecord]) -> None:
    with sessions.begin() as session:
        for record in runs:
            assert store_run(session, record, D0)
            add_run(session, record, D0)


def reads(sessions: sessionmaker[Session], start: datetime, end: datetime) -> dict[str, Any]:
    """What charts, history, breakdown and the samples' pages answer over [start, end)."""
    with sessions() as session:
        chart = run_chart(session, "chat", start, end)
        found = breakdown(session, "chat", start, end)
        series = time_series(session, "chat", start, end, bucket_seconds=3600, now=end)
        page, _ = samples_page(session, (start, end), None, None, None, 10_000)
    window = DatabaseHistory(sessions).window("chat", "eu", start, end)
    return {
        "chart": chart,
        "breakdown": found,
        "series": series,
        "history": [(r.run_id, r.at, r.totals.tolist(), r.phases.tolist()) for r in window],
        "samples": [(s.run_id, s.idx, s.started_at, s.total_ms, s.phases) for s, _, _ in page],
    }


def count(sessions: sessionmaker[Session], table: Any, where: Any = None) -> int:
    query = select(func.count()).select_from(table)
    with sessions() as session:
        return int(session.scalar(query if where is None else query.where(where)) or 0)


def days_present(engine: Engine) -> list[date]:
    with engine.connect() as connection:
        return existing_days(connection)


def in_default(engine: Engine) -> int:
    with engine.connect() as connection:
        return int(connection.exec_driver_sql(f"SELECT count(*) FROM {DEFAULT}").scalar() or 0)


@only_postgres
def test_days_are_made_ahead_of_now_and_the_defaults_rows_move_into_theirs(
    engine: Engine, sessions: sessionmaker[Session]
) -> None:
    store(sessions, records(D0, 10, timedelta(hours=12)))  # no partition holds these days
    assert in_default(engine) == 100

    now = D0 + 10 * ONE_DAY
    changes = keep_partitions(engine, now, cutoff=D0 - 30 * ONE_DAY)

    ahead = {now.date() + timedelta(days=n) for n in range(AHEAD_DAYS + 1)}
    assert ahead | {day(n) for n in range(5)} <= set(days_present(engine))
    assert set(changes.created) >= {day(n) for n in range(5)}
    assert in_default(engine) == 0
    assert count(sessions, SampleRow) == 100
    assert keep_partitions(engine, now, D0 - 30 * ONE_DAY).created == []  # made once


@only_postgres
def test_a_retention_drop_removes_the_days_past_it_whole_and_keeps_the_rest(
    engine: Engine, sessions: sessionmaker[Session]
) -> None:
    runs = across_midnights()
    store(sessions, runs)
    keep_partitions(engine, D0, D0 - 30 * ONE_DAY)
    later = (D0 + 2 * ONE_DAY, D0 + 6 * ONE_DAY)
    before = reads(sessions, *later)

    changes = keep_partitions(engine, D0 + 6 * ONE_DAY, cutoff=D0 + 2 * ONE_DAY)

    assert changes.dropped == [day(0), day(1)] and changes.deleted == 0
    assert not {day(0), day(1)} & set(days_present(engine))
    assert count(sessions, SampleRow, SampleRow.started_at < later[0]) == 0
    assert count(sessions, SampleRow) == sum(
        1 for r in runs for s in r.samples if s.started_at >= later[0]
    )
    assert count(sessions, RunRow) == len(runs)  # summaries stay
    assert reads(sessions, *later) == before


@only_postgres
def test_what_the_default_partition_holds_past_the_cutoff_is_deleted(
    engine: Engine, sessions: sessionmaker[Session]
) -> None:
    store(sessions, records(D0 - 90 * ONE_DAY, 3, ONE_DAY))  # an import of old runs

    changes = keep_partitions(engine, D0, cutoff=D0 - 30 * ONE_DAY)

    assert changes.deleted == 30 and in_default(engine) == 0
    assert not {day(-90), day(-89), day(-88)} & set(days_present(engine))


@only_postgres
def test_reads_across_day_boundaries_are_the_same_as_from_one_table(
    engine: Engine, sessions: sessionmaker[Session]
) -> None:
    store(sessions, across_midnights())
    window = (D0 - timedelta(hours=3), D0 + 5 * ONE_DAY)
    from_one_table = reads(sessions, *window)  # every row in the default partition

    keep_partitions(engine, D0, D0 - 30 * ONE_DAY)

    assert in_default(engine) == 0 and len(days_present(engine)) >= 5
    assert reads(sessions, *window) == from_one_table


@only_postgres
def test_ingest_stays_idempotent_by_run_id_and_slot_on_the_partitioned_table(
    engine: Engine, sessions: sessionmaker[Session]
) -> None:
    (first,) = records(D0 + ONE_DAY - timedelta(milliseconds=500), 1, ONE_DAY)
    run = replace(first, slot=7)
    other = replace(run, id=uuid.uuid4())  # another replica's run of the same slot
    with sessions.begin() as session:
        assert ingest_run(session, run, D0) is Ingested.STORED
    keep_partitions(engine, D0, D0 - 30 * ONE_DAY)  # its samples now in two days
    with sessions.begin() as session:
        assert ingest_run(session, run, D0) is Ingested.REPLAYED
        assert ingest_run(session, other, D0) is Ingested.SLOT_TAKEN
    assert count(sessions, SampleRow) == len(run.samples)
    assert len({s.started_at.date() for s in run.samples}) == 2


@pytest.fixture
def populated(postgres_server: str) -> Iterator[str]:
    from tests.conftest import _postgres_database

    with _postgres_database(postgres_server) as url:
        upgrade(url)
        yield url


def test_the_migration_partitions_a_populated_database_and_reads_stay_the_same(
    populated: str,
) -> None:
    # Stored by today's code, then taken back to the revision before the partitions (one
    # table, every row with it), and upgraded again: the conversion of a populated database.
    engine = make_engine(populated)
    sessions = make_sessions(engine)
    try:
        runs = across_midnights()
        store(sessions, runs)
        window = (D0 - timedelta(hours=3), D0 + 5 * ONE_DAY)
        before, rows = reads(sessions, *window), count(sessions, SampleRow)
        downgrade(populated, "0009")
        with engine.connect() as connection:
            assert not is_partitioned(connection) and existing_days(connection) == []
        assert count(sessions, SampleRow) == rows

        upgrade(populated)

        with engine.connect() as connection:
            assert is_partitioned(connection)
        today = datetime.now(UTC).date()
        assert {day(n) for n in range(5)} <= set(days_present(engine))
        assert {today + timedelta(days=n) for n in range(AHEAD_DAYS + 1)} <= set(
            days_present(engine)
        )
        assert in_default(engine) == 0
        assert count(sessions, SampleRow) == rows
        assert reads(sessions, *window) == before
        with sessions.begin() as session:  # stored before, replayed after: not again
            assert ingest_run(session, runs[3], D0) is Ingested.REPLAYED
    finally:
        engine.dispose()


def test_the_service_prunes_summaries_only_when_told_to(
    db_url: str, sessions: sessionmaker[Session], tmp_path: Path
) -> None:
    store(sessions, records(D0, 10, ONE_DAY))
    settings = Settings(database_url=db_url, spool_dir=tmp_path / "spool", vantage="v")
    now = D0 + 400 * ONE_DAY
    for kept_days, runs_left in [(None, 10), (397, 7), (1, 0)]:
        targets = TargetsFile(raw_retention_days=30, summary_retention_days=kept_days)
        service = build_service(settings, targets)
        try:
            asyncio.run(service.prune(now))
        finally:
            service.engine.dispose()
        assert count(sessions, RunRow) == runs_left
        assert count(sessions, RunDigestRow) == runs_left
        assert count(sessions, SampleRow) == 0
    assert count(sessions, RollupRow) == 0


@pytest.mark.parametrize(
    ("raw", "summary", "cutoff"),
    [
        (30, None, None),
        (30, 400, D0 - 400 * ONE_DAY),
        (30, 7, D0 - 30 * ONE_DAY),  # never before the samples go
    ],
)
def test_summaries_are_kept_at_least_as_long_as_the_samples(
    raw: int, summary: int | None, cutoff: datetime | None
) -> None:
    assert summaries_cutoff(D0, raw, summary) == cutoff


@only_postgres
def test_replicas_keeping_partitions_at_once_make_each_day_once(
    engine: Engine, sessions: sessionmaker[Session]
) -> None:
    store(sessions, records(D0 + 40 * ONE_DAY, 6, ONE_DAY))
    now = D0 + 40 * ONE_DAY
    with ThreadPoolExecutor(3) as pool:
        done = list(pool.map(lambda _: keep_partitions(engine, now, D0), range(3)))

    made = sorted(d for changes in done for d in changes.created)
    assert made == sorted(set(made)) and {day(40 + n) for n in range(6)} <= set(made)
    assert in_default(engine) == 0 and count(sessions, SampleRow) == 60
