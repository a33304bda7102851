"""How fast and how lean `phasewatch backtest` is on the issue's size: 16 targets × 2
vantages × 10 days of 15-minute runs of 20 samples (614,400 samples).

Goals (issue 11 item 7): CPU ≤ 15× a bare ``csv.reader`` pass over the same file, peak
RSS ≤ 400 MB, RSS that does not grow with the file, and a month (``--days 30``, 1.8 M
samples) in ≤ 60 s wall on 2 cores.

The corpus has structure to find (a generation collapse halfway, busy hours every day) so
the detectors do their full work, bootstrap and all, not only the cheap early exits.
Each process is measured alone (``os.wait4``: its own CPU time and peak RSS; with
``--jobs`` its workers' CPU time is included, and the peak RSS is the largest process's). RSS growth
is the peak RSS at ``--days`` minus that at ``--growth-days``, per extra sample; the
backtest keeps the runs of its last 8 days (reference window and a day), so growth means
something only when both sizes are past that.

``--same-as REV`` also replays a smaller corpus with the code of git revision REV (an
export of it in a temporary directory) and with this tree, and fails unless both print
the same transitions (alert ids aside, as they are random).

``--fleet`` (issue 35 item 8): the fleet shape instead (``write_fleet``: 200 targets, ~70 %
seen from one vantage, 10 samples a run, ~2.5 M samples over 10 days); ``--csv FILE`` times
any file; ``--save FILE`` keeps the generated one. The load average before and after is
printed: the machine is shared, and load inflates the replay's CPU more than the floor's.

    .venv/bin/python -m bench.backtest_speed --fleet [--jobs 1] [--save F]
    .venv/bin/python -m bench.backtest_speed --csv F [--jobs 1]
    .venv/bin/python -m bench.backtest_speed --days 0 --fleet --same-targets 20 \
        --same-days 10 --same-as REV
    .venv/bin/python -m bench.backtest_speed [--targets 16] [--days 10] [--growth-days 5]
    .venv/bin/python -m bench.backtest_speed --days 30 --growth-days 10 [--jobs 2]
    .venv/bin/python -m bench.backtest_speed --days 0 --same-as 486f18d
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

PHASES = ("connect", "network", "queue", "prefill", "generation", "transfer")
START = datetime(2026, 1, 1, tzinfo=UTC)
ROOT = Path(__file__).resolve().parent.parent
FLOOR = "import csv, sys\nfor _ in csv.reader(open(sys.argv[1], newline='')): pass\n"


def write_corpus(path: Path, targets: int, days: int, samples: int, seed: int) -> int:
    rng = np.random.default_rng(seed)
    rows = 0
    with path.open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(
            ["timestamp", "target", "vantage", "run_id", "status", "total_ms"]
            + [f"{p}_ms" for p in PHASES]
        )
        for index in range(days * 96):
            at = START + timedelta(minutes=15 * index)
            busy = 1.8 if at.hour in (9, 10, 11) else 1.0
            collapsed = index >= days * 48
            for target in range(targets):
                for vantage in ("seoul-old", "seoul-new"):
                    rows += _run(
                        writer, rng, at, f"target-{target}", vantage, samples, busy, collapsed
                    )
    return rows


FLEET_EVENTS = ("collapse", "queue_growth", "route", "slowdown")


def write_fleet(path: Path, targets: int, days: int, samples: int, seed: int) -> tuple[int, int]:
    """The issue's fleet shape: ``targets`` targets, ~70 % seen from one vantage and the rest
    from two, a run every 15 minutes (each target at its own minute) of ``samples`` samples.
    Each target has its own levels, busy hours and run-to-run load; one in ten changes
    halfway (a generation collapse, queue growth, a route at one vantage or a uniform
    slowdown), so the detectors do their full work on some and the quiet path on most.
    Returns (samples, series)."""
    rng = np.random.default_rng(seed)
    fleet = [_fleet_target(rng, index) for index in range(targets)]
    series = sum(len(t["vantages"]) for t in fleet)
    rows = 0
    with path.open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(
            ["timestamp", "target", "vantage", "run_id", "status", "total_ms"]
            + [f"{p}_ms" for p in PHASES]
        )
        slots = sorted((t["minute"], t["name"], t) for t in fleet)
        for index in range(days * 96):
            slot = START + timedelta(minutes=15 * index)
            after = index >= days * 48
            for minute, _, target in slots:
                at = slot + timedelta(minutes=minute)
                for vantage, network in target["vantages"].items():
                    rows += _fleet_run(writer, rng, at, target, vantage, network, samples, after)
    return rows, series


def _fleet_target(rng: np.random.Generator, index: int) -> dict[str, object]:
    two = rng.random() < 0.3
    vantages = {"fra": float(rng.uniform(5, 40))}
    if two:
        vantages["sgp"] = float(rng.uniform(80, 250))
    return {
        "name": f"fleet-{index:03d}",
        "minute": int(rng.integers(0, 15)),
        "vantages": vantages,
        "generation": float(rng.uniform(200, 2000)),
        "queue": float(rng.uniform(10, 150)),
        "prefill": float(rng.uniform(10, 80)),
        "busy_hours": {int(h) % 24 for h in rng.integers(0, 24) + np.arange(3)},
        "load_sigma": float(rng.uniform(0.05, 0.3)),
        "event": FLEET_EVENTS[index // 10 % 4] if index % 10 == 3 else None,
    }


def _fleet_run(writer, rng, at, target, vantage, network, samples, after) -> int:  # type: ignore[no-untyped-def]
    event = target["event"] if after else None
    busy = 2.0 if at.hour in target["busy_hours"] else 1.0
    shared = rng.lognormal(0, target["load_sigma"])
    generation = target["generation"] * rng.lognormal(0, 0.1, samples)
    queue = target["queue"] * busy * shared * rng.lognormal(0, 0.4, samples)
    if event == "collapse":
        generation = generation / 8
    elif event == "queue_growth":
        queue = queue + 4 * target["generation"] * rng.lognormal(0, 0.2, samples)
    if event == "route" and vantage == "fra":
        network = network + 150
    net = network * rng.lognormal(0, 0.05, samples)
    prefill = target["prefill"] * rng.lognormal(0, 0.1, samples)
    connect = rng.lognormal(0, 0.3, samples)
    transfer = rng.lognormal(0, 0.3, samples)
    matrix = np.stack([connect, net, queue, prefill, generation, transfer], axis=1)
    if event == "slowdown":
        matrix = matrix * 1.25
    run_id = str(uuid.uuid4())
    for k, phases in enumerate(matrix.tolist()):
        stamp = (at + timedelta(seconds=2 * k)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        writer.writerow(
            [stamp, target["name"], vantage, run_id, "ok", repr(sum(phases)), *map(repr, phases)]
        )
    return samples


def _run(writer, rng, at, target, vantage, samples, busy, collapsed) -> int:  # type: ignore[no-untyped-def]
    run_id, shared = str(uuid.uuid4()), rng.lognormal(0, 0.1)
    for k in range(samples):
        generation = (150 if collapsed else 1500) * rng.lognormal(0, 0.1)
        queue = 167 * busy * shared * rng.lognormal(0, 0.4)
        phases = [
            1.0,
            275 * rng.lognormal(0, 0.03),
            queue,
            30 * rng.lognormal(0, 0.1),
            generation,
            1.0,
        ]
        stamp = (at + timedelta(seconds=2 * k)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        writer.writerow(
            [stamp, target, vantage, run_id, "ok", repr(sum(phases)), *map(repr, phases)]
        )
    return samples


@dataclass(frozen=True)
class Measured:
    cpu_s: float
    wall_s: float
    peak_rss_mib: float
    stdout: str


def measure(command: list[str], cwd: Path = ROOT) -> Measured:
    """Run ``command`` alone and read its own CPU time and peak RSS from ``wait4``."""
    env = os.environ | {"PYTHONPATH": str(cwd)}
    with tempfile.TemporaryFile("w+") as out:
        began = time.perf_counter()
        child = subprocess.Popen(command, cwd=cwd, env=env, stdout=out, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - began
        assert child.stderr is not None
        errors = child.stderr.read().decode()
        child.stderr.close()
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"{command[:4]} failed:\n{errors}")
        out.seek(0)
        text = out.read()
    # ru_maxrss is in KiB on Linux.
    return Measured(usage.ru_utime + usage.ru_stime, wall, usage.ru_maxrss / 1024, text)


def backtest(corpus: Path, cwd: Path = ROOT, jobs: int | None = None) -> Measured:
    """``jobs`` None: the command's default (and no ``--jobs``, for code without it)."""
    command = [sys.executable, "-m", "app", "backtest", str(corpus), "--format", "jsonl"]
    return measure(command + ([] if jobs is None else ["--jobs", str(jobs)]), cwd)


