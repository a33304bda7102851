"""The catch-up digests the samples of runs this process stored from memory
(``app.store.rollups.inhand``): the same digests and rollups as from the rows read back,
without reading them."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import numpy as np
from sqlalchemy import delete, select
from sqlalchemy.orm import Session, sessionmaker

from app.runs.dbsink import DatabaseSink
from app.store.models import RollupRow, RunDigestRow, SampleRow
from app.store.records import RunRecord, RunStatus
from app.store.rollups.catchup import catch_up
from app.store.rollups.inhand import SamplesInHand
from tests.runfactory import T0, make_run, record_of

NOW = T0 + timedelta(days=1)
SINCE = T0 - timedelta(days=1)


def _records() -> list[RunRecord]:
    rng = np.random.default_rng(5)
    return [
        record_of(make_run(rng, T0 + timedelta(minutes=7 * i), target=name, n=6, failed=i % 2))
        for i in range(5)
        for name in ("a", "b")
    ]


def _documents(sessions: sessionmaker[Session]) -> tuple[dict[Any, Any], dict[Any, Any]]:
    with sessions() as session:
        digests = {row.run_id: row.digest for row in session.scalars(select(RunDigestRow))}
        rollups = {
            (r.target_id, r.vantage, r.period_s, r.period_start): (r.runs, r.n, r.digest)
            for r in session.scalars(select(RollupRow))
        }
    return digests, rollups


def _forget_rollups(sessions: sessionmaker[Session]) -> None:
    with sessions.begin() as session:
        session.execute(delete(RollupRow))
        session.execute(delete(RunDigestRow))


def test_runs_in_hand_are_digested_as_read_back_ones_without_their_rows(
    sessions: sessionmaker[Session],
) -> None:
    records = _records()
    hand = SamplesInHand()
    sink = DatabaseSink(sessions, clock=lambda: NOW, stored=hand.keep)
    assert sink.store_batch(records) == [True] * len(records)
    assert hand.count() == len(records)

    assert catch_up(sessions, SINCE, NOW, batch=4) == len(records)  # read back
    read_back = _documents(sessions)
    assert set(read_back[0]) == {record.id for record in records}

    _forget_rollups(sessions)
    with sessions.begin() as session:  # read back, these runs would now be passed over
        session.execute(delete(SampleRow))
    assert catch_up(sessions, SINCE, NOW, batch=4, in_hand=hand.take) == len(records)
    assert _documents(sessions) == read_back
    assert hand.count() == 0  # each taken once


def test_only_complete_runs_are_kept_and_the_oldest_go_first() -> None:
    records = _records()
    hand = SamplesInHand(most=3)
    aborted = replace(records[0], status=RunStatus.ABORTED)
    hand.keep(aborted)
    assert hand.count() == 0

    for record in records[1:6]:
        hand.keep(record)
    assert hand.count() == 3
    assert [hand.take(r.id) is not None for r in records[1:6]] == [False, False, True, True, True]
    assert hand.take(records[5].id) is None  # taken already
