"""Import: a CSV in the layout of app.csvio.layout, checked, then stored.

An import is all or nothing: every row is checked first, every problem is reported with
its line, and only a clean file is stored, in one transaction. Run ids make it idempotent.
"""

from __future__ import annotations

import csv
import math
import re
import uuid
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING, TextIO, TypeVar

from sqlalchemy import Engine

from app.clock import parse_timestamp, utcnow
from app.csvio.layout import (
    BASE_COLUMNS,
    STATUSES,
    CsvImportError,
    CsvProblem,
    ImportResult,
    parse_name,
    parse_number,
    parse_run_id,
    parse_status,
    phase_order,
)
from app.store.db import make_sessions, transaction
from app.store.ingest import store_run
from app.store.records import RunRecord, RunStatus, SampleRecord

if TYPE_CHECKING:
    from _csv import Reader

MAX_LISTED_PROBLEMS = 20
PROGRESS_EVERY = 10_000

_PHASE_NAME = re.compile(r"^[A-Za-z0-9_]{1,40}$")  # runs.dominant_phase holds 40 characters
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
T = TypeVar("T")


def import_samples(
    engine: Engine, rows: TextIO, *, progress: Callable[[int], None] | None = None
) -> ImportResult:
    """Check every row, then store the file's runs in one transaction, or nothing.

    Raises CsvImportError, listing each problem with its line, if any row is malformed.
    ``progress`` is called with the number of rows read so far, every few thousand rows.
    A run whose id is already stored is left as it is and counted as already present.
    """
    parsed = _parse(rows, progress or (lambda _: None))
    return _store(engine, parsed)


@dataclass(slots=True)
class _Run:
    target: str
    vantage: str
    line: int
    rows: array[int] = field(default_factory=lambda: array("q"))


@dataclass(slots=True)
class _Problems:
    listed: list[CsvProblem] = field(default_factory=list)
    count: int = 0

    def add(self, line: int, column: str | None, reason: str) -> None:
        self.count += 1
        if len(self.listed) < MAX_LISTED_PROBLEMS:
            self.listed.append(CsvProblem(line, column, reason))


