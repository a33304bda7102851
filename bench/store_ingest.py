"""Ingest: how many samples per second ``store_run`` writes, a run per transaction.

Exactly as the pipeline stores a finished run (``Pipeline.store`` itself: the write lock,
one Core connection in one transaction, ``store_run_on``, commit; ``--candidates``: in a
Session, ``store_run`` then and now). Beside it, in turn with it, the floor: the same
statements with the same (already processed) parameters replayed on the driver's own
connection, a run per transaction; the ratio of the two is what SQLAlchemy and our own
Python cost on top of the driver and the database. Runs are built beforehand (``Synth``,
not measured) for 20 targets, one in three streaming from an LLM. The database starts
empty and is dropped at the end. ``--profile`` prints where the time of one size went
(cProfile, by own time).

    .venv/bin/python -m bench.store_ingest --sizes 20,100,300 --samples 100000
"""

from __future__ import annotations

import argparse
import cProfile
import io
import math
import os
import pstats
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from app.config import Target
from app.runs.dbsink import DatabaseSink
from app.runtime.targetsync import target_values
from app.store.db import make_sessions
from app.store.records import RunRecord
from app.store.targets import sync_targets
from bench.common import machine_info, pct, print_table
from bench.ingest_floor import captured, replay
from bench.store_candidates import StoreRun, check_summaries, ingest_ladder
from bench.store_common import (
    Synth,
    add_database_options,
    add_quiet_option,
    backend_label,
    backends,
    bench_database,
    bench_engine,
    database_url,
    pg_version,
    target_kind,
    target_name,
    wait_quiet,
)

TARGETS = 20
WARM_UP_RUNS = 20
GOALS = {"postgresql": 20_000, "sqlite": 10_000}


@dataclass(frozen=True)
class Result:
    backend: str
    size: int
    runs: int
    seconds: float
    latencies: list[float]
    cut: bool
    client_cpu_s: float
    server_cpu_s: float | None

    @property
    def samples_per_s(self) -> float:
        return self.runs * self.size / self.seconds

    def per_sample_us(self, seconds: float | None) -> str:
        return "-" if seconds is None else f"{seconds / (self.runs * self.size) * 1e6:.0f}"

    def row(self, spread: str = "") -> list[str]:
        goal = GOALS[self.backend]
        met = "yes" if self.samples_per_s >= goal else "NO"
        return [
            self.backend,
            str(self.size),
            f"{self.runs:,}" + (" (cut)" if self.cut else ""),
            f"{self.samples_per_s:,.0f}" + spread,
            f"{self.runs / self.seconds:,.1f}",
            f"{pct(self.latencies, 50) * 1000:.2f}",
            f"{pct(self.latencies, 99) * 1000:.2f}",
            f"{max(self.latencies) * 1000:.2f}",
            self.per_sample_us(self.client_cpu_s),
            self.per_sample_us(self.server_cpu_s),
            f"{goal:,} {met}",
        ]


HEADERS = [
    "backend",
    "samples/run",
    "runs",
    "samples/s",
    "runs/s",
    "store p50 ms",
    "store p99 ms",
    "store max ms",
    "client CPU us/sample",
    "server CPU us/sample",
    "goal samples/s met",
]


