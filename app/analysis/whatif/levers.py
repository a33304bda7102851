"""Levers now: for each phase, the end-to-end if it halved or vanished, biggest lever first;
and, for a target with objectives, each objective's share met and goodput if it did
(``objectivelevers`` ranks the phases by them).

Point estimates only (no resampling): a ranking, read at a glance; ``predict`` gives the
intervals of any one of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from app.analysis.objectives import Objective
from app.analysis.whatif.apply import settle
from app.analysis.whatif.objectiveshares import shares as objective_shares
from app.analysis.whatif.outcome import Bound, bound, shares_of
from app.analysis.whatif.rhythm import scaled
from app.analysis.whatif.samples import SampleSet

HALVED, REMOVED = 0.5, 0.0
# A phase holding less than this of the time is no lever ("connect, 0 % of the time").
MIN_SHARE = 0.005
# Less than this is no change: a lever "from 1.50 s to 1.50 s" is not one.
SAME_MS, SAME_RATE = 0.5, 0.0005


@dataclass(frozen=True)
class LeverObjective:
    """One objective's share met (or goodput's) were the lever's phase halved or gone."""

    metric: str
    halved: float | None
    removed: float | None

    def to_json(self) -> dict[str, Any]:
        return {"metric": self.metric, "halved": self.halved, "removed": self.removed}


@dataclass(frozen=True)
class Lever:
    phase: str
    share: float  # of the mean end-to-end now
    halved: Bound
    removed: Bound
    # Halved, does it move the tail (p99 or the miss rate), the median? Samples cut at the
    # deadline stay misses whatever a phase does, so a tail of misses moves with no lever.
    tail_moves: bool = True
    median_moves: bool = True
    objectives: tuple[LeverObjective, ...] = ()  # the target's latency objectives, goodput

    def to_json(self) -> dict[str, Any]:
        return {
            "phase": self.phase,
            "share": self.share,
            "halved": self.halved.to_json(),
            "removed": self.removed.to_json(),
            "tail_moves": self.tail_moves,
            "median_moves": self.median_moves,
            "objectives": [found.to_json() for found in self.objectives],
        }


def levers(
    samples: SampleSet,
    *,
    deadline_ms: float | None = None,
    objectives: Sequence[Objective] = (),
) -> list[Lever]:
    """Ranked by the p99 if halved (judge by the tail), then the miss rate, then the p50;
    each with ``objectives``' shares met and goodput's, halved and gone.

    A cut sample's shortened phase says nothing of what came after the cut: it stays a miss
    (the pessimistic end, as in ``predict``); so where misses hold the p99, no lever moves
    it, each lever says so (``tail_moves``) and the median ranks them."""
    if samples.n == 0:
        return []
    deadline = samples.deadline_ms if deadline_ms is None else deadline_ms
    now = settle(samples.ms, samples.censored, deadline)
    base = bound(now)
    shares = shares_of(samples.phases, now.phase_ms)
    found = []
    for j, phase in enumerate(samples.phases):
        if shares.get(phase, 0.0) < MIN_SHARE:
            continue
        halved, half_met = _scaled(samples, j, HALVED, deadline, objectives)
        removed, gone_met = _scaled(samples, j, REMOVED, deadline, objectives)
        found.append(
            Lever(
                phase,
                shares[phase],
                halved,
                removed,
                tail_moves=base.p99_ms - halved.p99_ms >= SAME_MS
                or base.miss_rate - halved.miss_rate >= SAME_RATE,
                median_moves=base.p50_ms - halved.p50_ms >= SAME_MS,
                objectives=tuple(
                    LeverObjective(metric, half_met[metric], gone_met.get(metric))
                    for metric in half_met
                ),
            )
        )
    return sorted(found, key=lambda lever: _rank(lever))


def _rank(lever: Lever) -> tuple[float, float, float]:
    return lever.halved.p99_ms, lever.halved.miss_rate, lever.halved.p50_ms


def levers_to_json(found: list[Lever]) -> list[dict[str, Any]]:
    return [lever.to_json() for lever in found]


def _scaled(
    samples: SampleSet,
    column: int,
    factor: float,
    deadline: float | None,
    objectives: Sequence[Objective],
) -> tuple[Bound, dict[str, float | None]]:
    ms = samples.ms.copy()
    ms[:, column] *= factor
    settled = settle(ms, samples.censored, deadline)
    rhythm = scaled(samples.phases, samples.ms, ms, samples.rhythm)
    met = objective_shares(samples.phases, settled, objectives, rhythm) if objectives else {}
    return bound(settled), met


def headline(found: list[Lever], now_p99_ms: float, now_p50_ms: float) -> str:
    """``the biggest lever now is generation: halved, p99 812 → 540 ms``; never a lever
    that changes nothing called the biggest."""
    if not found:
        return "no lever: no samples"
    best = found[0]
    if best.tail_moves:
        return (
            f"the biggest lever now is {best.phase}: halved, p99 {now_p99_ms:.0f} → "
            f"{best.halved.p99_ms:.0f} ms (gone: {best.removed.p99_ms:.0f} ms)"
        )
    why = "no lever moves the p99: its samples are cut at the deadline and stay misses"
    median = by_median(found)
    if median is None:
        return f"{why}, nor the median"
    return (
        f"{why}; by the median the biggest is {median.phase}: halved, p50 "
        f"{now_p50_ms:.0f} → {median.halved.p50_ms:.0f} ms"
    )


def by_median(found: list[Lever]) -> Lever | None:
    """Where no lever moves the tail: the one that moves the median most; None when none
    moves it either."""
    best = min(found, key=lambda lever: lever.halved.p50_ms, default=None)
    return best if best is not None and best.median_moves else None
