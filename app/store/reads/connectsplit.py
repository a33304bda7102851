"""A target's connect split over a window: the details of its samples that made a
connection (app.analysis.connectsplit summarises them)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.analysis.connectsplit import ConnectSplit, split_of
from app.store.models import RunRow, SampleRow
from app.store.partitions import days_of_window
from app.store.reads.browse import where_run_of
from app.store.records import RunStatus
from app.store.targets import target_key


def connect_split(
    session: Session, target: str, start: datetime, end: datetime, vantage: str | None = None
) -> ConnectSplit | None:
    """The split of the samples of ``target``'s complete runs that started in [start, end)."""
    key = target_key(session, target)
    if key is None:
        return None
    query = (
        select(SampleRow.details)
        .join(RunRow, RunRow.id == SampleRow.run_id)
        .where(RunRow.status == RunStatus.COMPLETE.value)
        .where(SampleRow.started_at >= start, SampleRow.started_at < end)
        .where(*days_of_window(session.get_bind().dialect.name, start, end))
    )
    details: list[Mapping[str, Any]] = list(session.scalars(where_run_of(query, key, vantage)))
    return split_of(details)
