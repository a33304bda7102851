"""Three baselines that read the same CSV and report firing alerts in backtest's shape.

* ``static`` (Gatus / Checkly style): the run's p90 of end-to-end time at or over a fixed
  limit for 3 runs in a row fires; 3 runs under resolve. The limit is the target's
  deadline where it has one, else 1.5 × the p90 of its first day.
* ``student_t`` (Bencher style): the run's p90 above the upper bound of the two-sided
  99 % Student-t prediction interval of the previous 64 runs' p90 fires; the first run
  back inside resolves (a streak of runs outside is one alert).
* ``dominant_run``: a run whose dominant phase differs from the previous run's fires.

Each works per (target, vantage), so every alert names its vantage, and reports when
it resolves (``dominant_run`` at once: a run is its whole alert), so flaps are counted
for baselines as for phasewatch.

    .venv/bin/python -m bench.detection.baselines FILE.csv --detector static [--labels L.json]
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import timedelta
from pathlib import Path

import numpy as np
from scipy import stats

from bench.detection.corpus import Run, read_runs
from bench.detection.labels import Alert, read_labels, write_alerts

STATIC_RUNS = 3
STATIC_FACTOR = 1.5
T_HISTORY = 64
T_LEVEL = 0.99

Detector = Callable[[Sequence[Run], float | None], Iterator[Alert]]


def static_limit(runs: Sequence[Run], deadline_ms: float | None) -> Iterator[Alert]:
    limit = deadline_ms if deadline_ms is not None else STATIC_FACTOR * _first_day_p90(runs)
    over = under = 0
    firing = False
    for run in runs:
        p90 = run.p90
        if math.isnan(p90):
            continue
        over, under = (over + 1, 0) if p90 >= limit else (0, under + 1)
        if not firing and over >= STATIC_RUNS:
            firing = True
            yield _alert("static", run, f"p90 {p90:.0f} ms ≥ {limit:.0f} ms for {over} runs")
        elif firing and under >= STATIC_RUNS:
            firing = False
            yield _alert("static", run, f"p90 {p90:.0f} ms under {limit:.0f} ms", "resolved")


def _first_day_p90(runs: Sequence[Run]) -> float:
    if not runs:
        return math.inf
    end = runs[0].at + timedelta(days=1)
    totals = [run.totals for run in runs if run.at < end]
    return float(np.percentile(np.concatenate(totals), 90))


def student_t(runs: Sequence[Run], deadline_ms: float | None = None) -> Iterator[Alert]:
    quantile = float(stats.t.ppf(1 - (1 - T_LEVEL) / 2, T_HISTORY - 1))
    widen = math.sqrt(1 + 1 / T_HISTORY)
    history: list[float] = []
    outside = False
    for run in runs:
        p90 = run.p90
        if math.isnan(p90):
            continue
        if len(history) >= T_HISTORY:
            window = np.array(history[-T_HISTORY:])
            upper = window.mean() + quantile * window.std(ddof=1) * widen
            above = p90 > upper
            if above and not outside:
                yield _alert("student_t", run, f"p90 {p90:.0f} ms > {upper:.0f} ms")
            elif outside and not above:
                yield _alert("student_t", run, f"p90 {p90:.0f} ms ≤ {upper:.0f} ms", "resolved")
            outside = above
        history.append(p90)


def dominant_run(runs: Sequence[Run], deadline_ms: float | None = None) -> Iterator[Alert]:
    previous: str | None = None
    for run in runs:
        leader = run.dominant
        if leader is None:
            continue
        if previous is not None and leader != previous:
            shift = {"from_phase": previous, "to_phase": leader}
            yield _alert("dominant_run", run, f"{previous} → {leader}", **shift)
            yield _alert("dominant_run", run, "one run", "resolved", **shift)
        previous = leader


def _alert(kind: str, run: Run, summary: str, state: str = "firing", **phases: str) -> Alert:
    return Alert(kind, run.target, run.vantage, run.at, "vantage", summary, state=state, **phases)


DETECTORS: dict[str, Detector] = {
    "static": static_limit,
    "student_t": student_t,
    "dominant_run": dominant_run,
}


def run_baselines(
    csv_path: Path, deadlines: Mapping[str, float | None], names: Sequence[str] = tuple(DETECTORS)
) -> dict[str, list[Alert]]:
    """Every named baseline over one CSV (read once): its firing alerts in time order."""
    series = read_runs(csv_path)
    found: dict[str, list[Alert]] = {}
    for name in names:
        alerts = [
            alert
            for (target, _), runs in sorted(series.items())
            for alert in DETECTORS[name](runs, deadlines.get(target))
        ]
        found[name] = sorted(alerts, key=lambda alert: alert.at)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("csv", type=Path)
    parser.add_argument("--detector", choices=sorted(DETECTORS), required=True)
    parser.add_argument("--labels", type=Path, help="labels JSON: the targets' deadlines")
    args = parser.parse_args()
    deadlines = {}
    if args.labels:
        deadlines = {t.name: t.deadline_ms for t in read_labels(args.labels).targets}
    write_alerts(run_baselines(args.csv, deadlines, [args.detector])[args.detector], sys.stdout)


if __name__ == "__main__":
    main()
