"""``serve`` starts while PostgreSQL is down: it probes into the spool, and once the
database is back it migrates it (or, with ``--no-migrate``, waits until somebody has) and
stores every spooled run, once.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from app.demo.sim.server import SimServer
from tests.faults.support import quick_health, stop, stored, targets_file
from tests.helpers import eventually
from tests.pgcluster import PgCluster, Serve

pytestmark = [pytest.mark.process, pytest.mark.postgres]

SAMPLES = 2


def spooling_while_down(
    tmp_path: Path, cluster: PgCluster, sim: SimServer, serve: Callable[..., Serve], *args: str
) -> Serve:
    cluster.stop()  # a new cluster, never migrated, and down
    config = targets_file(tmp_path, sim, "api", interval="1s", samples=str(SAMPLES))
    served = serve("serve", config, args=args, PHASEWATCH_DATABASE_URL=cluster.url)
    served.wait_ready()
    health = quick_health(served)
    assert (health["database"], health["status"], health["leader"]) == (
        "unreachable", "degraded", True
    )  # fmt: skip
    eventually(lambda: len(served.spooled_ids()) >= 2, 15, "runs spooled")
    return served


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


def test_serve_starts_while_postgres_is_down_then_migrates_and_flushes_when_it_is_back(
    tmp_path: Path, cluster: PgCluster, sim: SimServer, serve: Callable[..., Serve]
) -> None:
    served = spooling_while_down(tmp_path, cluster, sim, serve)
    spooled = served.spooled_ids()
    cluster.start()
    all_arrived(served, cluster.url, spooled)
    assert "migrating the database" in served.output()
    assert quick_health(served)["status"] == "ok"
    assert stop(served) == 0


def test_no_migrate_waits_for_the_schema_then_flushes(
    tmp_path: Path, cluster: PgCluster, sim: SimServer, serve: Callable[..., Serve]
) -> None:
    served = spooling_while_down(tmp_path, cluster, sim, serve, "--no-migrate")
    cluster.start()
    eventually(
        lambda: quick_health(served)["database"] == "waiting for the schema", 15, "schema wait"
    )
    before = len(served.spooled_ids())
    eventually(lambda: len(served.spooled_ids()) > before, 10, "still probing into the spool")

    spooled = served.spooled_ids()
    upgrade = [sys.executable, "-m", "app", "db", "upgrade", "--database-url", cluster.url]
    subprocess.run(upgrade, check=True, timeout=60, env=os.environ, capture_output=True)
    all_arrived(served, cluster.url, spooled)
    assert "migrating the database" not in served.output()
    assert stop(served) == 0
