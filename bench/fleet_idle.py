"""What ``serve`` spends a minute whatever its runs: CPU, wakeups and database round trips.

One ``python -m app serve`` (bench/fleet.py's pieces: a throw-away database, the simulated
endpoint in a process of its own, ``--targets`` ``http`` targets of ``--samples`` requests
every ``--interval`` s) on PostgreSQL or SQLite. After ``--warmup`` minutes, three windows
one after the other, so that none disturbs another:

1. ``--minutes`` of serve's CPU (/proc/<pid>/stat, every thread) and the runs it stored:
   CPU seconds a minute, and ms a run;
2. ``--trace`` seconds of ``strace -f`` on serve: the system calls a minute by name (the
   waits among them are the wakeups: every return of ``epoll_wait``, ``futex``, ``poll``,
   ``select``), and every message sent to PostgreSQL (a socket to port 5432: one round
   trip each) by its statement's first words (``BEGIN``, ``SELECT 1``, ``UPDATE
   replica_leases`` …), a minute;
3. ``--profile`` seconds of py-spy (bench/fleet_profile.py), its raw stacks kept.

strace slows what it traces: window 2's CPU is not counted in window 1's.

    nice -n 19 .venv/bin/python -m bench.fleet_idle --targets 1 --warmup 1 --minutes 3 --trace 60
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from contextlib import ExitStack
from pathlib import Path

from app.demo.sim.app import SimConfig
from app.demo.sim.process import SimProcess
from bench.common import machine_info
from bench.fleet import fleet_file, fleet_options, stopped
from bench.fleet_profile import record
from bench.soak import count_runs, proc_reading
from bench.store_common import SQLITE_DIR, bench_database, database_url
from tests.pgcluster import Serve

READY_S = 300.0
WAITS = ("epoll_wait", "epoll_pwait", "futex", "poll", "ppoll", "select", "pselect6")
TRACED = "sendto,sendmsg,write,epoll_wait,epoll_pwait,futex,poll,ppoll,select,pselect6"
# A message to PostgreSQL, as strace shows it: the statement's text inside the payload.
_PG_SEND = re.compile(r"^\d+\s+(sendto|sendmsg|write)\(\d+<TCP:\[[^\]]*->[^\]]*:5432\]>")
_SQL = re.compile(
    r"(BEGIN|COMMIT|ROLLBACK|SELECT|INSERT INTO|UPDATE|DELETE FROM|WITH|LISTEN|NOTIFY|"
    r"SET|SHOW|pg_\w+)[ \w.,()*=$:'\"-]{0,48}"
)
_CALL = re.compile(r"^\d+\s+(\w+)\(")


def cpu_window(pid: int, url: str, minutes: float) -> tuple[float, int]:
    """CPU seconds a minute over ``minutes``, and the runs stored meanwhile."""
    began = time.monotonic()
    first = proc_reading(pid, 0.0, count_runs(url))
    time.sleep(minutes * 60)
    last = proc_reading(pid, time.monotonic() - began, count_runs(url))
    return (last.cpu_s - first.cpu_s) * 60 / last.at_s, last.runs - first.runs


def traced(pid: int, seconds: float, out: Path) -> str:
    """strace's lines for ``seconds`` of every thread of ``pid`` ('' if strace cannot)."""
    command = ["timeout", "-s", "INT", str(seconds), "strace", "-f", "-yy", "-s", "160"]
    command += ["-e", f"trace={TRACED}", "-o", str(out), "-p", str(pid)]
    try:
        subprocess.run(command, capture_output=True, timeout=seconds + 30, check=False)
        return out.read_text(errors="replace")
    except (OSError, subprocess.SubprocessError) as exc:
        print(f"    (no trace: {exc})")
        return ""


def statement(line: str) -> str:
    """What a message to PostgreSQL asks, by its first words ('?' when strace cut it)."""
    payload = line.split(">,", 1)[-1]
    if payload.startswith(' "B'):  # a statement prepared earlier, executed again
        return "(prepared) " + _PREPARED.get(_prepared_name(line), "?")
    found = _SQL.search(payload.replace("\\n", " ").replace("\\t", " "))
    text = re.sub(r"\s+", " ", found.group(0)).strip()[:48] if found else "?"
    if payload.startswith(' "P') and (name := _prepared_name(line)):
        _PREPARED[name] = text
    return text


