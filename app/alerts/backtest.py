"""Replay a CSV of samples through the production detectors on a simulated clock.

The runs are fed, oldest first, to the very ``Evaluator`` that ``serve`` uses; only the
history is in memory and the clock is each run's own time. The file is streamed: runs are
built as the reading passes them, and the history keeps only what the evaluator can
still ask for, so memory stays flat however long the file.
"""

from __future__ import annotations

import csv
import itertools
from collections.abc import Callable, Iterable, Iterator
from datetime import timedelta
from typing import TextIO

import numpy as np

from app.alerts.evaluate import Evaluator
from app.alerts.history import MemoryHistory, Retention
from app.alerts.identity import Transition
from app.analysis.detectors import DetectorParams
from app.analysis.runs import Array, RunData, phase_order
from app.probe.sample import Status
from app.store.csvlayout import BASE_COLUMNS, format_timestamp, parse_timestamp

TIMED = (Status.OK.value, Status.DEADLINE_EXCEEDED.value)
CENSORED = Status.DEADLINE_EXCEEDED.value
# How far the reading may be from time order: a row may start up to this much before a row
# above it (runs of several vantages interleave), and a run's samples all start within
# this much of its first. Every run is complete once the reading is twice this past it.
MAX_SPAN = timedelta(hours=1)
SLACK = timedelta(days=1)  # kept beyond a reference window


class BacktestError(Exception):
    pass


class _Reading:
    """A run whose rows are still being read; times are in the export's own text form."""

    __slots__ = ("first", "limit", "line", "rows")

    def __init__(self, first: str, line: int, max_span: timedelta) -> None:
        self.line = line
        self.rows: list[list[str]] = []
        self.start(first, max_span)

    def start(self, first: str, max_span: timedelta) -> None:
        self.first = first  # its earliest sample's start ...
        self.limit = format_timestamp(parse_timestamp(first) + max_span)  # ... and its last


def read_runs(rows: TextIO, max_span: timedelta = MAX_SPAN) -> Iterator[RunData]:
    """The CSV's runs, oldest first (a run is at its first sample's time; runs that start
    at the same time in the order the file first names them), as the reading passes them.

    The rows must be in time order as `phasewatch export` writes them, give or take
    ``max_span`` (see MAX_SPAN); a file that is not is a BacktestError naming the line.
    Times in the export's form (``…T12:00:00.000000Z``) compare as text, which is time
    order; others are converted to it. A run's first time is parsed, so checked in full;
    the others only for their form and their order.
    """
    reader = csv.reader(rows)
    header = next(reader, None)
    if header is None or tuple(header[: len(BASE_COLUMNS)]) != BASE_COLUMNS:
        raise BacktestError(f"not a phasewatch samples CSV: header must start {BASE_COLUMNS}")
    phases = [name.removesuffix("_ms") for name in header[len(BASE_COLUMNS) :]]
    width = len(header)
    reading: dict[str, _Reading] = {}
    done: set[str] = set()
    latest = floor_of = floor = ""
    flush_after = _LAST
    for line, row in enumerate(reader, start=2):
        if len(row) != width:
            raise BacktestError(f"line {line}: {len(row)} columns, the header has {width}")
        stamp = row[0]
        if len(stamp) != _FORM_LENGTH or stamp[-1] != "Z":
            stamp = _canonical(stamp, line)
        if stamp >= latest:
            latest = stamp
        else:  # runs interleave: a row a little behind is fine
            if floor_of != latest:
                floor_of, floor = latest, format_timestamp(parse_timestamp(latest) - max_span)
            if stamp < floor:
                raise BacktestError(
                    f"line {line}: {row[0]} is more than {max_span} before a row above it;"
                    " the rows must be in time order, as `phasewatch export` writes them"
                )
        run = reading.get(row[3])
        if run is None:
            run = reading[row[3]] = _new(row[3], stamp, line, done, max_span)
            if len(reading) == 1:
                flush_after = _after(stamp, 2 * max_span)
        elif stamp < run.first:
            run.start(stamp, max_span)
        if stamp > run.limit:
            raise BacktestError(
                f"line {line}: run {row[3]}'s samples start more than {max_span} apart"
            )
        run.rows.append(row)
        if latest > flush_after:
            yield from _complete(reading, done, _after(latest, -2 * max_span), phases)
            flush_after = _after(next(iter(reading.values())).first, 2 * max_span)
    yield from _complete(reading, done, _LAST, phases)