def floor(corpus: Path) -> Measured:
    return measure([sys.executable, "-c", FLOOR, str(corpus)])


def speed(args: argparse.Namespace, directory: Path) -> None:
    if args.csv is not None:
        corpus = args.csv
        with corpus.open() as lines:
            rows = sum(1 for _ in lines) - 1
    elif args.fleet:
        corpus = args.save or directory / "fleet.csv"
        rows, series = write_fleet(corpus, args.targets, args.days, args.samples, args.seed)
        print(f"fleet: {args.targets} targets, {series} series")
    else:
        corpus = args.save or directory / "corpus.csv"
        rows = write_corpus(corpus, args.targets, args.days, args.samples, args.seed)
    print(f"load average before  {os.getloadavg()[0]:>12.2f} of {os.cpu_count()} cores")
    bare, run = floor(corpus), backtest(corpus, jobs=args.jobs)
    jobs = "default" if args.jobs is None else args.jobs
    firing = sum('"state": "firing"' in line for line in run.stdout.splitlines())
    print(f"samples              {rows:>12,}")
    print(f"bare csv.reader CPU  {bare.cpu_s:>12.2f} s")
    print(f"backtest CPU         {run.cpu_s:>12.2f} s")
    print(f"CPU ratio            {run.cpu_s / bare.cpu_s:>12.1f} ×   (goal ≤ 15×)")
    print(f"backtest wall time   {run.wall_s:>12.1f} s   (month goal ≤ 60 s), --jobs {jobs}")
    print(f"peak RSS             {run.peak_rss_mib:>12.0f} MiB (goal ≤ 400 MB)")
    print(f"firing transitions   {firing:>12}")
    print(f"load average after   {os.getloadavg()[0]:>12.2f}")
    if args.growth_days and args.csv is None and not args.fleet:
        small = directory / "small.csv"
        fewer = write_corpus(small, args.targets, args.growth_days, args.samples, args.seed)
        smaller = backtest(small, jobs=args.jobs)
        growth = (run.peak_rss_mib - smaller.peak_rss_mib) * 1024 / (rows - fewer)
        print(f"peak RSS at {fewer:,} samples {smaller.peak_rss_mib:.0f} MiB")
        print(f"RSS growth           {growth:>12.3f} KiB per sample")


