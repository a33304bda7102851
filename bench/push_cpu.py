"""The CPU a pushed run costs the server without HTTP: its push stored (gunzip, parse, the
door, the store: ``store_one`` / ``store_many`` on the service's own sink, as
``app.agents.server`` calls them), then the rollups' catch-up of those runs, each timed by
the CPU clock of the thread doing it (``time.thread_time``), per run.

The service is built as ``serve`` builds it (``app.main.build_service``: its sink hands
each stored run on as serve's does), on a PostgreSQL database of its own; the agents'
bodies are ``bench.agents_ingest``'s (20 samples a run, gzip), built beforehand. Run with
another tree's ``PYTHONPATH`` to measure its code with the same script (a tree whose
upkeep keeps no samples in hand catches up from the database alone).

    .venv/bin/python -m bench.push_cpu --runs 2000
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from app.agents.server.access import PushCheck
from app.agents.server.ingest import Database, store_many, store_one
from app.config import Settings
from app.main import build_service
from app.store.rollups.catchup import catch_up
from bench.agents_ingest import bodies, targets_file
from bench.common import machine_info, print_table
from bench.store_common import create_database, database_url, drop_database

AGENTS = 20
TARGETS = 50


def _pushes(batch: int, runs: int) -> list[tuple[str, bytes]]:
    each = max(runs // AGENTS, batch or 1)
    made = []
    for k in range(AGENTS):
        agent = f"agent-{k:02d}"
        made += [(agent, body) for body, _ in bodies(agent, TARGETS, each, k + 1, batch)]
    return made


def _measure(url: str, config: Path, batch: int, runs: int) -> list[str]:
    service = build_service(Settings(config=config, database_url=url))
    ready = threading.Event()
    ready.set()
    database = Database(service.sink, ready)
    names = frozenset(f"t{k:03d}" for k in range(TARGETS))
    store = store_many if batch else store_one
    pushes = _pushes(batch, runs)
    stored = 0
    began = time.thread_time()
    for agent, body in pushes:
        answer: Any = store(database, PushCheck(agent, names), lambda _run: None, body, True)
        stored += len(answer) if batch else int(answer)
    storing = time.thread_time() - began
    in_hand = getattr(service.upkeep, "in_hand", None)  # None: a tree without it
    began = time.thread_time()
    since, now = datetime.now(UTC) - timedelta(days=1), datetime.now(UTC)
    added = catch_up(
        service.sessions, since, now, **({} if in_hand is None else {"in_hand": in_hand})
    )
    catching = time.thread_time() - began
    service.engine.dispose()
    label = f"batches of {batch}" if batch else "one run a push"
    return [label, str(stored), f"{storing / stored * 1000:.3f}", str(added),
            f"{catching / max(added, 1) * 1000:.3f}",
            f"{(storing / stored + catching / max(added, 1)) * 1000:.3f}"]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000, help="runs a mode")
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--pg", default="postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--db-name", default="pw_bench_push_cpu")
    args = parser.parse_args()
    print(machine_info())
    url = database_url("postgresql", args.db_name, args.pg, Path(tempfile.gettempdir()))
    agents = [f"agent-{k:02d}" for k in range(AGENTS)]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "phasewatch.yaml"
        targets_file(config, agents, {a: f"bench-token-of-{a}" for a in agents}, TARGETS, True)
        for batch in (0, args.batch):
            create_database(url, args.pg)
            try:
                rows.append(_measure(url, config, batch, args.runs))
            finally:
                drop_database(url, args.pg)
    headers = ["mode", "runs stored", "store CPU ms/run", "caught up", "catch-up ms/run"]
    print_table([*headers, "both ms/run"], rows)


if __name__ == "__main__":
    main()
