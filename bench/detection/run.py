"""Generate the corpus, replay it through phasewatch's backtest and the baselines, score.

    .venv/bin/python -m bench.detection.run --seed 1
    .venv/bin/python -m bench.detection.run --seed 7 --days 12 --set tail_share=0.08 --details

phasewatch is ``python -m app backtest FILE --format jsonl`` (plus ``--config`` with the
scenario's targets file when the command has that option), one process per scenario;
only ``"state": "firing"`` lines count. Without the command the baselines run alone.
Goals for phasewatch, over the whole corpus: recall ≥ 0.9, ≤ 1 false alarm per
target-month, median delay ≤ 4 runs on abrupt changes, F1 above every baseline's.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import REPO_ROOT, machine_info, print_table
from bench.detection.baselines import DETECTORS, run_baselines
from bench.detection.generate import Written, add_params, generate, params_from, scenario_names
from bench.detection.labels import Alert, Labels, alerts_from_jsonl, read_labels
from bench.detection.score import CAUSES, Score, cause, first_detections, fmt, score

PHASEWATCH = "phasewatch"
GOAL_RECALL = 0.9
GOAL_FALSE_PER_TARGET_MONTH = 1.0
GOAL_DELAY_RUNS = 4.0
BACKTEST = [sys.executable, "-m", "app", "backtest"]


@dataclass(slots=True)
class Replay:
    alerts: list[Alert]  # one per episode
    seconds: float
    error: str | None = None
    firing_lines: int = 0  # every "firing" line, re-firings from recovering included


def backtest_help() -> str | None:
    """The command's help text, or None when phasewatch has no backtest yet."""
    done = subprocess.run(
        [*BACKTEST, "--help"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120
    )
    return done.stdout if done.returncode == 0 else None


def phasewatch_version() -> str:
    """The commit the detectors come from, and whether app/ has changes on top of it."""

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=True)
        return done.stdout.strip()

    dirty = git("status", "--porcelain", "--", "app")
    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    return commit + (" + uncommitted changes in app/" if dirty else "")


