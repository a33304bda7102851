"""Generate the corpus, replay it through phasewatch's backtest and the baselines, score.

    .venv/bin/python -m bench.detection.run --seeds 1,2,3
    .venv/bin/python -m bench.detection.run --seed 7 --days 12 --set tail_share=0.08 --details

phasewatch is ``python -m app backtest FILE --format jsonl`` (plus ``--config`` with the
scenario's targets file when the command has that option), one process per scenario, one
at a time; its firing and resolved lines are scored. Without the command the baselines
run alone. Goals for phasewatch, over each seed's whole corpus: recall ≥ 0.95, ≤ 0.5
false alarms per target-month, 0 flaps, median delay ≤ 4 runs on abrupt changes; per
kind, bench/detection/goals.py. ``--fleet`` runs the fleet corpus (bench/detection/
fleet.py, scored per kind, no baselines); ``--untuned`` adds the untuned kinds (reported
apart); ``--held-out 4,5`` reports those seeds apart as held out of tuning.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from bench.common import REPO_ROOT, machine_info
from bench.detection import fleet, goals, report
from bench.detection.baselines import run_baselines
from bench.detection.catalog import UNTUNED
from bench.detection.generate import Written, add_params, generate, params_from, scenario_names
from bench.detection.labels import Alert, Labels, read_labels, transitions_from_jsonl
from bench.detection.oracle import table as oracle
from bench.detection.report import PHASEWATCH, Scores
from bench.detection.scenario import Params
from bench.detection.score import score

BACKTEST = [sys.executable, "-m", "app", "backtest"]


@dataclass(slots=True)
class Replay:
    transitions: list[Alert]  # firing and resolved lines
    seconds: float
    error: str | None = None


@dataclass(slots=True)
class Seed:
    """One seed's corpus, scores and replays."""

    out: Path
    written: list[Written]
    labels: dict[str, Labels]
    scores: Scores
    replays: dict[str, Replay]
    oracle: list[oracle.Beside] = field(default_factory=list)
    oracle_seconds: float = 0.0


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
    error = f"exit {done.returncode}: {done.stderr.strip()[-500:]}" if done.returncode else None
    return Replay(list(transitions_from_jsonl(done.stdout.splitlines())), seconds, error)


def stored_replay(out: Path, scenario: str) -> Replay:
    path = out / f"{PHASEWATCH}.{scenario}.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return Replay(list(transitions_from_jsonl(lines)), 0.0)


def run_seed(params: Params, names: list[str], out: Path, args: argparse.Namespace) -> Seed:
    if args.reuse:
        written = [Written.at(out, name, _rows(out / f"{name}.csv")) for name in names]
    else:
        written = generate(out, params, names, verbose=False)
    help_text = None if args.no_phasewatch else backtest_help()
    seed = Seed(out, written, {}, {}, {})
    for item in written:
        labels = seed.labels[item.scenario] = read_labels(item.labels)
        deadlines = {t.name: t.deadline_ms for t in labels.targets}
        # The baselines read a whole file into Python lists: too big for the fleet.
        found = {} if item.scenario == fleet.NAME else run_baselines(item.csv, deadlines)
        seed.scores[item.scenario] = {
            name: score(labels, alerts, any_kind=True) for name, alerts in found.items()
        }
        if help_text is None:
            continue
        done = (
            stored_replay(out, item.scenario)
            if args.rescore
            else replay(item, help_text, out, args.timeout)
        )
        seed.replays[item.scenario] = done
        seed.scores[item.scenario][PHASEWATCH] = score(labels, done.transitions)
        if done.error:
            print(f"phasewatch on {item.scenario}: {done.error}")
        if item.scenario == fleet.NAME:
            _by_kind(seed, labels, done)
    if not args.no_oracle:
        _oracle(seed)
    return seed


def _by_kind(seed: Seed, labels: Labels, done: Replay) -> None:
    """The fleet's score, one row per kind in its place."""
    del seed.scores[fleet.NAME]
    for name, part in fleet.split(labels).items():
        alerts = fleet.alerts_of(part, done.transitions)
        seed.labels[name] = part
        seed.replays[name] = Replay(alerts, 0.0)  # the fleet's own keeps the time
        seed.scores[name] = {PHASEWATCH: score(part, alerts)}


def _oracle(seed: Seed) -> None:
    """The oracle's delay on every change, phasewatch's beside it (bench/detection/oracle)."""
    began = time.perf_counter()
    for item in seed.written:
        replay = seed.replays.get(item.scenario)
        alerts = replay.transitions if replay is not None else None
        seed.oracle += oracle.beside(seed.labels[item.scenario], item.csv, alerts)
    seed.oracle_seconds = time.perf_counter() - began


def _rows(path: Path) -> int:
    with path.open() as handle:
        return sum(1 for _ in handle) - 1


def apart(scores: Scores) -> tuple[Scores, Scores]:
    """The scores of the tuned kinds, and of the untuned ones (bench/detection/heldout.py)."""
    untuned = {sc: by for sc, by in scores.items() if sc in UNTUNED}
    return {sc: by for sc, by in scores.items() if sc not in UNTUNED}, untuned


