"""The goals of issue 35 per kind of change, the oracle's delays beside phasewatch's.

* large changes (leader changes, queue growth, routes, level shifts): phasewatch's median
  delay ≤ 3 runs;
* tail changes: phasewatch's median delay ≤ 1.5 × the pooled oracle's median, and no
  change above 2 × its own pooled oracle delay (a miss, or no oracle alarm, fails).

A fleet's rows (``fleet/<kind>``) and its oracle rows (groups ``<kind>:<id>``) count
under their kind, with the standard corpus's.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from bench.common import print_table
from bench.detection.oracle.table import Beside
from bench.detection.report import PHASEWATCH, Scores
from bench.detection.score import Score, fmt

LARGE_DELAY_RUNS = 3.0
TAIL_MEDIAN_RATIO = 1.5
TAIL_EVENT_RATIO = 2.0
LARGE = (
    "abrupt_generation_collapse",
    "generation_regrowth",
    "queue_growth",
    "one_vantage_route",
    "uniform_slowdown",
    "phase_slowdown",
    "retrieval_prompts",
)
TAIL = ("queue_tail_blowup", "persistent_violation_after_tail_change")


def kind_of(scenario: str) -> str:
    """``fleet/queue_growth`` → ``queue_growth``; a scenario of the corpus is its kind."""
    return scenario.rpartition("/")[2]


def oracle_kind(b: Beside) -> str:
    """The kind of an oracle row: a fleet's group is ``<kind>:<id>``."""
    kind, colon, _ = b.oracle.group.partition(":")
    return kind if colon else b.oracle.scenario


@dataclass(frozen=True, slots=True)
class KindCheck:
    kind: str
    goal: str
    passed: bool
    phasewatch: Score
    oracle_one: float | None
    oracle_pooled: float | None
    worst_ratio: float | None  # tail changes: the largest phasewatch / pooled oracle


def _median(values: Sequence[float | int | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return statistics.median(kept) if kept else None


def _ratios(rows: Sequence[Beside]) -> list[float | None]:
    """phasewatch / pooled oracle per change; None where either has no delay."""
    return [
        b.phasewatch / b.oracle.pooled if b.phasewatch and b.oracle.pooled else None for b in rows
    ]


def check(kind: str, ours: Score, rows: Sequence[Beside]) -> KindCheck:
    one = _median([b.oracle.one for b in rows])
    pooled = _median([b.oracle.pooled for b in rows])
    delay = ours.median_delay
    if kind in TAIL:
        ratios = _ratios(rows)
        worst = None if not ratios or None in ratios else max(r for r in ratios if r is not None)
        passed = (
            delay is not None
            and pooled is not None
            and delay <= TAIL_MEDIAN_RATIO * pooled
            and worst is not None
            and worst <= TAIL_EVENT_RATIO
            and not ours.missed
        )
        goal = f"≤ {TAIL_MEDIAN_RATIO:g}× pooled oracle, each ≤ {TAIL_EVENT_RATIO:g}×"
        return KindCheck(kind, goal, passed, ours, one, pooled, worst)
    passed = delay is not None and delay <= LARGE_DELAY_RUNS
    return KindCheck(kind, f"≤ {LARGE_DELAY_RUNS:g} runs", passed, ours, one, pooled, None)


def kind_checks(scores: Scores, besides: Sequence[Beside]) -> list[KindCheck]:
    """One check per large or tail kind present in the scores."""
    by_kind: dict[str, Score] = {}
    for scenario, by_detector in scores.items():
        kind = kind_of(scenario)
        if PHASEWATCH in by_detector and kind in (*LARGE, *TAIL):
            by_kind[kind] = by_kind.get(kind, Score()).add(by_detector[PHASEWATCH])
    return [
        check(kind, ours, [b for b in besides if oracle_kind(b) == kind])
        for kind, ours in by_kind.items()
    ]


def show(title: str, checks: Sequence[KindCheck]) -> bool:
    """Print the per-kind goals; True when all pass."""
    if not checks:
        return True
    headers = ["kind", "goal", "phasewatch median (runs)", "missed"]
    headers += ["oracle one / pooled", "worst ratio", "verdict"]
    rows = [
        [
            c.kind,
            c.goal,
            fmt(c.phasewatch.median_delay, 1),
            f"{len(c.phasewatch.missed)}/{c.phasewatch.groups}",
            f"{fmt(c.oracle_one, 1)} / {fmt(c.oracle_pooled, 1)}",
            "-" if c.worst_ratio is None else f"{c.worst_ratio:.1f}×",
            "PASS" if c.passed else "FAIL",
        ]
        for c in checks
    ]
    print(f"\ngoals per kind, {title}:")
    print_table(headers, rows)
    return all(c.passed for c in checks)
