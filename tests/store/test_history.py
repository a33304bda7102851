"""DatabaseHistory, on SQLite and PostgreSQL: stored runs rebuilt as the detectors see them."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import numpy as np
import pytest
from sqlalchemy import Engine, delete, event
from sqlalchemy.orm import Session, sessionmaker

from app.analysis.runs import RunData
from app.store.dbhistory import DatabaseHistory
from app.store.models import SampleRow
from tests.runfactory import EVERY, T0, failed_run, make_run, record_of, store_records


def store(sessions: sessionmaker[Session], *runs: RunData, status: str = "complete") -> None:
    store_records(sessions, [replace(record_of(run), status=status) for run in runs], T0)


def series(seed: int, count: int, vantage: str = "eu", start: datetime = T0) -> list[RunData]:
    rng = np.random.default_rng(seed)
    runs = [make_run(rng, start + i * EVERY, vantage=vantage, run_id=None) for i in range(count)]
    # Stored runs are known by uuid: give the constructed ones the ids the store will use.
    return [replace_id(run) for run in runs]


def replace_id(run: RunData) -> RunData:
    record = record_of(run)
    return RunData(
        str(record.id), run.target, run.vantage, run.at, run.phase_names, run.phases,
        run.totals, run.censored, run.failed, run.samples,
    )  # fmt: skip


@pytest.fixture
def sample_queries(engine: Engine) -> Iterator[list[str]]:
    seen: list[str] = []

    def count(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if statement.startswith("SELECT") and "FROM samples" in statement:
            seen.append(statement)

    event.listen(engine, "before_cursor_execute", count)
    yield seen
    event.remove(engine, "before_cursor_execute", count)


def test_a_stored_run_comes_back_as_it_was_measured(sessions: sessionmaker[Session]) -> None:
    rng = np.random.default_rng(1)
    original = replace_id(make_run(rng, T0, censored=3, failed=2))
    store(sessions, original)
    (rebuilt,) = DatabaseHistory(sessions).last("chat", "eu", 4)
    assert rebuilt.run_id == original.run_id
    assert (rebuilt.at, rebuilt.phase_names) == (original.at, original.phase_names)
    np.testing.assert_allclose(rebuilt.phases, original.phases)
    np.testing.assert_allclose(rebuilt.totals, original.totals)
    counts = (rebuilt.censored, rebuilt.failed, rebuilt.samples, rebuilt.ok)
    assert counts == (3, 2, 22, 17)


def test_last_and_window_give_complete_runs_oldest_first(
    sessions: sessionmaker[Session],
) -> None:
    runs = series(2, 6)
    store(sessions, *runs[:3], *runs[4:])
    store(sessions, runs[3], status="aborted")
    store(sessions, *series(3, 2, vantage="us"))
    history = DatabaseHistory(sessions)
    complete = [runs[i].run_id for i in (0, 1, 2, 4, 5)]
    assert [run.run_id for run in history.last("chat", "eu", 3)] == complete[-3:]
    assert [run.run_id for run in history.last("chat", "eu", 50)] == complete
    # [start, end): the run at ``end`` is not in it.
    window = history.window("chat", "eu", runs[1].at, runs[5].at)
    assert [run.run_id for run in window] == [runs[i].run_id for i in (1, 2, 4)]
    assert history.last("chat", "nowhere", 3) == []
    assert history.last("other", "eu", 3) == []


def test_a_run_whose_samples_were_pruned_is_left_out(sessions: sessionmaker[Session]) -> None:
    runs = series(4, 4)
    store(sessions, *runs)
    with sessions.begin() as session:
        session.execute(delete(SampleRow).where(SampleRow.run_id == record_of(runs[1]).id))
        # Part of a run pruned (the cutoff fell inside it): it cannot be rebuilt either.
        session.execute(
            delete(SampleRow).where(SampleRow.run_id == record_of(runs[2]).id, SampleRow.idx < 5)
        )
    history = DatabaseHistory(sessions)
    assert [run.run_id for run in history.last("chat", "eu", 4)] == [
        runs[0].run_id,
        runs[3].run_id,
    ]
    assert len(history.window("chat", "eu", T0, T0 + timedelta(days=1))) == 2


def test_a_run_without_any_timed_sample_is_kept(sessions: sessionmaker[Session]) -> None:
    failed = replace_id(failed_run(T0, failed=4))
    store(sessions, failed)
    (rebuilt,) = DatabaseHistory(sessions).last("chat", "eu", 3)
    assert (rebuilt.timed, rebuilt.failed, rebuilt.ok) == (0, 4, 0)


def test_runs_are_built_once_and_new_ones_found_even_when_they_arrive_late(
    sessions: sessionmaker[Session], sample_queries: list[str]
) -> None:
    runs = series(5, 6)
    store(sessions, *runs[:3], *runs[4:])
    history = DatabaseHistory(sessions)
    history.last("chat", "eu", 4)
    assert len(sample_queries) == 1
    for count in (4, 2, 1, 4):
        history.last("chat", "eu", count)
    assert len(sample_queries) == 1  # nothing new: nothing rebuilt
    # A run flushed from the spool late, older than the newest already seen.
    store(sessions, runs[3])
    latest = history.last("chat", "eu", 4)
    assert [run.run_id for run in latest] == [run.run_id for run in runs[2:]]
    assert len(sample_queries) == 2
    # The reference window reuses what is built and is kept for the same bounds.
    history.window("chat", "eu", T0, runs[5].at)
    history.window("chat", "eu", T0, runs[5].at)
    assert len(sample_queries) == 3


def test_vantages_are_those_with_a_run_in_the_last_seven_days(
    sessions: sessionmaker[Session],
) -> None:
    store(sessions, *series(6, 2, vantage="eu"))
    store(sessions, *series(7, 2, vantage="old", start=T0 - timedelta(days=8)))
    store(sessions, *series(8, 1, vantage="us"), status="aborted")
    now = T0 + timedelta(hours=1)
    history = DatabaseHistory(sessions)
    assert history.vantages("chat", now) == ["eu"]
    assert history.vantages("unknown", now) == []
    # A new vantage is present as soon as its runs are read, cache or not.
    store(sessions, *series(9, 1, vantage="ap", start=T0 + timedelta(minutes=30)))
    history.last("chat", "ap", 4)
    assert history.vantages("chat", now) == ["ap", "eu"]
    assert history.vantages("chat", T0 + timedelta(days=8)) == []


def test_the_window_skips_runs_it_cannot_rebuild_without_asking_again(
    sessions: sessionmaker[Session], sample_queries: list[str]
) -> None:
    runs = series(10, 3)
    store(sessions, *runs)
    with sessions.begin() as session:
        session.execute(delete(SampleRow))
    history = DatabaseHistory(sessions)
    assert history.window("chat", "eu", T0, T0 + timedelta(days=1)) == []
    assert history.last("chat", "eu", 3) == []
    assert len(sample_queries) == 1


def test_a_reference_window_longer_than_the_bound_is_not_kept(
    sessions: sessionmaker[Session], sample_queries: list[str]
) -> None:
    runs = series(11, 6)
    store(sessions, *runs)
    history = DatabaseHistory(sessions, kept_window_runs=4)
    for _ in range(2):
        history.window("chat", "eu", T0, runs[4].at)  # 4 runs: kept, read once
    assert len(sample_queries) == 1
    for _ in range(2):
        history.window("chat", "eu", T0, runs[5].at + EVERY)  # 6 runs: read every time
    assert len(sample_queries) == 3


def test_windows_of_twenty_lengths_read_samples_with_six_statements(
    sessions: sessionmaker[Session], sample_queries: list[str]
) -> None:
    # Each IN-list length is a statement SQLite prepares and caches apart (app.store.inlists).
    runs = series(12, 20)
    store(sessions, *runs)
    for count in range(1, 21):
        window = DatabaseHistory(sessions).window("chat", "eu", T0, runs[count - 1].at + EVERY)
        assert [run.run_id for run in window] == [run.run_id for run in runs[:count]]
    assert len(sample_queries) == 20
    assert len(set(sample_queries)) == 6  # 1, 2, 4, 8, 16 and 32 parameters
