"""Three ``serve`` replicas on one PostgreSQL share the targets: every slot of every target
is probed, none twice; a replica killed with ``kill -9`` has its targets taken over by the
others from the end of its lease, and its slots since stored.

The lease is short here (``LEASE_S``, renewed every third of it) so the takeover fits in a
test; each assertion is about what was stored and who owned what, not about how long
anything took (those numbers are bench/fleet.py's).
"""

from __future__ import annotations

import math
import signal
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from sqlalchemy import pool, select

from app.demo.sim.server import SimServer
from app.replicas.assign import owner
from app.runs.slots import epoch_ms
from app.store.db import make_engine, make_sessions
from app.store.models import RunRow, TargetRow
from tests.faults.support import stop
from tests.helpers import eventually
from tests.pgcluster import READY_S, Serve

pytestmark = [pytest.mark.process, pytest.mark.postgres, pytest.mark.timeout(400)]

TARGETS = [f"shared-{k:02d}" for k in range(9)]
INTERVAL_S = 4.0
# A dead replica's targets are taken over within this: 1.5 intervals. Renewed every 2 s:
# a replica starved longer than the lease (a machine loaded far past its cores) would be
# taken for dead while it still probes, and a slot probed twice.
LEASE_S = 6.0
INTERVAL_MS = round(INTERVAL_S * 1000)
WATCHED_SLOTS = 4  # of each target while the three share them


def fleet_file(
    tmp_path: Path, sim: SimServer, targets: list[str] = TARGETS, samples: int = 1
) -> Path:
    entries = "".join(
        f"  - {{name: {name}, url: '{sim.url}/health', interval: {INTERVAL_S}s,"
        f" samples: {samples}}}\n"
        for name in targets
    )
    path = tmp_path / "phasewatch.yaml"
    path.write_text(f"targets:\n{entries}")
    return path


def replica_env(url: str) -> dict[str, str]:
    return {
        "PHASEWATCH_DATABASE_URL": url,
        "PHASEWATCH_VANTAGE": "replicated",
        "PHASEWATCH_REPLICA_LEASE_S": str(LEASE_S),
        "PHASEWATCH_LEADER_CHECK_S": "1",
    }


def share(replica: Serve) -> dict[str, object]:
    health = replica.health(timeout_s=10)
    assert health is not None, replica.output()
    found = health["replica"]
    assert isinstance(found, dict)
    return found


def sharing(
    serve: Callable[..., Serve], config: Path, url: str, targets: list[str], ready_s: float
) -> list[Serve]:
    """Three replicas started on ``config``, once each reads three live leases and their
    shares add up to ``targets``."""
    replicas = [serve(name, config, **replica_env(url)) for name in "abc"]
    for replica in replicas:
        replica.wait_ready(ready_s)

    eventually(lambda: all_share(replicas, len(targets)), 60, "three replicas sharing the targets")
    return replicas


def all_share(replicas: list[Serve], targets: int) -> bool:
    """Each of ``replicas`` reads every one of them live, and their shares add up to
    ``targets``."""
    shares = [share(replica) for replica in replicas]
    live = all(s["live"] == len(replicas) for s in shares)
    return live and sum(int(str(s["targets"])) for s in shares) == targets


def slots_stored(url: str) -> dict[str, list[int]]:
    """Each target's stored slots, in order (the unique index keeps one run a slot)."""
    engine = make_engine(url, poolclass=pool.NullPool)
    try:
        with make_sessions(engine)() as session:
            rows = session.execute(
                select(TargetRow.name, RunRow.slot).join(TargetRow).order_by(RunRow.slot)
            )
            found: dict[str, list[int]] = {name: [] for name in TARGETS}
            for name, slot in rows:
                found[name].append(slot)
            return found
    finally:
        engine.dispose()


def duplicates(replica: Serve) -> float:
    """Runs this replica probed whose slot another had stored: a slot probed twice."""
    text = httpx.get(f"{replica.base_url}/metrics", timeout=10).text
    prefix = "phasewatch_runs_duplicate_slot_total{"
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(prefix))


