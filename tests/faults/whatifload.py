"""A `serve` hammered by what-ifs: the database it reads, its targets file, the clients and
a watcher of its memory and /healthz (tests/faults/test_whatif_load.py, bench/whatif_load.py).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import numpy as np
from sqlalchemy import pool, select

from app.demo.sim.server import SimServer
from app.store.db import make_engine, make_sessions
from app.store.migrate import upgrade
from app.store.models import RunRow, TargetRow
from tests.pgcluster import Serve
from tests.runfactory import make_run, record_of, store_records

BIG, RUNS, PER_RUN = "history", 8_000, 8
CLIENTS = 8
HAMMER_S = 25.0
BODY = {"changes": ["network=15ms", "generation*1.5"], "resamples": 1000}


def fill(url: str, end: datetime) -> None:
    """RUNS runs of PER_RUN samples of BIG, one every 30 s up to ``end``."""
    upgrade(url)
    engine = make_engine(url)
    sessions, rng, batch = make_sessions(engine), np.random.default_rng(7), []
    for k in range(RUNS):
        at = end - timedelta(seconds=30 * (RUNS - k))
        batch.append(record_of(make_run(rng, at, n=PER_RUN, target=BIG, vantage="here")))
        if len(batch) == 1000:
            store_records(sessions, batch, end)
            batch = []
    store_records(sessions, batch, end)
    engine.dispose()


def config(directory: Path, sim: SimServer, live: str) -> Path:
    path = directory / "phasewatch.yaml"
    lines = ["targets:"]
    for name, every in ((live, "1s"), (BIG, "1h")):
        lines += [f"  - name: {name}", "    kind: http", f"    url: {sim.url}/health"]
        lines += [f"    interval: {every}", "    samples: 1"]
    path.write_text("\n".join(lines) + "\n")
    return path


def rss_mb(pid: int) -> float:
    """VmRSS of ``pid`` in MB; 0 once it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0
    line = next((x for x in status.splitlines() if x.startswith("VmRSS:")), "VmRSS: 0 kB")
    return int(line.split()[1]) / 1024


def children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


@dataclass
class Seen:
    statuses: list[int] = field(default_factory=list)
    retry_after: list[str | None] = field(default_factory=list)  # of each 429
    server_mb: list[float] = field(default_factory=list)
    worker_mb: list[float] = field(default_factory=list)
    health: list[int | None] = field(default_factory=list)  # None: no answer in 10 s
    health_s: list[float] = field(default_factory=list)
    answered_s: list[float] = field(default_factory=list)  # each 200's time
    lock: threading.Lock = field(default_factory=threading.Lock)


def client(base_url: str, until: float, seen: Seen) -> None:
    with httpx.Client(base_url=base_url, timeout=300) as http:
        while time.monotonic() < until:
            began = time.monotonic()
            response = http.post(f"/api/v1/targets/{BIG}/whatif", json=BODY)
            with seen.lock:
                seen.statuses.append(response.status_code)
                if response.status_code == 200:
                    seen.answered_s.append(time.monotonic() - began)
                if response.status_code == 429:
                    seen.retry_after.append(response.headers.get("Retry-After"))
            if response.status_code == 429:
                time.sleep(0.2)  # a hammer: it does not wait the Retry-After


def watcher(served: Serve, until: float, seen: Seen) -> None:
    pid = served.process.pid
    while time.monotonic() < until:
        seen.server_mb.append(rss_mb(pid))
        seen.worker_mb.append(sum(rss_mb(child) for child in children(pid)))
        began = time.monotonic()
        try:
            seen.health.append(httpx.get(f"{served.base_url}/healthz", timeout=10).status_code)
        except httpx.HTTPError:
            seen.health.append(None)
        seen.health_s.append(time.monotonic() - began)
        time.sleep(0.25)


def hammer(served: Serve) -> Seen:
    seen, until = Seen(), time.monotonic() + HAMMER_S
    threads = [
        threading.Thread(target=client, args=(served.base_url, until, seen)) for _ in range(CLIENTS)
    ]
    threads.append(threading.Thread(target=watcher, args=(served, until, seen)))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return seen


def runs_of(url: str, target: str) -> list[tuple[datetime, datetime]]:
    """When each of ``target``'s stored runs was due (its slot, however late it ran) and
    when it started."""
    engine = make_engine(url, poolclass=pool.NullPool)
    try:
        with make_sessions(engine)() as session:
            query = select(RunRow.scheduled_at, RunRow.started_at).join(
                TargetRow, TargetRow.id == RunRow.target_id
            )
            found = session.execute(query.where(TargetRow.name == target)).all()
            return [(_utc(due), _utc(began)) for due, began in found if due is not None]
    finally:
        engine.dispose()


def _utc(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
