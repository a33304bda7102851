"""Import: a CSV in the layout of app.csvio.layout, checked, then stored.

An import is all or nothing: every row is checked first, every problem is reported with
its line, and only a clean file is stored, in one transaction. Run ids make it idempotent.
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING, TextIO, TypeVar

from sqlalchemy import Engine

from app.analysis.llmmetrics import METRIC_NAMES
from app.clock import parse_timestamp, utcnow
from app.csvio.goodput import GOODPUT_COLUMNS, parse_flag
from app.csvio.layout import (
    BASE_COLUMNS,
    SPLIT_COLUMNS,
    CsvImportError,
    CsvProblem,
    ImportResult,
    parse_name,
    parse_number,
    parse_run_id,
    parse_status,
    phase_order,
)
from app.csvio.table import Table, TableRun
from app.runs.validate import Problem, check_run
from app.store.db import make_sessions, transaction
from app.store.ingest import store_run
from app.store.rollups.catchup import catch_up

if TYPE_CHECKING:
    from _csv import Reader

MAX_LISTED_PROBLEMS = 20
PROGRESS_EVERY = 10_000

_PHASE_NAME = re.compile(r"^[A-Za-z0-9_]{1,40}$")  # runs.dominant_phase holds 40 characters
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
class _Problems:
    listed: list[CsvProblem] = field(default_factory=list)
    count: int = 0

    def add(self, line: int, column: str | None, reason: str) -> None:
        self.count += 1
        if len(self.listed) < MAX_LISTED_PROBLEMS:
            self.listed.append(CsvProblem(line, column, reason))


@dataclass(frozen=True, slots=True)
class _Layout:
    """Where each column is in the file, phases in their canonical order, then the LLM
    metrics the file has (in ``METRIC_NAMES``' order)."""

    width: int
    base: dict[str, int]
    phases: dict[str, int]
    metrics: dict[str, int] = field(default_factory=dict)
    flags: dict[str, int] = field(default_factory=dict)  # the goodput columns it has


def _parse(rows: TextIO, progress: Callable[[int], None]) -> Table:
    reader = csv.reader(rows, strict=True)
    problems = _Problems()
    try:
        table = _parse_rows(reader, _layout(next(reader, None)), problems, progress)
        _refuse_repeats(table, problems)
        if not problems.count:
            _check_runs(table, problems, utcnow())
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
) -> Table:
    table = Table(list(layout.phases), list(layout.metrics), bool(layout.flags))
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


def _refuse_repeats(table: Table, problems: _Problems) -> None:
    """A row twice is one sample stored twice: it would weigh double in every quantile."""
    for run in table.runs.values():
        first: dict[tuple[object, ...], int] = {}  # one run at a time: a few rows each
        for row in run.rows:
            line = first.setdefault(table.cells(row), table.lines[row])
            if line != table.lines[row]:
                reason = f"repeats line {line}: the same sample (run_id and every cell) twice"
                problems.add(table.lines[row], None, reason)


def _check_runs(table: Table, problems: _Problems, now: datetime) -> None:
    """Each run through the door every stored run passes (app.runs.validate; the phases
    not held to the total: the layout lets another tool's history hold only some), its
    problems on the line of the sample they are about (the run's first line for its own)."""
    for run_id, run in table.runs.items():
        for problem in check_run(table.record(run_id, run), now, phase_sums=False):
            line = run.line if problem.sample is None else table.lines[run.rows[problem.sample]]
            problems.add(line, _column_of(problem), problem.reason)


def _column_of(problem: Problem) -> str | None:
    """The CSV column a run's field comes from (None: the row as a whole)."""
    leaf = problem.field.rsplit(".", 1)[-1]
    if problem.kind == "phase":
        return f"{leaf}_ms"
    columns = {"total": "total_ms", "sample_status": "status", "time": "timestamp"}
    return columns.get(problem.kind)


