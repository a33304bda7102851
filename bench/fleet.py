"""A fleet on PostgreSQL: what one ``serve`` spends a run at 50, 500 and 2,000 targets.

For each fleet size: a throw-away PostgreSQL database (migrated), the simulated endpoint in
a process of its own (``app.demo.sim.process``), and ``python -m app serve`` probing N
``http`` targets (``--samples`` requests a run, every ``--interval`` seconds) as a user
runs it (bench/soak.py's pieces). After ``--warmup`` minutes (every target has run and been
evaluated once) the CPU serve spent (/proc/<pid>/stat, all its threads) and the runs it
stored are read, and again ``--minutes`` later: CPU a run is the one over the other. Then
py-spy samples serve for ``--profile`` seconds (bench/fleet_profile.py) to split that CPU
by component. Once serve is stopped, the probe alone (bench/probe_floor.py) probes the same
targets on the same sims for ``--floor`` minutes: the floor serve's CPU a run is held to.
Reported: the slots due on each target's grid against those stored, doubled,
and skipped (serve's log), lateness (a run's start minus its due time) p50/p99 in the
measured window, CPU a run in all and by component, RSS over time, and what 10,000
targets at the same interval would need on paper from the measured CPU a run.

Bounded: each size at most ``MAX_MINUTES``; serve stopped with SIGTERM (killed if it
hangs), the sim stops by itself; loopback only.

    nice -n 10 .venv/bin/python -m bench.fleet --sizes 50,500,2000 --interval 60 --samples 5
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import select

from app.demo.sim.app import SimConfig
from app.demo.sim.process import SimProcess
from app.store.db import make_sessions
from app.store.models import RunRow
from bench.common import RunClock, machine_info, pct, print_table
from bench.fleet_profile import COMPONENTS, OTHER, record, shares
from bench.probe_floor import Floor, floor_in_process
from bench.soak import (
    END_MARGIN_INTERVALS,
    Slots,
    count_runs,
    due_times,
    proc_reading,
    slots,
)
from bench.soak_report import Reading
from bench.soak_timing import skips_logged
from bench.store_common import PG_SERVER, SQLITE_DIR, bench_database, bench_engine, database_url
from tests.pgcluster import Serve

MAX_MINUTES = 60.0
# 2,000 targets on a busy 2-core machine took minutes to answer /healthz the first time.
READY_S = 600.0
TARGETS_PER_SIM = 600
PROJECTED = 10_000


@dataclass
class Measured:
    size: int
    slots: Slots
    skipped: int
    late_ms: list[float]
    cpu_ms_per_run: float
    cpu_s_per_min: float
    runs: int
    by_component: dict[str, float]
    readings: list[Reading]
    floor: Floor | None
    load: str


def run_one(args: argparse.Namespace, size: int) -> Measured:
    url = database_url("postgresql", args.db_name, args.pg, SQLITE_DIR)
    floor_s = (args.interval + args.floor * 60) if args.floor > 0 else 0.0
    total_s = READY_S + (args.warmup + args.minutes) * 60 + args.profile + floor_s + 300
    with (
        bench_database(url, args.pg, keep=False),
        ExitStack() as stack,
        tempfile.TemporaryDirectory(prefix="pw-fleet-") as name,
    ):
        # The sim's loop selects with select(), whose file descriptors end at 1,024: each
        # sim takes at most TARGETS_PER_SIM targets' connections.
        config = SimConfig(one_way_ms=0)
        sims = [
            stack.enter_context(SimProcess(config, http2=False, max_seconds=total_s))
            for _ in range(math.ceil(size / TARGETS_PER_SIM))
        ]
        path = Path(name) / "phasewatch.yaml"
        fleet_file(path, [sim.url for sim in sims], size, args.interval, args.samples)
        serve = Serve(Path(name) / "serve", path, {"PHASEWATCH_DATABASE_URL": url})
        try:
            serve.wait_ready(READY_S)
            measured = watch(serve, url, args)
            until = datetime.now(UTC) - timedelta(seconds=END_MARGIN_INTERVALS * args.interval)
            stopped(serve)
        finally:
            serve.kill()
            log = serve.output()
        # The probe alone, on the same sims, once serve is gone: the floor of the ratio.
        floor = floor_in_process(path, args.interval, args.floor * 60) if floor_s else None
        names = [f"soak-{k:03d}" for k in range(size)]
        counted = slots(due_times(url), names, args.interval, until)
        late = lateness_ms(url, measured.window)
        gone = [sim.url for sim in sims if not alive(sim)]
        if gone:
            print(f"    the sim at {gone} stopped before the end: its targets' runs failed")
    return Measured(
        size,
        counted,
        skips_logged(log)[0],
        late,
        measured.cpu_ms,
        measured.cpu_s_per_min,
        measured.runs,
        measured.by_component,
        measured.readings,
        floor,
        " ".join(f"{v:.2f}" for v in os.getloadavg()),
    )


def fleet_file(path: Path, urls: list[str], count: int, interval: float, samples: int) -> None:
    """bench/soak.py's targets file, the targets dealt out over ``urls`` in turn."""
    lines = ["targets:"]
    for k in range(count):
        lines += [f"  - name: soak-{k:03d}", f"    url: {urls[k % len(urls)]}/health"]
        lines += [f"    interval: {interval:g}s", f"    samples: {samples}"]
    path.write_text("\n".join(lines) + "\n")


