"""`phasewatch whatif` on a month of one target (60,000 samples), end to end as a person
runs it: a fresh process, the CLI, the query, the prediction with its intervals, levers.

One LLM target probed every 864 s for 30 days, 20 samples a run (3,000 runs), in a SQLite
file (populated, not measured). Each repetition is a new ``python -m app whatif`` process;
the floor is ``python -m app version`` (interpreter and CLI start-up) in the same run.

    .venv/bin/python -m bench.whatif_speed [--repeat 5] [--days 30]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from typing import Any

from bench.common import REPO_ROOT, RunClock, print_header
from bench.store_common import (
    PG_SERVER,
    SQLITE_DIR,
    Layout,
    bench_database,
    database_url,
    populate,
    target_name,
)

CHANGES = ("network=15ms", "queue=0", "generation*1.5", "cold=12%:800-2500ms", "deadline=1500ms")
GOAL_S = 2.0


def _timed(command: list[str]) -> tuple[float, float, str]:
    """Wall seconds, CPU seconds (user + system: what other work on the machine cannot
    inflate) and stdout of one run of ``command``."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    cpu_before = _children_cpu()
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False, timeout=60)
    took = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed: {done.stderr.strip()}")
    return took, _children_cpu() - cpu_before, done.stdout


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main(repeat: int, days: float, keep: bool = False) -> None:
    print_header("whatif_speed", "phasewatch whatif on one target's month, end to end (s)")
    clock = RunClock()
    layout = Layout(targets=1, vantages=1, days=days, interval_s=864.0, samples_per_run=20)
    url = database_url("sqlite", "pw_bench_whatif", PG_SERVER, SQLITE_DIR)
    with bench_database(url, PG_SERVER, keep=keep, reuse=keep) as reused:
        if not reused:
            print(f"populating: {layout.describe()} in {populate(url, layout):.1f} s")
        window = ["--from", layout.start.isoformat(), "--to", layout.end.isoformat()]
        base = [sys.executable, "-m", "app"]
        whatif = [*base, "whatif", target_name(0), *CHANGES, *window, "--database-url", url]
        floors, runs, shown = [], [], {}
        for _ in range(repeat):
            floors.append(_timed([*base, "version"])[:2])
            took, cpu, out = _timed([*whatif, "--json"])
            runs.append((took, cpu))
            shown = json.loads(out)
        table = _timed(whatif)[:2]
    _report(floors, runs, table, shown)
    print(f"finished in {clock.report()}")


def _report(
    floors: list[tuple[float, float]],
    runs: list[tuple[float, float]],
    table: tuple[float, float],
    shown: dict[str, Any],
) -> None:
    before, after = shown["before"], shown["after"]
    print(f"samples {before['samples']:,} in {before['runs']:,} runs; changes {' '.join(CHANGES)}")
    print(f"p99 now {before['p99_ms']['value']:.0f} ms -> after {after['p99_ms']['value']:.0f} ms")
    for label, times in (("floor (python -m app version)", floors), ("whatif --json", runs)):
        wall, cpu = (statistics.median(t[i] for t in times) for i in (0, 1))
        worst = max(t[0] for t in times), max(t[1] for t in times)
        print(
            f"{label}: median wall {wall:.2f} s (max {worst[0]:.2f}), median CPU {cpu:.2f} s"
            f" (max {worst[1]:.2f}) over {len(times)}"
        )
    ratio = statistics.median(r[1] for r in runs) / statistics.median(f[1] for f in floors)
    print(
        f"whatif CPU / floor CPU: x{ratio:.2f}; table output once: wall {table[0]:.2f} s,"
        f" CPU {table[1]:.2f} s"
    )
    worst_cpu = max(r[1] for r in runs)
    verdict = "met" if worst_cpu <= GOAL_S else "NOT met"
    print(
        f"goal: every run's CPU time <= {GOAL_S:g} s (wall equals it on an idle machine): {verdict}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--days", type=float, default=30.0)
    parser.add_argument("--keep", action="store_true", help="keep (and reuse) the database")
    args = parser.parse_args()
    main(args.repeat, args.days, args.keep)
