"""Samples as CSV: the one layout that export, import, backtests and the API share.

``timestamp,target,vantage,run_id,status,total_ms,<phase>_ms...``: one row per sample,
``timestamp`` its start in UTC (written ``2024-05-01T12:00:00.000000Z``; any offset is read
and converted), an empty phase cell for a phase the sample does not have. Rows are ordered
by timestamp, run id, then the sample's index in its run; numbers are written with ``repr``
so that they read back as the same float. Export → import → export is byte-identical.

An import is all or nothing: every row is checked first, every problem is reported with
its line, and only a clean file is stored, in one transaction. Run ids make it idempotent.
"""

from __future__ import annotations

import csv
import math
import re
import uuid
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

from sqlalchemy import Engine, Select, func, select, true
from sqlalchemy.orm import Session

from app.probe.sample import HTTP_PHASES, LLM_PHASES, Status
from app.store.db import make_sessions, transaction
from app.store.models import RunRow, SampleRow, TargetRow
from app.store.queries import store_run
from app.store.records import RunRecord, SampleRecord

if TYPE_CHECKING:
    from _csv import Reader, Writer

BASE_COLUMNS = ("timestamp", "target", "vantage", "run_id", "status", "total_ms")
STATUSES = tuple(status.value for status in Status)
KNOWN_PHASES = (*LLM_PHASES, *(p for p in HTTP_PHASES if p not in LLM_PHASES))
MAX_LISTED_PROBLEMS = 20
MAX_NAME_LENGTH = 200  # targets.name and runs.vantage
EXPORT_BATCH = 2_000
PROGRESS_EVERY = 10_000

_PHASE_NAME = re.compile(r"^[A-Za-z0-9_]{1,40}$")  # runs.dominant_phase holds 40 characters
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class CsvProblem:
    """One thing wrong with the file; ``column`` is None when it is the whole row."""

    line: int
    column: str | None
    reason: str

    def __str__(self) -> str:
        where = f"{self.line}: {self.column}" if self.column else str(self.line)
        return f"{where}: {self.reason}"


class CsvImportError(Exception):
    """The file was not stored. ``problems`` lists the first ones; ``count`` is all of them."""

    def __init__(self, problems: Sequence[CsvProblem], count: int | None = None) -> None:
        self.problems = list(problems)
        self.count = len(self.problems) if count is None else count
        super().__init__("\n".join(str(problem) for problem in self.problems))

    @property
    def unlisted(self) -> int:
        return self.count - len(self.problems)


class CsvExportError(Exception):
    """The export stopped part-way; what was written so far is incomplete."""


@dataclass(frozen=True, slots=True)
class ImportResult:
    runs_stored: int
    samples_stored: int
    runs_already_present: int


def phase_order(names: Iterable[str]) -> list[str]:
    """The LLM phases, then ``server``, in their order; any others alphabetically."""
    found = set(names)
    return [p for p in KNOWN_PHASES if p in found] + sorted(found.difference(KNOWN_PHASES))


def header(phases: Sequence[str]) -> list[str]:
    return [*BASE_COLUMNS, *(f"{phase}_ms" for phase in phases)]


def format_timestamp(value: datetime) -> str:
    # Fixed width (always microseconds) so that text order is time order.
    text = value.astimezone(UTC).isoformat(timespec="microseconds")
    return text.removesuffix("+00:00") + "Z"


def parse_timestamp(text: str) -> datetime:
    """An ISO-8601 time with an offset (``Z`` included), as UTC; ValueError otherwise."""
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{text!r} is not an ISO-8601 time") from None
    if value.tzinfo is None:
        raise ValueError(f"{text!r} has no UTC offset (add 'Z' for UTC)")
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise ValueError(f"{text!r} is out of range in UTC") from None


def format_number(value: float) -> str:
    # + 0.0 turns -0.0 into 0.0: JSONB keeps no negative zero, so it would not round-trip.
    return repr(float(value) + 0.0)


# Export ---------------------------------------------------------------------------------


def export_samples(
    source: Session | Engine,
    out: TextIO,
    *,
    target: str | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
) -> int:
    """Write the samples that started in [start, end) as CSV; return how many rows.

    Rows are streamed from the database in batches, so memory does not grow with the
    number of samples. Given a session, the export runs in the caller's transaction.
    Raises CsvExportError if a concurrent writer adds a phase that the header lacks.
    """
    for bound in (start, end):
        if bound is not None and bound.tzinfo is None:
            raise ValueError("export bounds must be aware datetimes")
    with _reading(source) as session:
        phases = phase_order(_phase_names(session, target, start, end))
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(header(phases))
        return _write_rows(session, _filtered(_sample_rows(), target, start, end), phases, writer)


def _write_rows(session: Session, rows: Select[Any], phases: list[str], writer: Writer) -> int:
    known, count = frozenset(phases), 0
    streamed = session.execute(rows, execution_options={"yield_per": EXPORT_BATCH})
    # closing: an export that fails part-way must not leave a server-side cursor open.
    with closing(streamed):
        for row in streamed:
            writer.writerow(_cells(tuple(row), phases, known))
            count += 1
    return count