_FORM_LENGTH = len("2024-05-01T12:00:00.000000Z")
_LAST = "~"  # after every time in text form


def _canonical(text: str, line: int) -> str:
    try:
        return format_timestamp(parse_timestamp(text))
    except ValueError as exc:
        raise BacktestError(f"line {line}: {exc}") from None


def _after(stamp: str, span: timedelta) -> str:
    return format_timestamp(parse_timestamp(stamp) + span)


def _new(run_id: str, stamp: str, line: int, done: set[str], max_span: timedelta) -> _Reading:
    if run_id in done:
        raise BacktestError(
            f"line {line}: run {run_id} goes on after its other rows were read:"
            f" its samples must start within {max_span} of each other"
        )
    try:
        return _Reading(stamp, line, max_span)
    except ValueError as exc:
        raise BacktestError(f"line {line}: {exc}") from None


def _complete(
    reading: dict[str, _Reading], done: set[str], before: str, phases: list[str]
) -> Iterator[RunData]:
    """The runs that started before ``before``, oldest first, taken out of ``reading``."""
    ready = sorted(
        (run.first, run.line, run_id) for run_id, run in reading.items() if run.first < before
    )
    for _, _, run_id in ready:
        run = reading.pop(run_id)
        done.add(run_id)
        yield _run(run_id, run, phases)


def _run(run_id: str, run: _Reading, phases: list[str]) -> RunData:
    rows = run.rows
    timed = [row for row in rows if row[4] in TIMED]
    names, matrix, totals = _numbers(timed, phases, run.line)
    return RunData(
        run_id=run_id,
        target=rows[0][1],
        vantage=rows[0][2],
        at=parse_timestamp(run.first),
        phase_names=names,
        phases=matrix,
        totals=totals,
        censored=sum(row[4] == CENSORED for row in rows),
        failed=len(rows) - len(timed),
        samples=len(rows),
    )


def _numbers(
    timed: list[list[str]], phases: list[str], line: int
) -> tuple[tuple[str, ...], Array, Array]:
    """The phases present (a cell in any timed row), their matrix, and the totals."""
    cells = list(itertools.chain.from_iterable(row[5:] for row in timed))
    present = list(range(len(phases)))
    if "" in cells:  # a phase some sample lacks: 0 there, and absent if no sample has it
        if any(not row[5] for row in timed):
            raise BacktestError(f"the run starting at line {line}: a timed sample has no total")
        present = [i for i in present if any(row[6 + i] for row in timed)]
        cells = [cell or "0" for cell in cells]
    try:
        values = np.array(cells, dtype=np.float64).reshape(len(timed), 1 + len(phases))
    except ValueError as exc:
        raise BacktestError(f"the run starting at line {line}: {exc}") from None
    names = phase_order(phases[i] for i in present) if timed else ()
    columns = [1 + phases.index(name) for name in names]
    return names, values[:, columns], values[:, 0].copy()


def replay(
    runs: Iterable[RunData],
    params_for: Callable[[str], DetectorParams],
    *,
    seed: int = 0,
    progress: Callable[[int], None] | None = None,
) -> Iterator[Transition]:
    history = MemoryHistory(lambda target: retention(params_for(target)))
    evaluator = Evaluator(history, params_for, seed=seed)
    for done, run in enumerate(runs, start=1):
        history.add(run)
        yield from evaluator.evaluate(run.target, run.vantage, run.at)
        if progress is not None:
            progress(done)


def retention(params: DetectorParams) -> Retention:
    """All the evaluator can still ask of a target with these ``params``: its reference
    window and a day more; for ``last``, the tail onset's reach (4 recent windows)."""
    reach = max(4 * params.recent_runs, params.failing_runs, params.dominant_runs, 2)
    return Retention(timedelta(days=params.reference_days) + SLACK, reach)