def _layout(names: list[str] | None) -> _Layout:
    if not names:
        expected = ",".join(BASE_COLUMNS)
        raise CsvImportError([CsvProblem(1, None, f"no header: expected {expected},...")])
    names = [names[0].removeprefix("\ufeff"), *names[1:]]  # a spreadsheet's byte order mark
    problems = _Problems()
    base: dict[str, int] = {}
    phases: dict[str, int] = {}
    metrics: dict[str, int] = {}
    flags: dict[str, int] = {}
    for index, name in enumerate(names):
        if name in names[:index]:
            problems.add(1, name, "column appears twice")
        elif name in BASE_COLUMNS:
            base[name] = index
        elif name in GOODPUT_COLUMNS:  # before the phases: met_ttft_ms is no phase
            flags[name] = index
        elif name in METRIC_NAMES:  # before the phases: ttft_ms is a metric, not a phase
            metrics[name] = index
        elif name.endswith("_ms") and _PHASE_NAME.match(name.removesuffix("_ms")):
            phases[name.removesuffix("_ms")] = index
        else:
            problems.add(1, name, "not a column: phase columns are <letters, digits, _>_ms")
    for missing in (name for name in BASE_COLUMNS if name not in base):
        problems.add(1, missing, "column missing")
    if problems.count:
        raise CsvImportError(problems.listed, problems.count)
    split = [name for name in SPLIT_COLUMNS if name in phases]
    if split and len(split) != len(SPLIT_COLUMNS):
        columns = ", ".join(f"{name}_ms" for name in SPLIT_COLUMNS)
        raise CsvImportError([CsvProblem(1, None, f"{columns} come together or not at all")])
    ordered = {name: phases[name] for name in [*phase_order(phases), *split]}
    found = {name: metrics[name] for name in METRIC_NAMES if name in metrics}
    return _Layout(len(names), base, ordered, found, flags)


def _parse_row(
    cells: list[str], line: int, layout: _Layout, table: Table, problems: _Problems
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
    values = [_number(cells[i], f"{name}_ms", line, problems) for name, i in layout.phases.items()]
    values += [_number(cells[i], name, line, problems) for name, i in layout.metrics.items()]
    flags = _flags(cells, layout, line, problems)
    for column in ("target", "vantage"):
        _checked(parse_name, cell, column, line, problems)
    if problems.count > before or started_at is None or run_id is None:
        return
    if status is None or total is None or not _ends_in_range(started_at, total, line, problems):
        return
    run = table.runs.setdefault(run_id, TableRun(cell["target"], cell["vantage"], line))
    if _same_run(run, cell, line, problems):
        run.rows.append(table.append(line, started_at, status, total, values, flags))


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


def _number(text: str, column: str, line: int, problems: _Problems) -> float:
    """A phase's or a metric's cell: NaN when empty (the sample has none)."""
    if text == "":
        return math.nan
    try:
        return parse_number(text)
    except ValueError as exc:
        problems.add(line, column, str(exc))
        return math.nan


def _flags(cells: list[str], layout: _Layout, line: int, problems: _Problems) -> list[bool | None]:
    """The goodput cells in ``GOODPUT_COLUMNS``' order (None: empty, or not in the file);
    none for a file without them."""
    found: list[bool | None] = []
    if not layout.flags:
        return found
    for name in GOODPUT_COLUMNS:
        index = layout.flags.get(name)
        try:
            found.append(None if index is None else parse_flag(cells[index]))
        except ValueError as exc:
            problems.add(line, name, str(exc))
            found.append(None)
    return found


def _same_run(run: TableRun, cell: dict[str, str], line: int, problems: _Problems) -> bool:
    consistent = True
    for column, first in (("target", run.target), ("vantage", run.vantage)):
        if cell[column] != first:
            reason = f"{cell[column]!r} differs from {first!r} on line {run.line} for this run_id"
            problems.add(line, column, reason)
            consistent = False
    return consistent


def _store(engine: Engine, table: Table) -> ImportResult:
    now = utcnow()
    runs = samples = present = 0
    earliest: datetime | None = None
    sessions = make_sessions(engine)
    with transaction(sessions) as session:
        for run_id, run in table.runs.items():
            # One run's records at a time: the table stays the only copy of the file.
            record = table.record(run_id, run)
            if store_run(session, record, now):
                runs, samples = runs + 1, samples + len(run.rows)
                earliest = min(earliest or record.started_at, record.started_at)
            else:
                present += 1
    if earliest is not None:
        # Digested and rolled up now, as serve does for its own runs: history older than
        # the raw retention would otherwise be pruned undigested (lost), and the overview,
        # which reads digests, would not know these targets.
        catch_up(sessions, earliest, now)
    return ImportResult(runs, samples, present)
