"""Generate the labelled corpus: per scenario a CSV of samples, its labels, a targets file.

    .venv/bin/python -m bench.detection.generate --out /tmp/detection --seed 1
    .venv/bin/python -m bench.detection.generate --out /tmp/d2 --seed 7 --days 12 --samples 30

Writes ``<scenario>.csv`` (the layout of app.csvio.layout: rows ordered by timestamp,
run id, then index in the run), ``<scenario>.labels.json`` (bench.detection.labels) and
``<scenario>.targets.yaml`` (the targets with their deadlines, for ``backtest --config``),
and prints what each target's series look like, so a label can be checked by eye.
"""

from __future__ import annotations

import argparse
import json
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import yaml

from app.csvio.layout import header, phase_order
from bench.detection.catalog import DEFAULT, SCENARIOS, UNTUNED, build
from bench.detection.fleet import NAME as FLEET
from bench.detection.fleet import SAMPLES as FLEET_SAMPLES
from bench.detection.labels import write_labels
from bench.detection.model import STATUS_DEADLINE, STATUS_NAMES, STATUS_OK, Drawn, draw
from bench.detection.scenario import Params, Scenario


@dataclass(frozen=True, slots=True)
class Written:
    scenario: str
    csv: Path
    labels: Path
    targets: Path
    rows: int

    @classmethod
    def at(cls, out: Path, scenario: str, rows: int) -> Written:
        def path(suffix: str) -> Path:
            return out / f"{scenario}{suffix}"

        return cls(scenario, path(".csv"), path(".labels.json"), path(".targets.yaml"), rows)


def generate(
    out: Path, params: Params, names: Sequence[str], *, verbose: bool = True
) -> list[Written]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name in names:
        scenario = build(name, params)
        rng = np.random.default_rng([params.seed, zlib.crc32(name.encode()), 7])
        drawn = [draw(s, params.samples, params.spacing_s, rng) for s in scenario.series]
        written.append(_write(out, scenario, drawn))
        if verbose:
            _describe(scenario, drawn, written[-1].rows)
    (out / "corpus.json").write_text(
        json.dumps({"params": params.as_json(), "scenarios": list(names)}, indent=2) + "\n"
    )
    return written


def _write(out: Path, scenario: Scenario, drawn: list[Drawn]) -> Written:
    written = Written.at(out, scenario.name, 0)
    rows = write_csv(written.csv, drawn)
    write_labels(scenario.labels(), written.labels)
    written.targets.write_text(yaml.safe_dump(_targets_file(scenario), sort_keys=False))
    return Written.at(out, scenario.name, rows)


def write_csv(path: Path, drawn: list[Drawn], chunk: int = 200_000) -> int:
    """Rows in time order (then run id, index in the run); the text is made ``chunk``
    rows at a time, so a fleet of millions of rows fits in memory."""
    names = phase_order(name for d in drawn for name in d.phase_names)
    columns = _columns(drawn, names)
    order = np.lexsort((columns["idx"], columns["run_rank"], columns["started"]))
    run_ids = [run_id for d in drawn for run_id in d.run_ids]
    places = [f"{d.series.target},{d.series.vantage}" for d in drawn]
    with path.open("w") as out:
        out.write(",".join(header(names)) + "\n")
        for low in range(0, len(order), chunk):
            rows = order[low : low + chunk]
            stamps = np.datetime_as_string(
                columns["started"][rows].astype("datetime64[us]"), unit="us"
            ).tolist()
            place = [places[i] for i in columns["series"][rows].tolist()]
            run = [run_ids[i] for i in columns["run"][rows].tolist()]
            status = np.array(STATUS_NAMES)[columns["status"][rows]].tolist()
            total = _numbers(columns["total"][rows])
            phases = [_numbers(columns["phases"][rows, i]) for i in range(len(names))]
            for i, stamp in enumerate(stamps):
                cells = [stamp + "Z", place[i], run[i], status[i], total[i]]
                cells += [p[i] for p in phases]
                out.write(",".join(cells) + "\n")
    return len(order)


def _columns(drawn: list[Drawn], names: Sequence[str]) -> dict[str, np.ndarray]:
    """Per row: start, index in the run, the run (a number: its place in ``drawn``'s run
    ids, and its rank among them), the series, status, total, phases."""
    parts: dict[str, list[np.ndarray]] = {key: [] for key in _KEYS}
    runs_before = 0
    for n, d in enumerate(drawn):
        runs, samples = d.status.shape
        parts["started"].append(d.started.ravel())
        parts["idx"].append(np.tile(np.arange(samples, dtype=np.int32), runs))
        parts["run"].append(np.repeat(np.arange(runs_before, runs_before + runs), samples))
        parts["series"].append(np.full(runs * samples, n, dtype=np.int32))
        parts["status"].append(d.status.ravel())
        parts["total"].append(d.total.ravel())
        aligned = np.full((runs * samples, len(names)), np.nan)
        for j, name in enumerate(d.phase_names):
            aligned[:, names.index(name)] = d.phases[:, :, j].ravel()
        parts["phases"].append(aligned)
        runs_before += runs
    columns = {key: np.concatenate(value) for key, value in parts.items()}
    # Runs that start together are ordered by their ids, as text.
    ids = np.array([run_id for d in drawn for run_id in d.run_ids])
    rank = np.empty(len(ids), dtype=np.int64)
    rank[np.argsort(ids, kind="stable")] = np.arange(len(ids))
    columns["run_rank"] = rank[columns["run"]]
    return columns


