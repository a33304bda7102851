"""The detection benchmark's report: tables, goal checks, details, results.json.

``Scores`` maps scenario → detector → Score for one seed; the pooled result of several
seeds is their scenario-wise sum.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from bench.common import print_table
from bench.detection.baselines import DETECTORS
from bench.detection.labels import Alert, Labels
from bench.detection.score import CAUSES, Score, first_detections, fmt

PHASEWATCH = "phasewatch"
GOAL_RECALL = 0.95
GOAL_FALSE_PER_TARGET_MONTH = 0.5
GOAL_FLAPS = 0
GOAL_DELAY_RUNS = 4.0
Scores = dict[str, dict[str, Score]]
HEADERS = [
    "scenario",
    "detector",
    "detected",
    "recall",
    "false",
    "false/t-month",
    "flaps",
    "delay (runs)",
    "precision",
    "F1",
]


def detectors(scores: Scores) -> list[str]:
    first = next(iter(scores.values()), {})
    return [name for name in (PHASEWATCH, *DETECTORS) if name in first]


def overall(scores: Scores, detector: str) -> Score:
    total = Score()
    for by_detector in scores.values():
        total = total.add(by_detector[detector])
    return total


def pooled(per_seed: dict[int, Scores]) -> Scores:
    """Every seed's scores added up, scenario by scenario."""
    out: Scores = {}
    for scores in per_seed.values():
        for scenario, by_detector in scores.items():
            into = out.setdefault(scenario, {})
            for detector, s in by_detector.items():
                into[detector] = into.get(detector, Score()).add(s)
    return out


def row(label: str, detector: str, s: Score) -> list[str]:
    return [
        label,
        detector,
        f"{s.detected}/{s.groups}",
        fmt(s.recall),
        str(s.false_alarms),
        fmt(s.false_per_target_month),
        str(s.flaps),
        fmt(s.median_delay, 1),
        fmt(s.precision),
        fmt(s.f1),
    ]


def scenario_table(scores: Scores) -> None:
    names = detectors(scores)
    rows = [row(sc, d, by[d]) for sc, by in scores.items() for d in names]
    rows += [row("overall", d, overall(scores, d)) for d in names]
    print()
    print_table(HEADERS, rows)


def seed_table(per_seed: dict[int, Scores]) -> None:
    """One row per seed and detector over the whole corpus, then the pooled rows."""
    names = detectors(next(iter(per_seed.values())))
    rows = [row(f"seed {seed}", d, overall(sc, d)) for seed, sc in per_seed.items() for d in names]
    if len(per_seed) > 1:
        rows += [row("pooled", d, overall(pooled(per_seed), d)) for d in names]
    print()
    print_table(["corpus", *HEADERS[1:]], rows)


def phasewatch_lines(scores: Scores) -> None:
    ours = overall(scores, PHASEWATCH)
    causes = ", ".join(f"{why} {ours.causes[why]}" for why in CAUSES)
    print(f"\nphasewatch false alarms by cause: {causes}")
    print(f"phasewatch delays on abrupt changes (runs): {sorted(ours.delays)}")
    print(f"phasewatch: {ours.alerts} alerts (episodes), {ours.flaps} flaps")


def goals(seed: int, scores: Scores) -> bool:
    """Print the goal checks of one seed's corpus; True when all pass."""
    ours = overall(scores, PHASEWATCH)
    checks = [
        (f"recall ≥ {GOAL_RECALL}", (ours.recall or 0.0) >= GOAL_RECALL, fmt(ours.recall)),
        (
            f"≤ {GOAL_FALSE_PER_TARGET_MONTH:g} false alarms per target-month",
            ours.false_per_target_month <= GOAL_FALSE_PER_TARGET_MONTH,
            fmt(ours.false_per_target_month),
        ),
        (f"{GOAL_FLAPS} flaps", ours.flaps <= GOAL_FLAPS, str(ours.flaps)),
        (
            f"median delay ≤ {GOAL_DELAY_RUNS:g} runs (abrupt)",
            ours.median_delay is not None and ours.median_delay <= GOAL_DELAY_RUNS,
            fmt(ours.median_delay, 1),
        ),
    ]
    print(f"\ngoals, seed {seed}:")
    for goal, passed, value in checks:
        print(f"  {'PASS' if passed else 'FAIL'}  {goal}: {value}")
    return all(passed for _, passed, _ in checks)


def details(scores: Scores, labels: dict[str, Labels], alerts: dict[str, list[Alert]]) -> None:
    """phasewatch in full (each change caught or missed, every false alarm and flap); the
    baselines in one line each."""
    for scenario, by_detector in scores.items():
        print(f"\n{scenario}:")
        for detector, s in by_detector.items():
            if detector == PHASEWATCH:
                _explain(labels[scenario], s, alerts.get(scenario, []))
            else:
                missed = f", missed {', '.join(s.missed)}" if s.missed else ""
                print(f"  {detector}: {s.false_alarms} false, {s.flaps} flaps{missed}")


def _explain(labels: Labels, s: Score, alerts: list[Alert]) -> None:
    starts = {e.group: e.start for e in labels.events if not e.optional}
    caught = first_detections(labels, alerts)
    for group, start in starts.items():
        found = caught.get(group)
        if found is None:
            print(f"  {PHASEWATCH}: MISSED {group}")
            continue
        runs = int((found.at - start).total_seconds() // labels.interval_s) + 1
        print(f"  {PHASEWATCH}: caught {group} on run {runs}: {brief(found)}")
    kinds = Counter(
        (a.kind, a.severity, a.vantage, why) for a, why in zip(s.false, s.false_why, strict=True)
    )
    for (kind, severity, vantage, why), count in sorted(kinds.items(), key=str):
        print(f"  {PHASEWATCH}: false ×{count} {kind} ({severity}) @{vantage} ({why})")
    for alert, why in zip(s.false, s.false_why, strict=True):
        print(f"    false {_line(alert)} ({why})")
    for alert in s.flapped:
        print(f"    flap  {_line(alert)}")


def _line(alert: Alert) -> str:
    where = f"{alert.target}@{alert.vantage}"
    return f"{alert.at:%m-%d %H:%M} {where} {alert.kind}/{alert.severity}: {alert.summary[:110]}"


def brief(alert: Alert) -> str:
    return f"{alert.kind}/{alert.severity} @{alert.vantage} [{alert.scope}] {alert.at:%m-%d %H:%M}"


def one(s: Score) -> dict[str, Any]:
    return {
        "groups": s.groups,
        "detected": s.detected,
        "recall": s.recall,
        "false_alarms": s.false_alarms,
        "false_per_target_month": s.false_per_target_month,
        "flaps": s.flaps,
        "median_delay_runs": s.median_delay,
        "precision": s.precision,
        "f1": s.f1,
        "tolerated": s.tolerated,
        "missed": s.missed,
        "false_by_cause": dict(s.causes),
    }


def save(path: Path, scores: Scores, extra: dict[str, Any]) -> None:
    names = detectors(scores)
    result = {
        "scenarios": {sc: {d: one(by[d]) for d in names} for sc, by in scores.items()},
        "overall": {d: one(overall(scores, d)) for d in names},
        **extra,
    }
    path.write_text(json.dumps(result, indent=2) + "\n")
