"""``serve`` replicas on one PostgreSQL keep the rollups of the targets each owns: each
catches up the runs it stored itself (their samples in hand); a replica killed with
``kill -9`` leaves runs not caught up, and the new owners of its targets catch them up; at
the end the rollups are those of a rebuild from scratch of the runs they counted, none
counted twice.

Short lease and interval as in test_replicas_share (whose helpers this uses); each
assertion is about what was stored and counted, not about how long anything took.
"""

from __future__ import annotations

import signal
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import delete, func, pool, select
from sqlalchemy.orm import Session, sessionmaker

from app.demo.sim.server import SimServer
from app.replicas.assign import owner
from app.store.db import make_engine, make_sessions
from app.store.models import RollupRow, RunDigestRow, RunRow, TargetRow
from app.store.records import RunStatus
from app.store.rollups.catchup import catch_up
from app.store.rollups.coarse import COARSE
from app.store.rollups.folds import fold_closed
from tests.faults.support import stop
from tests.faults.test_replicas_share import INTERVAL_S, fleet_file, share, sharing
from tests.helpers import eventually
from tests.pgcluster import Serve

pytestmark = [pytest.mark.process, pytest.mark.postgres, pytest.mark.timeout(600)]

TARGETS = [f"rolled-{k:02d}" for k in range(12)]
CAUGHT_UP = "phasewatch_rollup_runs_caught_up_total{"
START_S = 300.0  # three serves starting on a loaded machine (nice 19, load 30: over 90 s)


def caught_up(replica: Serve) -> dict[str, float]:
    """``phasewatch_rollup_runs_caught_up_total`` by where the samples came from."""
    text = httpx.get(f"{replica.base_url}/metrics", timeout=30).text
    return {
        line[len(CAUGHT_UP) :].split('"')[1]: float(line.split()[-1])
        for line in text.splitlines()
        if line.startswith(CAUGHT_UP)
    }


def pending(sessions: sessionmaker[Session], names: list[str], before: datetime) -> set[uuid.UUID]:
    """Complete runs of ``names`` started before ``before`` that no rollup counts yet."""
    query = (
        select(RunRow.id)
        .join(TargetRow, TargetRow.id == RunRow.target_id)
        .outerjoin(RunDigestRow, RunDigestRow.run_id == RunRow.id)
        .where(RunDigestRow.run_id.is_(None), RunRow.status == RunStatus.COMPLETE)
        .where(TargetRow.name.in_(names), RunRow.started_at < before)
    )
    with sessions() as session:
        return set(session.scalars(query))


def rows(sessions: sessionmaker[Session]) -> tuple[list[Any], dict[Any, Any]]:
    """The run digests, and the rollup rows by key."""
    key = (RollupRow.target_id, RollupRow.vantage, RollupRow.period_s, RollupRow.period_start)
    with sessions() as session:
        digests = session.execute(
            select(RunDigestRow.run_id, RunDigestRow.digest).order_by(RunDigestRow.run_id)
        ).all()
        rollups = session.execute(select(*key, RollupRow.runs, RollupRow.n, RollupRow.digest))
        return [tuple(d) for d in digests], {tuple(r[:4]): tuple(r[4:]) for r in rollups}


def assert_rollups_are_a_rebuilds(sessions: sessionmaker[Session]) -> None:
    """The rows the replicas wrote against those one pass writes from scratch, over the
    runs they counted (those stored after their last pass thrown away first)."""
    now = datetime.now(UTC)
    with sessions.begin() as session:
        session.execute(delete(RunRow).where(RunRow.id.in_(pending(sessions, TARGETS, now))))
    digests, rollups = rows(sessions)
    with sessions() as session:
        complete = session.scalar(
            select(func.count()).select_from(RunRow).where(RunRow.status == RunStatus.COMPLETE)
        )
    assert len(digests) == complete > 0  # every run counted, once
    with sessions.begin() as session:
        session.execute(delete(RollupRow))
        session.execute(delete(RunDigestRow))
    since = now - timedelta(days=1)
    assert catch_up(sessions, since, now) == len(digests)
    fold_closed(sessions, since, now)
    again, rebuilt = rows(sessions)
    assert again == digests
    fine = {key: row for key, row in rollups.items() if key[2] not in COARSE}
    assert fine == {key: row for key, row in rebuilt.items() if key[2] not in COARSE}
    # A period that closed after the replicas' last fold is built by the rebuild alone.
    assert {key: rebuilt.get(key) for key in rollups} == rollups


def test_each_replica_catches_up_its_own_targets_and_the_survivors_a_killed_ones(
    tmp_path: Path, postgres_url: str, sim: SimServer, serve: Callable[..., Serve]
) -> None:
    config = fleet_file(tmp_path, sim, TARGETS, samples=2)
    replicas = sharing(serve, config, postgres_url, TARGETS, START_S)
    shared_at = datetime.now(UTC) + timedelta(seconds=INTERVAL_S)
    engine = make_engine(postgres_url, poolclass=pool.NullPool)
    sessions = make_sessions(engine)
    try:
        # Runs of before the shares held may be caught up by whoever owns them now.
        eventually(lambda: not pending(sessions, TARGETS, shared_at), 60, "the first runs")
        before = [caught_up(replica) for replica in replicas]
        # The owners' ids are random: a replica may own nothing (rarely, with 12 targets).
        owning = [int(str(share(replica)["targets"])) > 0 for replica in replicas]
        assert sum(owning) >= 2

        def grown() -> list[dict[str, float]] | None:
            now = [caught_up(replica) for replica in replicas]
            more = all(
                n["in_hand"] >= b["in_hand"] + 3
                for n, b, owns in zip(now, before, owning, strict=True)
                if owns
            )
            return now if more else None

        # Every replica owning targets catches up runs from its own hand (when the leader
        # kept the fleet's rollups, the others caught up none). A few are read back even so:
        # a catch-up may find a run committed before its sink handed it over (seen at load
        # 35: 3-9 a replica in a minute); that each touches only its own targets is shown
        # by tests/runtime/test_upkeep_rollups.py.
        eventually(grown, 90, "every replica catching up runs it stored")

        ids = {str(share(r)["id"]): r for r in replicas}
        owners = {target: owner(target, list(ids)) for target in TARGETS}
        victim_id = max(ids, key=lambda i: sum(1 for o in owners.values() if o == i))
        theirs = [target for target, o in owners.items() if o == victim_id]
        victim = ids.pop(victim_id)
        survivors = list(ids.values())
        read = sum(caught_up(replica)["read"] for replica in survivors)
        far = datetime.now(UTC) + timedelta(days=1)
        eventually(lambda: pending(sessions, theirs, far), 60, "a run the victim left pending")
        victim.process.send_signal(signal.SIGKILL)
        victim.process.wait(timeout=10)
        left = pending(sessions, theirs, far)
        assert left  # stored by the victim, counted by nobody yet

        eventually(lambda: not left & pending(sessions, theirs, far), 90, "the survivors'")
        assert sum(caught_up(replica)["read"] for replica in survivors) >= read + len(left)
        assert [stop(replica) for replica in survivors] == [0, 0]
        assert_rollups_are_a_rebuilds(sessions)
    finally:
        engine.dispose()
