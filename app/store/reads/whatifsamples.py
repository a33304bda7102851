"""The samples a what-if starts from: one target's (and vantage's) complete runs in a window,
as one ``SampleSet`` (app.analysis.whatif), read in one query of three columns (six when a
stream's rhythm is asked for: an objective over ``tpot_ms`` or ``stall_ms``)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sqlalchemy import Engine, String, cast, select
from sqlalchemy.orm import Session

from app.analysis.llmmetrics import llm_some
from app.analysis.whatif import SampleSet
from app.analysis.whatif.changes import KNOWN_PHASES
from app.analysis.whatif.samples import KEPT_STATUSES, from_columns
from app.store.models import RunRow, SampleRow, TargetRow
from app.store.partitions import days_of_window
from app.store.rawdriver import tuples
from app.store.reads.browse import where_run_of
from app.store.records import RunStatus
from app.store.samplepack import unpack
from app.store.targets import target_key


def load_sample_set(
    source: Session | Engine,
    target: str,
    vantage: str | None,
    since: datetime,
    until: datetime,
    rhythm: Sequence[str] = (),
) -> SampleSet | None:
    """Samples of runs started in [since, until); every vantage when ``vantage`` is None.
    None when the target was never seen. The deadline is the target's, if it has one.
    ``rhythm``: the rhythm values (``tpot_ms``, ``stall_ms``) to read too, from each
    sample's marks and details as the objectives read them."""
    if isinstance(source, Engine):
        with Session(source) as session:
            return load_sample_set(session, target, vantage, since, until, rhythm)
    key = target_key(source, target)
    if key is None:
        return None
    # The phases as stored (packed, read as the driver's bytes), unpacked here: a sample's
    # six phases cost one parse, where reading each out in SQL would parse six times.
    query = select(cast(SampleRow.run_id, String), SampleRow.status, SampleRow.phases)
    if rhythm:  # as stored too, unpacked only for the targets that judge a rhythm
        query = query.add_columns(SampleRow.total_ms, SampleRow.marks, SampleRow.details)
    query = query.join(RunRow, RunRow.id == SampleRow.run_id)
    query = where_run_of(query, key, vantage).where(
        RunRow.status == RunStatus.COMPLETE,
        RunRow.started_at >= since,
        RunRow.started_at < until,
        *days_of_window(source.get_bind().dialect.name, since, until),
    )
    rows = tuples(source.connection(), query)
    keys, statuses = [row[0] for row in rows], [row[1] for row in rows]
    ms = np.array([_phase_row(unpack("phases", row[2])) for row in rows], np.float64)
    ms = ms.reshape(len(rows), len(KNOWN_PHASES))
    found = _rhythm_columns(rhythm, rows)
    return from_columns(KNOWN_PHASES, keys, statuses, ms, _deadline_ms(source, key), found)


def _phase_row(phases: dict[str, float]) -> list[float]:
    return [phases.get(phase, math.nan) for phase in KNOWN_PHASES]


def _rhythm_columns(
    names: Sequence[str], rows: Sequence[Sequence[Any]]
) -> dict[str, NDArray[np.float64]]:
    """Each of ``names`` for each row (status, ..., total, marks, details), NaN where it
    has none, as the objectives read them (app.analysis.llmmetrics): a row's marks and
    details parsed once for every name, and only a timed row's (the others are dropped)."""
    if not names:
        return {}
    found = np.full((len(rows), len(names)), math.nan)
    for j, row in enumerate(rows):
        if row[1] not in KEPT_STATUSES:
            continue
        marks, details = unpack("marks", row[4]) or {}, unpack("details", row[5]) or {}
        values = llm_some(names, row[1], float(row[3]), marks, details)
        found[j] = [math.nan if value is None else value for value in values]
    return dict(zip(names, found.T.copy(), strict=True))


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