def same(args: argparse.Namespace, directory: Path) -> None:
    """The transitions of REV's code and of this tree on one corpus, alert ids aside."""
    old = directory / "before"
    old.mkdir()
    archive = subprocess.run(["git", "archive", args.same_as], cwd=ROOT, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(old)], input=archive.stdout, check=True)
    corpus = directory / "same.csv"
    write = write_fleet if args.fleet else write_corpus
    made = write(corpus, args.same_targets, args.same_days, args.samples, args.seed)
    rows = made[0] if isinstance(made, tuple) else made
    before, after = (
        _transitions(backtest(corpus, old)),
        _transitions(backtest(corpus, jobs=args.jobs)),
    )
    print(f"same-as {args.same_as}: {rows:,} samples, {len(before)} transitions before")
    if before != after:
        for index, (a, b) in enumerate(zip(before, after, strict=False)):
            if a != b:
                raise SystemExit(f"transition {index} differs:\n  before {a}\n  after  {b}")
        raise SystemExit(f"{len(before)} transitions before, {len(after)} after")
    print("same transitions: yes")


def _transitions(run: Measured) -> list[dict[str, object]]:
    found = [json.loads(line) for line in run.stdout.splitlines()]
    for transition in found:
        transition.pop("alert_id")
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--targets", type=int, help="default 16, with --fleet 200")
    parser.add_argument("--fleet", action="store_true", help="the fleet shape (see write_fleet)")
    parser.add_argument("--csv", type=Path, help="time this file instead of a generated one")
    parser.add_argument("--save", type=Path, help="write the generated corpus here, and keep it")
    parser.add_argument("--days", type=int, default=10, help="0: skip the speed run")
    parser.add_argument("--growth-days", type=int, default=5, help="0: skip the growth run")
    parser.add_argument("--samples", type=int, help="a run's samples: default 20, --fleet 10")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--jobs", type=int, help="the backtest's --jobs (default: its own)")
    parser.add_argument("--same-as", metavar="REV", help="compare transitions with REV's code")
    parser.add_argument("--same-targets", type=int, default=4)
    parser.add_argument("--same-days", type=int, default=4)
    args = parser.parse_args()
    args.targets = args.targets or (200 if args.fleet else 16)
    args.samples = args.samples or (10 if args.fleet else 20)
    with tempfile.TemporaryDirectory() as directory:
        if args.days:
            speed(args, Path(directory))
        if args.same_as:
            same(args, Path(directory))


if __name__ == "__main__":
    main()
