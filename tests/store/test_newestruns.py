"""newest_start on SQLite and PostgreSQL: where a window must start for its newest complete
runs to hold at most so many timed samples."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest
from sqlalchemy.orm import Session, sessionmaker

from app.store.reads.newestruns import newest_start
from app.store.targets import target_key
from tests.runfactory import T0, failed_run, make_run, record_of, store_records

EVERY = timedelta(minutes=10)
SINCE, UNTIL = T0 - timedelta(days=1), T0 + timedelta(days=1)


@pytest.fixture
def key(sessions: sessionmaker[Session]) -> int:
    rng = np.random.default_rng(2)
    runs = [record_of(make_run(rng, T0 + k * EVERY, n=10, censored=2)) for k in range(6)]
    runs += [record_of(make_run(rng, T0 + k * EVERY, n=10, vantage="us")) for k in range(6)]
    runs.append(record_of(failed_run(T0 + 6 * EVERY)))  # newest, but no timed sample
    store_records(sessions, runs, UNTIL)
    with sessions() as session:
        found = target_key(session, "chat")
        assert found is not None
        return found


@pytest.mark.parametrize(
    ("limit", "runs_kept"),
    [(60, 6), (1000, 6), (59, 5), (30, 3), (21, 2), (10, 1), (3, 1)],
)
def test_the_newest_runs_that_fit_are_kept_whole(
    sessions: sessionmaker[Session], key: int, limit: int, runs_kept: int
) -> None:
    with sessions() as session:
        start = newest_start(session, key, "eu", SINCE, UNTIL, limit)
    expected = SINCE if runs_kept == 6 else T0 + (6 - runs_kept) * EVERY
    assert start == expected


def test_every_vantage_counts_when_none_is_given(sessions: sessionmaker[Session], key: int) -> None:
    with sessions() as session:
        start = newest_start(session, key, None, SINCE, UNTIL, 40)
    assert start == T0 + 4 * EVERY  # two runs a time, ten samples each
