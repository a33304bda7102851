"""The samples a what-if starts from: one target's (and vantage's) complete runs in a window,
as one ``SampleSet`` (app.analysis.whatif), read in one query of three columns."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

import numpy as np
import orjson
from sqlalchemy import Engine, String, cast, select
from sqlalchemy.orm import Session

from app.analysis.whatif import SampleSet
from app.analysis.whatif.changes import KNOWN_PHASES
from app.analysis.whatif.samples import from_columns
from app.store.models import RunRow, SampleRow, TargetRow
from app.store.partitions import days_of_window
from app.store.rawdriver import tuples
from app.store.reads.browse import where_run_of
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
    # The phases as their JSON text, parsed here by orjson: a sample's six phases cost one
    # parse, where reading each out in SQL (json_extract) parses the document six times.
    query = select(cast(SampleRow.run_id, String), SampleRow.status, cast(SampleRow.phases, String))
    query = query.join(RunRow, RunRow.id == SampleRow.run_id)
    query = where_run_of(query, key, vantage).where(
        RunRow.status == RunStatus.COMPLETE,
        RunRow.started_at >= since,
        RunRow.started_at < until,
        *days_of_window(source.get_bind().dialect.name, since, until),
    )
    rows = tuples(source.connection(), query)
    keys, statuses = [row[0] for row in rows], [row[1] for row in rows]
    ms = np.array([_phase_row(orjson.loads(row[2])) for row in rows], np.float64)
    ms = ms.reshape(len(rows), len(KNOWN_PHASES))
    return from_columns(KNOWN_PHASES, keys, statuses, ms, _deadline_ms(source, key))


def _phase_row(phases: dict[str, float]) -> list[float]:
    return [phases.get(phase, math.nan) for phase in KNOWN_PHASES]


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
