"""``serve`` starts while PostgreSQL is down: it has no leader lock, so it probes nothing
(another replica may lead through the outage) and says so; once the database is back it
migrates it (or, with ``--no-migrate``, waits until somebody has), takes the lead and
stores its runs — those spooled while the schema was missing too, once.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy.exc import ProgrammingError

from app.demo.sim.server import SimServer
from app.runtime.health import WAITING_FOR_ELECTION
from tests.faults.support import Run, problems, quick_health, stop, stored, targets_file
from tests.helpers import eventually
from tests.pgcluster import PgCluster, Serve

pytestmark = [pytest.mark.process, pytest.mark.postgres]

SAMPLES = 2


def waiting_while_down(
    tmp_path: Path, cluster: PgCluster, sim: SimServer, serve: Callable[..., Serve], *args: str
) -> Serve:
    cluster.stop()  # a new cluster, never migrated, and down
    config = targets_file(tmp_path, sim, "api", interval="1s", samples=str(SAMPLES))
    env = {"PHASEWATCH_DATABASE_URL": cluster.url, "PHASEWATCH_LEADER_CHECK_S": "1"}
    served = serve("serve", config, args=args, **env)
    served.wait_ready()
    health = quick_health(served)
    assert (health["database"], health["status"], health["leader"]) == (
        "unreachable", "degraded", False
    )  # fmt: skip
    assert WAITING_FOR_ELECTION in problems(served)
    assert f"{WAITING_FOR_ELECTION}; 1 target(s)" in served.output()
    assert not served.spooled_ids()  # probing nothing while it cannot know who leads
    return served


def stored_once_migrated(url: str) -> list[Run]:
    try:
        return stored(url)
    except ProgrammingError:  # the tables are not there yet
        return []


def all_arrived(served: Serve, url: str, spooled: list[str]) -> None:
    """``spooled``: read before the database could take them (a flush may beat a later read)."""
    assert spooled
    eventually(lambda: not served.spooled_ids(), 30, "the spool flushed")
    runs = stored(url)
    ids = [run.id for run in runs]
    assert len(ids) == len(set(ids)) and set(spooled) <= set(ids)
    assert {(run.status, run.samples) for run in runs if run.id in spooled} == {
        ("complete", SAMPLES)
    }
    assert not (served.spool_dir / "rejected.jsonl").exists()


def test_serve_starts_while_postgres_is_down_then_migrates_leads_and_stores(
    tmp_path: Path, cluster: PgCluster, sim: SimServer, serve: Callable[..., Serve]
) -> None:
    served = waiting_while_down(tmp_path, cluster, sim, serve)
    cluster.start()
    eventually(lambda: len(stored_once_migrated(cluster.url)) >= 2, 30, "runs stored once it leads")
    assert "migrating the database" in served.output()
    assert "took the lead" in served.output()
    runs = stored(cluster.url)
    assert {(run.status, run.samples) for run in runs[:-1]} == {("complete", SAMPLES)}
    health = quick_health(served)
    assert (health["status"], health["leader"]) == ("ok", True), health
    assert stop(served) == 0


def test_no_migrate_waits_for_the_schema_then_flushes(
    tmp_path: Path, cluster: PgCluster, sim: SimServer, serve: Callable[..., Serve]
) -> None:
    served = waiting_while_down(tmp_path, cluster, sim, serve, "--no-migrate")
    cluster.start()
    eventually(
        lambda: quick_health(served)["database"] == "waiting for the schema", 15, "schema wait"
    )
    # Elected (the lock needs no schema), it probes into the spool until the schema is there.
    eventually(lambda: len(served.spooled_ids()) >= 2, 15, "probing into the spool")

    spooled = served.spooled_ids()
    upgrade = [sys.executable, "-m", "app", "db", "upgrade", "--database-url", cluster.url]
    subprocess.run(upgrade, check=True, timeout=60, env=os.environ, capture_output=True)
    all_arrived(served, cluster.url, spooled)
    assert "migrating the database" not in served.output()
    assert stop(served) == 0
