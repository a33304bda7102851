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

import math
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from app.alerts.history import History
from app.alerts.memory import EvaluatorView
from app.analysis import detectors as d
from app.analysis.dominance import phase_mix
from app.analysis.level import LevelReference, pooled_z

Grown = Callable[[str, str | None], dict[str, Any] | None]


def grown(
    view: EvaluatorView,
    history: History,
    target: str,
    present: list[str],
    params: d.DetectorParams,
) -> Grown:
    """Asked of a phase and the phase it took the lead from: the pooled numbers when it
    grew, and by more than that one (everything × 1.25 is no leader change); None when
    not, or when it is not the server's. Lazy and remembered: most rounds never ask."""
    raw: dict[str, tuple[float, float, float] | None] = {}
    runs = min(params.dominant_runs, params.dominant_fast_runs)
    material = math.log1p(params.level_min_relative)

    def pooled(phase: str) -> tuple[float, float, float] | None:
        if phase not in raw:
            references: list[LevelReference] = []
            windows = []
            for vantage in present:
                reference = view.memory(target, vantage).reference
                level = None if reference is None else reference.level
                # Hours' levels known as level_shift knows them (days since the last change).
                if level is not None and level.span >= timedelta(days=params.level_min_days):
                    references.append(level)
                    windows.append(history.last(target, vantage, runs))
            starts = [window[0].at for window in windows if window]
            # A level_shift told before these runs: the hours' levels predate that change,
            # and a burst on top of it would read as the growth of one phase.
            stale = bool(starts) and level_told(view, target, min(starts))
            raw[phase] = None if stale else pooled_z(references, windows, phase)
        return raw[phase]

    def ask(phase: str, against: str | None) -> dict[str, Any] | None:
        if phase not in d.SERVER_SIDE or params.pooled_min_z <= 0:
            return None
        found = pooled(phase)
        if found is None:
            return None
        z, growth, least = found
        # Grown as every vantage saw it: one vantage's phase alone is no server's change.
        if z < params.pooled_min_z or least < material:
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
) -> tuple[str, str | None, d.Finding] | None:
    """A server-side phase that now leads each of a vantage's newest
    ``dominant_fast_runs`` runs over its reference's leader, and that grew as every vantage
    saw it in each: the service's change, a run or two before one vantage's lead is
    confirmed by a bootstrap of its own (a queue that grew 4.5× may lead the near vantage's
    network by a few points only). The pooled growth is the evidence; the lead only says
    which phase leads now. The vantage, the old leader (None where the vantages' differ),
    and the finding."""
    leaders = set()
    for vantage in present:
        reference = view.memory(target, vantage).reference
        leaders.add(None if reference is None else reference.mix.dominant)
    for vantage in present:
        reference = view.memory(target, vantage).reference
        newest = history.last(target, vantage, params.dominant_fast_runs)
        if reference is None or len(newest) < params.dominant_fast_runs:
            continue
        # Which phase leads: the same in each of the newest runs (the growth is judged on
        # all of them too: one wild run leads, and grew, alone).
        tops = {phase_mix([run]).dominant for run in newest}
        leader, top = reference.mix.dominant, tops.pop() if len(tops) == 1 else None
        if leader is None or top is None or top == leader:
            continue
        grew = pooled(top, leader)
        if grew is None:
            continue
        # Its numbers as dominant_shift gives them (a lead under δ has no bootstrap).
        found = d.dominant_finding(newest, leader, top, params, view.rng(target))
        before = {"from_share_before_pct": round(100 * reference.mix.shares.get(leader, 0.0), 1)}
        old = leader if leaders == {leader} else None
        return vantage, old, d.Finding(d.Signal.HIT, found.numbers | grew | before)
    return None
