"""What the fault tests share: targets files, reading back what was stored, /healthz.

Time bounds here are generous hard limits that keep a test from hanging, never the
assertion itself: the tests assert what the process decided (its exit code, the path its
log shows, what the database holds); the times are measured in ``bench/stop_time.py``.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import pairwise
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import func, pool, select

from app import clock
from app.config.settings import server_vantage
from app.demo.sim.server import SimServer
from app.runs.slots import Grid
from app.store.db import make_engine, make_sessions
from app.store.models import RunRow, SampleRow
from tests.pgcluster import Serve

HEALTHZ_QUICK_S = 1.0
STOP_HARD_S = 30.0  # SIGTERM to exit: the test fails, not hangs, past this (the promise is 5 s)
SKIPPED = "phasewatch_runs_skipped"


@dataclass(frozen=True)
class Run:
    id: str
    status: str
    samples: int
    started_at: datetime
    scheduled_at: datetime | None = None


def targets_file(directory: Path, sim: SimServer, name: str, **fields: str) -> Path:
    lines = "".join(f"    {key}: {value}\n" for key, value in fields.items())
    path = directory / "phasewatch.yaml"
    path.write_text(
        f"targets:\n  - name: {name}\n    kind: http\n    url: {sim.url}/health\n{lines}"
    )
    return path


def early_name(
    prefix: str,
    interval_s: float,
    within_s: float = 1.0,
    vantage: str | None = None,
    after_s: float = 0.0,
) -> str:
    """A target name whose first run, probed from ``vantage`` (default: serve's, the host
    name) by a process ready ``after_s`` from now, comes within ``within_s`` of that (its
    grid, ``app.runs.slots.Grid``, is shared by every process): a test then need not wait
    most of a long interval for it."""
    vantage = vantage or server_vantage(None, None)
    ready = clock.wall() + timedelta(seconds=after_s)
    names = (f"{prefix}-{n}" for n in range(1000))
    return next(
        name
        for name in names
        if Grid.of(name, vantage, interval_s).next_start(ready) - ready
        < timedelta(seconds=within_s)
    )


def stored(url: str) -> list[Run]:
    """Every run in the database, oldest first, with how many samples it has."""
    engine = make_engine(url, poolclass=pool.NullPool)
    try:
        with make_sessions(engine)() as session:
            per_run = select(SampleRow.run_id, func.count()).group_by(SampleRow.run_id)
            counts = dict(session.execute(per_run).all())
            rows = session.scalars(select(RunRow).order_by(RunRow.started_at))
            return [
                Run(str(r.id), r.status, counts.get(r.id, 0), r.started_at, r.scheduled_at)
                for r in rows
            ]
    finally:
        engine.dispose()


def gaps_s(runs: list[Run]) -> list[float]:
    """Seconds between the due times of successive runs: a missing slot shows, however late
    a loaded machine started them."""
    due = [run.scheduled_at for run in runs]
    assert None not in due, runs
    return [(b - a).total_seconds() for a, b in pairwise(due) if a is not None and b is not None]


def skipped(served: Serve) -> dict[str, float]:
    """``phasewatch_runs_skipped_total`` by reason, over the targets: the due runs serve says
    it did not start."""
    text = httpx.get(f"{served.base_url}/metrics", timeout=30).text
    (family,) = [f for f in text_string_to_metric_families(text) if f.name == SKIPPED]
    found: dict[str, float] = {}
    for sample in family.samples:
        if sample.name == f"{SKIPPED}_total":
            reason = sample.labels["reason"]
            found[reason] = found.get(reason, 0.0) + sample.value
    return found


def quick_health(served: Serve) -> dict[str, object]:
    """/healthz answers, whatever the database and the disk do: within a second of what a
    static file from the same process takes just before (a loaded machine slows both)."""
    reference = _seconds(lambda: httpx.get(f"{served.base_url}/static/favicon.svg", timeout=30))
    began = time.monotonic()
    health = served.health(timeout_s=5 + reference)
    took = time.monotonic() - began
    assert health is not None, served.output()
    assert took < reference + HEALTHZ_QUICK_S, f"/healthz took {took:.2f} s ({reference:.2f})"
    return health


def _seconds(call: Callable[[], object]) -> float:
    began = time.monotonic()
    call()
    return time.monotonic() - began


def problems(served: Serve) -> str:
    """What /healthz says is wrong, in one line (it answers within a second, or this fails)."""
    found = quick_health(served).get("problems", [])
    assert isinstance(found, list)
    return " | ".join(str(problem) for problem in found)


def journalled_for(spool: Path, seconds: float) -> bool:
    """A run has been journalled (in flight, or waiting to be stored) ``seconds`` and more:
    with runs that measure in milliseconds, one whose store hangs."""
    now = time.time()
    journals = (spool / "inflight").glob("*.json")
    return any(now - path.stat().st_mtime > seconds for path in journals)


def stop(served: Serve) -> int:
    """SIGTERM; the exit code once the process ended by itself (it fails past STOP_HARD_S)."""
    served.process.send_signal(signal.SIGTERM)
    try:
        return served.process.wait(timeout=STOP_HARD_S)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"still running {STOP_HARD_S} s after SIGTERM") from None
