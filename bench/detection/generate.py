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
from bench.detection.catalog import SCENARIOS, build
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


def write_csv(path: Path, drawn: list[Drawn]) -> int:
    names = phase_order(name for d in drawn for name in d.phase_names)
    columns = _columns(drawn, names)
    order = np.lexsort((columns["idx"], columns["run_rank"], columns["started"]))
    stamps = np.datetime_as_string(columns["started"][order].astype("datetime64[us]"), unit="us")
    text = {
        "target": columns["target"][order].tolist(),
        "vantage": columns["vantage"][order].tolist(),
        "run_id": columns["run_id"][order].tolist(),
        "status": np.array(STATUS_NAMES)[columns["status"][order]].tolist(),
        "total": _numbers(columns["total"][order]),
    }
    phases = [_numbers(columns["phases"][order, i]) for i in range(len(names))]
    with path.open("w") as out:
        out.write(",".join(header(names)) + "\n")
        for i, stamp in enumerate(stamps.tolist()):
            cells = [stamp + "Z", text["target"][i], text["vantage"][i], text["run_id"][i]]
            cells += [text["status"][i], text["total"][i], *(p[i] for p in phases)]
            out.write(",".join(cells) + "\n")
    return len(order)


def _columns(drawn: list[Drawn], names: Sequence[str]) -> dict[str, np.ndarray]:
    parts: dict[str, list[np.ndarray]] = {key: [] for key in _KEYS}
    for d in drawn:
        runs, samples = d.status.shape
        parts["started"].append(d.started.ravel())
        parts["idx"].append(np.tile(np.arange(samples), runs))
        parts["run_id"].append(np.repeat(np.array(d.run_ids), samples))
        parts["target"].append(np.full(runs * samples, d.series.target, dtype=object))
        parts["vantage"].append(np.full(runs * samples, d.series.vantage, dtype=object))
        parts["status"].append(d.status.ravel())
        parts["total"].append(d.total.ravel())
        aligned = np.full((runs * samples, len(names)), np.nan)
        for j, name in enumerate(d.phase_names):
            aligned[:, names.index(name)] = d.phases[:, :, j].ravel()
        parts["phases"].append(aligned)
    columns = {key: np.concatenate(value) for key, value in parts.items()}
    columns["run_rank"] = np.unique(columns["run_id"], return_inverse=True)[1]
    return columns


_KEYS = ("started", "idx", "run_id", "target", "vantage", "status", "total", "phases")


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
    parser.add_argument("--samples", type=int, default=defaults.samples, help="per run")
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
        "--scenarios", default=",".join(SCENARIOS), help="comma-separated, default all"
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
        samples=args.samples,
        interval_s=args.interval,
        replicas=args.replicas,
        deadline_ms=args.deadline_ms,
        start=start if start.tzinfo else start.replace(tzinfo=UTC),
        **knobs,  # type: ignore[arg-type]
    )


def scenario_names(args: argparse.Namespace) -> list[str]:
    names = [name.strip() for name in args.scenarios.split(",") if name.strip()]
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
