"""A database that holds a store up (a locked SQLite file, a frozen PostgreSQL) never costs
a run: the probe job ends once its run is measured, the store stage waits on a thread of
its own, /healthz answers within a second and says what is wrong, and /metrics answers.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from app import clock
from app.demo.sim.server import SimServer
from tests.faults.support import Run, gaps_s, problems, quick_health, skipped, stop, stored
from tests.faults.support import targets_file as write_targets
from tests.helpers import eventually
from tests.pgcluster import PgCluster, Serve

pytestmark = pytest.mark.process

INTERVAL_S = 1.0
HELD_S = 8.0  # longer than the old 20 s store budget's share of an interval, many times over
# Another process's write lock on the file, held for HELD_S and then let go by itself.
LOCKER = (
    "import sqlite3, sys, time\n"
    "db = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
    "db.execute('BEGIN EXCLUSIVE')\n"
    "print('locked', flush=True)\n"
    "time.sleep(float(sys.argv[2]))\n"
)


def targets(tmp_path: Path, sim: SimServer) -> Path:
    return write_targets(tmp_path, sim, "api", interval=f"{INTERVAL_S}s", samples="1")


def assert_no_run_lost(served: Serve, url: str) -> None:
    """Every slot since the start has its run, stored once and complete, but those the
    scheduler counted and said it skipped (a machine that gives serve no CPU for an interval
    costs slots, and says so): none lost in silence. That the store held no probe up is
    what the probes during the outage show.

    Skips counted before ``said_at`` are of slots before it; those of slots before the
    first run due after it were counted once that run began."""
    said_at = clock.wall()

    def after(run: Run) -> bool:
        return run.scheduled_at is not None and run.scheduled_at > said_at

    said_before = sum(skipped(served).values())
    eventually(lambda: after(stored(url)[-1]), 30, "a run due after stored")
    said_after = sum(skipped(served).values())
    runs = stored(url)
    runs = runs[: next(i for i, run in enumerate(runs) if after(run)) + 1]
    missing = sum(round(gap / INTERVAL_S) - 1 for gap in gaps_s(runs))
    assert said_before <= missing <= said_after, (gaps_s(runs), said_before, said_after)
    assert {run.status for run in runs} == {"complete"}
    ids = [run.id for run in runs]
    assert len(ids) == len(set(ids))


def test_a_locked_sqlite_file_skips_no_run_and_healthz_says_the_store_waits(
    tmp_path: Path, sim: SimServer, serve: Callable[..., Serve]
) -> None:
    path = tmp_path / "pw.db"
    url = f"sqlite:///{path}"
    served = serve("serve", targets(tmp_path, sim), PHASEWATCH_DATABASE_URL=url)
    served.wait_ready()
    eventually(lambda: len(stored(url)) >= 2, 15, "two runs stored")

    command = [sys.executable, "-c", LOCKER, str(path), str(HELD_S)]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as locker:
        try:
            assert locker.stdout is not None and locker.stdout.readline() == "locked\n"
            eventually(lambda: "store: waiting" in problems(served), HELD_S, "the store waits")
            assert quick_health(served)["database"] == "reachable"  # reads go on (WAL)
            assert locker.wait(timeout=HELD_S + 30) == 0
        finally:
            if locker.poll() is None:
                locker.kill()
    eventually(lambda: "store:" not in problems(served), 30, "the stores caught up")
    caught_up = len(stored(url))
    eventually(lambda: len(stored(url)) >= caught_up + 2, 30, "and went on")

    assert_no_run_lost(served, url)
    assert stop(served) == 0


@pytest.mark.postgres
def test_a_frozen_postgres_skips_no_run_and_healthz_says_timeout(
    tmp_path: Path, cluster: PgCluster, sim: SimServer, serve: Callable[..., Serve]
) -> None:
    env = {"PHASEWATCH_DATABASE_URL": cluster.url, "PHASEWATCH_LEADER_CHECK_S": "1"}
    served = serve("serve", targets(tmp_path, sim), **env)
    served.wait_ready()
    eventually(lambda: len(stored(cluster.url)) >= 2, 15, "two runs stored")

    cluster.freeze()
    try:
        eventually(lambda: "store: waiting" in problems(served), 15, "the store waits")
        health = quick_health(served)
        assert (health["database"], health["status"]) == ("timeout", "degraded"), health
        probed = len(sim.truths())
        time.sleep(HELD_S / 2)  # more runs come due meanwhile, and are probed: the store
        assert len(sim.truths()) >= probed + 2  # waits on a thread of its own, not the runs
        assert quick_health(served)["leader"] is True
        # A scrape answers with what is known without the database, inside Prometheus'
        # default 10 s scrape timeout …
        scraped = httpx.get(f"{served.base_url}/metrics", timeout=30)
        assert scraped.status_code == 200 and "phasewatch_build_info{" in scraped.text
        assert "phasewatch_runs_stored_total{" in scraped.text
        # … because it left the database's reads behind at their budget, not at the
        # driver's connect timeout (or never, on a pooled connection that hangs).
        assert "metrics: open alerts left out: no answer within" in served.output()
    finally:
        cluster.thaw()
    eventually(lambda: "store:" not in problems(served), 30, "the stores caught up")
    eventually(lambda: not served.spooled_ids(), 20, "the spool flushed")
    caught_up = len(stored(cluster.url))
    eventually(lambda: len(stored(cluster.url)) >= caught_up + 2, 30, "and went on")

    assert_no_run_lost(served, cluster.url)
    # Healthy again once every part read the database again (the replica's leases too).
    eventually(lambda: quick_health(served)["status"] == "ok", 15, "healthy again")
    assert stop(served) == 0