def replay(written: Written, help_text: str, out: Path, timeout: float) -> Replay:
    command = [*BACKTEST, str(written.csv), "--format", "jsonl"]
    if "--config" in help_text:
        command += ["--config", str(written.targets)]
    began = time.perf_counter()
    try:
        done = subprocess.run(
            command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return Replay([], time.perf_counter() - began, f"timed out after {timeout:.0f} s")
    seconds = time.perf_counter() - began
    (out / f"{PHASEWATCH}.{written.scenario}.jsonl").write_text(done.stdout)
    error = None
    if done.returncode != 0:
        error = f"exit {done.returncode}: {done.stderr.strip()[-500:]}"
    lines = done.stdout.splitlines()
    every = sum(1 for _ in alerts_from_jsonl(lines, episodes=False))
    return Replay(list(alerts_from_jsonl(lines)), seconds, error, every)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_params(parser)
    parser.add_argument("--out", type=Path, help="corpus folder (default /tmp/...-<seed>)")
    parser.add_argument("--reuse", action="store_true", help="score the corpus already in --out")
    parser.add_argument("--no-phasewatch", action="store_true", help="baselines only")
    parser.add_argument("--timeout", type=float, default=3600, help="per backtest, seconds")
    parser.add_argument("--details", action="store_true", help="list misses and false alarms")
    args = parser.parse_args()
    params, names = params_from(args), scenario_names(args)
    out = args.out or Path(f"/tmp/phasewatch-detection-{params.seed}")
    print(machine_info())
    print(f"corpus {out}: {json.dumps(params.as_json())}")
    written = _corpus(out, params, names, args.reuse)
    help_text = None if args.no_phasewatch else backtest_help()
    if help_text is None and not args.no_phasewatch:
        print("phasewatch: no `backtest` command yet: baselines only")
    elif help_text is not None:
        print(f"phasewatch at {phasewatch_version()}")
    scores, replays = _score_all(written, help_text, out, args.timeout)
    _report(scores, replays, written)
    if args.details:
        _details(scores, written, out)
    _save(out / "results.json", scores, replays, written)


def _corpus(out: Path, params: Any, names: list[str], reuse: bool) -> list[Written]:
    if reuse:
        return [Written.at(out, name, _rows(out / f"{name}.csv")) for name in names]
    return generate(out, params, names, verbose=False)


def _rows(path: Path) -> int:
    with path.open() as handle:
        return sum(1 for _ in handle) - 1


def _score_all(
    written: list[Written], help_text: str | None, out: Path, timeout: float
) -> tuple[dict[str, dict[str, Score]], dict[str, Replay]]:
    scores: dict[str, dict[str, Score]] = {}
    replays: dict[str, Replay] = {}
    for item in written:
        labels = read_labels(item.labels)
        deadlines = {t.name: t.deadline_ms for t in labels.targets}
        found = run_baselines(item.csv, deadlines)
        scores[item.scenario] = {
            name: score(labels, alerts, any_kind=True) for name, alerts in found.items()
        }
        if help_text is not None:
            replays[item.scenario] = replay(item, help_text, out, timeout)
            scores[item.scenario][PHASEWATCH] = score(labels, replays[item.scenario].alerts)
            if replays[item.scenario].error:
                print(f"phasewatch on {item.scenario}: {replays[item.scenario].error}")
    return scores, replays


def _detectors(scores: dict[str, dict[str, Score]]) -> list[str]:
    first = next(iter(scores.values()), {})
    return [name for name in (PHASEWATCH, *DETECTORS) if name in first]


def _overall(scores: dict[str, dict[str, Score]], detector: str) -> Score:
    total = Score()
    for by_detector in scores.values():
        total = total.add(by_detector[detector])
    return total


def _row(label: str, detector: str, s: Score) -> list[str]:
    return [
        label,
        detector,
        f"{s.detected}/{s.groups}",
        fmt(s.recall),
        str(s.false_alarms),
        fmt(s.false_per_target_month),
        fmt(s.median_delay, 1),
        fmt(s.precision),
        fmt(s.f1),
    ]


def _report(
    scores: dict[str, dict[str, Score]], replays: dict[str, Replay], written: list[Written]
) -> None:
    headers = [
        "scenario",
        "detector",
        "detected",
        "recall",
        "false",
        "false/t-month",
        "delay (runs)",
        "precision",
        "F1",
    ]
    detectors = _detectors(scores)
    rows = [
        _row(scenario, d, by_detector[d])
        for scenario, by_detector in scores.items()
        for d in detectors
    ]
    rows += [_row("overall", d, _overall(scores, d)) for d in detectors]
    print()
    print_table(headers, rows)
    if PHASEWATCH in detectors:
        ours = _overall(scores, PHASEWATCH)
        causes = ", ".join(f"{why} {ours.causes[why]}" for why in CAUSES)
        print(f"\nphasewatch false alarms by cause: {causes}")
        print(f"phasewatch delays on abrupt changes (runs): {sorted(ours.delays)}")
        lines = sum(r.firing_lines for r in replays.values())
        print(f"phasewatch: {ours.alerts} alerts (episodes) from {lines} firing lines")
    if replays:
        samples = sum(item.rows for item in written)
        seconds = sum(r.seconds for r in replays.values())
        print(
            f"\nbacktest: {samples} samples in {seconds:.1f} s = {samples / seconds:,.0f} samples/s"
        )
        _goals(scores, detectors)


def _goals(scores: dict[str, dict[str, Score]], detectors: list[str]) -> None:
    ours = _overall(scores, PHASEWATCH)
    best = max((_overall(scores, d).f1 or 0.0 for d in detectors if d != PHASEWATCH), default=0.0)
    checks = [
        (
            f"recall ≥ {GOAL_RECALL}",
            ours.recall is not None and ours.recall >= GOAL_RECALL,
            fmt(ours.recall),
        ),
        (
            f"≤ {GOAL_FALSE_PER_TARGET_MONTH:g} false alarm per target-month",
            ours.false_per_target_month <= GOAL_FALSE_PER_TARGET_MONTH,
            fmt(ours.false_per_target_month),
        ),
        (
            f"median delay ≤ {GOAL_DELAY_RUNS:g} runs (abrupt)",
            ours.median_delay is not None and ours.median_delay <= GOAL_DELAY_RUNS,
            fmt(ours.median_delay, 1),
        ),
        ("F1 above every baseline", (ours.f1 or 0.0) > best, f"{fmt(ours.f1)} vs {fmt(best)}"),
    ]
    print()
    for goal, passed, value in checks:
        print(f"{'PASS' if passed else 'FAIL'}  {goal}: {value}")


def _details(scores: dict[str, dict[str, Score]], written: list[Written], out: Path) -> None:
    """phasewatch in full (how each change was caught, every kind of false alarm and its
    likely cause, the first few); the baselines in one line each."""
    for item in written:
        labels = read_labels(item.labels)
        print(f"\n{item.scenario}:")
        for detector, s in scores[item.scenario].items():
            if detector == PHASEWATCH:
                _explain(labels, s, out)
            else:
                missed = f", missed {', '.join(s.missed)}" if s.missed else ""
                print(f"  {detector}: {s.false_alarms} false{missed}")


def _explain(labels: Labels, s: Score, out: Path) -> None:
    path = out / f"{PHASEWATCH}.{labels.scenario}.jsonl"
    alerts = list(alerts_from_jsonl(path.read_text().splitlines())) if path.exists() else []
    starts = {e.group: e.start for e in labels.events}
    caught = first_detections(labels, alerts)
    nearby = first_detections(labels, alerts, any_kind=True)
    for group, start in starts.items():
        found = caught.get(group)
        if found is None:
            other = nearby.get(group)
            seen = f" (in its window only: {_brief(other)})" if other else ""
            print(f"  {PHASEWATCH}: MISSED {group}{seen}")
            continue
        runs = int((found.at - start).total_seconds() // labels.interval_s) + 1
        print(f"  {PHASEWATCH}: caught {group} on run {runs}: {_brief(found)}")
    kinds = Counter((a.kind, a.vantage, cause(labels, a)) for a in s.false)
    for (kind, vantage, why), count in sorted(kinds.items()):
        print(f"  {PHASEWATCH}: false ×{count} {kind} @{vantage} ({why})")
    for alert in s.false[:6]:
        print(f"    {alert.at:%m-%d %H:%M} {alert.target}@{alert.vantage} {alert.summary[:120]}")


def _brief(alert: Alert) -> str:
    return f"{alert.kind} @{alert.vantage} [{alert.scope}] {alert.at:%m-%d %H:%M}"


def _save(
    path: Path,
    scores: dict[str, dict[str, Score]],
    replays: dict[str, Replay],
    written: list[Written],
) -> None:
    def one(s: Score) -> dict[str, Any]:
        return {
            "groups": s.groups,
            "detected": s.detected,
            "recall": s.recall,
            "false_alarms": s.false_alarms,
            "false_per_target_month": s.false_per_target_month,
            "median_delay_runs": s.median_delay,
            "precision": s.precision,
            "f1": s.f1,
            "tolerated": s.tolerated,
            "missed": s.missed,
            "false_by_cause": dict(s.causes),
        }

    detectors = _detectors(scores)
    result = {
        "scenarios": {sc: {d: one(by[d]) for d in detectors} for sc, by in scores.items()},
        "overall": {d: one(_overall(scores, d)) for d in detectors},
        "backtest_seconds": {sc: r.seconds for sc, r in replays.items()},
        "samples": {item.scenario: item.rows for item in written},
    }
    path.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