_KEYS = ("started", "idx", "run", "series", "status", "total", "phases")


def _numbers(values: np.ndarray) -> list[str]:
    return ["" if v != v else repr(v + 0.0) for v in values.tolist()]


def _targets_file(scenario: Scenario) -> dict[str, object]:
    targets = []
    for info in scenario.targets:
        target: dict[str, object] = {
            "name": info.name,
            "kind": info.kind,
            "url": f"https://{info.name.replace('_', '-').replace('.', '-')}.example.invalid/",
            "interval": f"{scenario.params.interval_s:g}s",
            "samples": scenario.params.samples,
        }
        if info.deadline_ms is not None:
            target["deadline_ms"] = info.deadline_ms
        targets.append(target)
    return {"targets": targets}


def _describe(scenario: Scenario, drawn: list[Drawn], rows: int) -> None:
    print(f"{scenario.name}: {rows} samples, {len(scenario.targets)} targets")
    changes = {e.target: e.start for e in scenario.events if not e.slo}
    for d in drawn:
        cut = changes.get(d.series.target)
        runs = np.arange(len(d.series.starts))
        before = d.series.starts < (cut.timestamp() * 1e6 if cut else np.inf)
        parts = [_mix(d, runs[before], "before" if cut else "all")]
        if cut is not None:
            parts.append(_mix(d, runs[~before], "after"))
        print(f"  {d.series.target}@{d.series.vantage}: " + " | ".join(parts))
    for event in scenario.events:
        window = f"{event.window[0]:%m-%d %H:%M}..{event.window[1]:%m-%d %H:%M}"
        print(f"  event {event.id} {event.kind} @{event.vantage or '*'} {window}: {event.note}")


def _mix(d: Drawn, runs: np.ndarray, label: str) -> str:
    if not len(runs):
        return f"{label}: -"
    status = d.status[runs]
    timed = (status == STATUS_OK) | (status == STATUS_DEADLINE)
    phases = d.phases[runs][timed]
    medians = np.median(phases, axis=0)
    shares = medians / medians.sum()
    ranked = np.argsort(-shares)[:2]
    lead = " ".join(f"{d.phase_names[i]} {shares[i]:.0%}" for i in ranked)
    totals = d.total[runs][timed]
    p50, p95 = np.percentile(totals, [50, 95])
    misses = np.mean(status[timed] == STATUS_DEADLINE)
    miss = f" miss {misses:.1%}" if d.series.profile.deadline_ms else ""
    return f"{label}: {lead}, p50 {p50:.0f} p95 {p95:.0f}{miss}"


def add_params(parser: argparse.ArgumentParser) -> None:
    defaults = Params()
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--days", type=float, default=defaults.days)
    parser.add_argument("--quiet-days", type=float, default=defaults.quiet_days)
    parser.add_argument(
        "--samples", type=int, help=f"per run (default {defaults.samples}, fleet {FLEET_SAMPLES})"
    )
    parser.add_argument("--interval", type=float, default=defaults.interval_s, help="seconds")
    parser.add_argument(
        "--replicas", type=int, default=defaults.replicas, help="targets per scenario"
    )
    parser.add_argument("--deadline-ms", type=float, default=defaults.deadline_ms)
    parser.add_argument("--start", default=defaults.start.isoformat(), help="ISO-8601, UTC")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KNOB=VALUE",
        help="any other Params field, e.g. --set tail_share=0.08 --set busy_factor=2.5",
    )
    parser.add_argument(
        "--scenarios",
        default=",".join(DEFAULT),
        help="comma-separated; default all but the fleet and the untuned kinds",
    )
    parser.add_argument(
        "--fleet", action="store_true", help="the fleet corpus alone (bench/detection/fleet.py)"
    )
    parser.add_argument(
        "--untuned",
        action="store_true",
        help="add the untuned kinds (bench/detection/heldout.py), reported apart",
    )


def params_from(args: argparse.Namespace) -> Params:
    start = datetime.fromisoformat(args.start)
    knobs: dict[str, object] = {}
    for item in args.set:
        key, _, value = item.partition("=")
        current = getattr(Params(), key)
        knobs[key] = (
            tuple(float(v) for v in value.split(","))
            if isinstance(current, tuple)
            else type(current)(value)
        )
    return Params(
        seed=args.seed,
        days=args.days,
        quiet_days=args.quiet_days,
        samples=args.samples or (FLEET_SAMPLES if args.fleet else Params().samples),
        interval_s=args.interval,
        replicas=args.replicas,
        deadline_ms=args.deadline_ms,
        start=start if start.tzinfo else start.replace(tzinfo=UTC),
        **knobs,  # type: ignore[arg-type]
    )


def scenario_names(args: argparse.Namespace) -> list[str]:
    if args.fleet:
        return [FLEET]
    names = [name.strip() for name in args.scenarios.split(",") if name.strip()]
    names += [name for name in UNTUNED if args.untuned and name not in names]
    unknown = sorted(set(names).difference(SCENARIOS))
    if unknown:
        raise SystemExit(f"unknown scenarios {unknown}; known: {', '.join(SCENARIOS)}")
    return names


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    add_params(parser)
    args = parser.parse_args()
    generate(args.out, params_from(args), scenario_names(args))


if __name__ == "__main__":
    main()
