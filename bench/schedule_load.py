"""Scheduling: the real service (``build_service``, as ``serve`` wires it) under load.

Each target is an ``http`` target of 5 samples against ``GET /health`` of the simulated
endpoint, served by ``app.demo.sim.process`` in a process of its own (so its CPU does not
disturb this process's event loop). Everything ``serve`` runs runs here: the writer thread,
alert evaluation after each run, the rollup, retention and outbox loops, the spool
flusher, into SQLite (WAL) by default. ``--burners N`` starts N processes that each keep a
core busy beside it (and kills them by PID at the end).

Measured: start lateness (``Watch.lateness_s``: job start minus its due time), this
event loop's lag, APScheduler's missed / max-instances events, runs spooled, the writer's
deepest backlog, and from the database: runs per target against the number of due times
in the window, unique run ids, and the spacing of each target's runs (the slots missing
between them, beside the skips serve counts and says by reason).

    .venv/bin/python -m bench.schedule_load --targets 50 --samples 5 --burners 2 --duration 300
    .venv/bin/python -m bench.schedule_load --backends postgresql --duration 300
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from apscheduler.events import EVENT_JOB_ERROR, EVENT_JOB_MAX_INSTANCES, EVENT_JOB_MISSED
from sqlalchemy import Engine, select

from app.config import Settings, Target, TargetsFile
from app.demo.sim.app import SimConfig
from app.demo.sim.process import SimProcess
from app.main import build_service
from app.runtime.scheduler import Watch, first_run_offset
from app.runtime.service import Service
from app.store.db import make_sessions
from app.store.models import RunRow, SampleRow, TargetRow
from app.store.records import RunRecord
from bench.common import LoopLag, machine_info, pct, print_table
from bench.store_common import (
    add_database_options,
    add_quiet_option,
    backend_label,
    backends,
    bench_database,
    bench_engine,
    database_url,
    pg_version,
    wait_quiet,
)

GOAL_P99_MS = 50.0
STOP_GRACE_S = 2.0  # as app.runtime.stopping.RUNS_GRACE_S


@dataclass
class Events:
    """APScheduler's bad news, counted."""

    counts: Counter[str] = field(default_factory=Counter)

    def __call__(self, event: Any) -> None:
        name = {EVENT_JOB_MISSED: "missed", EVENT_JOB_MAX_INSTANCES: "max_instances"}
        self.counts[name.get(event.code, "error")] += 1


