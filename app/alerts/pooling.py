"""Server-side changes judged on the vantages' pooled evidence.

A change the server causes (queue, prefill, generation, server) is seen from every
vantage, though it may make a new leader at only one of them (the queue grows past the
network at the near vantage; at the far one, only in busy hours). So a new server-side
leader seen at one vantage does not wait for a second to see the same leader: it is a
``service`` change once the vantages' pooled evidence says that phase really grew
(app.analysis.level.pooled_z: each vantage's newest runs against the same hours of its
reference, averaged so that the load they share counts once) and it grew materially at
every vantage. A network change stays one vantage's.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from app.alerts.history import History
from app.alerts.memory import EvaluatorView
from app.analysis import detectors as d
from app.analysis.dominance import leader_of
from app.analysis.level import LevelReference, pooled_z
from app.analysis.levelstep import BEFORE, steady_z, step_z
from app.analysis.runs import RunData

Grown = Callable[[str, str | None], dict[str, Any] | None]
# A new server-side leader is the service's change when, beside the pooled mean's
# ``pooled_min_z``, each vantage's least newest run grew by this many spreads of the
# window's mean (averaged over vantages): a wild run beside an ordinary one reads ~1 there,
# however wild (app.analysis.levelstep.steady_z) — and when the newest runs stepped up from
# the runs before them by ``pooled_min_z`` spreads of that step (``step_z``): a load that
# climbed for hours has its mean, not its step.
STEADY_Z = 3.0
# Where the new leader led each of a vantage's newest runs (two runs' lead, not one's), the
# step need only tell a step from a climb: correlated runs that led so read 1.4–2.2, the
# queue growths 4.1–6.0 (bench/detection/README.md, "eachrun"); a target seen from one
# vantage keeps ``pooled_min_z`` there too (its near ties read 4.2: "fleetq").
EACH_RUN_STEP_Z = 3.0
# A target seen from one vantage has no second to see the growth too: its pooled z must
# reach ``pooled_min_z`` × this, the bar two vantages' mean z meets where their noise is
# their own (bench/detection/README.md, "fleetq": one vantage's near ties read 4.0–4.5).
ALONE_Z = math.sqrt(2)


def newest_runs(params: d.DetectorParams) -> int:
    """How many of each vantage's newest runs the pooled evidence judges."""
    return min(params.dominant_runs, params.dominant_fast_runs)


def grown(
    view: EvaluatorView,
    history: History,
    target: str,
    present: list[str],
    params: d.DetectorParams,
    alone: bool = False,
) -> Grown:
    """Asked of a phase and the phase it took the lead from: the pooled numbers when it
    grew, and by more than that one (everything × 1.25 is no leader change); None when
    not, or when it is not the server's. Lazy and remembered: most rounds never ask.
    ``alone``: the target is seen from one vantage only, its bar ``ALONE_Z`` higher (a
    target of several with one vantage on time keeps the usual bar)."""
    raw: dict[str, tuple[float, float, float] | None] = {}
    runs = newest_runs(params)
    material = math.log1p(params.level_min_relative)
    bar = params.pooled_min_z * (ALONE_Z if alone else 1.0)

    @functools.cache
    def read() -> Levels | None:  # the same for every phase asked: read once
        return levels(view, history, target, present, params, runs)

    def pooled(phase: str) -> tuple[float, float, float] | None:
        if phase not in raw:
            found = read()
            raw[phase] = None if found is None else pooled_z(*found, phase)
        return raw[phase]

    def ask(phase: str, against: str | None) -> dict[str, Any] | None:
        if phase not in d.SERVER_SIDE or params.pooled_min_z <= 0:
            return None
        found = pooled(phase)
        if found is None:
            return None
        z, growth, least = found
        # Grown as every vantage saw it: one vantage's phase alone is no server's change.
        if z < bar or least < material:
            return None
        old = pooled(against) if against else None
        if old is not None and growth - old[1] < material:
            return None
        return {
            "pooled_phase": phase,
            "pooled_z": round(z, 1),
            "pooled_growth_pct": round(100 * math.expm1(growth), 1),
            "pooled_vantages": len(present),
        }

    return ask


Levels = tuple[list[LevelReference], list[list[RunData]]]


def levels(
    view: EvaluatorView,
    history: History,
    target: str,
    present: list[str],
    params: d.DetectorParams,
    runs: int,
) -> Levels | None:
    """The hours' levels of each present vantage that has them (known as level_shift knows
    them: days since the last change), and its newest ``runs`` runs, as the pooled evidence
    reads them; None when a level_shift told before the newest of them that the pooled
    growth judges is active: the hours' levels predate that change, and a burst on top of
    it would read as the growth of one phase."""
    references: list[LevelReference] = []
    windows: list[list[RunData]] = []
    for vantage in present:
        reference = view.memory(target, vantage).reference
        level = None if reference is None else reference.level
        if level is not None and level.span >= timedelta(days=params.level_min_days):
            references.append(level)
            windows.append(history.last(target, vantage, runs))
    newest = newest_runs(params)
    starts = [window[-newest:][0].at for window in windows if window]
    if starts and level_told(view, target, min(starts)):
        return None
    return references, windows


