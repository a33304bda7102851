"""bench/fleet.py's fleet over several ``serve`` replicas on one PostgreSQL database.

N ``http`` targets on the simulator (dealt over several sim processes, as bench/fleet.py
does: a sim's ``select()`` loop stops at 1,024 descriptors) through ``--replicas`` real
``python -m app serve`` processes sharing one throw-away database (app.replicas: leases,
rendezvous hashing by slot). Each serve's start is waited for (``/healthz``, then every
replica seeing all live and the shares adding up to the fleet); after ``--warmup`` minutes
the measured window begins, and with ``--kill-one`` the replica owning the most targets is
killed (``kill -9``) half-way through it.

Reported per replica (bench/fleet_replicas_report.py): targets owned, CPU a run in the
window (the victim's until its kill), RSS over time, the slots due on its targets' grids
from the moment all shared (the first slots included) against those stored, skipped (its
log), doubled (runs turned away at ingest, ``phasewatch_runs_duplicate_slot_total``; the
victim's read before the kill) and missing, lateness p50/p99; and for the victim's targets
the slots lost around the kill against the bound ⌈lease / interval⌉ + 1.

Bounded: at most ``MAX_MINUTES`` measured; every serve killed at the end, the sims stop by
themselves (their ``max_seconds``).

    nice -n 5 .venv/bin/python -m bench.fleet_replicas --size 500 --replicas 3 --kill-one \\
        --interval 60 --lease 60 --warmup 2 --minutes 6
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import signal
import sys
import tempfile
import time
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path

import httpx
from sqlalchemy import select

from app.demo.sim.app import SimConfig
from app.demo.sim.process import SimProcess
from app.runs.slots import epoch_ms
from app.store.db import make_sessions
from app.store.models import RunRow, TargetRow
from bench.common import machine_info
from bench.fleet import TARGETS_PER_SIM, alive, fleet_file, fleet_options
from bench.fleet_replicas_report import Plan, Replica, Run, report
from bench.soak import END_MARGIN_INTERVALS, proc_reading
from bench.soak_timing import skips_logged
from bench.store_common import SQLITE_DIR, bench_database, bench_engine, database_url
from tests.helpers import eventually
from tests.pgcluster import Serve

MAX_MINUTES = 40.0
READY_S = 900.0
DRAIN_S = 120.0
VANTAGE = "fleet"


def share(serve: Serve) -> dict[str, object]:
    health = serve.health(timeout_s=30) or {}
    found = health.get("replica", {})
    return dict(found) if isinstance(found, dict) else {}


def doubled(serve: Serve) -> float:
    # Long: a starved serve (a loaded machine, nice 19) answered a scrape in over 60 s.
    text = httpx.get(f"{serve.base_url}/metrics", timeout=300).text
    prefix = "phasewatch_runs_duplicate_slot_total{"
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(prefix))


def cpu_s(serve: Serve) -> float:
    return proc_reading(serve.process.pid, 0.0, 0).cpu_s


def replicas(args: argparse.Namespace, url: str, path: Path, root: Path) -> list[Serve]:
    env = {
        "PHASEWATCH_DATABASE_URL": url,
        "PHASEWATCH_VANTAGE": VANTAGE,
        "PHASEWATCH_REPLICA_LEASE_S": str(args.lease),
    } | dict(item.split("=", 1) for item in args.env)
    return [Serve(root / f"serve-{k}", path, env) for k in range(args.replicas)]


def wait_sharing(args: argparse.Namespace, served: list[Serve]) -> dict[int, dict[str, object]]:
    began = time.monotonic()
    for serve in served:
        serve.wait_ready(READY_S)
    args.ready_ms = epoch_ms(datetime.now(UTC))
    print(f"  every serve answers /healthz after {time.monotonic() - began:.0f} s", flush=True)
    found: dict[int, dict[str, object]] = {}

    def sharing() -> bool:
        found.update({serve.process.pid: share(serve) for serve in served})
        live = all(s.get("live") == args.replicas for s in found.values())
        owned = sum(int(str(s.get("targets", 0))) for s in found.values())
        return live and owned == args.size

    eventually(sharing, READY_S, "the replicas sharing every target")
    print(f"  sharing every target after {time.monotonic() - began:.0f} s", flush=True)
    return found


class Readings:
    """Each live replica's RSS every ``every`` seconds, printed as it goes."""

    def __init__(self, served: list[Serve], every: float) -> None:
        self.served, self.every = served, every
        self.rss: dict[int, list[float]] = {s.process.pid: [] for s in served}
        self.began = time.monotonic()

    def until(self, seconds_from_now: float) -> None:
        end = time.monotonic() + seconds_from_now
        while True:
            line = []
            for serve in self.served:
                if serve.alive():
                    mb = proc_reading(serve.process.pid, 0.0, 0).rss_mb
                    self.rss[serve.process.pid].append(mb)
                    line.append(f"{mb:6.0f}")
                else:
                    line.append("     -")
            at = (time.monotonic() - self.began) / 60
            print(f"    {at:5.1f} min  RSS MB {' '.join(line)}  load {os.getloadavg()[0]:.1f}",
                  flush=True)  # fmt: skip
            left = end - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(self.every, left))