def make_runs(size: int, count: int, seed: int) -> list[RunRecord]:
    """``count`` runs of ``size`` samples, a run per target in turn, 10 s apart."""
    synth = Synth(seed)
    start = datetime.now(UTC) - timedelta(days=1)
    runs = []
    for i in range(count):
        t = i % TARGETS
        at = start + timedelta(seconds=10 * (i // TARGETS), milliseconds=t)
        runs.append(synth.run(target_name(t), "bench", target_kind(t), at, size, at))
    return runs


def backend_cpu_s(engine: Engine) -> float | None:
    """CPU seconds used so far by the PostgreSQL backends serving this database.

    Read from /proc (the server is local, the database ours alone): where the time goes,
    the client or the server.
    """
    if engine.dialect.name != "postgresql":
        return None
    with engine.connect() as connection:
        pids = connection.exec_driver_sql(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
        ).scalars()
        ticks = 0
        for pid in pids:
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue  # gone meanwhile
            ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


# One run stored, a transaction of its own.
Store = Callable[[RunRecord], object]


def in_session(sessions: sessionmaker[Session], store: StoreRun) -> Store:
    """``store`` as a Session's transaction (how the pipeline stored runs before
    ``store_run_on``; the candidates' signature)."""

    def call(record: RunRecord) -> None:
        with sessions.begin() as session:
            store(session, record, datetime.now(UTC))

    return call


def as_pipeline(sessions: sessionmaker[Session]) -> Store:
    """``DatabaseSink.store``: what the service's writer calls with each finished run."""
    return DatabaseSink(sessions).store


def store_all(
    store: Store,
    runs: list[RunRecord],
    budget_s: float,
    writers: int = 1,
) -> tuple[list[float], float, bool]:
    """Store every run in its own transaction; stops early at ``budget_s``.

    With ``writers`` > 1, that many threads share the runs, as the pipeline's worker
    threads (``asyncio.to_thread``) do when runs finish together.
    """
    started = time.perf_counter()
    deadline = started + budget_s
    if writers == 1:  # in this thread, where --profile sees it
        latencies = _store_share(store, runs, deadline)
        return latencies, time.perf_counter() - started, len(latencies) < len(runs)
    shares = [runs[i::writers] for i in range(writers)]
    with ThreadPoolExecutor(writers) as pool:
        done = list(pool.map(lambda share: _store_share(store, share, deadline), shares))
    latencies = [latency for share in done for latency in share]
    return latencies, time.perf_counter() - started, len(latencies) < len(runs)


def _store_share(store: Store, runs: list[RunRecord], deadline: float) -> list[float]:
    latencies: list[float] = []
    for record in runs:
        before = time.perf_counter()
        store(record)
        latencies.append(time.perf_counter() - before)
        if before > deadline:
            break
    return latencies


# Runs per turn when both are measured: each side gets this many samples, then the other.
TURN_SAMPLES = 1000


@dataclass
class _Tally:
    """One side's turns added up: wall time, CPU here and on the server, latencies."""

    seconds: float = 0.0
    client_s: float = 0.0
    server_s: float | None = 0.0
    latencies: list[float] = field(default_factory=list)

    def turn(self, engine: Engine, work: Callable[[], list[float]]) -> None:
        server_before, client_before = backend_cpu_s(engine), time.process_time()
        started = time.perf_counter()
        self.latencies += work()
        self.seconds += time.perf_counter() - started
        self.client_s += time.process_time() - client_before
        server_after = backend_cpu_s(engine)
        if server_after is None or server_before is None or self.server_s is None:
            self.server_s = None
        else:
            self.server_s += server_after - server_before

    def result(self, backend: str, size: int, cut: bool) -> Result:
        runs, latencies = len(self.latencies), self.latencies
        return Result(
            backend, size, runs, self.seconds, latencies, cut, self.client_s, self.server_s
        )


def measure_side_by_side(
    engine: Engine, size: int, seed: int, args: argparse.Namespace
) -> tuple[Result, Result]:
    """``store_run`` and the raw-driver floor taking turns (``TURN_SAMPLES`` each), so
    that both see the same machine: on a shared one the load moves within seconds."""
    count = max(1, args.samples // size)
    runs, calls = make_runs(size, count, seed), captured(engine, make_runs(size, count, seed + 1))
    store, turn = as_pipeline(make_sessions(engine)), max(1, TURN_SAMPLES // size)
    real, floor = _Tally(), _Tally()
    wait_quiet(args.wait_quiet)
    deadline, cut = time.perf_counter() + args.max_seconds, False
    for start in range(0, count, turn):
        mine, theirs = runs[start : start + turn], calls[start : start + turn]
        real.turn(engine, partial(_store_share, store, mine, math.inf))
        floor.turn(engine, partial(replay, engine, theirs, math.inf))
        if time.perf_counter() > deadline:
            cut = start + turn < count
            break
    backend = engine.dialect.name
    return real.result(backend, size, cut), floor.result(backend, size, cut)


def measure_once(
    engine: Engine,
    size: int,
    seed: int,
    args: argparse.Namespace,
    profile: bool = False,
    candidate: StoreRun | None = None,
) -> Result:
    sessions = make_sessions(engine)
    store = as_pipeline(sessions) if candidate is None else in_session(sessions, candidate)
    runs = make_runs(size, max(1, args.samples // size), seed=seed)
    wait_quiet(args.wait_quiet)
    server_before, client_before = backend_cpu_s(engine), time.process_time()
    profiler = cProfile.Profile() if profile else None
    if profiler:
        profiler.enable()
    latencies, seconds, cut = store_all(store, runs, args.max_seconds, args.writers)
    if profiler:
        profiler.disable()
        print_profile(profiler, f"{engine.dialect.name}, {size} samples/run")
    client = time.process_time() - client_before
    server_after = backend_cpu_s(engine)
    server = None if server_after is None or server_before is None else server_after - server_before
    backend = engine.dialect.name
    return Result(backend, size, len(latencies), seconds, latencies, cut, client, server)


def prepared(url: str) -> Engine:
    """An engine on the database, its targets synced and its connection warm."""
    engine = bench_engine(url)
    sessions = make_sessions(engine)
    with sessions.begin() as session:
        targets = [Target(name=target_name(t), url="https://x.example/") for t in range(TARGETS)]
        sync_targets(session, target_values(targets), datetime.now(UTC))
    store_all(as_pipeline(sessions), make_runs(20, WARM_UP_RUNS, seed=99), budget_s=30)
    return engine


def median_row(tries: list[Result], first: str | None = None) -> list[str]:
    tries = sorted(tries, key=lambda r: r.samples_per_s)
    chosen = tries[len(tries) // 2]
    spread = f" ({tries[0].samples_per_s:,.0f}-{tries[-1].samples_per_s:,.0f})"
    row = chosen.row(spread if len(tries) > 1 else "")
    return row if first is None else [first, *row[1:]]


def measure(url: str, args: argparse.Namespace) -> list[list[str]]:
    """Per run size, the median of ``--repeat`` measurements, with their range, and beside
    it (taken in turn with it) the raw-driver floor and the ratio of the two."""
    engine = prepared(url)
    rows = []
    for size in args.sizes:
        check_summaries(make_runs(size, 200, seed=5))  # the same numbers as numpy's
        if args.profile == size:
            measure_once(engine, size, size * 1000 + 999, args, profile=True)
        tries, floors = [], []
        for i in range(args.repeat):
            real, floor = measure_side_by_side(engine, size, size * 1000 + 10 * i, args)
            tries.append(real)
            floors.append(floor)
        ratios = sorted(
            r.samples_per_s / f.samples_per_s for r, f in zip(tries, floors, strict=True)
        )
        ratio = ratios[len(ratios) // 2]  # of each measurement and its floor, taken in turns
        rows.append(median_row(tries) + [f"{ratio:.2f}x"])
        rows.append(median_row(floors, f"{engine.dialect.name}: raw driver") + ["1x"])
        print_table(HEADERS + ["of the floor"], rows[-2:])
    engine.dispose()
    return rows


def measure_latest_cost(url: str, args: argparse.Namespace) -> list[list[str]]:
    """``--latest-cost``: the store with series_latest's upsert and without, paired."""
    from bench.latest_cost import cost_row, paired  # it imports this module

    engine = prepared(url)
    rows = []
    for size in args.sizes:
        pairs = [paired(engine, size, size * 1000 + 10 * i, args) for i in range(args.repeat)]
        rows.append(cost_row(engine.dialect.name, size, pairs))
    engine.dispose()
    return rows


def measure_candidates(url: str, args: argparse.Namespace) -> list[list[str]]:
    """The ladder of proposed changes, round-robin ``--repeat`` times; medians."""
    engine = prepared(url)
    ladder = ingest_ladder()
    rows = []
    for size in args.sizes:
        check_summaries(make_runs(size, 200, seed=5))
        tries: dict[str, list[Result]] = {name: [] for name, _ in ladder}
        for i in range(args.repeat):
            for n, (name, store) in enumerate(ladder):
                seed = 10_000 * (i + 1) + 100 * n + size
                tries[name].append(measure_once(engine, size, seed, args, candidate=store))
        for name, _ in ladder:
            rows.append(median_row(tries[name], f"{engine.dialect.name}: {name}"))
        print_table(HEADERS, rows[-len(ladder) :])
    engine.dispose()
    return rows


def print_profile(profiler: cProfile.Profile, what: str) -> None:
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out).strip_dirs().sort_stats("tottime")
    stats.print_stats(25)
    print(f"\n## profile: {what} (by own time)\n```\n{out.getvalue().strip()}\n```\n")


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_database_options(parser, "pw_bench_ingest")
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="store into an existing (e.g. kept, populated) database instead of an empty one",
    )
    add_quiet_option(parser)
    parser.add_argument(
        "--sizes",
        default="20,100,300",
        type=lambda v: [int(s) for s in v.split(",")],
        help="samples per run, comma-separated (default 20,100,300)",
    )
    parser.add_argument(
        "--samples", type=int, default=100_000, help="samples stored per size (default 100000)"
    )
    parser.add_argument(
        "--max-seconds", type=float, default=60.0, help="time budget per size (default 60)"
    )
    parser.add_argument(
        "--repeat", type=int, default=3, help="measurements per size; the median is shown"
    )
    parser.add_argument(
        "--candidates",
        action="store_true",
        help="measure the changes proposed in bench/store_candidates.py, one after another",
    )
    parser.add_argument(
        "--latest-cost",
        action="store_true",
        help="the store with series_latest's upsert and without, in turns (bench/latest_cost.py)",
    )
    parser.add_argument(
        "--writers", type=int, default=1, help="threads storing runs at once (default 1)"
    )
    parser.add_argument("--profile", type=int, metavar="SIZE", help="cProfile this run size")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = arguments(argv)
    chosen = backends(args.backends)
    pg = f"; PostgreSQL {pg_version(args.pg)}" if "postgresql" in chosen else ""
    print(f"# Ingest: store_run, one run per transaction, {args.writers} writer(s)")
    print(f"{machine_info()}{pg}\n")
    rows = []
    for backend in chosen:
        url = database_url(backend, args.db_name, args.pg, args.sqlite_dir)
        print(f"## {backend_label(url)}")
        with bench_database(url, args.pg, keep=args.keep, reuse=args.reuse):
            if args.latest_cost:
                rows += measure_latest_cost(url, args)
            else:
                rows += measure_candidates(url, args) if args.candidates else measure(url, args)
        print()
    if args.latest_cost:
        from bench.latest_cost import HEADERS as COST_HEADERS

        print(f"## series_latest's upsert, with and without in turns (median of {args.repeat})")
        print_table(COST_HEADERS, rows)
        return
    print(f"## all (median of {args.repeat}; samples/s range in brackets)")
    print_table(HEADERS if args.candidates else HEADERS + ["of the floor"], rows)


if __name__ == "__main__":
    main()
