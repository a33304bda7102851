"""The ``History`` contract (app/alerts/history.py), held by every implementation: the
same runs fed to MemoryHistory and to DatabaseHistory on SQLite and PostgreSQL give the
same answers."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Protocol

import numpy as np
import pytest
from sqlalchemy import delete
from sqlalchemy.orm import Session, sessionmaker

from app.alerts.history import History, MemoryHistory, Retention
from app.analysis.runs import RunCount, RunData
from app.store.db import make_engine, make_sessions
from app.store.dbhistory import DatabaseHistory
from app.store.ingest import store_run
from app.store.models import SampleRow
from tests.runfactory import EVERY, T0, failed_run, make_run, record_of


class Backend(Protocol):
    history: History

    def store(self, runs: Sequence[RunData], status: str = "complete") -> None: ...

    def prune(self, before: datetime) -> None: ...


class Memory:
    def __init__(self, pack_after: int | None = None) -> None:
        # Packing (a backtest's): every run but the newest of a series kept packed.
        far = timedelta(days=3650)
        packing = Retention(far, 0, far, pack_after)
        self.history = MemoryHistory(None if pack_after is None else lambda _: packing)

    def store(self, runs: Sequence[RunData], status: str = "complete") -> None:
        for run in runs:
            if status == "complete":  # a backtest's runs are complete ones
                self.history.add(run)

    def prune(self, before: datetime) -> None:
        self.history.prune(before)


class Database:
    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self.sessions = sessions
        self.history = DatabaseHistory(sessions)

    def store(self, runs: Sequence[RunData], status: str = "complete") -> None:
        with self.sessions.begin() as session:
            for run in runs:
                store_run(session, replace(record_of(run), status=status), T0)

    def prune(self, before: datetime) -> None:
        # As the pruner does: raw samples go by their own time, the run rows stay.
        with self.sessions.begin() as session:
            session.execute(delete(SampleRow).where(SampleRow.started_at < before))


BACKENDS = [
    pytest.param("memory", id="memory"),
    pytest.param("memory-packed", id="memory-packed"),
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgresql", id="postgresql", marks=pytest.mark.postgres),
]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param.startswith("memory"):
        yield Memory(1 if request.param == "memory-packed" else None)
        return
    if request.param == "postgresql":
        url = request.getfixturevalue("postgres_url")
    else:
        shutil.copyfile(request.getfixturevalue("_migrated_sqlite"), tmp_path / "h.db")
        url = f"sqlite:///{tmp_path / 'h.db'}"
    engine = make_engine(url)
    yield Database(make_sessions(engine))
    engine.dispose()


def run(at: datetime, vantage: str = "eu", target: str = "chat", **kwargs: int) -> RunData:
    rng = np.random.default_rng(at.minute + len(vantage))
    return make_run(rng, at, vantage=vantage, target=target, run_id=str(uuid.uuid4()), **kwargs)


def ids(runs: Sequence[RunData]) -> list[str]:
    return [run.run_id for run in runs]


def test_window_and_last_give_complete_runs_oldest_first_ties_by_run_id(
    backend: Backend,
) -> None:
    eu = [run(T0 + i * EVERY) for i in range(6)]
    tie = run(T0 + 2 * EVERY, censored=2)
    backend.store([*eu[:3], *eu[4:]])
    backend.store([tie])
    backend.store([eu[3]], status="aborted")
    backend.store([run(T0, vantage="us"), run(T0, target="other")])
    tied = sorted([eu[2], tie], key=lambda r: r.run_id)
    history = backend.history
    # [start, end): the run at ``end`` is left out; the aborted one is never seen.
    window = history.window("chat", "eu", eu[1].at, eu[5].at)
    assert ids(window) == ids([eu[1], *tied, eu[4]])
    assert ids(history.last("chat", "eu", 3)) == ids([tied[1], eu[4], eu[5]])
    assert ids(history.last("chat", "eu", 50)) == ids([eu[0], eu[1], *tied, eu[4], eu[5]])
    assert history.last("chat", "nowhere", 3) == []
    assert history.window("nowhere", "eu", T0, T0 + timedelta(days=1)) == []
    (back,) = history.last("chat", "us", 1)
    assert (back.at, back.timed, back.censored, back.failed) == (T0, 20, 0, 0)


def test_vantages_are_those_with_a_complete_run_in_the_seven_days_up_to_now(
    backend: Backend,
) -> None:
    old = T0 - timedelta(days=8)
    backend.store([run(T0, vantage="eu"), run(T0 + EVERY, vantage="us")])
    backend.store([run(old, vantage="old"), run(old + EVERY, vantage="old")])
    backend.store([run(T0, vantage="aborted")], status="aborted")
    history = backend.history
    assert history.vantages("chat", T0 + timedelta(hours=1)) == ["eu", "us"]
    # Both ends included: a run at now, and one exactly 7 days before now.
    assert history.vantages("chat", T0) == ["eu"]
    assert history.vantages("chat", T0 + timedelta(days=7)) == ["eu", "us"]
    assert history.vantages("chat", old + EVERY + timedelta(days=7)) == ["old"]
    assert history.vantages("chat", old + EVERY + timedelta(days=7, seconds=1)) == []
    assert history.vantages("chat", old) == ["old"]
    assert history.vantages("chat", old - timedelta(seconds=1)) == []
    assert history.vantages("unknown", T0) == []


def test_counts_are_one_per_complete_run_oldest_first(backend: Backend) -> None:
    runs = [run(T0 + i * EVERY, censored=i) for i in range(4)]
    failing = replace_id(failed_run(T0 + 4 * EVERY, failed=3))
    same_time = run(T0 + EVERY, censored=5)
    backend.store([*runs, failing, same_time])
    backend.store([run(T0 + 2 * EVERY, vantage="eu")], status="aborted")
    counts = backend.history.counts("chat", "eu", T0 + EVERY, T0 + 4 * EVERY)
    assert counts == [
        RunCount(T0 + EVERY, 20, 1, 20),
        RunCount(T0 + EVERY, 20, 5, 20),
        RunCount(T0 + 2 * EVERY, 20, 2, 20),
        RunCount(T0 + 3 * EVERY, 20, 3, 20),
    ]
    later = backend.history.counts("chat", "eu", T0 + 4 * EVERY, T0 + timedelta(days=1))
    assert later == [RunCount(T0 + 4 * EVERY, 0, 0, 3)]  # every sample: availability's count
    assert backend.history.counts("chat", "us", T0, T0 + timedelta(days=1)) == []


def test_a_pruned_run_leaves_window_and_last_but_stays_in_counts_and_vantages(
    backend: Backend,
) -> None:
    runs = [run(T0 + i * EVERY, censored=1) for i in range(4)]
    backend.store(runs)
    # The cutoff falls inside the second run: it cannot be rebuilt either.
    backend.prune(runs[1].at + timedelta(milliseconds=500))
    history = backend.history
    assert ids(history.last("chat", "eu", 4)) == ids(runs[2:])
    assert ids(history.window("chat", "eu", T0, T0 + timedelta(days=1))) == ids(runs[2:])
    counts = history.counts("chat", "eu", T0, T0 + timedelta(days=1))
    assert counts == [RunCount(r.at, 20, 1, 20) for r in runs]
    backend.prune(T0 + timedelta(days=1))
    assert history.counts("chat", "eu", T0, T0 + timedelta(days=1)) == counts
    assert history.vantages("chat", T0 + timedelta(days=1)) == ["eu"]


def replace_id(made: RunData) -> RunData:
    return RunData(
        str(uuid.uuid4()), made.target, made.vantage, made.at, made.phase_names, made.phases,
        made.totals, made.censored, made.failed, made.samples,
    )  # fmt: skip
