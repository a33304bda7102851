"""The rows ``DatabaseHistory`` rebuilds runs from: a series' run heads and their samples."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any

from sqlalchemy import (
    BindParameter,
    Connection,
    Select,
    String,
    TextualSelect,
    Uuid,
    case,
    column,
    func,
    select,
    text,
)
from sqlalchemy.orm import Session

from app.store.inlists import padded
from app.store.models import RunRow, SampleRow, TargetRow
from app.store.partitions import days_of_runs
from app.store.rawdriver import run_driver
from app.store.records import RunStatus

# What a sample's objective values read of its details (app.analysis.llmmetrics.llm_value).
STREAM_DETAILS = ("stream", "tokens", "llm")
IDS_PER_QUERY = 512  # a power of two: see app.store.inlists


@dataclass(frozen=True, slots=True)
class StoredSample:
    status: str
    total_ms: float
    phases: dict[str, float]
    marks: dict[str, int]  # for the objectives' values (time to first token)
    details: dict[str, Any]  # STREAM_DETAILS only: for TPOT and stall objectives


def heads_of(
    target: str | BindParameter[str], vantage: str | BindParameter[str]
) -> Select[uuid.UUID, datetime, int]:
    """A series' complete runs (id, start, samples); ``target`` and ``vantage`` values, or
    bind parameters for a statement built once."""
    return (
        select(RunRow.id, RunRow.started_at, RunRow.n_samples)
        .join(TargetRow, RunRow.target_id == TargetRow.id)
        .where(
            TargetRow.name == target, RunRow.vantage == vantage, RunRow.status == RunStatus.COMPLETE
        )
    )


def samples_of(session: Session, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, list[StoredSample]]:
    found: dict[uuid.UUID, list[StoredSample]] = {}
    dialect = session.get_bind().dialect.name
    for first in range(0, len(ids), IDS_PER_QUERY):
        batch = padded(ids[first : first + IDS_PER_QUERY])
        rows = session.execute(
            select(
                SampleRow.run_id,
                SampleRow.status,
                SampleRow.total_ms,
                SampleRow.phases,
                SampleRow.marks,
                SampleRow.details,
            )
            .where(SampleRow.run_id.in_(batch), *days_of_runs(dialect, batch))
            .order_by(SampleRow.run_id, SampleRow.idx)
        )
        for run_id, status, total_ms, phases, marks, stored in rows:
            details = {key: stored[key] for key in STREAM_DETAILS if stored.get(key)}
            sample = StoredSample(status, total_ms, phases, marks, details)
            found.setdefault(run_id, []).append(sample)
    return found


def run_counts(
    session: Session, target: str, vantage: str, start: datetime, end: datetime
) -> Sequence[tuple[datetime, int, int, int]]:
    """A series' complete runs in [start, end): start, ok, deadline missed, samples. Every
    column read is in ``ix_runs_chart``: an index-only range scan, no sample read."""
    return session.execute(
        select(RunRow.started_at, RunRow.n_ok, RunRow.n_deadline_exceeded, RunRow.n_samples)
        .join(TargetRow, RunRow.target_id == TargetRow.id)
        .where(
            TargetRow.name == target,
            RunRow.vantage == vantage,
            RunRow.status == RunStatus.COMPLETE,
            RunRow.started_at >= start,
            RunRow.started_at < end,
        )
    ).all()


def newest_by_vantage(
    session: Session, target: str, since: datetime, until: datetime
) -> dict[str, tuple[datetime, datetime | None, datetime]]:
    """Each vantage with a complete run of ``target`` started at ``since`` or later: when its
    oldest such run started, its newest at or before ``until`` (None if none did), and its
    newest. One statement, the range open above: what the vantages present at a time later
    than ``until`` need is read with it."""
    started = RunRow.started_at
    newest_until = func.max(case((started <= until, started)))
    found = session.execute(
        select(RunRow.vantage, func.min(started), newest_until, func.max(started))
        .join(TargetRow, RunRow.target_id == TargetRow.id)
        .where(TargetRow.name == target, RunRow.status == RunStatus.COMPLETE, started >= since)
        .group_by(RunRow.vantage)
    ).all()
    return {vantage: (first, before, newest) for vantage, first, before, newest in found}


# Each vantage asked of, as rows: a list bound as one parameter (an array; JSON on SQLite).
_VANTAGES = {
    "postgresql": "unnest(CAST(:vantages AS varchar[])) AS v (vantage)",
    "sqlite": "(SELECT value AS vantage FROM json_each(:vantages)) AS v",
}
_NEWEST_OF_EACH = """SELECT v.vantage, (
    SELECT runs.id FROM runs
    WHERE runs.target_id = t.id AND runs.vantage = v.vantage AND runs.status = :complete
    ORDER BY runs.started_at DESC, runs.id DESC LIMIT 1
) AS id FROM targets t, {vantages} WHERE t.name = :target"""


def newest_of_each(
    connection: Connection, target: str, vantages: Sequence[str]
) -> dict[str, str | None]:
    """Each of ``vantages``' newest complete run of ``target`` (its id; None: it has none),
    in one statement: an index seek a vantage, one round trip for them all."""
    dialect = connection.dialect.name
    listed = list(vantages) if dialect == "postgresql" else json.dumps(list(vantages))
    bound = {"target": target, "vantages": listed, "complete": RunStatus.COMPLETE.value}
    if dialect == "postgresql":  # once an evaluation: run as driver SQL (app.store.rawdriver)
        rows: Any = run_driver(connection, _newest_of_each(dialect), bound)
    else:  # the ids are hex text there: the Uuid type reads them
        rows = connection.execute(_newest_of_each(dialect), bound)
    found = {vantage: None if run_id is None else str(run_id) for vantage, run_id in rows}
    return {vantage: found.get(vantage) for vantage in vantages}


@cache
def _newest_of_each(dialect: str) -> TextualSelect:
    return text(_NEWEST_OF_EACH.format(vantages=_VANTAGES[dialect])).columns(
        column("vantage", String), column("id", Uuid)
    )
