"""``series_latest`` keeps each (target, vantage)'s newest run, whichever road the run took
(a probe's Session or Core write, a pushed batch, an imported CSV) and in whatever order
runs arrive: a late or replayed run never replaces a newer one. On SQLite and PostgreSQL."""

from __future__ import annotations

import io
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine, select, text
from sqlalchemy.orm import Session, sessionmaker

from app.csvio.importer import import_samples
from app.runs.dbsink import DatabaseSink
from app.store.db import transaction, write_connection
from app.store.ingest import store_run_on
from app.store.reads.latestruns import MANY, last_runs, latest_runs
from app.store.reads.seriesrank import series_ranks
from app.store.records import RunRecord, SampleRecord
from app.store.serieslatest import SeriesLatestRow, rebuild
from tests.runfactory import store_records

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def run(target: str, vantage: str, minutes_ago: int, misses: int = 0) -> RunRecord:
    at = NOW - timedelta(minutes=minutes_ago)
    samples = tuple(
        SampleRecord(
            i,
            at + timedelta(seconds=i),
            "deadline_exceeded" if i < misses else "ok",
            10.0,
            {"server": 10.0},
        )
        for i in range(4)
    )
    return RunRecord(uuid.uuid4(), target, vantage, at, "complete", samples, finished_at=at)


def kept(sessions: sessionmaker[Session]) -> dict[tuple[str, str], tuple[datetime, int]]:
    with sessions() as session:
        return {
            (r.target, r.vantage): (r.started_at, r.n_deadline_exceeded)
            for r in latest_runs(session)
        }


def by_session(sessions: sessionmaker[Session], engine: Engine, records: list[RunRecord]) -> None:
    store_records(sessions, records, NOW)


def by_core(sessions: sessionmaker[Session], engine: Engine, records: list[RunRecord]) -> None:
    for record in records:
        with write_connection(sessions) as connection:
            store_run_on(connection, record, NOW)


def by_push(sessions: sessionmaker[Session], engine: Engine, records: list[RunRecord]) -> None:
    """As the server stores an agent's pushed batch (``app.agents.server.ingest``)."""
    assert all(r is True for r in DatabaseSink(sessions, lambda: NOW).store_batch(records))


def by_import(sessions: sessionmaker[Session], engine: Engine, records: list[RunRecord]) -> None:
    lines = ["timestamp,target,vantage,run_id,status,total_ms,server_ms"]
    for record in records:
        for s in record.samples:
            stamp = s.started_at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            lines.append(
                f"{stamp},{record.target},{record.vantage},{record.id},{s.status},10.0,10.0"
            )
    import_samples(engine, io.StringIO("\n".join(lines) + "\n"))


ROADS = [by_session, by_core, by_push, by_import]


@pytest.mark.parametrize("road", ROADS, ids=lambda road: road.__name__)
def test_every_road_keeps_the_newest_run_of_each_series(
    road: object, engine: Engine, sessions: sessionmaker[Session]
) -> None:
    store = road  # type: ignore[assignment]
    older, newer = run("api", "eu", 30), run("api", "eu", 10, misses=1)
    store(sessions, engine, [older, run("api", "us", 20), newer])  # type: ignore[operator]
    assert kept(sessions) == {
        ("api", "eu"): (newer.started_at, 1),
        ("api", "us"): (NOW - timedelta(minutes=20), 0),
    }
    late = run("api", "eu", 60, misses=4)  # arrives last, started first
    store(sessions, engine, [late])  # type: ignore[operator]
    assert kept(sessions)[("api", "eu")] == (newer.started_at, 1)
    newest = run("api", "eu", 5, misses=2)
    store(sessions, engine, [newest])  # type: ignore[operator]
    assert kept(sessions)[("api", "eu")] == (newest.started_at, 2)


def test_a_replayed_run_changes_nothing(sessions: sessionmaker[Session]) -> None:
    first = run("api", "eu", 10)
    assert store_records(sessions, [first], NOW) == [True]
    assert store_records(sessions, [first, run("api", "eu", 40)], NOW) == [False, True]
    assert kept(sessions) == {("api", "eu"): (first.started_at, 0)}


def test_rebuilding_gives_what_ingest_kept(sessions: sessionmaker[Session]) -> None:
    store_records(sessions, [run("a", "eu", m) for m in (50, 5, 20)] + [run("b", "us", 7)], NOW)
    before = kept(sessions)
    with transaction(sessions) as session:
        session.execute(text("DELETE FROM series_latest"))
    assert kept(sessions) == {}
    with transaction(sessions) as session:
        rebuild(session.connection())
    assert kept(sessions) == before
    with sessions() as session:
        assert len(session.scalars(select(SeriesLatestRow)).all()) == 2


def test_last_runs_before_a_past_now_seek_the_runs(sessions: sessionmaker[Session]) -> None:
    records = [run("a", "eu", m) for m in (50, 5)]
    store_records(sessions, records, NOW)
    with sessions() as session:
        assert set(last_runs(session, NOW).values()) == {NOW - timedelta(minutes=5)}
        past = last_runs(session, NOW - timedelta(minutes=10))
        assert set(past.values()) == {NOW - timedelta(minutes=50)}
        assert last_runs(session, NOW - timedelta(hours=2)) == {}


@pytest.mark.parametrize("padding", [0, MANY + 1], ids=["in-list", "read-whole"])
def test_latest_runs_of_some_targets_only(sessions: sessionmaker[Session], padding: int) -> None:
    store_records(sessions, [run("a", "eu", 5), run("b", "eu", 6), run("b", "us", 7)], NOW)
    with sessions() as session:
        ids = {r.target: r.target_id for r in latest_runs(session)}
        unknown = set(range(10**6, 10**6 + padding))  # ids no target has
        found = latest_runs(session, {ids["b"]} | unknown)
    assert sorted((r.target, r.vantage) for r in found) == [("b", "eu"), ("b", "us")]


def test_series_ranks_give_the_newest_run_as_epoch_seconds_with_the_interval(
    sessions: sessionmaker[Session],
) -> None:
    store_records(sessions, [run("a", "eu", 50), run("a", "eu", 5, misses=3)], NOW)
    with sessions() as session:
        (found,) = series_ranks(session)
    assert (found.target, found.vantage, found.n_samples, found.n_deadline_exceeded) == (
        "a", "eu", 4, 3
    )  # fmt: skip
    newest = (NOW - timedelta(minutes=5)).timestamp()
    assert abs(found.started_s - newest) < 0.001 and found.interval_s == 0.0  # known by its runs
