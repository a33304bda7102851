"""Replay a CSV of samples through the production detectors on a simulated clock.

The runs are fed, oldest first, to the very ``Evaluator`` that ``serve`` uses; only the
history is in memory and the clock is each run's own time.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterator
from typing import TextIO

import numpy as np

from app.alerts.evaluate import Evaluator
from app.alerts.history import MemoryHistory
from app.alerts.identity import Transition
from app.analysis.detectors import DetectorParams
from app.analysis.runs import RunData, phase_order
from app.probe.sample import Status
from app.store.csvlayout import BASE_COLUMNS, parse_timestamp

TIMED = (Status.OK.value, Status.DEADLINE_EXCEEDED.value)


class BacktestError(Exception):
    pass


def read_runs(rows: TextIO) -> list[RunData]:
    """The CSV's runs, oldest first (a run is at its first sample's time)."""
    reader = csv.reader(rows)
    header = next(reader, None)
    if header is None or tuple(header[: len(BASE_COLUMNS)]) != BASE_COLUMNS:
        raise BacktestError(f"not a phasewatch samples CSV: header must start {BASE_COLUMNS}")
    phases = [name.removesuffix("_ms") for name in header[len(BASE_COLUMNS) :]]
    grouped: dict[str, list[list[str]]] = {}
    for line, row in enumerate(reader, start=2):
        if len(row) != len(header):
            raise BacktestError(f"line {line}: {len(row)} columns, the header has {len(header)}")
        grouped.setdefault(row[3], []).append(row)
    runs = [_run(run_id, rows, phases) for run_id, rows in grouped.items()]
    runs.sort(key=lambda run: run.at)
    return runs


def _run(run_id: str, rows: list[list[str]], phases: list[str]) -> RunData:
    timed = [row for row in rows if row[4] in TIMED]
    present = [i for i, _ in enumerate(phases) if any(row[6 + i] for row in timed)]
    names = phase_order(phases[i] for i in present)
    columns = [phases.index(name) for name in names]
    matrix = np.array(
        [[float(row[6 + i] or 0.0) for i in columns] for row in timed], dtype=np.float64
    ).reshape(len(timed), len(names))
    return RunData(
        run_id=run_id,
        target=rows[0][1],
        vantage=rows[0][2],
        at=min(parse_timestamp(row[0]) for row in rows),
        phase_names=names,
        phases=matrix,
        totals=np.array([float(row[5]) for row in timed], dtype=np.float64),
        censored=sum(row[4] == Status.DEADLINE_EXCEEDED.value for row in rows),
        failed=len(rows) - len(timed),
        samples=len(rows),
    )


def replay(
    runs: list[RunData],
    params_for: Callable[[str], DetectorParams],
    *,
    seed: int = 0,
    progress: Callable[[int], None] | None = None,
) -> Iterator[Transition]:
    history = MemoryHistory()
    evaluator = Evaluator(history, params_for, seed=seed)
    for done, run in enumerate(runs, start=1):
        history.add(run)
        yield from evaluator.evaluate(run.target, run.vantage, run.at)
        if progress is not None:
            progress(done)