def _show(number: int, seed: Seed, args: argparse.Namespace) -> None:
    print(f"\n## seed {number}: {seed.out}")
    tuned, untuned = apart(seed.scores)
    if tuned:
        report.scenario_table(tuned)
    if untuned:
        print("\nuntuned kinds (bench/detection/heldout.py):")
        report.scenario_table(untuned)
    if not seed.scores or PHASEWATCH not in report.detectors(seed.scores):
        return
    report.phasewatch_lines(seed.scores)
    samples = sum(item.rows for item in seed.written)
    seconds = sum(r.seconds for r in seed.replays.values())
    if seconds:
        print(f"backtest: {samples} samples in {seconds:.1f} s = {samples / seconds:,.0f}/s")
    if seed.oracle:
        oracle.event_table(seed.oracle)
        oracle.kind_table(seed.oracle)
        print(f"oracle: {len(seed.oracle)} changes in {seed.oracle_seconds:.1f} s")
    goals.show(f"seed {number}", goals.kind_checks(seed.scores, seed.oracle))
    if args.details:
        alerts = {sc: r.transitions for sc, r in seed.replays.items()}
        report.details(seed.scores, {sc: seed.labels[sc] for sc in seed.scores}, alerts)


def _save(number: int, seed: Seed) -> None:
    extra = {
        "seed": number,
        "backtest_seconds": {sc: r.seconds for sc, r in seed.replays.items()},
        "samples": {item.scenario: item.rows for item in seed.written},
        "oracle": oracle.as_json(seed.oracle),
        "oracle_seconds": seed.oracle_seconds,
    }
    report.save(seed.out / "results.json", seed.scores, extra)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_params(parser)
    parser.add_argument("--seeds", help="comma-separated: run each, then pool (e.g. 1,2,3)")
    parser.add_argument("--out", type=Path, help="corpus folder (default /tmp/...-<seed>)")
    parser.add_argument("--reuse", action="store_true", help="score the corpus already in --out")
    parser.add_argument(
        "--rescore", action="store_true", help="with --reuse: score the stored backtest output"
    )
    parser.add_argument("--no-phasewatch", action="store_true", help="baselines only")
    parser.add_argument("--timeout", type=float, default=3600, help="per backtest, seconds")
    parser.add_argument("--details", action="store_true", help="list misses and false alarms")
    parser.add_argument("--no-oracle", action="store_true", help="without the oracle's delays")
    parser.add_argument(
        "--held-out",
        default="",
        help="comma-separated seeds held out of tuning (e.g. 4,5): reported apart",
    )
    args = parser.parse_args()
    base, names = params_from(args), scenario_names(args)
    seeds = [int(s) for s in args.seeds.split(",")] if args.seeds else [base.seed]
    print(machine_info())
    if not args.no_phasewatch:
        print(f"phasewatch at {phasewatch_version()}")
    done: dict[int, Seed] = {}
    for number in seeds:
        params = replace(base, seed=number)
        out = _out(args.out, number, len(seeds))
        print(f"corpus {out}: {json.dumps(params.as_json())}")
        done[number] = run_seed(params, names, out, args)
        _show(number, done[number], args)
        _save(number, done[number])
    held = {int(s) for s in args.held_out.split(",") if s.strip()}
    groups = {
        "tuning seeds": {n: s for n, s in done.items() if n not in held},
        "held out of tuning": {n: s for n, s in done.items() if n in held},
    }
    for title, group in groups.items():
        if group and held:
            print(f"\n# {title}: seeds {', '.join(map(str, group))}")
        if group:
            _summary({n: s.scores for n, s in group.items()}, args.out, title if held else "")
            _pooled_oracle(group)


def _pooled_oracle(done: dict[int, Seed]) -> None:
    besides = [b for s in done.values() for b in s.oracle]
    if len(done) > 1 and besides:
        print(f"\n## oracle, seeds {', '.join(map(str, done))} pooled")
        oracle.kind_table(besides)
        pooled = report.pooled({n: s.scores for n, s in done.items()})
        goals.show(f"seeds {', '.join(map(str, done))} pooled", goals.kind_checks(pooled, besides))


def _out(base: Path | None, seed: int, count: int) -> Path:
    if base is None:
        return Path(f"/tmp/phasewatch-detection-{seed}")
    return base / f"seed-{seed}" if count > 1 else base


def _summary(per_seed: dict[int, Scores], out: Path | None, title: str = "") -> None:
    if len(per_seed) > 1:
        print(f"\n## {title or 'all seeds'} pooled")
        tuned, untuned = apart(report.pooled(per_seed))
        report.scenario_table(tuned)
        if untuned:
            print("\nuntuned kinds (bench/detection/heldout.py), pooled:")
            report.scenario_table(untuned)
    report.seed_table(per_seed)
    if PHASEWATCH not in report.detectors(next(iter(per_seed.values()))):
        return
    passed = [report.goals(seed, scores) for seed, scores in per_seed.items()]
    print(f"\ngoals met on {sum(passed)} of {len(passed)} seeds" + (f" ({title})" if title else ""))
    if len(per_seed) > 1 and out is not None:
        name = f"pooled-results{'-' + title.replace(' ', '-') if title else ''}.json"
        report.save(out / name, report.pooled(per_seed), {"seeds": list(per_seed)})


if __name__ == "__main__":
    main()
