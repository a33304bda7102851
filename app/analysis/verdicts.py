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

from app.analysis.objectives import AVAILABILITY, CUT, METRICS, Objective, Seen
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
    """``seen``: the sample's status, total, marks and details (``objectives.seen_of``).

    One sample at a time in plain Python (an export judges every row: numpy's arrays of
    one cost ten times more), by the rules of ``objectives.readings``, ``latency_tally``
    and ``goodput``; tests/analysis/test_verdicts.py holds them to the same answers."""
    if not objectives:
        return NO_VERDICT
    status = seen[0]
    met: dict[str, bool | None] = {}
    good = status == "ok"
    for objective in objectives:
        if objective.metric == AVAILABILITY:
            met[objective.metric] = status == "ok"
            continue
        value, lower = _reading(objective.metric, seen) if status in TIMED else (None, False)
        met[objective.metric] = _met(value, lower, objective.below_ms)
        good = good and _within(value, lower, objective.below_ms)
    return Verdict(good, met)


def _within(value: float | None, lower: bool, below_ms: float | None) -> bool:
    """Goodput's test: the value known, not a bound, and within the objective's bound."""
    return value is not None and below_ms is not None and not lower and value <= below_ms


def _reading(metric: str, seen: Seen) -> tuple[float | None, bool]:
    """The sample's value of ``metric`` and whether it is only a lower bound (its cut)."""
    found = METRICS.get(metric)
    if found is None or found.read is None:
        return None, False
    value = found.read(*seen)
    cut = seen[0] == CUT
    if value is None and cut and found.from_start:
        return seen[1], True  # its missing value lies past its cut
    return value, cut and metric == "end_to_end_ms"


def _met(value: float | None, lower: bool, below_ms: float | None) -> bool | None:
    if value is None or below_ms is None:
        return None
    if lower:  # a lower bound: a miss once at or past the bound, else not counted
        return False if value >= below_ms else None
    return value <= below_ms
