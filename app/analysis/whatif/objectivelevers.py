"""The levers by objective: for each of a target's latency objectives and goodput, the
phases whose halving raises its share met, most first, and a sentence naming the biggest.

The levers' point estimates (``levers.Lever.objectives``), ranked: a lever that raises a
share by less than ``levers.SAME_RATE`` is none for it. The ranking judges by the share
met if halved, then if gone, as the end-to-end's judges by the p99 if halved.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from app.analysis.objectives import Objective
from app.analysis.whatif.apply import settle
from app.analysis.whatif.levers import SAME_RATE, Lever, LeverObjective
from app.analysis.whatif.objectiveshares import shares
from app.analysis.whatif.samples import SampleSet


@dataclass(frozen=True)
class ObjectiveLevers:
    metric: str  # a latency objective's, or "goodput"
    below_ms: float | None
    now: float | None  # the share met as measured; None: nothing counted
    levers: tuple[tuple[str, LeverObjective], ...]  # phase and its shares, most raised first

    def to_json(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "below_ms": self.below_ms,
            "now": self.now,
            "levers": [{"phase": phase, **met.to_json()} for phase, met in self.levers],
            "headline": self.headline(),
        }

    def headline(self) -> str:
        """``goodput, 62.0 % now: the biggest lever is queue: halved 91.0 % (gone 97.0 %)``"""
        bound = "" if self.below_ms is None else f" ≤ {self.below_ms:g} ms"
        now = "nothing counted" if self.now is None else f"{self.now:.1%} met now"
        where = f"{self.metric}{bound}, {now}"
        if not self.levers:
            return f"{where}: no lever raises it"
        phase, met = self.levers[0]
        gone = _pct(met.removed)
        return f"{where}: the biggest lever is {phase}: halved {_pct(met.halved)} (gone {gone})"


def objective_levers(
    samples: SampleSet,
    found: Sequence[Lever],
    objectives: Sequence[Objective],
    *,
    deadline_ms: float | None = None,
) -> list[ObjectiveLevers]:
    """Each latency objective's levers, then goodput's; none without objectives.
    ``found``: ``levers(samples, deadline_ms=…, objectives=objectives)``."""
    if not objectives or samples.n == 0:
        return []
    deadline = samples.deadline_ms if deadline_ms is None else deadline_ms
    settled = settle(samples.ms, samples.censored, deadline)
    now = shares(samples.phases, settled, objectives, samples.rhythm)
    bounds = {o.metric: o.below_ms for o in objectives}
    return [
        ObjectiveLevers(metric, bounds.get(metric), share, _ranked(found, metric, share))
        for metric, share in now.items()
    ]


def _ranked(
    found: Sequence[Lever], metric: str, now: float | None
) -> tuple[tuple[str, LeverObjective], ...]:
    if now is None:
        return ()
    moving = [
        (lever.phase, met)
        for lever in found
        for met in lever.objectives
        if met.metric == metric and met.halved is not None and met.halved - now >= SAME_RATE
    ]
    return tuple(sorted(moving, key=lambda pair: (-_or0(pair[1].halved), -_or0(pair[1].removed))))


def _or0(value: float | None) -> float:
    return 0.0 if value is None else value


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"
