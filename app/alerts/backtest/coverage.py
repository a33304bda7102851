"""What a backtest could judge, and, where it could not, a sentence saying why.

The detectors that compare with a reference (``dominant_shift``, ``tail_shift``,
``composition_shift``) abstain until one can be built: ``min_reference_runs`` runs over
``min_reference_days`` before the newest ``recent_runs``; ``tail_shift`` also wants
``tail_min_days`` of it. A short file (a demo's few hours, a target's first day) then gives
none of those alerts, and an empty table alone reads as "nothing happened". So the replay
notes, per target and vantage, its runs and the largest reference it built, and the CLI
says what was never judged, against which settings.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from app.analysis.detectors import DetectorParams, Reference
from app.analysis.runs import RunData

REFERENCE_KINDS = ("dominant_shift", "tail_shift", "composition_shift")


@dataclass
class Series:
    """One target at one vantage, as the replay saw it."""

    runs: int = 0
    first: datetime | None = None
    last: datetime | None = None
    reference_runs: int = 0  # of the largest reference built; 0: none ever was
    reference_span: timedelta = timedelta(0)

    @property
    def span(self) -> timedelta:
        return self.last - self.first if self.first and self.last else timedelta(0)


@dataclass
class Coverage:
    series: dict[tuple[str, str], Series] = field(default_factory=dict)

    def add(self, run: RunData, reference: Reference | None) -> None:
        """``run`` was evaluated; ``reference`` is what its vantage was judged against."""
        seen = self.series.setdefault((run.target, run.vantage), Series())
        seen.runs += 1
        seen.first = seen.first or run.at
        seen.last = run.at
        if reference is not None:
            seen.reference_runs = max(seen.reference_runs, reference.runs)
            seen.reference_span = max(seen.reference_span, reference.span)

    def merge(self, other: Coverage) -> None:
        """Another worker's series (workers replay disjoint targets)."""
        self.series.update(other.series)


def unjudged(coverage: Coverage, params_for: Callable[[str], DetectorParams]) -> list[str]:
    """Per target whose reference detectors never judged a run: which, and why."""
    by_target: dict[str, list[tuple[str, Series]]] = {}
    for (target, vantage), seen in sorted(coverage.series.items()):
        by_target.setdefault(target, []).append((vantage, seen))
    found = []
    for target, series in by_target.items():
        params = params_for(target)
        kinds = [kind for kind in REFERENCE_KINDS if kind in params.enabled]
        held = ", ".join(f"{s.runs} runs over {duration(s.span)} at {v}" for v, s in series)
        if not any(s.reference_runs for _, s in series):
            found.append(
                f"{target}: {_listed(kinds)} never judged: they need a reference of"
                f" {params.min_reference_runs} runs over {_days(params.min_reference_days)}"
                f" (min_reference_runs, min_reference_days) before the newest"
                f" {params.recent_runs}; the file holds {held}"
            )
            continue
        longest = max(s.reference_span for _, s in series)
        if "tail_shift" in kinds and longest < timedelta(days=params.tail_min_days):
            found.append(
                f"{target}: tail_shift never judged: it needs a reference over"
                f" {_days(params.tail_min_days)} (tail_min_days); the longest here was"
                f" {duration(longest)}"
            )
    return found


def duration(span: timedelta) -> str:
    """'3 h', '8.5 h', '2.5 d', '40 min': as a person would say a file's length."""
    hours = span / timedelta(hours=1)
    if hours < 1:
        return f"{span / timedelta(minutes=1):.0f} min"
    if hours < 48:
        return f"{hours:.1f}".removesuffix(".0") + " h"
    return f"{hours / 24:.1f}".removesuffix(".0") + " d"


def _days(days: float) -> str:
    return "1 day" if days == 1 else f"{days:g} days"


def _listed(kinds: list[str]) -> str:
    return kinds[0] if len(kinds) == 1 else ", ".join(kinds[:-1]) + " and " + kinds[-1]
