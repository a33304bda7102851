"""A vantage's reference: what its recent runs are compared with.

Built from the previous ``reference_days`` of runs before the recent window, minus the runs
inside alerts that fired (``DetectorMemory.excluded``) and those before an acknowledged
change (``rebase_at``); kept a day (``REBUILD_EVERY``), then rebuilt. Too few runs, or too
short a span, and there is none: the detectors that compare abstain.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from app.alerts.history import History
from app.alerts.memory import DetectorMemory
from app.analysis import detectors as d
from app.analysis.dominance import phase_mix
from app.analysis.runs import RunData
from app.analysis.tail import tail_reference

REBUILD_EVERY = timedelta(days=1)


def current_reference(
    history: History,
    memory: DetectorMemory,
    target: str,
    vantage: str,
    now: datetime,
    params: d.DetectorParams,
    window: list[RunData],
) -> d.Reference | None:
    """``memory``'s reference, rebuilt (and kept in ``memory``) when it is a day old."""
    if memory.reference is not None and now - memory.reference.built_at < REBUILD_EVERY:
        return memory.reference
    start = now - timedelta(days=params.reference_days)
    if memory.rebase_at is not None:
        start = max(start, memory.rebase_at)
    end = window[0].at if window else now
    runs = history.window(target, vantage, start, end)
    if memory.excluded:
        runs = [run for run in runs if not _inside(run.at, memory.excluded)]
    span = runs[-1].at - runs[0].at if runs else timedelta(0)
    too_short = span < timedelta(days=params.min_reference_days)
    if len(runs) < params.min_reference_runs or too_short:
        memory.reference = None
        return None
    memory.reference = d.Reference(
        built_at=now,
        runs=len(runs),
        span=span,
        mix=phase_mix(runs, keep=False),  # asked for once a day: not kept with a run
        tail=tail_reference(runs),
        composition=(
            d.CompositionReference.build(runs, params.recent_runs)
            if "composition_shift" in params.enabled
            else None
        ),
    )
    return memory.reference


def _inside(at: datetime, spans: list[tuple[datetime, datetime | None]]) -> bool:
    return any(start <= at and (end is None or at <= end) for start, end in spans)
