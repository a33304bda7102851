"""bench/fleet.py's fleet over several ``serve`` replicas on one PostgreSQL database.

N ``http`` targets on the simulator (a process of its own) through ``--replicas`` real
``python -m app serve`` processes sharing one throw-away database (app.replicas: leases,
rendezvous hashing by slot). With ``--kill-one``, the replica owning the most targets is
killed (``kill -9``) half-way through the measured minutes. Reported: each replica's share
and CPU a run, the slots due on each target's grid against those stored, the runs turned
away at ingest because another replica had stored their slot (``doubled``, from the
replicas' ``phasewatch_runs_duplicate_slot_total``), and for the victim's targets the slots
lost around the kill against the bound the lease gives (``--lease`` / interval + 1).

Bounded: at most ``MAX_MINUTES``; every serve killed at the end, the sim stops by itself.

    nice -n 5 .venv/bin/python -m bench.fleet_replicas --size 300 --replicas 3 --kill-one
"""

from __future__ import annotations

import argparse
import math
import os
import tempfile
import time
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx

from app.demo.sim.app import SimConfig
from app.demo.sim.process import SimProcess
from bench.common import machine_info
from bench.fleet import TARGETS_PER_SIM, fleet_file
from bench.soak import END_MARGIN_INTERVALS, due_times, proc_reading, slots
from bench.store_common import PG_SERVER, SQLITE_DIR, bench_database, database_url
from tests.helpers import eventually
from tests.pgcluster import Serve

MAX_MINUTES = 30.0
READY_S = 600.0


def share(serve: Serve) -> dict[str, int]:
    health = serve.health(timeout_s=30) or {}
    found = health.get("replica", {})
    return dict(found) if isinstance(found, dict) else {}


def doubled(serve: Serve) -> float:
    text = httpx.get(f"{serve.base_url}/metrics", timeout=30).text
    prefix = "phasewatch_runs_duplicate_slot_total{"
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(prefix))


def cpu_s(serve: Serve) -> float:
    return proc_reading(serve.process.pid, 0.0, 0).cpu_s


def replicas(args: argparse.Namespace, url: str, path: Path, root: Path) -> list[Serve]:
    env = {
        "PHASEWATCH_DATABASE_URL": url,
        "PHASEWATCH_VANTAGE": "fleet",
        "PHASEWATCH_REPLICA_LEASE_S": str(args.lease),
    }
    return [Serve(root / f"serve-{k}", path, env) for k in range(args.replicas)]


def wait_sharing(args: argparse.Namespace, served: list[Serve]) -> None:
    for serve in served:
        serve.wait_ready(READY_S)

    def sharing() -> bool:
        shares = [share(serve) for serve in served]
        live = all(s.get("live") == args.replicas for s in shares)
        return live and sum(s.get("targets", 0) for s in shares) == args.size

    eventually(sharing, READY_S, "the replicas sharing every target")


def lost_around(dues: list[datetime], killed: datetime, interval: float) -> int:
    before = [d for d in dues if d < killed]
    after = [d for d in dues if d >= killed]
    if not before or not after:
        return -1
    return round((after[0] - before[-1]).total_seconds() / interval) - 1


def measure(args: argparse.Namespace, served: list[Serve], url: str) -> None:
    shares = {serve.process.pid: share(serve) for serve in served}
    cpu0 = {serve.process.pid: cpu_s(serve) for serve in served}
    began = datetime.now(UTC)
    half = args.minutes * 30
    time.sleep(half)
    victim, killed, theirs = None, None, 0
    counted = {serve.process.pid: doubled(serve) for serve in served}
    if args.kill_one:
        victim = max(served, key=lambda s: shares[s.process.pid].get("targets", 0))
        theirs = shares[victim.process.pid].get("targets", 0)
        cpu0[victim.process.pid] -= cpu_s(victim)  # its CPU until the kill
        killed = datetime.now(UTC)
        victim.process.kill()
        victim.process.wait(timeout=10)
    time.sleep(half)
    for serve in served:
        if serve.alive():
            counted[serve.process.pid] = doubled(serve)
            cpu0[serve.process.pid] = cpu_s(serve) - cpu0[serve.process.pid]
        else:
            cpu0[serve.process.pid] = -cpu0[serve.process.pid]
    until = datetime.now(UTC) - timedelta(seconds=END_MARGIN_INTERVALS * args.interval)
    found = due_times(url)
    names = [f"soak-{k:03d}" for k in range(args.size)]
    grid = slots(found, names, args.interval, until)
    window = [d for dues in found.values() for d in dues if began <= d < until]
    load = " ".join(f"{v:.2f}" for v in os.getloadavg())
    print(f"{len(served)} replicas, {args.size} targets every {args.interval:g} s; load {load}")
    for serve in served:
        pid, s = serve.process.pid, shares[serve.process.pid]
        state = "killed" if serve is victim else "live"
        print(
            f"  replica {s.get('id')}: {s.get('targets')} targets, {state}, CPU {cpu0[pid]:.1f} s"
        )
    runs = len(window)
    total_cpu = sum(cpu0.values())
    print(
        f"  runs due in window stored: {runs:,}; CPU a run {total_cpu * 1000 / max(runs, 1):.1f} ms"
    )
    print(f"  slots due {grid.expected:,}, stored {grid.stored:,}, doubled at ingest "
          f"{sum(counted.values()):g}, missing {grid.expected - grid.stored:,}")  # fmt: skip
    if victim is not None and killed is not None:
        lost = [lost_around(found.get(n, []), killed, args.interval) for n in names]
        moved = [n for n in lost if n >= 0]
        bound = math.ceil(args.lease / args.interval) + 1
        print(f"  killed {theirs} targets' worth; slots lost around the kill: max {max(moved)}, "
              f"total {sum(moved)} (bound a target: {bound})")  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=300, help="targets")
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--kill-one", action="store_true", help="kill -9 one half-way")
    parser.add_argument("--interval", type=float, default=10.0, help="seconds (default 10)")
    parser.add_argument("--samples", type=int, default=1, help="samples a run (default 1)")
    parser.add_argument("--lease", type=float, default=15.0, help="PHASEWATCH_REPLICA_LEASE_S")
    parser.add_argument("--minutes", type=float, default=3.0, help="minutes measured")
    parser.add_argument("--pg", default=PG_SERVER, help="a PostgreSQL server's maintenance URL")
    parser.add_argument("--db-name", default="pw_bench_fleet_replicas")
    args = parser.parse_args(argv)
    args.minutes = min(args.minutes, MAX_MINUTES)
    print(f"# Fleet over replicas\n{machine_info()}\n")
    url = database_url("postgresql", args.db_name, args.pg, SQLITE_DIR)
    total_s = READY_S + args.minutes * 60 + 300
    with (
        bench_database(url, args.pg, keep=False),
        ExitStack() as stack,
        tempfile.TemporaryDirectory(prefix="pw-fleet-r-") as name,
    ):
        sims = [
            stack.enter_context(
                SimProcess(SimConfig(one_way_ms=0), http2=False, max_seconds=total_s)
            )
            for _ in range(math.ceil(args.size / TARGETS_PER_SIM))
        ]
        path = Path(name) / "phasewatch.yaml"
        fleet_file(path, [sim.url for sim in sims], args.size, args.interval, args.samples)
        served = replicas(args, url, path, Path(name))
        try:
            wait_sharing(args, served)
            measure(args, served, url)
        finally:
            for serve in served:
                serve.kill()


if __name__ == "__main__":
    main()
