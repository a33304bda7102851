"""Each replica keeps the rollups of the targets it owns (``Upkeep.keep_rollups``, a pass of
the rollup loop), on SQLite and PostgreSQL: two upkeeps on one database, as two replicas,
each catch up only their own targets' runs, from the samples they hold; a target taken
over is caught up by its new owner, its pending runs too however old; and the rows are
those of a rebuild from scratch, no run counted twice nor left out."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime, timedelta

import numpy as np
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session, sessionmaker

from app.runs.dbsink import DatabaseSink
from app.runtime.upkeep import ROLLUP_LOOKBACK, Upkeep
from app.store.models import RunDigestRow, TargetRow
from app.store.records import RunRecord
from app.store.rollups.catchup import LOOP
from app.store.rollups.inhand import InHand
from tests.rolluprows import rebuilt, rollup_rows
from tests.runfactory import T0, make_run, record_of

FIRST = T0 + timedelta(hours=2)  # the first pass: the first runs' early periods closed
STORED = T0 + timedelta(hours=4)  # the sinks' clock: after every run
LATER = T0 + timedelta(days=3)  # the takeover: the pending runs older than ROLLUP_LOOKBACK


def _runs(start: datetime, count: int, targets: Iterable[str], seed: int) -> list[RunRecord]:
    rng = np.random.default_rng(seed)
    every = timedelta(minutes=7)
    return [
        record_of(make_run(rng, start + i * every, target=target, vantage="eu"))
        for i in range(count)
        for target in targets
    ]


class Replica:
    """A replica's part in this: its sink (what it stores, it holds) and its upkeep, owning
    the targets of ``owns`` as it says at each pass."""

    def __init__(
        self, sessions: sessionmaker[Session], engine: Engine, owns: Callable[[], set[str]]
    ) -> None:
        self.hand = InHand(wanted=lambda target: target in owns())
        self.sink = DatabaseSink(sessions, clock=lambda: STORED, writing=self.hand.keep)
        self.upkeep = Upkeep(
            sessions,
            engine,
            raw_retention_days=30,
            in_hand=self.hand,
            owned=lambda names: [name for name in names if name in owns()],
        )

    def store(self, records: list[RunRecord]) -> None:
        assert self.sink.store_batch(records) == [True] * len(records)

    def keep(self, now: datetime) -> int:
        return self.upkeep.keep_rollups(now, self.upkeep.quarantine.loop(LOOP))


def _ids(sessions: sessionmaker[Session]) -> dict[str, int]:
    with sessions() as session:
        return {name: id_ for id_, name in session.execute(select(TargetRow.id, TargetRow.name))}


def _digested(sessions: sessionmaker[Session]) -> dict[int, int]:
    """Run digests by target id."""
    with sessions() as session:
        query = select(RunDigestRow.target_id, func.count()).group_by(RunDigestRow.target_id)
        return {int(target): int(count) for target, count in session.execute(query)}


def test_each_replica_keeps_its_own_targets_rollups_and_takes_over_a_dead_ones(
    sessions: sessionmaker[Session], engine: Engine
) -> None:
    shares = {"x": {"a", "b"}, "y": {"c"}}
    x = Replica(sessions, engine, lambda: shares["x"])
    y = Replica(sessions, engine, lambda: shares["y"])
    x.store(_runs(T0, 12, ("a", "b"), seed=1))
    y.store(_runs(T0, 12, ("c",), seed=2))
    ids = _ids(sessions)

    assert x.keep(FIRST) == 24
    assert _digested(sessions) == {ids["a"]: 12, ids["b"]: 12}  # not c's: y's
    assert y.keep(FIRST) == 12
    assert (x.hand.hits, x.hand.misses, y.hand.hits, y.hand.misses) == (24, 0, 12, 0)

    # y stores more of c's runs and dies before its next pass: x owns c now. Its pass
    # comes three days later (ROLLUP_LOOKBACK back would miss them): c is new to it.
    y.store(_runs(FIRST, 5, ("c",), seed=3))
    shares["x"] = {"a", "b", "c"}
    assert LATER - ROLLUP_LOOKBACK > FIRST
    assert x.keep(LATER) == 5
    assert _digested(sessions) == {ids["a"]: 12, ids["b"]: 12, ids["c"]: 17}
    assert (x.hand.hits, x.hand.misses) == (24, 5)  # the dead one's runs read back
    assert x.keep(LATER) == 0

    shared = rollup_rows(sessions)
    assert rebuilt(sessions, T0 - timedelta(days=1), LATER, LATER) == shared


def test_a_replica_keeps_in_hand_only_the_runs_of_its_targets(
    sessions: sessionmaker[Session], engine: Engine
) -> None:
    x = Replica(sessions, engine, lambda: {"a"})
    x.store(_runs(T0, 4, ("a", "b"), seed=4))  # b's: an agent's push taken here
    assert len(x.hand) == 4
    assert x.keep(FIRST) == 4  # a's only: b's owner counts b's
    assert (x.hand.hits, x.hand.misses) == (4, 0)


def test_a_replica_that_owns_nothing_yet_touches_no_rollup(
    sessions: sessionmaker[Session], engine: Engine
) -> None:
    x = Replica(sessions, engine, set)
    x.store(_runs(T0, 3, ("a",), seed=5))
    assert x.keep(FIRST) == 0
    assert rollup_rows(sessions) == ([], [])
    assert x.upkeep.rollups.kept == set()  # when it owns a, a is new to it: caught up in full
