"""Why slots go missing in a soak: how long runs took, how late they began, how long
their samples took (all from the database), and the due runs serve's own log says it
skipped. A run of a target still going at its next due time makes the scheduler skip that
slot (one run of a target at a time), so a missing slot is a run that outlasted its
interval, and serve logs each streak of them.

    .venv/bin/python -m bench.soak_timing --url sqlite:////tmp/pw_bench/pw_bench_soak.db \\
        --interval 10 [--log serve.log]
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from sqlalchemy import select

from app.store.db import make_sessions
from app.store.models import RunRow, SampleRow
from bench.common import pct, print_table
from bench.store_common import bench_engine

FIRST_SKIP = re.compile(r"target (\S+): (?:a due run|(\d+) due runs) skipped, (.*)$")
STREAK = re.compile(r"target (\S+): (\d+) due runs were skipped before this one began")


def skips_logged(log: str) -> tuple[int, dict[str, int]]:
    """Due runs serve logged as skipped (a streak's first line, with its count, then the
    whole streak's count when it ends, if more), and the first lines by reason.
    (``phasewatch_runs_skipped_total`` counts the same, by reason, while serve runs.)"""
    total, reasons, said = 0, dict[str, int](), dict[str, int]()
    for line in log.splitlines():
        if first := FIRST_SKIP.search(line):
            target, count, why = first.group(1), int(first.group(2) or 1), first.group(3)
            total += count
            said[target] = count
            reasons[why] = reasons.get(why, 0) + 1
        elif streak := STREAK.search(line):
            total += int(streak.group(2)) - said.pop(streak.group(1), 1)
    return total, reasons


def timing_rows(url: str, interval_s: float) -> list[list[str]]:
    engine = bench_engine(url)
    try:
        with make_sessions(engine)() as session:
            runs = session.execute(
                select(RunRow.scheduled_at, RunRow.started_at, RunRow.finished_at)
            ).all()
            totals = session.execute(
                select(SampleRow.total_ms).where(SampleRow.total_ms.is_not(None))
            ).scalars()
            sample_ms = list(totals)
    finally:
        engine.dispose()
    took = [(f - s).total_seconds() for _, s, f in runs if f is not None]
    late = [(s - d).total_seconds() for d, s, _ in runs if d is not None]
    longer = sum(t > interval_s for t in took)
    return [
        ["run took p50 / p99 / max s", _three(took, "{:.2f}")],
        [f"runs longer than the interval ({interval_s:g} s)", f"{longer:,} of {len(took):,}"],
        ["run began after its due time p50 / p99 / max s", _three(late, "{:.2f}")],
        ["a sample took p50 / p99 / max ms", _three(sample_ms, "{:.1f}")],
    ]


def _three(values: list[float], style: str) -> str:
    if not values:
        return "-"
    return " / ".join(style.format(v) for v in (pct(values, 50), pct(values, 99), max(values)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True, help="the soak's database (run with --keep)")
    parser.add_argument("--interval", type=float, default=10.0)
    parser.add_argument("--log", type=Path, help="serve's log")
    args = parser.parse_args()
    rows = timing_rows(args.url, args.interval)
    if args.log is not None:
        skipped, reasons = skips_logged(args.log.read_text(errors="replace"))
        rows.append(["due runs serve logged as skipped", f"{skipped:,} ({reasons})"])
    print_table(["measure", "value"], rows)


if __name__ == "__main__":
    main()
