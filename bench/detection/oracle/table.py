"""The oracle beside phasewatch: one row per change, then one per kind of change.

The ratio is phasewatch's delay over the oracle's (one vantage / both pooled); a change
phasewatch missed has no delay and no ratio. Per kind: the medians of each column over
the kind's changes (every seed's), and the ratio of the medians.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.common import print_table
from bench.detection.labels import Alert, Labels
from bench.detection.oracle.events import OracleDelay, scenario_delays
from bench.detection.score import first_detections


@dataclass(frozen=True, slots=True)
class Beside:
    """The oracle's delays on one change and phasewatch's (None: missed / no alarm)."""

    oracle: OracleDelay
    phasewatch: int | None


def phasewatch_delays(labels: Labels, alerts: list[Alert]) -> dict[str, int]:
    """The run of phasewatch's first detecting alert, per group."""
    starts = {e.group: e.start for e in labels.events if not e.optional}
    found = first_detections(labels, alerts)
    return {
        group: int((alert.at - starts[group]).total_seconds() // labels.interval_s) + 1
        for group, alert in found.items()
    }


def beside(labels: Labels, csv: Path, alerts: list[Alert] | None) -> list[Beside]:
    """The oracle's delays on a scenario's changes, phasewatch's beside them."""
    ours = phasewatch_delays(labels, alerts) if alerts is not None else {}
    return [Beside(o, ours.get(o.group)) for o in scenario_delays(labels, csv)]


def ratio(ours: int | float | None, oracle: int | float | None) -> str:
    if ours is None or oracle is None or oracle == 0:
        return "-"
    return f"{ours / oracle:.1f}×"


def runs(value: int | float | None) -> str:
    if value is None:
        return "-"
    return f"{value:g}"


def event_table(rows: Sequence[Beside]) -> None:
    headers = ["change", "kind", "nats/run", "h (nats)", "oracle", "phasewatch", "ratio"]
    headers += ["oracle alarms before"]
    print("\noracle beside phasewatch, each change (one vantage / both pooled):")
    print_table(headers, [_event_row(b) for b in rows])


def _event_row(b: Beside) -> list[str]:
    o = b.oracle
    return [
        o.group,
        o.kind,
        f"{o.nats_one:.1f} / {o.nats_pooled:.1f}",
        f"{o.threshold_one:.1f} / {o.threshold_pooled:.1f}",
        f"{runs(o.one)} / {runs(o.pooled)}",
        runs(b.phasewatch),
        f"{ratio(b.phasewatch, o.one)} / {ratio(b.phasewatch, o.pooled)}",
        f"{o.pre_alarms} in {o.pre_runs} runs",
    ]


def kind_table(rows: Sequence[Beside]) -> None:
    kinds: dict[str, list[Beside]] = {}
    for b in rows:
        kinds.setdefault(b.oracle.kind, []).append(b)
    headers = ["kind", "changes", "nats/run, one vantage", "oracle, one / pooled"]
    headers += ["phasewatch", "ratio, one / pooled"]
    print("\noracle beside phasewatch, per kind (medians):")
    print_table(headers, [_kind_row(kind, found) for kind, found in kinds.items()])
    pre = sum(b.oracle.pre_alarms for b in rows)
    looked = sum(b.oracle.pre_runs for b in rows)
    print(f"one-vantage oracle on the runs before the changes: {pre} alarms in {looked} runs")


def _median(values: Sequence[int | float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return statistics.median(kept) if kept else None


def _kind_row(kind: str, found: list[Beside]) -> list[str]:
    one = _median([b.oracle.one for b in found])
    both = _median([b.oracle.pooled for b in found])
    ours = _median([b.phasewatch for b in found])
    nats = [b.oracle.nats_one for b in found]
    missed = sum(b.phasewatch is None for b in found)
    return [
        kind,
        str(len(found)),
        f"{min(nats):.1f}–{max(nats):.1f}",
        f"{runs(one)} / {runs(both)}",
        runs(ours) + (f" ({missed} missed)" if missed else ""),
        f"{ratio(ours, one)} / {ratio(ours, both)}",
    ]


def as_json(rows: Sequence[Beside]) -> list[dict[str, Any]]:
    return [{**asdict(b.oracle), "phasewatch": b.phasewatch} for b in rows]