def drained(served: list[Serve], victim: Serve | None) -> None:
    """Wait (a bounded while) for the survivors' spools to be flushed: a run spooled while
    the writer was behind is in the database only then."""
    began = time.monotonic()
    live = [s for s in served if s is not victim and s.alive()]
    while any(s.spooled_ids() for s in live) and time.monotonic() - began < DRAIN_S:
        time.sleep(2)
    waiting = sum(len(s.spooled_ids()) for s in live)
    print(f"  survivors' spools: {waiting} run(s) left after {time.monotonic() - began:.0f} s",
          flush=True)  # fmt: skip


def stored_runs(url: str) -> list[Run]:
    engine = bench_engine(url)
    query = (
        select(TargetRow.name, RunRow.slot, RunRow.scheduled_at, RunRow.started_at)
        .join(TargetRow, RunRow.target_id == TargetRow.id)
        .where(RunRow.slot.is_not(None), RunRow.scheduled_at.is_not(None))
    )
    try:
        with make_sessions(engine)() as session:
            rows = session.execute(query).all()
    finally:
        engine.dispose()
    return [
        Run(name, int(slot), (started - due).total_seconds() * 1000)
        for name, slot, due, started in rows
    ]


def measure(
    args: argparse.Namespace, served: list[Serve], url: str, shares: dict[int, dict[str, object]]
) -> None:
    shared_ms = epoch_ms(datetime.now(UTC))
    readings = Readings(served, args.every)
    readings.until(args.warmup * 60)
    cpu = {serve.process.pid: cpu_s(serve) for serve in served}
    window_from = epoch_ms(datetime.now(UTC))
    readings.until(args.minutes * 30)
    counted = {serve.process.pid: doubled(serve) for serve in served}
    victim, killed_ms = None, None
    if args.kill_one:
        victim = max(served, key=lambda s: int(str(shares[s.process.pid].get("targets", 0))))
        cpu[victim.process.pid] = cpu_s(victim) - cpu[victim.process.pid]
        killed_ms = epoch_ms(datetime.now(UTC))
        victim.process.kill()
        victim.process.wait(timeout=10)
        print(f"  killed replica {shares[victim.process.pid].get('id')}", flush=True)
    if victim is not None:
        left = len(list(victim.spool_dir.glob("*")))
        print(f"  the victim left {len(victim.spooled_ids())} run(s) spooled, {left} file(s) in "
              "its spool (journals: runs in flight or queued)", flush=True)  # fmt: skip
    readings.until(args.minutes * 30)
    window_to = epoch_ms(datetime.now(UTC))
    drained(served, victim)
    for serve in served:
        if serve is not victim:
            counted[serve.process.pid] = doubled(serve)
            cpu[serve.process.pid] = cpu_s(serve) - cpu[serve.process.pid]
    load = " ".join(f"{v:.2f}" for v in os.getloadavg())
    for serve in served:
        serve.kill()
    plan = Plan(
        names=[f"soak-{k:03d}" for k in range(args.size)],
        vantage=VANTAGE,
        interval_s=args.interval,
        lease_s=args.lease,
        ready_ms=args.ready_ms,
        shared_ms=shared_ms,
        window_ms=(window_from, window_to),
        until_ms=window_to - round(END_MARGIN_INTERVALS * args.interval * 1000),
        killed_ms=killed_ms,
        victim=None if victim is None else str(shares[victim.process.pid].get("id")),
    )
    rows = [
        Replica(
            id=str(shares[s.process.pid].get("id")),
            label="abcdefgh"[k],
            targets=int(str(shares[s.process.pid].get("targets", 0))),
            cpu_s=cpu[s.process.pid],
            skipped=skips_logged(s.output())[0],
            doubled=counted[s.process.pid],
            rss_mb=readings.rss[s.process.pid],
            killed=s is victim,
        )
        for k, s in enumerate(served)
    ]
    print(f"\n{args.replicas} replicas, {args.size:,} targets every {args.interval:g} s, "
          f"lease {args.lease:g} s; load at the end {load}\n")  # fmt: skip
    report(plan, rows, stored_runs(url))


def arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=500, help="targets")
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--kill-one", action="store_true", help="kill -9 one half-way")
    fleet_options(parser, warmup_min=2.0)
    parser.add_argument("--lease", type=float, default=60.0, help="PHASEWATCH_REPLICA_LEASE_S")
    parser.add_argument("--minutes", type=float, default=6.0, help="minutes measured")
    parser.add_argument("--every", type=float, default=30.0, help="seconds between readings")
    parser.add_argument("--logs", type=Path, default=Path("/tmp/pw-fleet-replicas"),
                        help="where each serve's log is copied")  # fmt: skip
    parser.add_argument("--env", action="append", default=[], help="KEY=VALUE for each serve")
    parser.add_argument("--keep-db", action="store_true", help="keep the database")
    parser.add_argument("--db-name", default="pw_bench_fleet_replicas")
    args = parser.parse_args(argv)
    if args.warmup + args.minutes > MAX_MINUTES:
        parser.error(f"--warmup + --minutes: at most {MAX_MINUTES:g}")
    return args


def main(argv: list[str] | None = None) -> None:
    args = arguments(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the serves killed on the way out
    print(f"# Fleet over replicas\n{machine_info()}\n", flush=True)
    url = database_url("postgresql", args.db_name, args.pg, SQLITE_DIR)
    total_s = READY_S + (args.warmup + args.minutes) * 60 + 300
    with (
        bench_database(url, args.pg, keep=args.keep_db),
        ExitStack() as stack,
        tempfile.TemporaryDirectory(prefix="pw-fleet-r-") as name,
    ):
        config = SimConfig(one_way_ms=0)
        sims = [
            stack.enter_context(SimProcess(config, http2=False, max_seconds=total_s))
            for _ in range(math.ceil(args.size / TARGETS_PER_SIM))
        ]
        path = Path(name) / "phasewatch.yaml"
        fleet_file(path, [sim.url for sim in sims], args.size, args.interval, args.samples)
        served = replicas(args, url, path, Path(name))
        try:
            measure(args, served, url, wait_sharing(args, served))
        finally:
            for serve in served:
                serve.kill()
            args.logs.mkdir(parents=True, exist_ok=True)
            for k, serve in enumerate(served):
                shutil.copy(serve.logpath, args.logs / f"serve-{k}.log")
            if gone := [sim.url for sim in sims if not alive(sim)]:
                print(f"  the sims at {gone} stopped before the end: their targets' runs failed")


if __name__ == "__main__":
    main()