def alive(sim: SimProcess) -> bool:
    try:
        sim.loop_lag()
    except Exception:  # any: a sim that cannot answer is gone
        return False
    return True


def stopped(serve: Serve) -> None:
    try:
        serve.terminate(30)
    except subprocess.TimeoutExpired:
        print("    serve did not exit within 30 s of SIGTERM: killed")


@dataclass
class Window:
    window: tuple[datetime, datetime]
    cpu_ms: float
    cpu_s_per_min: float
    runs: int
    by_component: dict[str, float]
    readings: list[Reading]


def watch(serve: Serve, url: str, args: argparse.Namespace) -> Window:
    began = time.monotonic()
    readings: list[Reading] = []
    pid = serve.process.pid

    def read_until(seconds: float) -> Reading:
        while True:
            at = time.monotonic() - began
            reading = proc_reading(pid, at, count_runs(url))
            readings.append(reading)
            print(
                f"    {at / 60:5.1f} min  RSS {reading.rss_mb:6.1f} MB  CPU {reading.cpu_s:7.1f} s"
                f"  runs {reading.runs:,}",
                flush=True,
            )
            if at >= seconds or not serve.alive():
                return reading
            time.sleep(max(0.0, min(args.every, seconds - at)))

    read_until(args.warmup * 60)
    first, started = readings[-1], datetime.now(UTC)
    last = read_until((args.warmup + args.minutes) * 60)
    ended = datetime.now(UTC)
    runs = last.runs - first.runs
    cpu_ms = (last.cpu_s - first.cpu_s) * 1000 / runs if runs else float("nan")
    args.profile_dir.mkdir(parents=True, exist_ok=True)
    out = args.profile_dir / f"serve-{args.size}.txt"
    raw = record(pid, args.profile, out) if args.profile > 0 else ""
    split = {name: share * cpu_ms for name, share in shares(raw).items()}
    readings.append(proc_reading(pid, time.monotonic() - began, count_runs(url)))
    per_min = (last.cpu_s - first.cpu_s) * 60 / (last.at_s - first.at_s)
    return Window((started, ended), cpu_ms, per_min, runs, split, readings)


def lateness_ms(url: str, window: tuple[datetime, datetime]) -> list[float]:
    """A run's start minus its due time, for the runs due in ``window``."""
    engine = bench_engine(url)
    query = select(RunRow.scheduled_at, RunRow.started_at).where(
        RunRow.scheduled_at >= window[0], RunRow.scheduled_at < window[1]
    )
    try:
        with make_sessions(engine)() as session:
            rows = session.execute(query).all()
    finally:
        engine.dispose()
    return [(started - due).total_seconds() * 1000 for due, started in rows]


