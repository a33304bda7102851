"""The rows ``DatabaseHistory`` rebuilds runs from: a series' run heads and their samples."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import BindParameter, Select, select
from sqlalchemy.orm import Session

from app.store.inlists import padded
from app.store.models import RunRow, SampleRow, TargetRow
from app.store.partitions import days_of_runs
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
