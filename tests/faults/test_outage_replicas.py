"""Replicas of ``serve`` started while their PostgreSQL is down never both probe a slot: a
process that has not reached the database holds no lock, so it probes nothing and says so;
once the database is back exactly one of them is elected and probes, one run per slot.
A leader that had the lock before the outage is the one prober through it. Should a late
replica take the freed lock before the old leader's next check, both probe until then, and
the database keeps one run a slot (``app.runs.slots``): the other is turned away, counted.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from sqlalchemy.exc import ProgrammingError

from app.demo.sim.server import SimServer
from app.runtime.health import WAITING_FOR_ELECTION
from tests.faults.support import problems, quick_health, stop
from tests.helpers import eventually
from tests.pgcluster import PgCluster, Serve
from tests.store.test_leader import (
    INTERVAL_S,
    TARGETS,
    Run,
    assert_never_two_at_once,
    assert_one_scheduler,
    leads,
    stored_runs,
    targets_file,
)

pytestmark = [pytest.mark.process, pytest.mark.postgres]

WATCHED_RUNS = 8  # per target, after the election: a prober's worth of slots to count


# Outages tried until the late replica takes the lock first (each ~59 in 60).
OVERLAP_TRIES = 3


def runs_once_migrated(url: str) -> dict[str, list[Run]]:
    try:
        return stored_runs(url)
    except ProgrammingError:  # the tables are not there yet
        return {name: [] for name in TARGETS}


def replica_env(cluster: PgCluster, check_s: float = 1.0) -> dict[str, str]:
    return {
        "PHASEWATCH_DATABASE_URL": cluster.url,
        "PHASEWATCH_VANTAGE": "replicated",
        "PHASEWATCH_LEADER_CHECK_S": str(check_s),
    }


def duplicates(replica: Serve) -> float:
    """``phasewatch_runs_duplicate_slot_total`` over every series: the runs it turned away."""
    text = httpx.get(f"{replica.base_url}/metrics", timeout=10).text
    prefix = "phasewatch_runs_duplicate_slot_total{"
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(prefix))


def assert_waiting(replica: Serve) -> None:
    health = quick_health(replica)
    assert health["leader"] is False, health
    assert WAITING_FOR_ELECTION in problems(replica)
    assert f"{WAITING_FOR_ELECTION}; {len(TARGETS)} target(s)" in replica.output()
    assert not replica.spooled_ids()  # nothing probed while nobody knows who leads


def assert_one_prober(url: str, before: dict[str, int], settle: int = 0) -> None:
    """The runs since ``before`` (less the first ``settle``): one grid per target, one run
    per slot, one at a time — as many as one prober makes over their span, not twice."""

    def watched() -> dict[str, list[Run]] | None:
        runs = stored_runs(url)
        since = {name: runs[name][before[name] + settle :] for name in TARGETS}
        return since if all(len(r) >= WATCHED_RUNS for r in since.values()) else None

    for runs in eventually(watched, 60, f"{WATCHED_RUNS} runs of each target").values():
        assert_one_scheduler(runs)
        assert_never_two_at_once(runs)
        span_s = (runs[-1].scheduled_at - runs[0].scheduled_at).total_seconds()
        assert len(runs) <= round(span_s / INTERVAL_S) + 1, runs


def test_replicas_started_while_postgres_is_down_elect_one_prober_when_it_is_back(
    tmp_path: Path, cluster: PgCluster, sim: SimServer, serve: Callable[..., Serve]
) -> None:
    cluster.stop()
    config = targets_file(tmp_path, sim)
    pair = [serve(name, config, **replica_env(cluster)) for name in ("a", "b")]
    for replica in pair:
        replica.wait_ready()
    for replica in pair:
        assert_waiting(replica)

    cluster.start()
    eventually(lambda: all(runs_once_migrated(cluster.url).values()), 60, "runs stored")
    (leader,) = [replica for replica in pair if leads(replica)]
    (follower,) = [replica for replica in pair if replica is not leader]
    assert "took the lead" in leader.output()
    assert "another replica leads: standing by" in follower.output()
    assert "took the lead" not in follower.output() and not follower.spooled_ids()
    assert quick_health(follower)["status"] == "ok"

    before = {name: len(runs) for name, runs in stored_runs(cluster.url).items()}
    assert_one_prober(cluster.url, before)
    assert [stop(replica) for replica in pair] == [0, 0]


def test_a_replica_started_during_an_outage_leaves_the_probing_to_the_leader(
    tmp_path: Path, cluster: PgCluster, sim: SimServer, serve: Callable[..., Serve]
) -> None:
    config = targets_file(tmp_path, sim)
    leader = serve("leader", config, **replica_env(cluster))
    leader.wait_ready()
    eventually(lambda: all(runs_once_migrated(cluster.url).values()), 60, "runs stored")

    cluster.stop()
    late = serve("late", config, **replica_env(cluster))
    late.wait_ready()
    assert_waiting(late)
    # The leader probes on through the outage, into its spool.
    eventually(lambda: len(leader.spooled_ids()) >= 2, 30, "the leader spools")
    assert quick_health(leader)["leader"] is True

    cluster.start()
    eventually(lambda: not leader.spooled_ids(), 60, "the leader's spool flushed")
    # Should the late one take the freed lock first, the old leader steps down at its next
    # check; the runs of both meanwhile share their slots, and one of each is kept: the
    # window is counted like any other.
    before = {name: len(runs) for name, runs in stored_runs(cluster.url).items()}
    eventually(lambda: WAITING_FOR_ELECTION not in problems(late), 30, "the late one elected")
    pair = (leader, late)
    eventually(lambda: sum(leads(replica) for replica in pair) == 1, 30, "one leader")
    # Elected, the late one may spool its first runs until its store reaches the database.
    eventually(lambda: not late.spooled_ids(), 30, "the late one's spool flushed")

    assert_one_prober(cluster.url, before)
    assert [stop(replica) for replica in (leader, late)] == [0, 0]


def test_two_replicas_probing_one_schedule_for_a_while_store_one_run_a_slot(
    tmp_path: Path, cluster: PgCluster, sim: SimServer, serve: Callable[..., Serve]
) -> None:
    """The overlap made long: the old leader checks its lead every 30 s, a replica started
    during the outage every 0.5 s, so once the database is back the late one takes the
    freed lock and both probe every slot until the old leader's next check. One run a slot
    is stored, on one grid; the second of each is turned away, counted, not set aside."""
    config = targets_file(tmp_path, sim)
    leader = serve("leader", config, **replica_env(cluster, check_s=30))
    leader.wait_ready()
    eventually(lambda: all(runs_once_migrated(cluster.url).values()), 60, "runs stored")

    cluster.stop()
    late = serve("late", config, **replica_env(cluster, check_s=0.5))
    late.wait_ready()
    pair = (leader, late)
    for _ in range(OVERLAP_TRIES):
        eventually(lambda: len(leader.spooled_ids()) >= 2, 30, "the leader spools")
        cluster.start()
        eventually(lambda: not leader.spooled_ids(), 60, "the leader's spool flushed")
        before = {name: len(runs) for name, runs in stored_runs(cluster.url).items()}
        if all(leads(replica) for replica in pair):
            break
        # The old leader's check came first (a 0.5 s window in 30 s): no overlap this time,
        # so another outage.
        cluster.stop()
    assert all(leads(replica) for replica in pair), f"no overlap in {OVERLAP_TRIES} outages"
    turned_away = eventually(lambda: sum(map(duplicates, pair)), 30, "a slot turned away")
    assert turned_away >= 1
    eventually(lambda: sum(leads(replica) for replica in pair) == 1, 45, "one leader")

    assert_one_prober(cluster.url, before)
    for replica in pair:
        assert not (replica.spool_dir / "rejected.jsonl").exists(), replica.output()
        assert "not stored: its slot" in replica.output() or duplicates(replica) == 0
    assert [stop(replica) for replica in pair] == [0, 0]