def report(results: list[Measured], args: argparse.Namespace) -> None:
    names = [name for name, _ in COMPONENTS] + [OTHER]
    rows = []
    for m in results:
        late = f"{pct(m.late_ms, 50):.0f} / {pct(m.late_ms, 99):.0f}" if m.late_ms else "-"
        parts = " · ".join(f"{n} {m.by_component.get(n, 0.0):.1f}" for n in names)
        parts = parts if m.by_component else "- (no profile)"
        rss = f"{m.readings[0].rss_mb:.0f} → {m.readings[-1].rss_mb:.0f}"
        floor = "-"
        if m.floor is not None:
            ratio = m.cpu_ms_per_run / m.floor.cpu_ms_per_run
            floor = f"{m.floor.cpu_ms_per_run:.1f} ({m.floor.runs:,} runs): ×{ratio:.2f}"
        rows.append(
            [
                f"{m.size:,}",
                f"{m.slots.expected:,}",
                f"{m.slots.stored:,}",
                str(m.skipped),
                str(m.slots.doubled),
                late,
                f"{m.cpu_ms_per_run:.1f} ({m.runs:,} runs; {m.cpu_s_per_min:.1f} s a min)",
                floor,
                parts,
                rss,
                m.load,
            ]
        )
    headers = ["targets", "slots due", "stored", "skipped (log)", "doubled", "late p50/p99 ms"]
    headers += ["CPU ms a run", "probe alone ms a run: serve ×", "by component, ms a run"]
    headers += ["RSS MB", "load after"]
    print_table(headers, rows)
    per_s = PROJECTED / args.interval
    for m in results:
        print(
            f"\n{PROJECTED:,} targets every {args.interval:g} s = {per_s:.0f} runs/s; at "
            f"{m.size:,} targets' {m.cpu_ms_per_run:.1f} ms a run: "
            f"{per_s * m.cpu_ms_per_run / 1000:.1f} cores of serve"
        )


def fleet_options(parser: argparse.ArgumentParser, warmup_min: float) -> None:
    """The options every fleet bench shares (this one, fleet_idle, fleet_replicas): each
    target's interval and samples, the minutes before measuring, the PostgreSQL server."""
    parser.add_argument("--interval", type=float, default=60.0, help="seconds (default 60)")
    parser.add_argument("--samples", type=int, default=5, help="samples a run (default 5)")
    parser.add_argument("--warmup", type=float, default=warmup_min, help="minutes before measuring")
    parser.add_argument("--pg", default=PG_SERVER, help="a PostgreSQL server's maintenance URL")


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="50,500,2000", help="fleet sizes, comma-separated")
    fleet_options(parser, warmup_min=2.0)
    parser.add_argument("--minutes", type=float, default=3.0, help="minutes measured")
    parser.add_argument("--profile", type=float, default=60.0, help="seconds of py-spy; 0: none")
    parser.add_argument(
        "--floor", type=float, default=3.0, help="minutes of the probe alone after; 0: none"
    )
    parser.add_argument("--every", type=float, default=30.0, help="seconds between readings")
    parser.add_argument(
        "--profile-dir", type=Path, default=Path("/tmp/pw-fleet"), help="py-spy's raw output"
    )
    parser.add_argument("--db-name", default="pw_bench_fleet", help="database to create, drop")
    args = parser.parse_args(argv)
    if args.warmup + args.minutes + args.floor > MAX_MINUTES:
        parser.error(f"--warmup + --minutes + --floor: at most {MAX_MINUTES:g}")
    return args


def main(argv: list[str] | None = None) -> None:
    args = arguments(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    clock = RunClock()
    print(f"# Fleet: `phasewatch serve` on PostgreSQL, every {args.interval:g} s, ")
    print(f"{args.samples} samples a run\n{machine_info()}\n")
    results = []
    for size in (int(s) for s in args.sizes.split(",")):
        print(f"## {size:,} targets", flush=True)
        args.size = size
        results.append(run_one(args, size))
        report(results[-1:], args)  # each size's row as soon as it is measured
    print("\n## All sizes\n")
    report(results, args)
    print(f"\n{clock.report()}")


if __name__ == "__main__":
    main()
