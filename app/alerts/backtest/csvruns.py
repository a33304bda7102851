"""A CSV of samples (the export's layout) read as runs, oldest first, for the backtest.

The file is streamed: a run is built as soon as the reading has passed it, so memory stays
flat however long the file. Rows must be in time order within ``max_span``; a file that is
not is a ``BacktestError`` naming the line.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import operator
import sys
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import TextIO

from app.alerts.backtest.csvnumbers import run_numbers
from app.analysis.llmmetrics import METRIC_NAMES
from app.analysis.runs import RunData
from app.clock import parse_timestamp
from app.csvio.goodput import GOODPUT_COLUMNS
from app.csvio.layout import BASE_COLUMNS, format_timestamp
from app.csvio.rows import csv_rows
from app.probe.sample import Status

TIMED = (Status.OK.value, Status.DEADLINE_EXCEEDED.value)
CENSORED = Status.DEADLINE_EXCEEDED.value
OK = Status.OK.value
# How far the reading may be from time order: a row may start up to this much before a row
# above it (runs of several vantages interleave), and a run's samples all start within
# this much of its first. Every run is complete once the reading is twice this past it.
MAX_SPAN = timedelta(hours=1)


class BacktestError(Exception):
    runs_before = 0  # the runs read before this error was found (see read_numbered)


class _Reading:
    """A run whose rows are still being read; times are in the export's own text form.

    Of a kept run's rows only what ``_run`` reads is kept: each row's status, and its
    total and phase cells joined by commas as the file had them (a row's dozen strings and
    their list were ~1 KB, and a fleet reads some 20,000 rows of runs at once); a row with
    a comma inside a cell keeps its cells as a list."""

    __slots__ = ("at", "cells", "first", "kept", "last", "limit", "line", "row", "statuses")

    def __init__(
        self, first: str, line: int, max_span: timedelta, kept: bool, row: list[str]
    ) -> None:
        self.line, self.last, self.kept = line, first, kept
        self.row = row[:3]  # its first row's time, target and vantage
        self.statuses: list[str] = []
        self.cells: list[str | list[str]] = []
        self.start(first, max_span)

    def start(self, first: str, max_span: timedelta) -> None:
        self.first = first  # its earliest sample's start, and the latest a sample may start
        self.at = parse_timestamp(first)
        self.limit = format_timestamp(self.at + max_span)


def read_runs(
    rows: TextIO, max_span: timedelta = MAX_SPAN, keep: Callable[[str], bool] | None = None
) -> Iterator[RunData]:
    """The CSV's runs, oldest first (a run is at its first sample's time; runs that start
    at the same time in the order the file first names them), as the reading passes them.
    With ``keep``, only the runs of the targets it keeps (the others are checked as they
    pass but their numbers are never parsed).

    The rows must be in time order as `phasewatch export` writes them, give or take
    ``max_span`` (see MAX_SPAN); a file that is not is a BacktestError naming the line.
    Times in the export's form (``…T12:00:00.000000Z``) compare as text, which is time
    order; others are converted to it. A run's first time is parsed, so checked in full;
    the others only for their form and their order.
    """
    return (run for _, run in read_numbered(rows, max_span, keep))


def read_numbered(
    rows: TextIO, max_span: timedelta = MAX_SPAN, keep: Callable[[str], bool] | None = None
) -> Iterator[tuple[int, RunData]]:
    """``read_runs``, each run with its position among all the file's runs (those ``keep``
    leaves out counted too). A BacktestError carries ``runs_before``: how many runs the
    reading had passed when it was found."""
    reader = csv_rows(rows)
    header = next(reader, None)
    if header is None or tuple(header[: len(BASE_COLUMNS)]) != BASE_COLUMNS:
        raise BacktestError(f"not a phasewatch samples CSV: header must start {BASE_COLUMNS}")
    stream = _Stream(header, max_span, keep)
    try:
        # Consecutive rows of one run are taken together: the checks then run per stretch.
        for run_id, stretch in itertools.groupby(reader, key=_run_id):
            yield from stream.take(run_id, list(stretch))
        yield from stream.complete(_LAST)
    except BacktestError as exc:
        exc.runs_before = stream.passed
        raise


_FORM_LENGTH = len("2024-05-01T12:00:00.000000Z")
_LAST = "~"  # after every time in text form
_last_char = operator.itemgetter(-1)
_status = operator.itemgetter(4)


def _numeric(phases: int) -> Callable[[list[str]], list[str]]:
    """A row's total and phase cells: the LLM metrics' cells after them are no phases."""
    return operator.itemgetter(slice(5, 6 + phases))


def _run_id(row: list[str]) -> str:
    return row[3] if len(row) > 3 else ""


class _Stream:
    """The runs being read, and how far the reading has got."""

    def __init__(
        self, header: list[str], max_span: timedelta, keep: Callable[[str], bool] | None
    ) -> None:
        # The LLM metrics (app.analysis.llmmetrics) follow the phases when an export has them.
        # So do the goodput columns (app.csvio.goodput): verdicts, not phases.
        skipped = {*METRIC_NAMES, *GOODPUT_COLUMNS}
        columns = [name for name in header[len(BASE_COLUMNS) :] if name not in skipped]
        self.phases = [name.removesuffix("_ms") for name in columns]
        self.width, self.max_span, self.keep = len(header), max_span, keep
        self.passed = 0  # runs completed, kept or not
        self.reading: dict[str, _Reading] = {}
        # (first, line, run_id) of every run being read, oldest first: ``complete`` takes
        # from the front instead of scanning every run being read (a fleet reads thousands
        # at once, and completes a few at every new minute). An entry whose run started
        # earlier since (``_Reading.start``) is stale: a fresh one was pushed beside it.
        self.order: list[tuple[str, int, str]] = []
        self.done: set[str] = set()
        self.line = 1
        self.latest = self.floor_of = self.floor = ""
        self.flush_after = _LAST
        self.numeric = _numeric(len(self.phases))

    def joined(self, row: list[str]) -> str | list[str]:
        """A row's total and phase cells as ``_Reading`` keeps them."""
        cells = self.numeric(row)
        text = ",".join(cells)
        return text if text.count(",") == len(self.phases) else cells

    def take(self, run_id: str, stretch: list[list[str]]) -> Iterator[tuple[int, RunData]]:
        line, self.line = self.line + 1, self.line + len(stretch)
        if set(map(len, stretch)) != {self.width}:
            bad = next(i for i, row in enumerate(stretch) if len(row) != self.width)
            raise BacktestError(
                f"line {line + bad}: {len(stretch[bad])} columns, the header has {self.width}"
            )
        stamps = [row[0] for row in stretch]
        if set(map(len, stamps)) != {_FORM_LENGTH} or set(map(_last_char, stamps)) != {"Z"}:
            stamps = [_canonical(stamp, line + i) for i, stamp in enumerate(stamps)]
        early, late = min(stamps), max(stamps)
        self._in_order(early, line + stamps.index(early))
        self.latest = max(self.latest, late)
        run = self.reading.get(run_id)
        if run is None:
            run = self.reading[run_id] = self._new(run_id, stretch[0], early, line)
            heapq.heappush(self.order, (run.first, run.line, run_id))
        elif early < run.first:
            run.start(early, self.max_span)
            heapq.heappush(self.order, (run.first, run.line, run_id))
        run.last = max(run.last, late)
        if run.last > run.limit:
            raise BacktestError(
                f"line {line + len(stamps) - 1}: run {run_id}'s samples start more than"
                f" {self.max_span} apart"
            )
        if run.kept:
            run.statuses.extend(map(_status, stretch))
            run.cells.extend(map(self.joined, stretch))
        if self.latest > self.flush_after:
            yield from self.complete(_after(self.latest, -2 * self.max_span))

    def complete(self, before: str) -> Iterator[tuple[int, RunData]]:
        """The runs that started before ``before``, oldest first, taken out of reading."""
        order = self.order
        while order and order[0][0] < before:
            first, _, run_id = heapq.heappop(order)
            run = self.reading.get(run_id)
            if run is None or run.first != first:
                continue  # stale: the run started earlier (a fresh entry) or is done
            self.done.add(run_id)
            del self.reading[run_id]
            if run.kept:
                yield self.passed, _run(run_id, run, self.phases)
            self.passed += 1
        oldest = next(iter(self.reading.values()), None)
        self.flush_after = _LAST if oldest is None else _after(oldest.first, 2 * self.max_span)

    def _in_order(self, stamp: str, line: int) -> None:
        if stamp >= self.latest:
            return
        if self.floor_of != self.latest:  # runs interleave: a row a little behind is fine
            self.floor_of = self.latest
            self.floor = _after(self.latest, -self.max_span)
        if stamp < self.floor:
            raise BacktestError(
                f"line {line}: {stamp} is more than {self.max_span} before a row above it;"
                " the rows must be in time order, as `phasewatch export` writes them"
            )

    def _new(self, run_id: str, row: list[str], stamp: str, line: int) -> _Reading:
        if run_id in self.done:
            raise BacktestError(
                f"line {line}: run {run_id} goes on after its other rows were read:"
                f" its samples must start within {self.max_span} of each other"
            )
        if not self.reading:
            self.flush_after = _after(stamp, 2 * self.max_span)
        try:
            kept = self.keep is None or self.keep(row[1])
            return _Reading(stamp, line, self.max_span, kept, row)
        except ValueError as exc:
            raise BacktestError(f"line {line}: {exc}") from None


