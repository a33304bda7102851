"""One sample judged against its target's objectives: whether it met each, and all at once.

What the CSV export writes per row (``good``, ``met_<metric>``, app.csvio.layout), so that
goodput — the share of requests meeting every objective at once, vLLM's and AIPerf's — is a
column's mean. The rules are the objectives' (app.analysis.objectives), one sample at a
time: ``met`` is None where an objective does not count the sample (a latency value it has
not got, a cut that came before the bound); ``good`` counts every sample, as goodput does:
a failed or cut sample never is, nor one without a latency objective's value.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from app.analysis.objectives import (
    AVAILABILITY,
    CUT,
    METRICS,
    Objective,
    Reading,
    Seen,
    goodput,
    latency_tally,
    readings,
)
from app.analysis.summary import TIMED

# Every metric an objective may be on, in the registry's order: the CSV's columns.
VERDICT_METRICS = tuple(METRICS)


@dataclass(frozen=True, slots=True)
class Verdict:
    good: bool | None  # None: the target has no objectives
    met: Mapping[str, bool | None]  # by metric, the target's objectives only

    def cells(self) -> tuple[bool | None, ...]:
        """``good``, then each of ``VERDICT_METRICS`` (None where the target has none)."""
        return (self.good, *(self.met.get(metric) for metric in VERDICT_METRICS))


NO_VERDICT = Verdict(None, {})


def verdict(objectives: Sequence[Objective], seen: Seen) -> Verdict:
    """``seen``: the sample's status, total, marks and details (``objectives.seen_of``)."""
    if not objectives:
        return NO_VERDICT
    status = seen[0]
    if status not in TIMED:
        met = {o.metric: False if o.metric == AVAILABILITY else None for o in objectives}
        return Verdict(False, met)
    reads = readings([seen])
    met = {o.metric: _met(o, status, reads) for o in objectives}
    good = goodput(objectives, 1, reads, np.array([status == CUT])).bad == 0
    return Verdict(good, met)


def _met(objective: Objective, status: str, reads: Mapping[str, Reading]) -> bool | None:
    if objective.metric == AVAILABILITY:
        return status == "ok"
    reading = reads.get(objective.metric)
    if reading is None or objective.below_ms is None:
        return None
    counted = latency_tally(reading, objective.below_ms)
    return None if counted.counted == 0 else counted.bad == 0
