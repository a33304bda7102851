"""A sample CSV read back as runs, per target and vantage, for the baselines.

Only what the baselines look at: each run's time, its timed samples' end-to-end times
(censored ones at the deadline, as phasewatch counts them) and its phase medians.
"""

from __future__ import annotations

import csv
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np

from bench.detection.labels import parse_time

TIMED = ("ok", "deadline_exceeded")


@dataclass(frozen=True, slots=True)
class Run:
    target: str
    vantage: str
    at: datetime  # the first sample's start
    totals: np.ndarray  # timed samples only
    phase_medians: dict[str, float]
    samples: int

    @property
    def p90(self) -> float:
        return float(np.percentile(self.totals, 90)) if len(self.totals) else float("nan")

    @property
    def dominant(self) -> str | None:
        if not self.phase_medians or max(self.phase_medians.values()) <= 0:
            return None
        return max(self.phase_medians, key=lambda name: self.phase_medians[name])


@dataclass(slots=True)
class _Rows:
    target: str
    vantage: str
    first: str
    statuses: list[str]
    totals: list[float]
    phases: list[list[str]]


def read_runs(path: Path) -> dict[tuple[str, str], list[Run]]:
    """Runs of each (target, vantage), in time order."""
    with path.open(newline="") as handle:
        reader = csv.reader(handle)
        head = next(reader)
        phase_names = [name.removesuffix("_ms") for name in head[6:]]
        grouped: dict[str, _Rows] = {}
        for row in reader:
            rows = grouped.get(row[3])
            if rows is None:
                rows = grouped[row[3]] = _Rows(row[1], row[2], row[0], [], [], [])
            rows.statuses.append(row[4])
            rows.totals.append(float(row[5]))
            rows.phases.append(row[6:])
    series: dict[tuple[str, str], list[Run]] = defaultdict(list)
    for rows in grouped.values():
        series[rows.target, rows.vantage].append(_run(rows, phase_names))
    for runs in series.values():
        runs.sort(key=lambda run: run.at)
    return dict(series)


def _run(rows: _Rows, names: list[str]) -> Run:
    timed = [i for i, status in enumerate(rows.statuses) if status in TIMED]
    medians: dict[str, float] = {}
    for j, name in enumerate(names):
        cells = [rows.phases[i][j] for i in timed]
        if cells and all(cells):
            medians[name] = float(np.median(np.array(cells, dtype=float)))
    return Run(
        target=rows.target,
        vantage=rows.vantage,
        at=parse_time(rows.first),
        totals=np.array([rows.totals[i] for i in timed], dtype=float),
        phase_medians=medians,
        samples=len(rows.statuses),
    )
