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
And the runs' times (``History.counts``, no sample read) tell a span too short before any
run is built: read whole, each hourly retry of a new target built its window, and the
database history kept it (a hundred new targets' windows at once, every hour).
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

    # The runs' times first: the runs that can be rebuilt are among those counted, so too
    # few or too short a span of these is no reference, and nothing is read to know it.
    def usable(at: datetime) -> bool:  # not in a maintenance window or a fired alert
        return not kept_out(at) and not (memory.excluded and _inside(at, memory.excluded))

    counted = [count.at for count in history.counts(target, vantage, start, end)]
    if _too_short([at for at in counted if usable(at)], params):
        _wait(memory, counted[0] if counted else end, now, params)
        return None
    runs = history.window(target, vantage, start, end)
    first = runs[0].at if runs else end
    runs = [run for run in runs if usable(run.at)]
    if _too_short([run.at for run in runs], params):
        _wait(memory, first, now, params)
        return None
    span = runs[-1].at - runs[0].at
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


def _too_short(times: list[datetime], params: d.DetectorParams) -> bool:
    span = times[-1] - times[0] if times else timedelta(0)
    return len(times) < params.min_reference_runs or span < timedelta(
        days=params.min_reference_days
    )


def _wait(memory: DetectorMemory, first: datetime, now: datetime, params: d.DetectorParams) -> None:
    """No reference yet: asked again once one could span ``min_reference_days`` from
    ``first``, or after ``RETRY_SHORT`` should runs be flushed late in meanwhile."""
    long_enough_at = first + timedelta(days=params.min_reference_days)
    memory.reference, memory.reference_wait = None, min(long_enough_at, now + RETRY_SHORT)


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
