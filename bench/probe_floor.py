"""The probe's own CPU a run: a fleet's targets probed on their schedule, and nothing else.

Issue 38 judges ``serve`` by its CPU a run against the probe's own. A py-spy share of serve
is one estimate (bench/fleet_profile.py), with two faults: at a small fleet serve holds the
interpreter lock so rarely that the share rests on a few dozen samples, and the event loop's
work for the probe's sockets lands outside the probe's frames. This is the floor measured
instead: one process, one event loop, the targets file's targets each probed with
``probe_target`` every interval (serve's own call: its samples, spacing and idle
tracking), the targets spread evenly over the interval, every sample dropped. Its CPU
(``time.process_time``, all threads) over the runs finished in the window, after a first
interval of warm-up, is what probing alone costs on this machine at this moment; bench/fleet.py
runs it right after serve, against the same sims.

    .venv/bin/python -m bench.probe_floor --config phasewatch.yaml --warmup 60 --seconds 180
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from app import clock
from app.config import Target
from app.config.loading import load_targets
from app.runs.pipeline import probe_target


@dataclass
class Floor:
    runs: int
    cpu_ms_per_run: float


@dataclass
class Probing:
    """What the fleet's probes share: each target's last probe (monotonic), runs finished."""

    idle: dict[str, float] = field(default_factory=dict)
    finished: int = 0


async def _probe_on_schedule(target: Target, offset_s: float, probing: Probing) -> None:
    await asyncio.sleep(offset_s)
    loop = asyncio.get_running_loop()
    due = loop.time()
    while True:
        asyncio.create_task(_one(target, probing))  # runs overlap, as serve's may
        due += target.interval
        await asyncio.sleep(max(0.0, due - loop.time()))


async def _one(target: Target, probing: Probing) -> None:
    try:
        await probe_target(target, probing.idle.get(target.name))
    finally:
        probing.idle[target.name] = clock.monotonic()
        probing.finished += 1


async def measure(targets: list[Target], warmup_s: float, seconds: float) -> Floor:
    interval = max(t.interval for t in targets)
    probing = Probing()
    loops = [
        asyncio.create_task(_probe_on_schedule(t, k * interval / len(targets), probing))
        for k, t in enumerate(targets)
    ]
    await asyncio.sleep(warmup_s)
    runs, cpu = probing.finished, time.process_time()
    await asyncio.sleep(seconds)
    runs, cpu = probing.finished - runs, time.process_time() - cpu
    for task in loops:
        task.cancel()
    return Floor(runs, cpu * 1000 / runs if runs else float("nan"))


def floor_in_process(config: Path, warmup_s: float, seconds: float) -> Floor:
    """The floor measured by a process of its own (this module), its JSON read back."""
    command = [sys.executable, "-m", "bench.probe_floor", "--config", str(config)]
    command += ["--warmup", str(warmup_s), "--seconds", str(seconds), "--json"]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=warmup_s + seconds + 120, check=True
    )
    return Floor(**json.loads(done.stdout.strip().splitlines()[-1]))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, required=True, help="a targets file")
    parser.add_argument("--warmup", type=float, default=60.0, help="seconds before measuring")
    parser.add_argument("--seconds", type=float, default=180.0, help="seconds measured")
    parser.add_argument("--json", action="store_true", help="one JSON line: runs, ms a run")
    args = parser.parse_args(argv)
    targets = list(load_targets(args.config).targets)
    floor = asyncio.run(measure(targets, args.warmup, args.seconds))
    if args.json:
        print(json.dumps({"runs": floor.runs, "cpu_ms_per_run": floor.cpu_ms_per_run}))
    else:
        print(f"{floor.runs:,} runs, {floor.cpu_ms_per_run:.2f} ms of CPU a run (probe alone)")


if __name__ == "__main__":
    main()