@contextmanager
def _reading(source: Session | Engine) -> Iterator[Session]:
    if isinstance(source, Session):
        yield source
        return
    if source.dialect.name == "postgresql":
        # One snapshot for the phase names and the rows, so both see the same samples.
        source = source.execution_options(isolation_level="REPEATABLE READ")
    with Session(source) as session, session.begin():
        yield session


def _phase_names(
    session: Session, target: str | None, start: datetime | None, end: datetime | None
) -> list[str]:
    """The phase names of the selected samples, found by the database, not by reading rows."""
    keys: Select[Any]
    if session.get_bind().dialect.name == "postgresql":
        keys = select(func.jsonb_object_keys(SampleRow.phases))
    else:  # SQLite, the only other database phasewatch runs on
        each = func.json_each(SampleRow.phases).table_valued("key")
        keys = select(each.c.key).select_from(SampleRow).join(each, true())
    query = _filtered(keys.distinct(), target, start, end)
    return [str(key) for key in session.scalars(query)]


def _sample_rows() -> Select[Any]:
    return select(
        SampleRow.started_at,
        TargetRow.name,
        RunRow.vantage,
        SampleRow.run_id,
        SampleRow.status,
        SampleRow.total_ms,
        SampleRow.phases,
    ).order_by(SampleRow.started_at, SampleRow.run_id, SampleRow.idx)


def _filtered(
    query: Select[Any], target: str | None, start: datetime | None, end: datetime | None
) -> Select[Any]:
    query = query.join(RunRow, RunRow.id == SampleRow.run_id).join(
        TargetRow, TargetRow.id == RunRow.target_id
    )
    if target is not None:
        query = query.where(TargetRow.name == target)
    if start is not None:
        query = query.where(SampleRow.started_at >= start)
    if end is not None:
        query = query.where(SampleRow.started_at < end)
    return query


def _cells(row: tuple[Any, ...], phases: Sequence[str], known: frozenset[str]) -> list[str]:
    started_at, target, vantage, run_id, status, total_ms, values = row
    if not values.keys() <= known:
        # Only a writer committing between the two queries can do this (SQLite keeps no
        # snapshot across them): refuse rather than silently drop the phase.
        unknown = sorted(values.keys() - known)
        raise CsvExportError(f"phases {unknown} appeared during the export; run it again")
    cells = [format_timestamp(started_at), target, vantage, str(run_id), status]
    cells.append(format_number(total_ms))
    cells.extend(format_number(values[p]) if p in values else "" for p in phases)
    return cells


# Import ---------------------------------------------------------------------------------


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
        self.runs: dict[uuid.UUID, _Run] = {}

    def append(self, started_at: datetime, status: str, total: float, values: list[float]) -> int:
        self.micros.append((started_at - _EPOCH) // _MICROSECOND)
        self.status.append(STATUSES.index(status))
        self.total.append(total)
        for column, value in zip(self.values, values, strict=True):
            column.append(value)
        return len(self.total) - 1

    def record(self, run_id: uuid.UUID, run: _Run) -> RunRecord:
        samples = tuple(self._sample(idx, row) for idx, row in enumerate(run.rows))
        finished = max(s.started_at + timedelta(milliseconds=s.total_ms) for s in samples)
        return RunRecord(
            id=run_id,
            target=run.target,
            vantage=run.vantage,
            started_at=min(s.started_at for s in samples),
            finished_at=finished,
            status="complete",
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
    run_id = _checked(_parse_uuid, cell, "run_id", line, problems)
    status = _checked(_parse_status, cell, "status", line, problems)
    total = _checked(_parse_number, cell, "total_ms", line, problems)
    values = [_phase_value(cells[i], name, line, problems) for name, i in layout.phases.items()]
    for column in ("target", "vantage"):
        _checked(_parse_name, cell, column, line, problems)
    if problems.count > before or started_at is None or run_id is None:
        return
    if status is None or total is None or not _ends_in_range(started_at, total, line, problems):
        return
    run = table.runs.setdefault(run_id, _Run(cell["target"], cell["vantage"], line))
    if _same_run(run, cell, line, problems):
        run.rows.append(table.append(started_at, status, total, values))


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
        return _parse_number(text)
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


def _parse_uuid(text: str) -> uuid.UUID:
    try:
        return uuid.UUID(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a UUID") from None


def _parse_status(text: str) -> str:
    if text not in STATUSES:
        raise ValueError(f"{text!r} is not one of {', '.join(STATUSES)}")
    return text


def _parse_number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise ValueError(f"{text!r} is not a finite number")
    if value < 0:
        raise ValueError(f"{text!r} is negative")
    return value + 0.0


def _parse_name(text: str) -> str:
    if not text or len(text) > MAX_NAME_LENGTH:
        raise ValueError(f"must be 1 to {MAX_NAME_LENGTH} characters")
    return text


def _store(engine: Engine, table: _Table) -> ImportResult:
    now = datetime.now(UTC)
    runs = samples = present = 0
    with transaction(make_sessions(engine)) as session:
        for run_id, run in table.runs.items():
            # One run's records at a time: the table stays the only copy of the file.
            if store_run(session, table.record(run_id, run), now):
                runs, samples = runs + 1, samples + len(run.rows)
            else:
                present += 1
    return ImportResult(runs, samples, present)
