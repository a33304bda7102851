"""Soak: a real ``phasewatch serve`` probing many targets for a long time; is its memory flat?

``--targets`` ``http`` targets (``--samples`` requests a run, every ``--interval`` seconds)
against the simulated endpoint (``app.demo.sim.process``, a process of its own), probed by
``python -m app serve`` as a user runs it (its own process, a throw-away database on SQLite
or the local PostgreSQL, migrated first). Every ``--every`` seconds: serve's RSS
(``/proc/<pid>/status`` VmRSS), its open file descriptors (``/proc/<pid>/fd``), threads,
CPU, and the runs stored so far. At the end (bench/soak_report.py): RSS at the end of
``--warmup`` minutes, at the start of the ``--last`` minutes and at the end, each the median
of 5 minutes of readings, and the change over the last part (issue 36's goal: the last 30
minutes of an hour within +5 %); fds and threads after the warm-up; the slots stored: each
target's due times on its grid (its first stored due time + k × interval) up to a margin
before the end, against the distinct due times stored (doubles counted apart), and why
any are missing (bench/soak_timing.py). ``--summarize FILE`` summarises a soak's printed
readings again.

Bounded: ``--minutes`` (at most 600), serve stopped with SIGTERM (killed if it hangs), the
sim stops by itself after the run; loopback only.

    nice -n 10 .venv/bin/python -m bench.soak --minutes 60 --db sqlite
    nice -n 10 .venv/bin/python -m bench.soak --minutes 60 --db postgres
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import func, select

from app.demo.sim.app import SimConfig
from app.demo.sim.process import SimProcess
from app.store.db import make_sessions
from app.store.models import RunRow, TargetRow
from bench.common import RunClock, machine_info, print_table
from bench.soak_report import Reading, parsed, summary_rows
from bench.soak_timing import skips_logged, timing_rows
from bench.store_common import PG_SERVER, SQLITE_DIR, bench_database, bench_engine, database_url
from tests.pgcluster import Serve

MAX_MINUTES = 600.0
END_MARGIN_INTERVALS = 2  # due times this close to the end may still be in flight


def proc_reading(pid: int, at_s: float, runs: int) -> Reading:
    status = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu_s = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime
    return Reading(
        at_s=at_s,
        rss_mb=int(status["VmRSS"].split()[0]) / 1024,
        anon_mb=int(status["RssAnon"].split()[0]) / 1024,
        fds=len(os.listdir(f"/proc/{pid}/fd")),
        threads=int(status["Threads"]),
        cpu_s=cpu_s,
        runs=runs,
    )


def targets_file(path: Path, url: str, count: int, interval: float, samples: int) -> None:
    lines = ["targets:"]
    for k in range(count):
        lines += [f"  - name: soak-{k:03d}", f"    url: {url}/health"]
        lines += [f"    interval: {interval:g}s", f"    samples: {samples}"]
    path.write_text("\n".join(lines) + "\n")


def count_runs(url: str) -> int:
    engine = bench_engine(url)
    try:
        with make_sessions(engine)() as session:
            return int(session.execute(select(func.count(RunRow.id))).scalar_one())
    finally:
        engine.dispose()


def due_times(url: str) -> dict[str, list[datetime]]:
    engine = bench_engine(url)
    query = (
        select(TargetRow.name, RunRow.scheduled_at)
        .join(TargetRow, RunRow.target_id == TargetRow.id)
        .where(RunRow.scheduled_at.is_not(None))
    )
    found: dict[str, list[datetime]] = defaultdict(list)
    try:
        with make_sessions(engine)() as session:
            for name, due in session.execute(query):
                found[name].append(due if due.tzinfo else due.replace(tzinfo=UTC))
    finally:
        engine.dispose()
    return found


@dataclass(frozen=True)
class Slots:
    expected: int
    stored: int
    doubled: int
    missing_by_target: dict[str, list[int]]  # slot indexes on each target's grid


def slots(
    found: dict[str, list[datetime]], names: list[str], interval: float, until: datetime
) -> Slots:
    expected = stored = doubled = 0
    missing: dict[str, list[int]] = {}
    for name in names:
        dues = sorted(found.get(name, []))
        if not dues:
            continue
        first = dues[0]
        cut = [d for d in dues if d <= until]
        # A target first due after ``until`` (a short window, a late start) had no slot due.
        grid = max(0, int((until - first).total_seconds() // interval) + 1)
        indexes = [round((d - first).total_seconds() / interval) for d in cut]
        expected += grid
        stored += len(set(indexes))
        doubled += len(indexes) - len(set(indexes))
        gone = sorted(set(range(grid)) - set(indexes))
        if gone:
            missing[name] = gone
    return Slots(expected, stored, doubled, missing)


def run(args: argparse.Namespace) -> None:
    backend = "sqlite" if args.db == "sqlite" else "postgresql"
    url = database_url(backend, args.db_name, args.pg, args.sqlite_dir)
    seconds = min(args.minutes, MAX_MINUTES) * 60
    clock = RunClock()
    print(f"# Soak: `phasewatch serve`, {args.targets} targets every {args.interval:g} s, ")
    print(f"{args.samples} samples a run, {seconds / 60:g} min, {backend}\n{machine_info()}\n")
    config = SimConfig(one_way_ms=0)
    with (
        bench_database(url, args.pg, keep=args.keep),
        SimProcess(config, http2=False, max_seconds=seconds + 300) as sim,
        tempfile.TemporaryDirectory(prefix="pw-soak-") as name,
    ):
        workdir = Path(name)
        config_path = workdir / "phasewatch.yaml"
        targets_file(config_path, sim.url, args.targets, args.interval, args.samples)
        serve = Serve(workdir / "serve", config_path, {"PHASEWATCH_DATABASE_URL": url})
        try:
            serve.wait_ready(120)
            readings = watch(serve, url, seconds, args.every)
            until = datetime.now(UTC) - timedelta(seconds=END_MARGIN_INTERVALS * args.interval)
            stop_s = serve.terminate(30)
        finally:
            serve.kill()
            log = serve.output()
        names = [f"soak-{k:03d}" for k in range(args.targets)]
        counted = slots(due_times(url), names, args.interval, until)
        lag = sim.loop_lag()
        timing = timing_rows(url, args.interval)
    timing.append(["the sim's loop late p99 / max ms", f"{lag['p99']:.1f} / {lag['max']:.1f}"])
    report(readings, counted, args, stop_s, log, timing)
    print(f"\n{clock.report()}")


def watch(serve: Serve, url: str, seconds: float, every: float) -> list[Reading]:
    began = time.monotonic()
    readings: list[Reading] = []
    print("| min | RSS MB | anon MB | fds | threads | CPU s | runs stored |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    while True:
        at = time.monotonic() - began
        reading = proc_reading(serve.process.pid, at, count_runs(url))
        readings.append(reading)
        print(
            f"| {at / 60:.1f} | {reading.rss_mb:.1f} | {reading.anon_mb:.1f} | {reading.fds} | "
            f"{reading.threads} | "
            f"{reading.cpu_s:.0f} | {reading.runs:,} |",
            flush=True,
        )
        if at >= seconds or not serve.alive():
            return readings
        time.sleep(max(0.0, min(every, seconds - at)))


def report(
    readings: list[Reading],
    counted: Slots,
    args: argparse.Namespace,
    stop_s: float,
    log: str,
    timing: list[list[str]],
) -> None:
    print()
    rows = summary_rows(readings, args.warmup * 60, args.last * 60)
    share = counted.stored / counted.expected * 100 if counted.expected else 0.0
    rows.append(["slots stored", f"{counted.stored:,} of {counted.expected:,} ({share:.2f} %)"])
    rows.append(["slots stored twice", str(counted.doubled)])
    missed = sum(len(v) for v in counted.missing_by_target.values())
    where = sorted(counted.missing_by_target.items(), key=lambda kv: -len(kv[1]))[:5]
    rows.append(
        ["missing slots, worst targets", ", ".join(f"{k} {v[:6]}" for k, v in where) or "none"]
    )
    rows.append(["missing slots in all", str(missed)])
    skipped, reasons = skips_logged(log)
    rows.append(["due runs serve logged as skipped", f"{skipped:,} ({reasons})"])
    rows += timing
    warnings = [line for line in log.splitlines() if " WARNING " in line or " ERROR " in line]
    rows.append(["serve's WARNING/ERROR lines", str(len(warnings))])
    rows.append(["SIGTERM to exit", f"{stop_s:.2f} s"])
    print_table(["measure", "value"], rows)
    for line in warnings[:10]:
        print(f"    {line}")


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--minutes", type=float, default=60.0, help="at most 600")
    parser.add_argument("--warmup", type=float, default=10.0, help="minutes (default 10)")
    parser.add_argument(
        "--last", type=float, default=30.0, help="minutes at the end whose RSS change is the goal"
    )
    parser.add_argument("--targets", type=int, default=100)
    parser.add_argument("--interval", type=float, default=10.0, help="seconds (default 10)")
    parser.add_argument("--samples", type=int, default=5, help="samples a run (default 5)")
    parser.add_argument("--every", type=float, default=30.0, help="seconds between readings")
    parser.add_argument("--pg", default=PG_SERVER, help="a PostgreSQL server's maintenance URL")
    parser.add_argument("--sqlite-dir", type=Path, default=SQLITE_DIR)
    parser.add_argument("--db-name", default="pw_bench_soak", help="database (file) name")
    parser.add_argument("--keep", action="store_true", help="do not drop the database")
    parser.add_argument(
        "--summarize", type=Path, help="a soak's output: summarise its readings again, no run"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = arguments(argv)
    if args.summarize is not None:
        readings = parsed(args.summarize.read_text())
        print_table(["measure", "value"], summary_rows(readings, args.warmup * 60, args.last * 60))
        return
    # SIGTERM (nohup's way to stop it) ends it as Ctrl-C does: serve and the sim stopped,
    # the database dropped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    run(args)


if __name__ == "__main__":
    main()
