"""The rollups kept a share of the targets at a time (each replica its own:
app.replicas.rollups), on SQLite and PostgreSQL: a catch-up or a fold of some targets
touches no other's rows, and the shares together give the rows of one pass over all."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.runs.dbsink import DatabaseSink
from app.store.models import RollupRow, TargetRow
from app.store.records import RunRecord
from app.store.rollups.catchup import catch_up
from app.store.rollups.coarse import COARSE
from app.store.rollups.folds import fold_closed
from tests.rolluprows import rebuilt, rollup_rows
from tests.runfactory import T0, make_run, record_of

NOW = T0 + timedelta(hours=3)  # the first two hours' periods closed
OPEN = T0  # a catch-up then: every run's periods still open, left to the fold
TARGETS = ("a", "b", "c")


def _runs(start: datetime, count: int, seed: int) -> list[RunRecord]:
    rng = np.random.default_rng(seed)
    every = timedelta(minutes=7)  # over several 5- and 15-minute periods
    return [
        record_of(make_run(rng, start + i * every, target=target, vantage=vantage))
        for i in range(count)
        for target in TARGETS
        for vantage in ("eu", "us")
    ]


def _stored(sessions: sessionmaker[Session], records: Iterable[RunRecord]) -> dict[str, int]:
    sink = DatabaseSink(sessions, clock=lambda: NOW)
    batch = list(records)
    assert sink.store_batch(batch) == [True] * len(batch)
    with sessions() as session:
        return {name: id_ for id_, name in session.execute(select(TargetRow.id, TargetRow.name))}


def _targets_of(rows: list[Any]) -> set[int]:
    return {row[1] for row in rows}


def test_each_share_caught_up_and_folded_apart_gives_the_rows_of_one_pass_over_all(
    sessions: sessionmaker[Session],
) -> None:
    records = _runs(T0, 16, seed=1)
    ids = _stored(sessions, records)
    mine = {ids["a"], ids["c"]}
    assert catch_up(sessions, T0, OPEN, targets=mine) == len(records) * 2 // 3
    digests, rollups = rollup_rows(sessions)
    assert _targets_of(digests) == mine
    assert {row[0] for row in rollups} == mine  # no other target's rows, coarse ones neither
    assert fold_closed(sessions, T0, NOW, targets=mine) > 0
    assert {row[0] for row in rollup_rows(sessions)[1]} == mine
    theirs = {ids["b"]}
    assert catch_up(sessions, T0, OPEN, targets=theirs) == len(records) // 3
    assert fold_closed(sessions, T0, NOW, targets=theirs) > 0
    assert catch_up(sessions, T0, NOW) == 0  # nothing left, nothing counted twice
    apart = rollup_rows(sessions)
    assert any(row[2] in COARSE for row in apart[1])
    assert rebuilt(sessions, T0 - timedelta(days=1), OPEN, NOW) == apart


def test_a_late_run_of_a_closed_period_folds_its_own_targets_periods_only(
    sessions: sessionmaker[Session],
) -> None:
    ids = _stored(sessions, _runs(T0, 16, seed=2))
    # Every run is late: its periods closed, no coarse row yet; the catch-up folds them.
    assert catch_up(sessions, T0, NOW, targets={ids["b"]}) > 0
    with sessions() as session:
        coarse = session.scalars(select(RollupRow.target_id).where(RollupRow.period_s == 900))
        assert set(coarse) == {ids["b"]}


def test_runs_started_before_a_time_are_caught_up_and_no_later_one(
    sessions: sessionmaker[Session],
) -> None:
    records = _runs(T0, 10, seed=3)
    _stored(sessions, records)
    cut = T0 + timedelta(minutes=30)
    early = [r for r in records if r.started_at < cut]
    assert 0 < len(early) < len(records)
    assert catch_up(sessions, T0 - timedelta(days=1), NOW, before=cut) == len(early)
    assert {row[0] for row in rollup_rows(sessions)[0]} == {r.id for r in early}


def test_an_empty_share_touches_nothing(sessions: sessionmaker[Session]) -> None:
    _stored(sessions, _runs(T0, 4, seed=4))
    assert catch_up(sessions, T0, NOW, targets=set()) == 0
    assert fold_closed(sessions, T0, NOW, targets=set()) == 0
    assert rollup_rows(sessions) == ([], [])
