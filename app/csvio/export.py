"""Export: stored samples written as CSV in the layout of app.csvio.layout."""

from __future__ import annotations

import csv
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any, TextIO

from sqlalchemy import Engine, Select, func, or_, select, true
from sqlalchemy.orm import Session

from app.analysis.llmmetrics import METRIC_NAMES, llm_values
from app.analysis.objectives import Objective
from app.analysis.verdicts import verdict
from app.csvio.goodput import GOODPUT_COLUMNS, flag_cells, stored_flags
from app.csvio.layout import (
    SPLIT_COLUMNS,
    CsvExportError,
    format_number,
    format_timestamp,
    header,
    phase_order,
)
from app.store.models import RunRow, SampleRow, TargetRow
from app.store.reads.objectives import objectives_of
from app.store.samplepack import as_json

if TYPE_CHECKING:
    from _csv import Writer

EXPORT_BATCH = 2_000


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
        split = _any_split(session, target, start, end)
        llm = _has_llm_values(session, target, start, end)
        judged = _Judged(_objectives(session, target), llm)
        if not judged.by_target:
            judged.on = _has_stored_verdicts(session, target, start, end)
        writer = csv.writer(out, lineterminator="\n")
        metrics = (*(METRIC_NAMES if llm else ()), *(GOODPUT_COLUMNS if judged.on else ()))
        writer.writerow(header(phases, split, metrics))
        rows = _filtered(_sample_rows(llm or judged.on), target, start, end)
        return _write_rows(session, rows, (phases, split), writer, judged)


class _Judged:
    """The goodput columns (app.csvio.goodput): written when a selected target has
    objectives or a selected sample has an import's verdicts."""

    def __init__(self, by_target: dict[str, tuple[Objective, ...]], llm: bool) -> None:
        self.by_target, self.llm, self.on = by_target, llm, bool(by_target)

    def cells(self, row: Any) -> list[str]:
        target, status, total_ms, marks, details = row[1], row[4], row[5], row[8], row[7]
        flags = stored_flags(details)
        if flags is None:
            seen = (status, total_ms, marks or {}, details)
            flags = verdict(self.by_target.get(target, ()), seen).cells()
        return flag_cells(flags)


def _write_rows(
    session: Session,
    rows: Select[Any],
    columns: tuple[list[str], bool],
    writer: Writer,
    judged: _Judged,
) -> int:
    (phases, split), count = columns, 0
    known = frozenset(phases)
    streamed = session.execute(rows, execution_options={"yield_per": EXPORT_BATCH})
    # closing: an export that fails part-way must not leave a server-side cursor open.
    with closing(streamed):
        for row in streamed:
            cells = _cells(tuple(row[:7]), phases, known)
            if split:
                cells.extend(split_cells(row[7].get("connect_split")))
            if judged.llm:  # the LLM metrics, from the sample's marks and details
                metrics = llm_values(row[4], row[5], row[8], row[7]).values()
                cells.extend("" if value is None else format_number(value) for value in metrics)
            if judged.on:
                cells.extend(judged.cells(row))
            writer.writerow(cells)
            count += 1
    return count


def split_cells(split: Any) -> list[str]:
    """The connect split's cells: empty for a sample without one (a reused connection)."""
    if not isinstance(split, dict):
        return [""] * len(SPLIT_COLUMNS)
    return [format_number(split[part]) if part in split else "" for part in SPLIT_COLUMNS.values()]


def _any_split(
    session: Session, target: str | None, start: datetime | None, end: datetime | None
) -> bool:
    """Whether a selected sample has a connect split: then the export has its columns."""
    dialect = session.get_bind().dialect.name
    details = as_json(SampleRow.details, "details", dialect)
    if dialect == "postgresql":
        kind = func.jsonb_typeof(details.op("->")("connect_split"))
    else:
        kind = func.json_type(details, "$.connect_split")
    query = _filtered(select(SampleRow.idx).where(kind == "object").limit(1), target, start, end)
    return session.scalar(query) is not None


def _has_llm_values(
    session: Session, target: str | None, start: datetime | None, end: datetime | None
) -> bool:
    """Whether a selected sample has an LLM metric: a streamed answer's rhythm, a token
    count, or imported metrics. Asked of the database (JSON paths), not by reading rows."""
    details = as_json(SampleRow.details, "details", session.get_bind().dialect.name)
    has = or_(
        details["stream"].as_string().is_not(None),
        details["llm"].as_string().is_not(None),
        details[("tokens", "prompt")].as_string().is_not(None),
        details[("tokens", "completion")].as_string().is_not(None),
    )
    query = _filtered(select(SampleRow.idx).where(has).limit(1), target, start, end)
    return session.execute(query).first() is not None


def _objectives(session: Session, target: str | None) -> dict[str, tuple[Objective, ...]]:
    """The selected targets' objectives as stored now, by name (targets without: absent)."""
    query = select(TargetRow.name, TargetRow.config)
    if target is not None:
        query = query.where(TargetRow.name == target)
    found = {name: objectives_of(config or {}) for name, config in session.execute(query)}
    return {name: params.objective_list() for name, params in found.items() if params}


def _has_stored_verdicts(
    session: Session, target: str | None, start: datetime | None, end: datetime | None
) -> bool:
    details = as_json(SampleRow.details, "details", session.get_bind().dialect.name)
    has = details["goodput"].as_string().is_not(None)
    query = _filtered(select(SampleRow.idx).where(has).limit(1), target, start, end)
    return session.execute(query).first() is not None


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
    dialect = session.get_bind().dialect.name
    phases = as_json(SampleRow.phases, "phases", dialect)
    if dialect == "postgresql":
        keys = select(func.jsonb_object_keys(phases))
    else:  # SQLite, the only other database phasewatch runs on
        each = func.json_each(phases).table_valued("key")
        keys = select(each.c.key).select_from(SampleRow).join(each, true())
    query = _filtered(keys.distinct(), target, start, end)
    return [str(key) for key in session.scalars(query)]


def _sample_rows(llm: bool) -> Select[Any]:
    """The columns a row is written from (the details for the connect split); with ``llm``,
    the marks its LLM metrics are read from too."""
    columns: list[Any] = [
        SampleRow.started_at,
        TargetRow.name,
        RunRow.vantage,
        SampleRow.run_id,
        SampleRow.status,
        SampleRow.total_ms,
        SampleRow.phases,
        SampleRow.details,
    ]
    if llm:
        columns.append(SampleRow.marks)
    return select(*columns).order_by(SampleRow.started_at, SampleRow.run_id, SampleRow.idx)


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