def level_told(view: EvaluatorView, target: str, before: datetime) -> bool:
    """A ``level_shift`` of ``target`` is active and fired before ``before``."""
    return any(
        identity.kind == "level_shift"
        and identity.target == target
        and alert.position.active
        and alert.fired_at is not None
        and alert.fired_at < before
        for identity, alert in view.alerts.items()
    )


def pooled_lane(
    view: EvaluatorView,
    history: History,
    target: str,
    present: list[str],
    params: d.DetectorParams,
    pooled: Grown,
    alone: bool = False,
) -> tuple[str, str | None, d.Finding] | None:
    """A server-side phase that now leads a vantage's newest run over its reference's
    leader, and that grew as every vantage saw it in each of their newest
    ``dominant_fast_runs`` runs: the service's change, a run or two before one vantage's
    lead is confirmed by a bootstrap of its own (a queue that grew 4.5× may lead the near
    vantage's network by a few points only, and not in every run). The evidence is the
    pooled mean growth of the newest runs, every run's growth and the step up from the
    runs before them (``stepped``), whether the phase led each of that vantage's newest
    runs or the newest alone (there the step's bar is ``EACH_RUN_STEP_Z``, unless the
    target is seen from one vantage: ``alone``): the lead only says which phase leads now.
    The vantage, the old leader (None where the vantages' differ), and the finding."""
    leaders = set()
    for vantage in present:
        reference = view.memory(target, vantage).reference
        leaders.add(None if reference is None else reference.mix.dominant)
    for each_run in (True, False):  # a vantage whose every newest run shows the lead first
        for vantage in present:
            found = _lane_at(
                view, history, target, present, vantage, params, pooled, each_run, alone
            )
            if found is not None:
                finding, leader = found
                return vantage, leader if leaders == {leader} else None, finding
    return None


def _lane_at(
    view: EvaluatorView,
    history: History,
    target: str,
    present: list[str],
    vantage: str,
    params: d.DetectorParams,
    pooled: Grown,
    each_run: bool,
    alone: bool,
) -> tuple[d.Finding, str] | None:
    """``pooled_lane`` at one vantage, its new leader leading each of its newest runs
    (``each_run``) or the newest alone; the finding and the reference's leader."""
    reference = view.memory(target, vantage).reference
    newest = history.last(target, vantage, params.dominant_fast_runs)
    if reference is None or len(newest) < params.dominant_fast_runs:
        return None
    tops = [leader_of(run) for run in newest]
    leader, top = reference.mix.dominant, tops[-1]
    if leader is None or top is None or top == leader or (len(set(tops)) == 1) != each_run:
        return None
    grew = pooled(top, leader)
    if grew is None:
        return None
    step_min = params.pooled_min_z
    if each_run and not alone:
        step_min = min(EACH_RUN_STEP_Z, step_min)
    guards = stepped(view, history, target, present, params, top, step_min)
    if guards is None:
        return None
    grew = grew | guards
    if not each_run:
        newest = newest[-1:]  # the lead is the newest run's
    # Its numbers as dominant_shift gives them (a lead under δ has no bootstrap).
    found = d.dominant_finding(newest, leader, top, params, view.rng(target))
    before = {"from_share_before_pct": round(100 * reference.mix.shares.get(leader, 0.0), 1)}
    return d.Finding(d.Signal.HIT, found.numbers | grew | before), leader


def stepped(
    view: EvaluatorView,
    history: History,
    target: str,
    present: list[str],
    params: d.DetectorParams,
    phase: str,
    step_min: float,
) -> dict[str, Any] | None:
    """The evidence that ``phase`` grew in every one of the vantages' newest runs
    (``steady_z`` ≥ ``STEADY_Z``) and stepped up at them from the runs before
    (``step_z`` ≥ ``step_min``): their numbers, else None (app.analysis.levelstep)."""
    runs = newest_runs(params)
    found = levels(view, history, target, present, params, runs + BEFORE)
    if found is None:
        return None
    references, windows = found
    least = steady_z(references, [window[-runs:] for window in windows], phase)
    if least is None or least < STEADY_Z:
        return None
    step = step_z(references, windows, phase, runs)
    if step is None or step < step_min:
        return None
    return {"pooled_least_z": round(least, 1), "pooled_step_z": round(step, 1)}