def _canonical(text: str, line: int) -> str:
    if len(text) == _FORM_LENGTH and text[-1] == "Z":
        return text
    try:
        return format_timestamp(parse_timestamp(text))
    except ValueError as exc:
        raise BacktestError(f"line {line}: {exc}") from None


@functools.lru_cache(maxsize=4096)  # a fleet's runs start at a few shared minutes
def _after(stamp: str, span: timedelta) -> str:
    return format_timestamp(parse_timestamp(stamp) + span)


def _run(run_id: str, run: _Reading, phases: list[str]) -> RunData:
    statuses, rows = run.statuses, run.cells
    timed = (
        rows
        if set(statuses) == {OK}
        else [row for row, status in zip(rows, statuses, strict=True) if status in TIMED]
    )
    try:
        names, matrix, totals = run_numbers(timed, phases)
    except ValueError as exc:
        raise BacktestError(f"the run starting at line {run.line}: {exc}") from None
    return RunData(
        run_id=run_id,
        # One string per name, not one per run: a backtest keeps a week of every series.
        target=sys.intern(run.row[1]),
        vantage=sys.intern(run.row[2]),
        at=run.at,
        phase_names=names,
        phases=matrix,
        totals=totals,
        censored=statuses.count(CENSORED),
        failed=len(rows) - len(timed),
        samples=len(rows),
    )
