"""A lone ``serve`` replica killed with ``kill -9`` and started again on the same host
probes every target from its first slot on: it ends its dead predecessor's lease as it
joins (``app.replicas.membership.predecessor_dead``) instead of waiting for that lease to
run out and then two renewals more, slots lost all the while.

The lease is long here (``LEASE_S``: ten intervals) so that waiting for it would lose
slots the assertions see; they are about what was stored and the leases' rows, not about
how long anything took.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import pytest
from sqlalchemy import pool, select

from app.demo.sim.server import SimServer
from app.runs.slots import epoch_ms
from app.store.db import make_engine, make_sessions
from app.store.replicarows import ReplicaRow
from tests.faults.support import stop
from tests.faults.test_replicas_share import (
    INTERVAL_MS,
    TARGETS,
    WATCHED_SLOTS,
    after,
    assert_every_slot_once,
    duplicates,
    fleet_file,
    share,
    slots_stored,
)
from tests.helpers import eventually
from tests.pgcluster import Serve

pytestmark = [pytest.mark.process, pytest.mark.postgres, pytest.mark.timeout(300)]

LEASE_S = 40.0


def leases(url: str) -> dict[str, ReplicaRow]:
    engine = make_engine(url, poolclass=pool.NullPool)
    try:
        with make_sessions(engine)() as session:
            rows = session.scalars(select(ReplicaRow)).all()
            session.expunge_all()
            return {row.id: row for row in rows}
    finally:
        engine.dispose()


def alone(replica: Serve) -> bool:
    found = share(replica)
    return found["live"] == 1 and found["targets"] == len(TARGETS)


def test_a_lone_replica_restarted_after_kill_9_probes_from_its_first_slot(
    tmp_path: Path, postgres_url: str, sim: SimServer, serve: Callable[..., Serve]
) -> None:
    config = fleet_file(tmp_path, sim)
    env = {
        "PHASEWATCH_DATABASE_URL": postgres_url,
        "PHASEWATCH_VANTAGE": "replicated",
        "PHASEWATCH_REPLICA_LEASE_S": str(LEASE_S),
    }
    first = serve("first", config, **env)
    first.wait_ready()
    eventually(lambda: alone(first), 60, "the first replica owning every target")
    eventually(lambda: all(slots_stored(postgres_url).values()), 60, "a run of each target")
    (crashed,) = leases(postgres_url)
    first.process.send_signal(signal.SIGKILL)
    first.process.wait(timeout=10)

    again = serve("again", config, **env)
    again.wait_ready()
    eventually(lambda: alone(again), 60, "the restarted replica owning every target")
    rows = leases(postgres_url)
    (mine,) = [row for lease_id, row in rows.items() if lease_id != crashed]
    ended = rows[crashed]
    assert ended.expires_at == ended.renewed_at <= mine.joined_at  # given up, as if stopped
    assert mine.effective_at == mine.joined_at  # alone: it counts at once

    # Every slot of every target from the restarted one's first on, none probed twice.
    since = epoch_ms(mine.joined_at) + INTERVAL_MS
    until = since + WATCHED_SLOTS * INTERVAL_MS

    def watched() -> dict[str, list[int]] | None:
        stored = slots_stored(postgres_url)
        return stored if all(after(slots, until) for slots in stored.values()) else None

    stored = eventually(watched, 60, f"{WATCHED_SLOTS} slots of each target")
    for slots in stored.values():
        assert_every_slot_once(slots, since, until)
    assert duplicates(again) == 0
    assert stop(again) == 0
    assert isinstance(mine.joined_at, datetime)
