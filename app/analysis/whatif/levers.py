"""Levers now: for each phase, the end-to-end if it halved or vanished, biggest lever first.

Point estimates only (no resampling): a ranking, read at a glance; ``predict`` gives the
intervals of any one of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.analysis.whatif.apply import settle
from app.analysis.whatif.outcome import Bound, bound, shares_of
from app.analysis.whatif.samples import SampleSet

HALVED, REMOVED = 0.5, 0.0


@dataclass(frozen=True)
class Lever:
    phase: str
    share: float  # of the mean end-to-end now
    halved: Bound
    removed: Bound

    def to_json(self) -> dict[str, Any]:
        return {
            "phase": self.phase,
            "share": self.share,
            "halved": self.halved.to_json(),
            "removed": self.removed.to_json(),
        }


def levers(samples: SampleSet, *, deadline_ms: float | None = None) -> list[Lever]:
    """Ranked by the p99 if halved (judge by the tail), then by the p50 if halved.

    A cut sample's shortened phase says nothing of what came after the cut: it stays a miss
    (the pessimistic end, as in ``predict``)."""
    if samples.n == 0:
        return []
    deadline = samples.deadline_ms if deadline_ms is None else deadline_ms
    now = settle(samples.ms, samples.censored, deadline)
    shares = shares_of(samples.phases, now.phase_ms)
    found = [
        Lever(
            phase,
            shares[phase],
            _scaled(samples, j, HALVED, deadline),
            _scaled(samples, j, REMOVED, deadline),
        )
        for j, phase in enumerate(samples.phases)
        if shares.get(phase, 0.0) > 0
    ]
    return sorted(found, key=lambda lever: (lever.halved.p99_ms, lever.halved.p50_ms))


def levers_to_json(found: list[Lever]) -> list[dict[str, Any]]:
    return [lever.to_json() for lever in found]


def _scaled(samples: SampleSet, column: int, factor: float, deadline: float | None) -> Bound:
    ms = samples.ms.copy()
    ms[:, column] *= factor
    return bound(settle(ms, samples.censored, deadline))


def headline(found: list[Lever], now_p99_ms: float) -> str:
    """``the biggest lever now is generation: halved, p99 812 → 540 ms``."""
    if not found:
        return "no lever: no samples"
    best = found[0]
    return (
        f"the biggest lever now is {best.phase}: halved, p99 {now_p99_ms:.0f} → "
        f"{best.halved.p99_ms:.0f} ms (gone: {best.removed.p99_ms:.0f} ms)"
    )