# Prepared statements' texts by (fd, name), from their Parse messages (psycopg prepares a
# statement run five times on one connection, then sends only Bind + Execute).
_PREPARED: dict[str, str] = {}
_NAMED = re.compile(r'^(\d+)\s+\w+\((\d+)<.*?>, "[PB][^_]*?(_pg3_\d+)')


def _prepared_name(line: str) -> str:
    found = _NAMED.match(line)
    return f"{found.group(2)}/{found.group(3)}" if found else ""


def tally(lines: str) -> tuple[Counter[str], Counter[str]]:
    """System calls by name (``resumed`` halves left out), messages to PostgreSQL by text."""
    calls: Counter[str] = Counter()
    sent: Counter[str] = Counter()
    for line in lines.splitlines():
        if "resumed>" in line:
            continue
        if call := _CALL.match(line):
            calls[call.group(1)] += 1
        if _PG_SEND.match(line):
            sent[statement(line)] += 1
    return calls, sent


def per_minute(counts: Counter[str], seconds: float) -> list[tuple[str, float]]:
    return [(name, n * 60 / seconds) for name, n in counts.most_common()]


def report(args: argparse.Namespace, cpu: tuple[float, int], lines: str) -> None:
    per_min, runs = cpu
    minutes = args.minutes
    per_run = per_min * minutes * 1000 / runs if runs else float("nan")
    print(
        f"\nCPU: {per_min:.3f} s a minute; {runs} runs in {minutes:g} min: {per_run:.1f} ms a run"
    )
    print(f"load after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    if not lines:
        return
    calls, sent = tally(lines)
    waits = sum(calls[name] for name in WAITS)
    total = sum(calls.values()) * 60 / args.trace
    print(f"\nsystem calls a minute (strace, {args.trace:g} s): {total:.0f}")
    print(f"waits (wakeups) a minute: {waits * 60 / args.trace:.0f}")
    for name, n in per_minute(calls, args.trace):
        print(f"  {name:14s} {n:8.0f}")
    print(f"\nmessages to PostgreSQL a minute: {sum(sent.values()) * 60 / args.trace:.0f}")
    for name, n in per_minute(sent, args.trace):
        print(f"  {n:7.1f}  {name}")


def run(args: argparse.Namespace) -> None:
    backend = "sqlite" if args.db == "sqlite" else "postgresql"
    url = database_url(backend, args.db_name, args.pg, SQLITE_DIR)
    total_s = READY_S + (args.warmup + args.minutes) * 60 + args.trace + args.profile + 120
    with (
        bench_database(url, args.pg, keep=False),
        ExitStack() as stack,
        tempfile.TemporaryDirectory(prefix="pw-idle-") as name,
    ):
        sim = stack.enter_context(
            SimProcess(SimConfig(one_way_ms=0), http2=False, max_seconds=total_s)
        )
        path = Path(name) / "phasewatch.yaml"
        fleet_file(path, [sim.url], args.targets, args.interval, args.samples)
        serve = Serve(Path(name) / "serve", path, {"PHASEWATCH_DATABASE_URL": url})
        try:
            serve.wait_ready(READY_S)
            time.sleep(args.warmup * 60)
            pid = serve.process.pid
            cpu = cpu_window(pid, url, args.minutes)
            lines = traced(pid, args.trace, args.out / "strace.txt") if args.trace > 0 else ""
            if args.profile > 0:
                record(pid, args.profile, args.out / "spy.txt")
            stopped(serve)
        finally:
            serve.kill()
        report(args, cpu, lines)


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", type=int, default=1)
    fleet_options(parser, warmup_min=1.0)
    parser.add_argument("--minutes", type=float, default=3.0, help="minutes of CPU measured")
    parser.add_argument("--trace", type=float, default=60.0, help="seconds of strace; 0: none")
    parser.add_argument("--profile", type=float, default=0.0, help="seconds of py-spy; 0: none")
    parser.add_argument("--db", choices=("postgres", "sqlite"), default="postgres")
    parser.add_argument("--db-name", default="pw_bench_idle", help="database to create, drop")
    parser.add_argument(
        "--out", type=Path, default=Path("/tmp/pw-idle"), help="strace's and py-spy's output"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = arguments(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    print(f"# serve's fixed cost: {args.targets} target(s) on {args.db}, every {args.interval:g} s")
    print(f"{machine_info()}\nload before: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    run(args)


if __name__ == "__main__":
    main()
