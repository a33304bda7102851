"""One bad row never stops the others: a run the rollups cannot digest, planted straight into
the database of a running ``serve`` (past the door, as an older version or a hand with SQL
would), is set aside — named on /healthz, counted on /metrics, logged once — and every
other target's history goes on, on SQLite and on PostgreSQL."""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

import httpx
import pytest
from sqlalchemy import func, pool, select, update

from app.clock import utcnow
from app.demo.sim.server import SimServer
from app.store.db import make_engine, make_sessions
from app.store.ingest import store_run
from app.store.models import RunDigestRow, SampleRow, TargetRow
from app.store.records import RunRecord, SampleRecord
from tests.faults.support import problems, stop
from tests.helpers import eventually
from tests.pgcluster import PgCluster, Serve

pytestmark = pytest.mark.process

TARGETS = ("alpha", "beta", "gamma")
# The rollups trail the runs by up to CATCH_UP_EVERY_S (10 s): three passes, and the machine's load.
ADVANCED_S = 60.0


def targets_file(directory: Path, sim: SimServer) -> Path:
    entries = "".join(
        f"  - name: {name}\n    kind: http\n    url: {sim.url}/health\n"
        "    interval: 1s\n    samples: 1\n"
        for name in TARGETS
    )
    path = directory / "phasewatch.yaml"
    path.write_text(f"targets:\n{entries}")
    return path


def digested_since(url: str, since: datetime) -> dict[str, int]:
    """Each target's runs started after ``since`` that history counts (a run digest)."""
    engine = make_engine(url, poolclass=pool.NullPool)
    try:
        with make_sessions(engine)() as session:
            query = (
                select(TargetRow.name, func.count())
                .join(RunDigestRow, RunDigestRow.target_id == TargetRow.id)
                .where(RunDigestRow.started_at > since)
                .group_by(TargetRow.name)
            )
            return {name: int(count) for name, count in session.execute(query)}
    finally:
        engine.dispose()


def plant(url: str, target: str) -> RunRecord:
    """A complete run whose time is infinite, as no door lets in: stored, then its sample
    changed by SQL in the same transaction (the rollups never see it otherwise)."""
    at = utcnow()
    sample = SampleRecord(0, at, "ok", 10.0, {"connect": 5.0, "transfer": 5.0})
    record = RunRecord(uuid.uuid4(), target, "local", at, "complete", (sample,), at)
    engine = make_engine(url, poolclass=pool.NullPool)
    try:
        with make_sessions(engine).begin() as session:
            assert store_run(session, record, at)
            infinite = update(SampleRow).where(SampleRow.run_id == record.id)
            session.execute(infinite.values(total_ms=math.inf))
    finally:
        engine.dispose()
    return record


def quarantined(served: Serve) -> str:
    scraped = httpx.get(f"{served.base_url}/metrics", timeout=30)
    lines = [
        line for line in scraped.text.splitlines() if line.startswith("phasewatch_quarantined{")
    ]
    return "\n".join(lines)


def advanced(url: str, since: datetime, runs: int) -> bool:
    """Every target's history counts ``runs`` or more runs started after ``since``."""
    found = digested_since(url, since)
    return all(found.get(name, 0) >= runs for name in TARGETS)


def history_goes_on_past_a_poison_run(served: Serve, url: str) -> None:
    served.wait_ready()
    began = utcnow()
    eventually(lambda: advanced(url, began - timedelta(minutes=1), 1), ADVANCED_S, "history")

    poison = plant(url, "alpha")
    eventually(lambda: advanced(url, poison.started_at, 2), ADVANCED_S, "history goes on")
    reason = "sample 0: total_ms is inf, not a time"
    expected = f"rollups: 1 run quarantined: run {poison.id} of target alpha: {reason}"
    assert expected in problems(served)
    assert 'phasewatch_quarantined{loop="rollups"} 1.0' in quarantined(served)
    assert 'phasewatch_quarantined{loop="outbox"} 0.0' in quarantined(served)

    # Passed over, not tried again: a later pass, and still one line about it.
    later = utcnow()
    eventually(lambda: advanced(url, later, 1), ADVANCED_S, "another pass")
    assert served.output().count(str(poison.id)) == 1, served.output()
    assert "background step" not in served.output()
    assert stop(served) == 0


def test_a_poison_run_in_sqlite_leaves_every_other_history_going(
    tmp_path: Path, sim: SimServer, serve: Callable[..., Serve]
) -> None:
    url = f"sqlite:///{tmp_path / 'pw.db'}"
    served = serve("serve", targets_file(tmp_path, sim), PHASEWATCH_DATABASE_URL=url)
    history_goes_on_past_a_poison_run(served, url)


@pytest.mark.postgres
def test_a_poison_run_in_postgres_leaves_every_other_history_going(
    tmp_path: Path, cluster: PgCluster, sim: SimServer, serve: Callable[..., Serve]
) -> None:
    served = serve("serve", targets_file(tmp_path, sim), PHASEWATCH_DATABASE_URL=cluster.url)
    history_goes_on_past_a_poison_run(served, cluster.url)
