"""Coarse rollups (1 h, 6 h, 1 day) built when their period closes: every read of rollups
gives the same numbers whether they are folded yet or not, on SQLite and PostgreSQL."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

import numpy as np
import pytest
from sqlalchemy import Engine, delete, func, select, text
from sqlalchemy.orm import Session, sessionmaker

from app.analysis.digest import Digest, digest_of, merge_digests
from app.store.db import write_transaction
from app.store.ingest import store_run
from app.store.models import RollupRow
from app.store.reads.sparklines import sparklines
from app.store.reads.timeseries import time_series
from app.store.records import RunRecord
from app.store.rollups import coarse
from app.store.rollups.catchup import catch_up
from app.store.rollups.coarse import COARSE
from app.store.rollups.digests import (
    FINE_PERIODS,
    FINE_ROLLUPS_KEPT,
    add_run,
    prune_fine_rollups,
)
from app.store.rollups.folds import (
    fold,
    fold_before_prune,
    fold_closed,
    fold_due,
    summarize_closed,
)
from tests.runfactory import T0, make_run, record_of

END = T0 + timedelta(days=2)  # every run's periods closed
BUCKETS = (900, 3600, 7200, 21600, 43200, 86400, 172800)


def _runs(start: datetime, count: int, every: timedelta, seed: int) -> list[RunRecord]:
    rng = np.random.default_rng(seed)
    return [
        record_of(make_run(rng, start + i * every, target="chat", vantage=vantage))
        for i in range(count)
        for vantage in ("eu", "us")
    ]


def _store(sessions: sessionmaker[Session], records: Iterable[RunRecord], now: datetime) -> None:
    with write_transaction(sessions) as session:
        for record in records:
            store_run(session, record, now)
            add_run(session, record, now)


def _coarse_rows(sessions: sessionmaker[Session]) -> int:
    with sessions() as session:
        query = select(func.count()).where(RollupRow.period_s.in_(COARSE))
        return int(session.scalar(query.select_from(RollupRow)) or 0)


def _reads(sessions: sessionmaker[Session], now: datetime) -> dict[str, Any]:
    """Every read of rollups, as JSON: history per bucket and vantage, the sparklines."""
    found: dict[str, Any] = {}
    with sessions() as session:
        for bucket in BUCKETS:
            for vantage in (None, "eu", "us"):
                series = time_series(
                    session, "chat", T0, END, vantage, bucket_seconds=bucket, now=now
                )
                found[f"{bucket} {vantage}"] = series.to_json()
        found["sparklines"] = sparklines(session, now, hours=48)
    return found


@pytest.fixture
def spread(sessions: sessionmaker[Session]) -> list[RunRecord]:
    """30 h of runs every 7 minutes from two vantages, counted while every period was open:
    no coarse row yet."""
    records = _runs(T0 + timedelta(minutes=3), 260, timedelta(minutes=7), seed=3)
    _store(sessions, records, now=T0)
    return records


def test_runs_of_open_periods_leave_the_coarse_rows_to_the_fold(
    sessions: sessionmaker[Session], spread: list[RunRecord]
) -> None:
    assert _coarse_rows(sessions) == 0
    with write_transaction(sessions) as session:
        built = fold(session, T0, END)
    hours = {r.started_at.replace(minute=0, second=0, microsecond=0) for r in spread}
    assert sum(1 for key in built if key[2] == 3600) == 3 * len(hours)  # 2 vantages, pooled
    assert {key[2] for key in built} == set(COARSE)
    with write_transaction(sessions) as session:
        assert fold(session, T0, END) == []  # built once


def test_every_read_is_the_same_folded_or_not(
    sessions: sessionmaker[Session], spread: list[RunRecord]
) -> None:
    unfolded = _reads(sessions, END)
    assert sum(unfolded["3600 None"]["runs"]) == len(spread)
    with write_transaction(sessions) as session:
        fold(session, T0, T0 + timedelta(hours=13))  # in part: the day still open
    assert _reads(sessions, END) == unfolded
    assert fold_closed(sessions, T0, END) > 0
    assert _reads(sessions, END) == unfolded


def test_a_folded_read_is_the_one_rows_merged_per_run_gave(
    sessions: sessionmaker[Session], spread: list[RunRecord]
) -> None:
    fold_closed(sessions, T0, END)
    with sessions() as session:
        rows = session.execute(
            select(RollupRow.period_start, RollupRow.digest).where(
                RollupRow.period_s == 86400, RollupRow.vantage == "eu"
            )
        ).all()
    for start, document in rows:
        inside = [
            r
            for r in spread
            if r.vantage == "eu" and start <= r.started_at < start + timedelta(days=1)
        ]
        merged = merge_digests(digest_of(r.samples) for r in inside)
        assert Digest.from_json(document).to_json() == merged.to_json()


def test_a_late_run_is_merged_into_its_folded_period_and_builds_a_closed_one(
    sessions: sessionmaker[Session], spread: list[RunRecord]
) -> None:
    fold_closed(sessions, T0, T0 + timedelta(hours=12))
    late = _runs(T0 + timedelta(hours=2, minutes=1), 1, timedelta(0), seed=9)
    later = _runs(T0 + timedelta(hours=20, minutes=1), 1, timedelta(0), seed=10)
    _store(sessions, late + later, now=END)  # hour 2 folded; hour 20 closed, not folded
    expected = _reads(sessions, END)
    assert sum(expected["3600 eu"]["runs"]) == len(spread) // 2 + 2
    with sessions() as session:
        hour20 = session.scalar(
            select(RollupRow.runs).where(
                RollupRow.period_s == 3600,
                RollupRow.vantage == "eu",
                RollupRow.period_start == T0 + timedelta(hours=20),
            )
        )
    assert hour20 == sum(1 for r in spread + later if r.vantage == "eu" and r.started_at.hour == 20)
    with write_transaction(sessions) as session:  # every coarse row gone: reads merge
        session.execute(delete(RollupRow).where(RollupRow.period_s.in_(COARSE)))
    assert _reads(sessions, END) == expected


def test_catch_up_builds_the_closed_periods_of_the_runs_it_adds(
    sessions: sessionmaker[Session],
) -> None:
    records = _runs(T0, 30, timedelta(minutes=5), seed=4)
    with write_transaction(sessions) as session:
        for record in records:
            store_run(session, record, END)
    assert catch_up(sessions, T0, T0 + timedelta(hours=1, minutes=50)) == len(records)
    with sessions() as session:
        built = session.execute(
            select(RollupRow.period_s, RollupRow.period_start, RollupRow.runs).where(
                RollupRow.period_s.in_(COARSE), RollupRow.vantage == "eu"
            )
        ).all()
    quarters = [(900, T0 + i * timedelta(minutes=15), 3) for i in range(7)]
    # the closed periods; the open ones (1:45, 1:00, the 6 hours, the day) left to the fold
    assert sorted(built) == [*quarters, (3600, T0, 12)]


@pytest.mark.parametrize(
    ("last", "now", "due"),
    [
        (None, T0, True),
        (T0, T0 + timedelta(minutes=14), False),
        (T0 + timedelta(minutes=14), T0 + timedelta(minutes=15), True),
        (T0 + timedelta(minutes=5), T0 + timedelta(minutes=20), True),
    ],
)
def test_a_fold_is_due_when_a_quarter_hour_has_closed(
    last: datetime | None, now: datetime, due: bool
) -> None:
    assert fold_due(last, now) is due


def test_the_prune_folds_what_it_deletes_first_so_a_missed_fold_loses_nothing(
    engine: Engine, sessions: sessionmaker[Session], spread: list[RunRecord]
) -> None:
    """No fold ever ran (a stop longer than the lookback): the prune of the fine rows, a
    month on, builds their closed periods' coarse rows before deleting them."""
    hourly = {key: value for key, value in _reads(sessions, END).items() if key[0] != "9"}
    later = END + FINE_ROLLUPS_KEPT + timedelta(days=2)
    assert _coarse_rows(sessions) == 0
    assert fold_before_prune(sessions, later) > 0
    assert prune_fine_rollups(engine, later) > 0
    with sessions() as session:
        fine = select(func.count()).where(RollupRow.period_s.in_(FINE_PERIODS))
        assert session.scalar(fine.select_from(RollupRow)) == 0
    after = {key: value for key, value in _reads(sessions, END).items() if key[0] != "9"}
    assert after == hourly


