"""Replicas of ``serve`` started while their PostgreSQL is down never both probe a slot: a
process that has not read the leases (nor holds the lead) owns nothing, so it probes
nothing and says so; once the database is back they share the targets, one run per slot.
A replica that had its share before the outage keeps probing it into its spool through it
(all of them, alone), and a replica started during the outage takes its part only once
the database has its lease, at a slot both agree on (``app.replicas``).
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

pytestmark = [pytest.mark.process, pytest.mark.postgres, pytest.mark.timeout(300)]

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
        "PHASEWATCH_REPLICA_LEASE_S": "6",
    }


def sharing(pair: list[Serve]) -> bool:
    """Both live, as each reads the leases, and every target owned by one of them."""
    shares = [quick_health(replica)["replica"] for replica in pair]
    assert all(isinstance(share, dict) for share in shares)
    live = [share["live"] for share in shares if isinstance(share, dict)]
    owned = [int(share["targets"]) for share in shares if isinstance(share, dict)]
    return live == [2, 2] and sum(owned) == len(TARGETS)


def duplicates(replica: Serve) -> float:
    """``phasewatch_runs_duplicate_slot_total`` over every series: the runs it turned away."""
    text = httpx.get(f"{replica.base_url}/metrics", timeout=10).text
    prefix = "phasewatch_runs_duplicate_slot_total{"
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(prefix))


def assert_waiting(replica: Serve) -> None:
    health = quick_health(replica)
    assert health["leader"] is False, health
    assert health["replica"] == {
        "id": health["replica"]["id"],  # type: ignore[index]
        "live": 0,
        "targets": 0,
        "current": False,
    }
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


def test_replicas_started_while_postgres_is_down_share_the_targets_when_it_is_back(
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
    eventually(lambda: sharing(pair), 60, "the two sharing the targets")
    assert sum(leads(replica) for replica in pair) == 1  # one keeps rollups and retention
    assert all(quick_health(replica)["status"] == "ok" for replica in pair)

    before = {name: len(runs) for name, runs in stored_runs(cluster.url).items()}
    assert_one_prober(cluster.url, before)
    assert [duplicates(replica) for replica in pair] == [0, 0]
    assert [stop(replica) for replica in pair] == [0, 0]


def test_a_replica_started_during_an_outage_takes_its_share_once_it_is_back(
    tmp_path: Path, cluster: PgCluster, sim: SimServer, serve: Callable[..., Serve]
) -> None:
    config = targets_file(tmp_path, sim)
    first = serve("first", config, **replica_env(cluster))
    first.wait_ready()
    eventually(lambda: all(runs_once_migrated(cluster.url).values()), 60, "runs stored")

    cluster.stop()
    late = serve("late", config, **replica_env(cluster))
    late.wait_ready()
    assert_waiting(late)
    # The first probes its share (every target: it was alone) on through the outage.
    eventually(lambda: len(first.spooled_ids()) >= 2, 30, "the first spools")
    share = quick_health(first)["replica"]
    assert isinstance(share, dict) and share["targets"] == len(TARGETS)
    assert "leases not read" in problems(first)

    cluster.start()
    eventually(lambda: not first.spooled_ids(), 60, "the first's spool flushed")
    pair = [first, late]
    eventually(lambda: sharing(pair), 60, "the two sharing the targets")
    eventually(lambda: not late.spooled_ids(), 30, "the late one's spool flushed")
    before = {name: len(runs) for name, runs in stored_runs(cluster.url).items()}
    assert_one_prober(cluster.url, before)
    assert [duplicates(replica) for replica in pair] == [0, 0]
    assert [stop(replica) for replica in pair] == [0, 0]
