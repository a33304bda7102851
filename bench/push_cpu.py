"""The CPU a pushed run costs the server without HTTP: its push stored (gunzip, parse, the
door, the store: ``store_one`` / ``store_many`` on the service's own sink, as
``app.agents.server`` calls them), each stored run evaluated right after its push (the
service's ``after_store``: alert evaluation by the target's owner, then /metrics, as a
quiet server does it, every run), then the rollups' catch-up of those runs, each timed by
the CPU clock of the thread doing it (``time.thread_time``), per run.

The service is built as ``serve`` builds it (``app.main.build_service``: its sink hands
each stored run on as serve's does), on a PostgreSQL database of its own; the agents'
bodies are ``bench.agents_ingest``'s (20 samples a run, gzip), built beforehand. Run with
another tree's ``PYTHONPATH`` to measure its code with the same script (a tree whose
upkeep keeps no samples in hand catches up from the database alone). The garbage
collector is set as serve's start sets it (``app.runtime.collector``), and its passes are
counted.

    .venv/bin/python -m bench.push_cpu --runs 2000
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from app.agents.server.access import PushCheck
from app.agents.server.ingest import Database, store_many, store_one
from app.config import Settings
from app.main import build_service
from app.runtime.service import Service
from app.store.records import RunRecord
from app.store.rollups.catchup import catch_up

try:
    from app.runtime.collector import settle_collector
except ImportError:  # a tree without it: the collector as Python sets it
    settle_collector = None  # type: ignore[assignment]
from bench.agents_ingest import bodies, targets_file
from bench.common import machine_info, print_table
from bench.gctally import HEADERS as GC_HEADERS
from bench.gctally import GcTally
from bench.store_common import SentStatements, create_database, database_url, drop_database

AGENTS = 20
TARGETS = 50


def _pushes(batch: int, runs: int, recent: bool) -> list[tuple[str, bytes]]:
    each = max(runs // AGENTS, batch or 1)
    made = []
    for k in range(AGENTS):
        agent = f"agent-{k:02d}"
        made += [(agent, body) for body, _ in bodies(agent, TARGETS, each, k + 1, batch, recent)]
    return made


def _measure(url: str, config: Path, batch: int, runs: int, recent: bool) -> list[list[str]]:
    """The mode's row, and its garbage collections' (from the service built on)."""
    service = build_service(Settings(config=config, database_url=url))
    pushes = _pushes(batch, runs, recent)  # the agents' work: before the collections counted
    undo = None if settle_collector is None else settle_collector()  # as serve's start does
    try:
        with GcTally().counting() as collections:
            row = _timed(service, batch, pushes)
        return [row, [row[0], *collections.row(int(row[1]))]]  # what it froze, still frozen
    finally:
        if undo is not None:
            undo()


def _timed(service: Service, batch: int, pushes: list[tuple[str, bytes]]) -> list[str]:
    ready = threading.Event()
    ready.set()
    database = Database(service.sink, ready)
    names = frozenset(f"t{k:03d}" for k in range(TARGETS))
    store = store_many if batch else store_one
    stored, storing = 0, 0.0
    evaluations = _Evaluations(service.after_store, SentStatements(service.engine))
    for agent, body in pushes:
        fresh: list[RunRecord] = []
        began = time.thread_time()
        answer: Any = store(database, PushCheck(agent, names), fresh.append, body, True)
        storing += time.thread_time() - began
        stored += len(answer) if batch else int(answer)
        for run in fresh:
            evaluations.after(run)
    in_hand = getattr(service.upkeep, "in_hand", None)  # None: a tree without it
    began = time.thread_time()
    since, now = datetime.now(UTC) - timedelta(days=1), datetime.now(UTC)
    added = catch_up(
        service.sessions, since, now, **({} if in_hand is None else {"in_hand": in_hand})
    )
    catching = time.thread_time() - began
    service.engine.dispose()
    label = f"batches of {batch}" if batch else "one run a push"
    later = max(evaluations.runs[1], 1)
    each = [storing / stored, evaluations.cpu[1] / later, catching / max(added, 1)]
    first = evaluations.cpu[0] / max(evaluations.runs[0], 1)
    return [label, str(stored), *(f"{ms * 1000:.3f}" for ms in each), str(added),
            f"{sum(each) * 1000:.3f}", f"{first * 1000:.3f}",
            f"{evaluations.statements.count / later:.1f}"]  # fmt: skip


class _Evaluations:
    """``after_store`` of each stored run, timed: the first of its (target, vantage) apart
    (its series and the target's alert memory read from the database: once a series in
    ``serve``), then the later ones, whose statements are counted."""

    def __init__(self, after_store: Callable[[RunRecord], object], statements: SentStatements):
        self.after_store, self.statements = after_store, statements
        self.seen: set[tuple[str, str]] = set()
        self.cpu, self.runs = [0.0, 0.0], [0, 0]

    def after(self, run: RunRecord) -> None:
        later = int((run.target, run.vantage) in self.seen)
        self.seen.add((run.target, run.vantage))
        began = time.thread_time()
        if later:
            with self.statements.counting():
                self.after_store(run)
        else:
            self.after_store(run)
        self.cpu[later] += time.thread_time() - began
        self.runs[later] += 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--runs", type=int, default=4000, help="runs a mode (1,000 series: 4 runs each)"
    )
    parser.add_argument(
        "--batch", type=int, default=10, help="runs a push, batched; 0: single only"
    )
    parser.add_argument(
        "--recent", action="store_true", help="runs that end now (bench.agents_ingest --recent)"
    )
    parser.add_argument("--pg", default="postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--db-name", default="pw_bench_push_cpu")
    args = parser.parse_args()
    print(machine_info())
    url = database_url("postgresql", args.db_name, args.pg, Path(tempfile.gettempdir()))
    agents = [f"agent-{k:02d}" for k in range(AGENTS)]
    rows, collected = [], []
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "phasewatch.yaml"
        targets_file(config, agents, {a: f"bench-token-of-{a}" for a in agents}, TARGETS, True)
        for batch in (0, args.batch) if args.batch else (0,):
            create_database(url, args.pg)
            try:
                row, gc_row = _measure(url, config, batch, args.runs, args.recent)
                rows.append(row)
                collected.append(gc_row)
            finally:
                drop_database(url, args.pg)
    headers = ["mode", "runs stored", "store CPU ms/run", "evaluation ms/run", "catch-up ms/run"]
    headers += ["caught up", "all ms/run", "a series' first evaluation ms", "statements/evaluation"]
    print_table(headers, rows)
    print_table(["mode", *GC_HEADERS], collected)


if __name__ == "__main__":
    main()