@dataclass(frozen=True)
class Window:
    start: datetime
    stop: datetime

    def due_count(self, target: Target) -> int:
        """How many due times the target has in [start, stop)."""
        first = self.start + timedelta(seconds=first_run_offset(target.name, target.interval))
        if first >= self.stop:
            return 0
        return int((self.stop - first).total_seconds() // target.interval) + 1


def make_targets(url: str, count: int, interval: float, samples: int) -> list[Target]:
    return [
        Target(name=f"sched-{i:03d}", url=f"{url}/health", interval=interval, samples=samples)
        for i in range(count)
    ]


@dataclass
class Counts:
    """What the service did under load besides storing: runs spooled, the writer's backlog."""

    spooled: int = 0
    deepest_queue: int = 0


@contextmanager
def burners(count: int) -> Iterator[list[int]]:
    """``count`` processes that each keep a core busy, killed by their PIDs at the end."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield [proc.pid for proc in procs]
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def counting_spool(service: Service, counts: Counts) -> None:
    """Count every run the service puts in its spool (the pipeline and writer share it)."""
    spool = service.writer.spool
    append = spool.append

    def counted(record: RunRecord) -> None:
        counts.spooled += 1
        append(record)

    spool.append = counted  # type: ignore[method-assign]


async def _watch_queue(service: Service, counts: Counts) -> None:
    while True:
        counts.deepest_queue = max(counts.deepest_queue, service.writer._queue.qsize())
        await asyncio.sleep(0.5)


async def run_service(
    service: Service, duration_s: float
) -> tuple[Watch, Events, Window, LoopLag, float, Counts]:
    """The service as ``serve`` runs it (rollups, alerts, outbox), for ``duration_s``."""
    events, counts = Events(), Counts()
    counting_spool(service, counts)
    cpu_before = time.process_time()
    async with LoopLag() as lag:
        start = datetime.now(UTC)
        await service.start()
        service.watch.scheduler.add_listener(
            events, EVENT_JOB_MISSED | EVENT_JOB_MAX_INSTANCES | EVENT_JOB_ERROR
        )
        watcher = asyncio.create_task(_watch_queue(service, counts))
        await asyncio.sleep(duration_s)
        stop = datetime.now(UTC)
        watcher.cancel()
        await service.stop()
    cpu = (time.process_time() - cpu_before) / duration_s
    return service.watch, events, Window(start, stop), lag, cpu, counts


@dataclass
class Stored:
    by_target: dict[str, list[tuple[Any, datetime | None, datetime, str]]]
    samples: Counter[str]

    @classmethod
    def read(cls, engine: Engine) -> Stored:
        query = (
            select(TargetRow.name, RunRow.id, RunRow.scheduled_at, RunRow.started_at)
            .add_columns(RunRow.status)
            .join(TargetRow, RunRow.target_id == TargetRow.id)
            .order_by(RunRow.started_at)
        )
        by_target: dict[str, list[tuple[Any, datetime | None, datetime, str]]] = defaultdict(list)
        with make_sessions(engine)() as session:
            for name, run_id, scheduled, started, status in session.execute(query):
                by_target[name].append((run_id, scheduled, started, status))
            statuses = session.execute(select(SampleRow.status)).scalars()
            return cls(by_target, Counter(statuses))


def check_runs(stored: Stored, targets: list[Target], window: Window) -> list[list[str]]:
    """Per target: runs vs due times, doubles, gaps, spacing."""
    interval = targets[0].interval
    ids = [r[0] for runs in stored.by_target.values() for r in runs]
    off_by: Counter[int] = Counter()
    doubled = skipped = 0
    gaps: list[float] = []
    start_gaps: list[float] = []
    for target in targets:
        runs = stored.by_target.get(target.name, [])
        off_by[len(runs) - window.due_count(target)] += 1
        due = [r[1] for r in runs if r[1] is not None]
        doubled += len(due) - len(set(due))
        spacing = [(b - a).total_seconds() for a, b in zip(due, due[1:], strict=False)]
        skipped += sum(round(s / interval) - 1 for s in spacing if s > 1.5 * interval)
        gaps += spacing
        started = [r[2] for r in runs]
        start_gaps += [(b - a).total_seconds() for a, b in zip(started, started[1:], strict=False)]
    statuses = Counter(r[3] for runs in stored.by_target.values() for r in runs)
    per_target = [len(stored.by_target.get(t.name, [])) for t in targets]
    expected = (window.stop - window.start).total_seconds() / interval
    within = all(abs(n - expected) <= 1 for n in per_target)
    span = f"{min(per_target)}..{max(per_target)} (duration/interval = {expected:.1f}; "
    span += f"all within ±1: {'yes' if within else 'NO'})"
    counts = ", ".join(f"{k:+d}: {v} targets" for k, v in sorted(off_by.items()))
    return [
        ["runs stored", f"{len(ids):,} ({dict(statuses)})"],
        ["unique run ids", "yes" if len(set(ids)) == len(ids) else "NO"],
        ["runs per target", span],
        ["runs - due times, per target", counts],
        ["same due time stored twice", str(doubled)],
        ["slots missing between stored runs", str(skipped)],
        ["due-time spacing min/max s", f"{min(gaps, default=0):.3f} / {max(gaps, default=0):.3f}"],
        ["start spacing p1/p50/p99 s", _spread(start_gaps)],
        ["samples by status", str(dict(stored.samples))],
    ]


def _spread(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{pct(values, 1):.3f} / {pct(values, 50):.3f} / {pct(values, 99):.3f}"


def measure(url: str, args: argparse.Namespace) -> list[str]:
    label = backend_label(url)
    with (
        bench_database(url, args.pg, keep=args.keep),
        SimProcess(SimConfig(one_way_ms=0), http2=False, max_seconds=args.duration + 120) as sim,
        tempfile.TemporaryDirectory() as spool_dir,
    ):
        targets = make_targets(sim.url, args.targets, args.interval, args.samples)
        settings = Settings(
            config=Path(spool_dir) / "absent.yaml",
            database_url=url,
            spool_dir=Path(spool_dir) / "spool",
            vantage="bench",
        )
        service = build_service(settings, TargetsFile(targets=targets))  # as ``serve`` does
        wait_quiet(args.wait_quiet)
        print(f"running {len(targets)} targets every {args.interval:g} s for {args.duration:g} s")
        with burners(args.burners) as pids:
            if pids:
                print(f"with {len(pids)} CPU burners beside it (PIDs {pids})")
            watch, events, window, lag, cpu, counts = asyncio.run(
                asyncio.wait_for(run_service(service, args.duration), args.duration + 60)
            )
        engine = bench_engine(url)
        stored = Stored.read(engine)
        spooled = service.writer.spool.pending()
        sim_lag = sim.loop_lag()
        engine.dispose()
    late = [s * 1000 for s in watch.lateness_s]
    sim_lags = f"{sim_lag['p99']:.2f} / {sim_lag['max']:.2f}"
    pipeline_late = [
        (r[2] - r[1]).total_seconds() * 1000
        for runs in stored.by_target.values()
        for r in runs
        if r[1] is not None
    ]
    print_table(["check", "result"], check_runs(stored, targets, window))
    print_table(
        ["measure", "value"],
        [
            ["Watch.lateness_s n", f"{len(late):,}"],
            ["lateness p50/p95/p99/max ms", _ms4(late)],
            ["job due → run started_at p50/p95/p99/max ms", _ms4(pipeline_late)],
            ["this event loop's lag (5 ms sleeps)", lag.summary()],
            ["sim endpoint's loop lag p99 / max ms", sim_lags],
            ["APScheduler events", str(dict(events.counts) or "none")],
            ["skips said (phasewatch_runs_skipped_total)", _by_reason(watch)],
            ["runs spooled (while running and at stop)", str(counts.spooled)],
            ["runs left in the spool", str(spooled)],
            ["writer queue, deepest", str(counts.deepest_queue)],
            ["this process's CPU", f"{cpu * 100:.0f} % of one core"],
        ],
    )
    met = "yes" if late and pct(late, 99) <= GOAL_P99_MS else "NO"
    shape = [str(len(targets)), f"{args.interval:g}", f"{args.duration:g}"]
    return [label, *shape, _ms4(late), met]


def _by_reason(watch: Watch) -> str:
    reasons: Counter[str] = Counter()
    for (_target, reason), count in watch.skips.total.items():
        reasons[reason] += count
    return f"{reasons.total()} {dict(reasons)}" if reasons else "none"


def _ms4(values: list[float]) -> str:
    if not values:
        return "-"
    q = [pct(values, p) for p in (50, 95, 99)]
    return " / ".join(f"{v:.1f}" for v in [*q, max(values)])


HEADERS = ["backend", "targets", "interval s", "duration s", "lateness p50/p95/p99/max ms"]
HEADERS += ["p99 <= 50 ms"]


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_database_options(parser, "pw_bench_schedule", default_backends="sqlite")
    add_quiet_option(parser)
    parser.add_argument("--targets", type=int, default=200)
    parser.add_argument("--interval", type=float, default=10.0, help="seconds")
    parser.add_argument("--samples", type=int, default=5, help="samples per run")
    parser.add_argument("--duration", type=float, default=300.0, help="seconds (default 300)")
    parser.add_argument(
        "--burners", type=int, default=0, help="CPU-burning processes beside it (default 0)"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = arguments(argv)
    chosen = backends(args.backends)
    pg = f"; PostgreSQL {pg_version(args.pg)}" if "postgresql" in chosen else ""
    print(f"# Scheduling: Watch + Pipeline under load\n{machine_info()}{pg}\n")
    rows = []
    for backend in chosen:
        url = database_url(backend, args.db_name, args.pg, args.sqlite_dir)
        print(f"## {backend_label(url)}")
        rows.append(measure(url, args))
        print()
    print("## all")
    print_table(HEADERS, rows)


if __name__ == "__main__":
    main()