def _fine_rows(sessions: sessionmaker[Session]) -> list[tuple[float | None, dict[str, Any]]]:
    with sessions() as session:
        query = select(RollupRow.total_p50, RollupRow.digest).where(RollupRow.period_s == 300)
        return [(p50, digest) for p50, digest in session.execute(query)]


def test_fine_rows_counted_open_read_the_same_before_and_after_their_quantiles_are_written(
    sessions: sessionmaker[Session], spread: list[RunRecord]
) -> None:
    hours = (T0, T0 + timedelta(hours=6))

    def fine_reads() -> dict[str | None, Any]:
        with sessions() as session:
            return {
                v: time_series(session, "chat", *hours, v, bucket_seconds=300, now=END).to_json()
                for v in (None, "eu", "us")
            }

    before = fine_reads()  # every row's quantiles found from its sketches
    rows = _fine_rows(sessions)
    assert rows and all(p50 is None and "summary" not in doc for p50, doc in rows)
    with write_transaction(sessions) as session:
        assert summarize_closed(session, T0, END) == len(rows)
    assert all(p50 is not None and "summary" in doc for p50, doc in _fine_rows(sessions))
    assert fine_reads() == before
    assert sum(p50 is not None for p50 in before[None]["total"]["p50"]) > 40  # a run every 7 min
    with write_transaction(sessions) as session:
        assert summarize_closed(session, T0, END) == 0  # written once


