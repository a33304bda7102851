"""The catch-up takes the samples of runs this process stored from ``InHand`` instead of
reading them back, on SQLite and PostgreSQL: the same digests and rollups either way."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import timedelta

import numpy as np
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.runs.dbsink import DatabaseSink
from app.store.models import RollupRow
from app.store.records import RunRecord
from app.store.rollups.catchup import catch_up
from app.store.rollups.inhand import InHand
from tests.rolluprows import rollup_rows, thrown_away
from tests.runfactory import T0, make_run, record_of

NOW = T0 + timedelta(hours=1)


def _runs(count: int, vantage: str, seed: int) -> list[RunRecord]:
    rng = np.random.default_rng(seed)
    every = timedelta(seconds=70)  # over several 5-minute periods
    return [
        record_of(make_run(rng, T0 + i * every, target="chat", vantage=vantage))
        for i in range(count)
    ]


def test_runs_in_hand_are_rolled_up_as_if_read_back_without_reading_them(
    sessions: sessionmaker[Session], sample_reads: list[str]
) -> None:
    records = _runs(9, "eu", 1) + _runs(4, "us", 2)
    aborted = replace(_runs(1, "eu", 3)[0], id=uuid.uuid4(), status="aborted")
    hand = InHand()
    sink = DatabaseSink(sessions, clock=lambda: NOW, writing=hand.keep)
    assert sink.store_batch([*records, aborted]) == [True] * (len(records) + 1)
    assert len(hand) == len(records)  # an aborted run is never rolled up: not held
    assert catch_up(sessions, T0, NOW, in_hand=hand) == len(records)
    assert sample_reads == []
    assert len(hand) == 0  # taken
    in_hand = rollup_rows(sessions)
    thrown_away(sessions)
    assert catch_up(sessions, T0, NOW) == len(records)  # read back this time
    assert sample_reads != []
    assert rollup_rows(sessions) == in_hand


def test_a_run_not_in_hand_is_read_back_beside_those_that_are(
    sessions: sessionmaker[Session], sample_reads: list[str]
) -> None:
    records = _runs(6, "eu", 4)
    hand = InHand()
    sink = DatabaseSink(sessions, clock=lambda: NOW, writing=hand.keep)
    assert sink.store_batch(records) == [True] * len(records)
    hand.take([records[2].id])  # stored by another process, or pushed out of the hand
    assert catch_up(sessions, T0, NOW, in_hand=hand) == len(records)
    assert len(sample_reads) == 1
    with sessions() as session:
        runs = session.scalars(
            select(RollupRow.runs).where(RollupRow.vantage == "*", RollupRow.period_s == 300)
        ).all()
    assert sum(runs) == len(records)


def test_a_catch_up_the_moment_a_run_commits_finds_it_in_hand(
    sessions: sessionmaker[Session], sample_reads: list[str]
) -> None:
    """The sink hands a run over before writing it: a catch-up on another thread that
    counts it as soon as it commits (before anything after the commit ran) takes it from
    the hand, not from the database."""
    record = _runs(1, "eu", 6)[0]
    hand = InHand()
    counted: list[int] = []

    def caught_up_at_commit(stored: RunRecord) -> None:
        counted.append(catch_up(sessions, T0, NOW, in_hand=hand))

    sink = DatabaseSink(sessions, clock=lambda: NOW, stored=caught_up_at_commit, writing=hand.keep)
    assert sink.store(record)
    assert counted == [1]
    assert (hand.hits, hand.misses, sample_reads) == (1, 0, [])


def test_a_run_handed_over_but_refused_is_held_until_pushed_out(
    sessions: sessionmaker[Session],
) -> None:
    """Handed over before the write, a run the database then refuses (here: its slot held by
    another run) stays in the hand, never asked for nor counted, until newer runs push it
    out (the hand is bounded)."""
    first, second, third = (
        replace(r, slot=int(r.started_at.timestamp() * 1000)) for r in _runs(3, "eu", 7)
    )
    twin = replace(second, id=uuid.uuid4(), slot=first.slot)
    hand = InHand(capacity=2)
    sink = DatabaseSink(sessions, clock=lambda: NOW, writing=hand.keep)
    assert sink.store(first) and not sink.store(twin)
    assert catch_up(sessions, T0, NOW, in_hand=hand) == 1
    assert (len(hand), hand.hits, hand.misses) == (1, 1, 0)  # the twin, unasked
    assert sink.store(second) and sink.store(third)  # the twin pushed out
    assert catch_up(sessions, T0, NOW, in_hand=hand) == 2
    assert (len(hand), hand.hits, hand.misses) == (0, 3, 0)


@pytest.mark.parametrize(("capacity", "kept"), [(3, 3), (8, 6)])
def test_the_hand_holds_the_newest_runs_up_to_its_capacity(capacity: int, kept: int) -> None:
    records = _runs(6, "eu", 5)
    hand = InHand(capacity)
    for record in records:
        hand.keep(record)
    found = hand.take(record.id for record in records)
    assert list(found) == [record.id for record in records][-kept:]
    newest = records[-1]
    assert [s.total_ms for s in found[newest.id]] == [s.total_ms for s in newest.samples]
    assert hand.take([newest.id]) == {}
