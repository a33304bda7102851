"""The what-if for the objectives (``alerts.objectives``): the share of timed samples
meeting each latency objective, and goodput, before and after the changes.

From the settled samples (``apply.settle``): ``end_to_end_ms`` is the end-to-end time (a
miss at the deadline is at least the deadline); ``ttft_ms`` the time of the phases before
the first token — connect, network, queue, prefill, or a whole answer's server phase
(for a streamed answer that is the first token mark; for a whole answer whose server said
how long it generated, it leaves that out, where the mark would not). A sample cut before
its first token has only a lower bound, as the objectives count it. Availability is not
predicted: the what-if's samples are the timed ones, and no change makes a failed request
answer. Goodput here is over the timed samples: not cut, and every latency objective met.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from app.analysis.objectives import AVAILABILITY, Objective, Reading, latency_tally, share
from app.analysis.whatif.apply import Settled

BEFORE_TOKEN = ("connect", "network", "queue", "prefill", "server")


@dataclass(frozen=True, slots=True)
class ObjectiveOutcome:
    metric: str  # an objective's, or "goodput"
    below_ms: float | None
    before: float | None  # the share meeting it; None: nothing counted
    after: float | None

    def to_json(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "below_ms": self.below_ms,
            "before": self.before,
            "after": self.after,
        }


def readings_of(phases: tuple[str, ...], settled: Settled) -> dict[str, Reading]:
    columns = [i for i, name in enumerate(phases) if name in BEFORE_TOKEN]
    ttft = settled.phase_ms[:, columns].sum(axis=1)
    reached = np.isclose(ttft, settled.values) & settled.miss  # cut before its first token
    return {"end_to_end_ms": (settled.values, settled.miss), "ttft_ms": (ttft, reached)}


def shares(
    phases: tuple[str, ...], settled: Settled, objectives: Sequence[Objective]
) -> dict[str, float | None]:
    """Each latency objective's share met, and goodput's, of ``settled``."""
    reads = readings_of(phases, settled)
    found: dict[str, float | None] = {}
    good = ~settled.miss
    for objective in objectives:
        reading = reads.get(objective.metric)
        if objective.metric == AVAILABILITY or reading is None or objective.below_ms is None:
            continue
        counted = latency_tally(reading, objective.below_ms)
        found[objective.metric] = share(counted.counted, counted.bad)
        good = good & ~reading[1] & (reading[0] <= objective.below_ms)
    found["goodput"] = share(len(good), len(good) - int(np.count_nonzero(good)))
    return found


def outcomes(
    phases: tuple[str, ...],
    sides: tuple[Settled, Settled],
    objectives: Sequence[Objective],
) -> tuple[ObjectiveOutcome, ...]:
    if not objectives:
        return ()
    before, after = (shares(phases, side, objectives) for side in sides)
    bounds = {o.metric: o.below_ms for o in objectives}
    return tuple(
        ObjectiveOutcome(metric, bounds.get(metric), before[metric], after.get(metric))
        for metric in before
    )
