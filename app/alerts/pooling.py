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
from typing import Any

from app.alerts.history import History
from app.alerts.memory import EvaluatorView
from app.analysis import detectors as d
from app.analysis.level import LevelReference, pooled_z

Grown = Callable[[str], dict[str, Any] | None]


def grown(
    view: EvaluatorView,
    history: History,
    target: str,
    present: list[str],
    params: d.DetectorParams,
) -> Grown:
    """Asked of a phase: the pooled numbers when it grew (None when it did not, or is not
    the server's). Lazy and remembered: most rounds never ask."""
    asked: dict[str, dict[str, Any] | None] = {}
    runs = min(params.dominant_runs, params.dominant_fast_runs)

    def ask(phase: str) -> dict[str, Any] | None:
        if phase not in asked:
            asked[phase] = _grown(phase) if phase in d.SERVER_SIDE else None
        return asked[phase]

    def _grown(phase: str) -> dict[str, Any] | None:
        references: list[LevelReference] = []
        windows = []
        for vantage in present:
            reference = view.memory(target, vantage).reference
            if reference is not None and reference.level is not None:
                references.append(reference.level)
                windows.append(history.last(target, vantage, runs))
        pooled = pooled_z(references, windows, phase)
        if pooled is None:
            return None
        z, growth, least = pooled
        # Grown as every vantage saw it: one vantage's phase alone is no server's change.
        if z < params.pooled_min_z or least < math.log1p(params.level_min_relative):
            return None
        return {
            "pooled_phase": phase,
            "pooled_z": round(z, 1),
            "pooled_growth_pct": round(100 * math.expm1(growth), 1),
            "pooled_vantages": len(references),
        }

    return ask
