"""The samples a what-if starts from: one target's (and vantage's) complete runs in a window,
as one ``SampleSet`` (app.analysis.whatif), read in one query of four columns."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import numpy as np
from sqlalchemy import Engine, String, cast, select
from sqlalchemy.orm import Session

from app.analysis.whatif import SampleSet
from app.analysis.whatif.changes import KNOWN_PHASES
from app.analysis.whatif.samples import from_columns
from app.store.browse import where_run_of
from app.store.models import RunRow, SampleRow, TargetRow
from app.store.records import RunStatus
from app.store.targets import target_key


def load_sample_set(
    source: Session | Engine,
    target: str,
    vantage: str | None,
    since: datetime,
    until: datetime,
) -> SampleSet | None:
    """Samples of runs started in [since, until); every vantage when ``vantage`` is None.
    None when the target was never seen. The deadline is the target's, if it has one."""
    if isinstance(source, Engine):
        with Session(source) as session:
            return load_sample_set(session, target, vantage, since, until)
    key = target_key(source, target)
    if key is None:
        return None
    # Each phase read out of the JSON by the database, and rows as plain tuples (no ORM
    # objects, no UUIDs): decoding 60,000 documents and ids in Python costs more than the query.
    columns = [SampleRow.phases[phase].as_float() for phase in KNOWN_PHASES]
    query = select(cast(SampleRow.run_id, String), SampleRow.status, *columns)
    query = query.join(RunRow, RunRow.id == SampleRow.run_id)
    query = where_run_of(query, key, vantage).where(
        RunRow.status == RunStatus.COMPLETE, RunRow.started_at >= since, RunRow.started_at < until
    )
    rows = source.connection().execute(query).all()
    ms = np.array([row[2:] for row in rows], np.float64).reshape(len(rows), len(KNOWN_PHASES))
    keys, statuses = [row[0] for row in rows], [row[1] for row in rows]
    return from_columns(KNOWN_PHASES, keys, statuses, ms, _deadline_ms(source, key))


def vantages_of(session: Session, target: str, since: datetime, until: datetime) -> list[str]:
    key = target_key(session, target)
    if key is None:
        return []
    query = (
        select(RunRow.vantage)
        .distinct()
        .where(RunRow.target_id == key, RunRow.started_at >= since, RunRow.started_at < until)
    )
    return sorted(session.scalars(query))


def _deadline_ms(session: Session, key: int) -> float | None:
    config: dict[str, Any] | None = session.scalar(
        select(TargetRow.config).where(TargetRow.id == key)
    )
    deadline = (config or {}).get("deadline_ms")
    return float(deadline) if isinstance(deadline, int | float) else None