def metric(replica: Serve, name: str) -> float:
    text = httpx.get(f"{replica.base_url}/metrics", timeout=10).text
    (value,) = [line.split()[-1] for line in text.splitlines() if line.startswith(f"{name} ")]
    return float(value)


def after(slots: list[int], since_ms: int) -> list[int]:
    return [slot for slot in slots if slot >= since_ms]


def assert_every_slot_once(slots: list[int], since_ms: int, until_ms: int) -> None:
    """Each slot of the grid between the two times stored (the list holds no repeats)."""
    between = [slot for slot in slots if since_ms <= slot < until_ms]
    expected = math.floor((until_ms - since_ms) / INTERVAL_MS)
    assert len(between) >= expected, (between, since_ms, until_ms)
    assert all(b - a == INTERVAL_MS for a, b in zip(between, between[1:], strict=False)), between


def test_three_replicas_share_the_targets_and_a_killed_ones_move_to_the_others(
    tmp_path: Path, postgres_url: str, sim: SimServer, serve: Callable[..., Serve]
) -> None:
    replicas = sharing(serve, fleet_file(tmp_path, sim), postgres_url, TARGETS, READY_S)
    ids = {str(share(r)["id"]): r for r in replicas}
    owners = {target: owner(target, list(ids)) for target in TARGETS}
    for replica_id, replica in ids.items():
        mine = sum(1 for o in owners.values() if o == replica_id)
        assert share(replica)["targets"] == mine  # each says the share the leases give it

    # Every slot of every target stored while they share, none probed twice.
    since = epoch_ms(datetime.now(UTC))
    until = since + WATCHED_SLOTS * INTERVAL_MS

    def watched() -> dict[str, list[int]] | None:
        stored = slots_stored(postgres_url)
        done = all(after(slots, until) for slots in stored.values())
        return stored if done else None

    stored = eventually(watched, 60, f"{WATCHED_SLOTS} slots of each target")
    for slots in stored.values():
        assert_every_slot_once(slots, since, until)
    assert [duplicates(replica) for replica in replicas] == [0, 0, 0]
    assert all(metric(r, "phasewatch_replica_slots_passed_total") > 0 for r in replicas)

    # kill -9 the replica owning the most targets: the others take them over.
    victim_id = max(ids, key=lambda i: sum(1 for o in owners.values() if o == i))
    victim = ids.pop(victim_id)
    theirs = [target for target, o in owners.items() if o == victim_id]
    assert theirs
    killed = epoch_ms(datetime.now(UTC))
    victim.process.send_signal(signal.SIGKILL)
    victim.process.wait(timeout=10)
    survivors = list(ids.values())

    eventually(lambda: all_share(survivors, len(TARGETS)), 60, "the survivors owning every target")
    taken_at = epoch_ms(datetime.now(UTC))
    later = taken_at + WATCHED_SLOTS * INTERVAL_MS

    def stored_after_takeover() -> dict[str, list[int]] | None:
        stored = slots_stored(postgres_url)
        return stored if all(after(stored[t], later) for t in theirs) else None

    stored = eventually(stored_after_takeover, 60, "the victim's targets probed again")
    lease_ms = round(LEASE_S * 1000)
    for target in theirs:
        slots = stored[target]
        # Lost: at most the slots of one lease after the kill (and the one in flight).
        assert_every_slot_once(slots, killed + lease_ms + INTERVAL_MS, later)
        before_kill = [slot for slot in slots if slot < killed]
        lost = (after(slots, killed)[0] - before_kill[-1]) // INTERVAL_MS - 1
        assert lost <= math.ceil(LEASE_S / INTERVAL_S) + 1, (target, slots, killed)
    assert [duplicates(replica) for replica in survivors] == [0, 0]
    assert [stop(replica) for replica in survivors] == [0, 0]