def test_a_fold_writes_the_quantiles_of_the_fine_rows_closed_since_the_last(
    sessions: sessionmaker[Session], spread: list[RunRecord]
) -> None:
    cut = T0 + timedelta(hours=2)
    fold_closed(sessions, T0, cut)
    written = [(p50 is not None, "summary" in doc) for p50, doc in _fine_rows(sessions)]
    assert (True, True) in written and (False, False) in written  # those before cut alone
    fold_closed(sessions, cut, END)
    assert all(p50 is not None for p50, _ in _fine_rows(sessions))


def _waiting_on_a_lock(engine: Engine, others_than: int) -> bool:
    with engine.connect() as connection:
        query = text(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND wait_event_type = 'Lock' AND pid <> :me"
        )
        return bool(connection.scalar(query, {"me": others_than}))


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_a_fold_never_waits_on_a_late_run_s_merge_holding_the_coarse_lock(
    sessions: sessionmaker[Session], spread: list[RunRecord]
) -> None:
    # A late run's catch-up locks its fine rows, then the coarse writers' lock; a fold that
    # locked those rows under that lock would wait on it while it waits on the fold.
    engine: Engine = sessions.kw["bind"]
    late = sessions()
    late.execute(
        select(RollupRow.n).where(RollupRow.period_s == 300).with_for_update()
    ).all()  # every fine row locked, as a catch-up merging into them holds them
    me = late.scalar(text("SELECT pg_backend_pid()"))
    errors: list[BaseException] = []

    def folding() -> None:
        try:
            fold_closed(sessions, T0, END)
        except BaseException as error:  # noqa: BLE001 - the test reads it
            errors.append(error)

    fold = threading.Thread(target=folding)
    fold.start()
    while fold.is_alive() and not _waiting_on_a_lock(engine, me):
        time.sleep(0.01)  # until the fold waits for the rows (or is done)
    coarse.serialized(late)  # the merge's next step: the coarse writers' lock
    late.commit()
    fold.join(timeout=60)
    assert not fold.is_alive() and errors == []
    assert all(p50 is not None for p50, _ in _fine_rows(sessions))
