"""A vantage's reference: what its recent runs are compared with.

Built from the previous ``reference_days`` of runs before the recent window, minus the runs
inside maintenance windows, those inside alerts that fired (``DetectorMemory.excluded``) and
those before an acknowledged change (``rebase_at``); kept a day (``REBUILD_EVERY``), then
rebuilt. Too few runs, or too short a span, and there is none: the detectors that compare
abstain.

Too short a span is not asked again on every run: no reference can span
``min_reference_days`` before that long after its first run (the window's first, or the
recent window's when it had none), so the window is read again then, or after
``RETRY_SHORT`` should a spool flush older runs in meanwhile. Asked on every run, a new
target re-read (and a database history kept) every run it had, run after run, for a
whole day: memory and CPU grew with each run (issue 36, a soak of 100 targets at 10 s).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from app.alerts.history import History
from app.alerts.memory import DetectorMemory
from app.analysis import detectors as d
from app.analysis.detectors.drift import wants_baseline
from app.analysis.dominance import phase_mix
from app.analysis.drift import freeze
from app.analysis.leadspread import log_spread
from app.analysis.level import LevelReference
from app.analysis.runs import RunData
from app.analysis.tailcusum import tail_reference

REBUILD_EVERY = timedelta(days=1)
RETRY_SHORT = timedelta(hours=1)
# A reference this long is a full week (less the recent window and the day between
# rebuilds): baseline_drift may freeze its profile.
FULL_WEEK = timedelta(days=6.5)


def current_reference(
    history: History,
    memory: DetectorMemory,
    target: str,
    vantage: str,
    now: datetime,
    params: d.DetectorParams,
    window: list[RunData],
    kept_out: Callable[[datetime], bool] = lambda _at: False,
) -> d.Reference | None:
    """``memory``'s reference, rebuilt (and kept in ``memory``) when it is a day old."""
    if memory.reference is not None and now - memory.reference.built_at < REBUILD_EVERY:
        return memory.reference
    if memory.reference is None and memory.reference_wait is not None:
        if now < memory.reference_wait:
            return None
    start = now - timedelta(days=params.reference_days)
    if memory.rebase_at is not None:
        start = max(start, memory.rebase_at)
    end = window[0].at if window else now
    runs = history.window(target, vantage, start, end)
    first = runs[0].at if runs else end
    runs = [run for run in runs if not kept_out(run.at)]
    if memory.excluded:
        runs = [run for run in runs if not _inside(run.at, memory.excluded)]
    span = runs[-1].at - runs[0].at if runs else timedelta(0)
    too_short = span < timedelta(days=params.min_reference_days)
    if len(runs) < params.min_reference_runs or too_short:
        long_enough_at = first + timedelta(days=params.min_reference_days)
        memory.reference, memory.reference_wait = None, min(long_enough_at, now + RETRY_SHORT)
        return None
    memory.reference_wait = None
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
        spread=log_spread(runs),
        drift=(
            freeze(runs) if span >= FULL_WEEK and _wants_baseline(memory, params, now) else None
        ),
        level=LevelReference.build(_since_last_change(runs, memory.excluded)),
    )
    return memory.reference


def _wants_baseline(memory: DetectorMemory, params: d.DetectorParams, now: datetime) -> bool:
    if "baseline_drift" not in params.enabled:
        return False
    return wants_baseline(memory.cusums.get("baseline_drift"), params, memory.rebase_at, now)


def _since_last_change(
    runs: list[RunData], spans: list[tuple[datetime, datetime | None]]
) -> list[RunData]:
    """The runs after the last alert that fired and ended: the hours' levels before a
    change and after it are two normals, and a slot of each is neither (a weekend seen only
    before a change, weekdays only after)."""
    ended = [end for _, end in spans if end is not None]
    if not ended:
        return runs
    cut = max(ended)
    return [run for run in runs if run.at > cut]


def _inside(at: datetime, spans: list[tuple[datetime, datetime | None]]) -> bool:
    return any(start <= at and (end is None or at <= end) for start, end in spans)