class _Table:
    """The file's samples column by column, about 17 + 8 bytes per phase a row.

    A million rows would take gigabytes as objects; as arrays they take tens of megabytes.
    """

    def __init__(self, phases: Sequence[str]) -> None:
        self.phases = tuple(phases)
        self.micros = array("q")  # start, microseconds since the epoch
        self.status = bytearray()  # index into STATUSES
        self.total = array("d")
        self.values = [array("d") for _ in phases]  # NaN: the sample has no such phase
        self.lines = array("q")  # where each row is in the file
        self.runs: dict[uuid.UUID, _Run] = {}

    def append(
        self, line: int, started_at: datetime, status: str, total: float, values: list[float]
    ) -> int:
        self.lines.append(line)
        self.micros.append((started_at - _EPOCH) // _MICROSECOND)
        self.status.append(STATUSES.index(status))
        self.total.append(total)
        for column, value in zip(self.values, values, strict=True):
            column.append(value)
        return len(self.total) - 1

    def cells(self, row: int) -> tuple[object, ...]:
        """What a row says, comparable: an absent phase is None (NaN equals nothing)."""
        values = (column[row] for column in self.values)
        phases = (None if math.isnan(value) else value for value in values)
        return (self.micros[row], self.status[row], self.total[row], *phases)

    def record(self, run_id: uuid.UUID, run: _Run) -> RunRecord:
        samples = tuple(self._sample(idx, row) for idx, row in enumerate(run.rows))
        finished = max(s.started_at + timedelta(milliseconds=s.total_ms) for s in samples)
        return RunRecord(
            id=run_id,
            target=run.target,
            vantage=run.vantage,
            started_at=min(s.started_at for s in samples),
            finished_at=finished,
            status=RunStatus.COMPLETE,
            samples=samples,
        )

    def _sample(self, idx: int, row: int) -> SampleRecord:
        values = zip(self.phases, (column[row] for column in self.values), strict=True)
        return SampleRecord(
            idx=idx,
            started_at=_EPOCH + self.micros[row] * _MICROSECOND,
            status=STATUSES[self.status[row]],
            total_ms=self.total[row],
            phases={name: value for name, value in values if not math.isnan(value)},
        )


@dataclass(frozen=True, slots=True)
class _Layout:
    """Where each column is in the file, phases in their canonical order."""

    width: int
    base: dict[str, int]
    phases: dict[str, int]


def _parse(rows: TextIO, progress: Callable[[int], None]) -> _Table:
    reader = csv.reader(rows, strict=True)
    problems = _Problems()
    try:
        table = _parse_rows(reader, _layout(next(reader, None)), problems, progress)
        _refuse_repeats(table, problems)
    except csv.Error as exc:
        problems.add(reader.line_num, None, f"not CSV, reading stopped: {exc}")
    except UnicodeDecodeError:
        # Text is decoded a block ahead of the reader: the bad byte is on this line or later.
        problems.add(reader.line_num + 1, None, "not UTF-8 text (here or further on)")
    if problems.count:
        raise CsvImportError(problems.listed, problems.count)
    return table


def _parse_rows(
    reader: Reader,
    layout: _Layout,
    problems: _Problems,
    progress: Callable[[int], None],
) -> _Table:
    table = _Table(list(layout.phases))
    count, line = 0, 2
    for cells in reader:
        if cells:  # blank lines are skipped
            _parse_row(cells, line, layout, table, problems)
            count += 1
            if count % PROGRESS_EVERY == 0:
                progress(count)
        line = reader.line_num + 1
    progress(count)
    return table


def _refuse_repeats(table: _Table, problems: _Problems) -> None:
    """A row twice is one sample stored twice: it would weigh double in every quantile."""
    for run in table.runs.values():
        first: dict[tuple[object, ...], int] = {}  # one run at a time: a few rows each
        for row in run.rows:
            line = first.setdefault(table.cells(row), table.lines[row])
            if line != table.lines[row]:
                reason = f"repeats line {line}: the same sample (run_id and every cell) twice"
                problems.add(table.lines[row], None, reason)


def _layout(names: list[str] | None) -> _Layout:
    if not names:
        expected = ",".join(BASE_COLUMNS)
        raise CsvImportError([CsvProblem(1, None, f"no header: expected {expected},...")])
    names = [names[0].removeprefix("\ufeff"), *names[1:]]  # a spreadsheet's byte order mark
    problems = _Problems()
    base: dict[str, int] = {}
    phases: dict[str, int] = {}
    for index, name in enumerate(names):
        if name in names[:index]:
            problems.add(1, name, "column appears twice")
        elif name in BASE_COLUMNS:
            base[name] = index
        elif name.endswith("_ms") and _PHASE_NAME.match(name.removesuffix("_ms")):
            phases[name.removesuffix("_ms")] = index
        else:
            problems.add(1, name, "not a column: phase columns are <letters, digits, _>_ms")
    for missing in (name for name in BASE_COLUMNS if name not in base):
        problems.add(1, missing, "column missing")
    if problems.count:
        raise CsvImportError(problems.listed, problems.count)
    ordered = {name: phases[name] for name in phase_order(phases)}
    return _Layout(len(names), base, ordered)


def _parse_row(
    cells: list[str], line: int, layout: _Layout, table: _Table, problems: _Problems
) -> None:
    if len(cells) != layout.width:
        problems.add(line, None, f"expected {layout.width} columns, found {len(cells)}")
        return
    before = problems.count
    cell = {name: cells[index] for name, index in layout.base.items()}
    started_at = _checked(parse_timestamp, cell, "timestamp", line, problems)
    run_id = _checked(
        partial(parse_run_id, target=cell["target"], vantage=cell["vantage"]),
        cell,
        "run_id",
        line,
        problems,
    )
    status = _checked(parse_status, cell, "status", line, problems)
    total = _checked(parse_number, cell, "total_ms", line, problems)
    values = [_phase_value(cells[i], name, line, problems) for name, i in layout.phases.items()]
    for column in ("target", "vantage"):
        _checked(parse_name, cell, column, line, problems)
    if problems.count > before or started_at is None or run_id is None:
        return
    if status is None or total is None or not _ends_in_range(started_at, total, line, problems):
        return
    run = table.runs.setdefault(run_id, _Run(cell["target"], cell["vantage"], line))
    if _same_run(run, cell, line, problems):
        run.rows.append(table.append(line, started_at, status, total, values))


def _checked(
    parse: Callable[[str], T], cell: dict[str, str], column: str, line: int, problems: _Problems
) -> T | None:
    try:
        return parse(cell[column])
    except ValueError as exc:
        problems.add(line, column, str(exc))
        return None


def _ends_in_range(started_at: datetime, total: float, line: int, problems: _Problems) -> bool:
    # The run's finished_at is a start plus a total: it must be a datetime too.
    try:
        started_at + timedelta(milliseconds=total)
    except OverflowError:
        problems.add(line, "total_ms", f"{total!r} ms after the timestamp is past year 9999")
        return False
    return True


def _phase_value(text: str, phase: str, line: int, problems: _Problems) -> float:
    if text == "":
        return math.nan
    try:
        return parse_number(text)
    except ValueError as exc:
        problems.add(line, f"{phase}_ms", str(exc))
        return math.nan


def _same_run(run: _Run, cell: dict[str, str], line: int, problems: _Problems) -> bool:
    consistent = True
    for column, first in (("target", run.target), ("vantage", run.vantage)):
        if cell[column] != first:
            reason = f"{cell[column]!r} differs from {first!r} on line {run.line} for this run_id"
            problems.add(line, column, reason)
            consistent = False
    return consistent


def _store(engine: Engine, table: _Table) -> ImportResult:
    now = utcnow()
    runs = samples = present = 0
    with transaction(make_sessions(engine)) as session:
        for run_id, run in table.runs.items():
            # One run's records at a time: the table stays the only copy of the file.
            if store_run(session, table.record(run_id, run), now):
                runs, samples = runs + 1, samples + len(run.rows)
            else:
                present += 1
    return ImportResult(runs, samples, present)
