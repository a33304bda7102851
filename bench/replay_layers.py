"""What a backtest's replay costs a run, layer by layer: the floor of the per-run design.

Each layer runs in a process of its own over the same CSV, and its CPU is the process's
own (``time.process_time`` around the loop, the modules imported before it):

* ``floor``: a bare ``csv.reader`` pass (what ``bench.backtest_speed`` divides by);
* ``read``: the backtest's reader, every run built (``read_runs``);
* ``history``: and each run added to the backtest's history (its retention and packing);
* ``evaluator``: and the evaluator after every run with no detector enabled: what every
  run costs whatever is judged (the daily references, the tail CUSUM's step, the SLO
  ledgers, the evaluation's own walk);
* one row per detector: the evaluator with that detector alone (``enabled``);
* ``all``: the default detectors, as ``phasewatch backtest`` replays.

Each row says its CPU, its ms a run and its multiple of the floor; a detector's row says
what it adds to ``evaluator``. The multiples are of one floor measured in the same minutes,
so the rows compare; the machine's load is printed before and after.

``--parts``: the default replay once, in this process, each part's CPU timed where it runs
(``time.process_time`` around it; the parts are disjoint): the daily references, the
memory's step before judging (the tail CUSUM, the ledgers), each detector's judging, the
pooled level lane, the vantages judged together, applying the findings, the history's
``add``; what is left of the whole is the reading and the evaluation's own walk.

    PYTHONPATH=. .venv/bin/python -m bench.replay_layers --csv /tmp/fleet12.csv
    PYTHONPATH=. .venv/bin/python -m bench.replay_layers --csv F --only read,history
    PYTHONPATH=. .venv/bin/python -m bench.replay_layers --csv F --parts
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from app.alerts import pervantage
from app.alerts.backtest.csvruns import read_runs
from app.alerts.backtest.jobs import ParamsTable, collecting_rarely
from app.alerts.backtest.replay import replay, retention
from app.alerts.crossvantage import CrossVantage
from app.alerts.evaluate import Evaluator
from app.alerts.history import MemoryHistory
from app.analysis import detectors as d
from app.analysis.detectors import DetectorParams
from app.analysis.detectors.registry import default_enabled
from app.analysis.runs import RunData

BASE = ("floor", "read", "history", "evaluator")
SLO_KINDS = ("availability_slo", "end_to_end_ms_slo", "ttft_ms_slo", "tpot_ms_slo", "stall_ms_slo")


def layers() -> list[tuple[str, tuple[str, ...]]]:
    """Each detector row's name and its ``enabled`` (the objectives' five as one row)."""
    alone = [name for name in default_enabled() if name not in SLO_KINDS]
    slos = tuple(name for name in default_enabled() if name in SLO_KINDS)
    return [(name, (name,)) for name in alone] + ([("objectives", slos)] if slos else [])


def run_layer(path: Path, layer: str) -> tuple[int, float]:
    """``layer`` over ``path`` in this process: (runs, CPU seconds)."""
    enabled = dict(layers()).get(layer)
    started = time.process_time()
    with path.open(newline="") as rows, collecting_rarely():
        if layer == "floor":
            count = sum(1 for _ in csv.reader(rows)) - 1
        elif layer in ("read", "history"):
            count = sum(1 for _ in _kept(read_runs(rows), layer == "history"))
        else:
            params = DetectorParams() if layer == "all" else DetectorParams(enabled=enabled or ())
            done = [0]  # the runs replayed (``replay`` yields transitions, not runs)

            def progress(runs: int) -> None:
                done[0] = runs

            for _ in replay(read_runs(rows), ParamsTable(params), progress=progress):
                pass
            count = done[0]
    return count, time.process_time() - started


def _kept(runs: Iterator[RunData], keep: bool) -> Iterator[RunData]:
    history = MemoryHistory(lambda _target: retention(DetectorParams()))
    for run in runs:
        if keep:
            history.add(run)
        yield run


Spent = defaultdict[str, float]  # CPU seconds by part


def timed(spent: Spent, name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    """``function``, its CPU added to ``spent[name]`` at every call."""

    def call(*args: Any, **kwargs: Any) -> Any:
        started = time.process_time()
        try:
            return function(*args, **kwargs)
        finally:
            spent[name] += time.process_time() - started

    return call


def parts(path: Path) -> tuple[int, float, Spent]:
    """The default replay of ``path`` with its parts timed: (runs, CPU, CPU by part)."""
    spent: Spent = defaultdict(float)
    places: list[tuple[Any, str, str]] = [
        (pervantage, "current_reference", "references (daily)"),
        (pervantage.PerVantage, "_advance", "memory's step (tail CUSUM, ledgers)"),
        (pervantage.PerVantage, "_pooled_level", "pooled level lane"),
        (CrossVantage, "signals", "vantages together (dominant_shift)"),
        (Evaluator, "apply", "findings applied"),
        (MemoryHistory, "add", "history's add"),
    ]
    for owner, attribute, name in places:
        setattr(owner, attribute, timed(spent, name, getattr(owner, attribute)))
    for kind, detector in list(d.DETECTORS.items()):
        if detector.judge is not None:
            judge = timed(spent, f"judge: {kind}", detector.judge)
            d.DETECTORS[kind] = replace(detector, judge=judge)
    runs, seconds = run_layer(path, "all")
    return runs, seconds, spent


def print_parts(path: Path) -> None:
    runs, seconds, spent = parts(path)
    print("| part | CPU s | ms a run | share |")  # noqa: T201
    print("|---|---:|---:|---:|")  # noqa: T201
    rest = seconds - sum(spent.values())
    ranked = sorted(spent.items(), key=lambda item: -item[1])
    for name, cpu in [*ranked, ("reading and the walk (the rest)", rest)]:
        print(f"| {name} | {cpu:.2f} | {1000 * cpu / runs:.3f} | {100 * cpu / seconds:.1f} % |")  # noqa: T201
    print(f"| all | {seconds:.2f} | {1000 * seconds / runs:.3f} | |")  # noqa: T201


def measure(path: Path, layer: str) -> tuple[int, float]:
    """``layer`` in a process of its own: (runs or rows, CPU seconds)."""
    command = [sys.executable, "-m", "bench.replay_layers", "--csv", str(path), "--one", layer]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    count, seconds = done.stdout.split()
    return int(count), float(seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--csv", type=Path, required=True)
    parser.add_argument("--only", help="comma-separated layers (default: all of them)")
    parser.add_argument("--parts", action="store_true", help="the replay's parts, timed")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # a child: one layer, two numbers
    args = parser.parse_args()
    if args.parts:
        print_parts(args.csv)
        return
    if args.one:
        print(*run_layer(args.csv, args.one))  # noqa: T201
        return
    names = [*BASE, *(name for name, _ in layers()), "all"]
    if args.only:
        names = ["floor", *(n for n in args.only.split(",") if n != "floor")]
    print(f"load average before {os.getloadavg()[0]:.2f}")  # noqa: T201
    measured = {name: measure(args.csv, name) for name in names}
    floor = measured["floor"][1]
    runs = max(count for name, (count, _) in measured.items() if name != "floor")
    evaluator = measured.get("evaluator", (0, None))[1]
    print("| layer | CPU s | ms a run | × floor | over evaluator |")  # noqa: T201
    print("|---|---:|---:|---:|---:|")  # noqa: T201
    for name, (_, seconds) in measured.items():
        extra = "" if evaluator is None or name in BASE else f"{seconds - evaluator:+.2f} s"
        per_run = 1000 * seconds / runs
        print(f"| {name} | {seconds:.2f} | {per_run:.3f} | {seconds / floor:.1f}× | {extra} |")  # noqa: T201
    print(f"runs {runs:,}; load average after {os.getloadavg()[0]:.2f}")  # noqa: T201


if __name__ == "__main__":
    main()
