"""PostgreSQL goes away for a while and comes back: probing goes on, no run is lost or doubled.

The test stops and starts a private PostgreSQL cluster of its own (``tests/pgcluster.py``),
never the shared server the other tests use.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import pairwise
from pathlib import Path

import pytest
from sqlalchemy import func, pool, select

from app.demo.sim.server import SimServer
from app.store.db import make_engine, make_sessions
from app.store.models import RunRow, SampleRow
from tests.faults.support import quick_health
from tests.helpers import eventually
from tests.pgcluster import PgCluster, Serve, private_cluster, serving

pytestmark = [pytest.mark.process, pytest.mark.postgres]

INTERVAL_S = 1.0
SAMPLES = 2


@pytest.fixture
def cluster() -> Iterator[PgCluster]:
    with private_cluster() as started:
        yield started


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[..., Serve]]:
    with serving(tmp_path) as start:
        yield start


def stored(url: str) -> list[RunRow]:
    engine = make_engine(url, poolclass=pool.NullPool)
    try:
        with make_sessions(engine)() as session:
            return list(session.scalars(select(RunRow).order_by(RunRow.started_at)))
    finally:
        engine.dispose()


def samples_per_run(url: str) -> dict[str, int]:
    engine = make_engine(url, poolclass=pool.NullPool)
    try:
        with make_sessions(engine)() as session:
            query = select(SampleRow.run_id, func.count()).group_by(SampleRow.run_id)
            return {str(run_id): count for run_id, count in session.execute(query)}
    finally:
        engine.dispose()


def test_runs_spooled_while_postgres_is_down_arrive_once_when_it_is_back(
    tmp_path: Path, cluster: PgCluster, sim: SimServer, serve: Callable[..., Serve]
) -> None:
    config = tmp_path / "phasewatch.yaml"
    config.write_text(
        "targets:\n"
        f"  - name: steady\n    kind: http\n    url: {sim.url}/health\n"
        f"    interval: {INTERVAL_S}s\n    samples: {SAMPLES}\n"
    )
    served = serve(
        "serve",
        config,
        PHASEWATCH_DATABASE_URL=cluster.url,  # migrated by serve on start
        PHASEWATCH_VANTAGE="outage",
        PHASEWATCH_LEADER_CHECK_S="1",  # the leader loop meets the outage too
    )
    served.wait_ready()
    eventually(lambda: len(stored(cluster.url)) >= 2, 10, "two runs stored")

    cluster.stop()
    down = quick_health(served)
    assert down["database"] == "unreachable" and down["status"] == "degraded"

    def spooling() -> bool:
        health = quick_health(served)  # checked all through the outage
        return int(str(health["spooled_runs"])) >= 2 and len(served.spooled_ids()) >= 2

    eventually(spooling, 6 * INTERVAL_S, "two runs spooled")
    spooled = served.spooled_ids()
    assert quick_health(served)["leader"] is True  # a leader keeps probing into the spool

    cluster.start()
    eventually(lambda: not served.spooled_ids(), 10, "the spool flushed")
    back = quick_health(served)
    assert (back["database"], back["spooled_runs"]) == ("reachable", 0)
    flushed = len(stored(cluster.url))
    eventually(lambda: len(stored(cluster.url)) > flushed, 30, "a run straight into the database")

    served.terminate()  # how soon: bench.stop_time
    runs = stored(cluster.url)
    ids = [str(run.id) for run in runs]
    assert len(ids) == len(set(ids))
    assert all(ids.count(run_id) == 1 for run_id in spooled), (spooled, ids)
    counts = samples_per_run(cluster.url)
    assert all(counts.get(run_id) == SAMPLES for run_id in spooled), counts  # stored whole
    due = [run.scheduled_at for run in runs if run.scheduled_at is not None]
    gaps = [(b - a).total_seconds() for a, b in pairwise(due)]
    assert max(gaps) <= 2 * INTERVAL_S, gaps  # probing went on through the outage: due slots
    assert [run.status for run in runs[:-1]] == ["complete"] * (len(runs) - 1)
    assert not (served.spool_dir / "runs.jsonl").exists()
    assert not list((served.spool_dir / "inflight").glob("*.json"))
    assert not (served.spool_dir / "rejected.jsonl").exists()
