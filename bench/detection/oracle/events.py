"""The oracle's delay on each labelled change of a scenario, on the corpus's own samples.

For each abrupt change (one per group, optional ones left out): the one-vantage oracle on
the changed vantage (on each vantage when the change names none, the first to alarm
counts, as any vantage's alert detects it), and the pooled oracle on every vantage of the
target at once. Each CUSUM starts at 0 on the first changed run; its delay is the run
(1-based, as score.py counts) at which it reaches its threshold.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.detection.labels import Event, Labels, parse_time
from bench.detection.model import MICROS, Ints, Series
from bench.detection.oracle.cusum import Stream, alarms, calibrate, first_alarm
from bench.detection.oracle.regime import Fitted, cycle, fit, params_of, pooled, regimes, structural
from bench.detection.oracle.statistic import Floats, information, llr, run_stats

BUDGET = 0.5  # false alarms per target-month, shared by
DETECTORS = 3  # dominant_shift, tail_shift, deadline_miss
VANTAGES = 2
HORIZON_DAYS = 4.0
TIMED = ("ok", "deadline_exceeded")
KINDS = {
    "abrupt_generation_collapse": "generation collapse / regrowth",
    "generation_regrowth": "generation collapse / regrowth",
    "one_vantage_route": "one-vantage route",
    "queue_growth": "queue growth",
    "queue_tail_blowup": "queue tail blow-up",
    "persistent_violation_after_tail_change": "persistent tail",
    "uniform_slowdown": "uniform slowdown",
    "phase_slowdown": "phase slowdown",
}


def arl(interval_s: float, pooled: bool) -> float:
    """ARL₀ in runs of one stream: a vantage's, or a target's with its vantages pooled."""
    runs_per_month = 30 * 86400 / interval_s
    streams = DETECTORS * (1 if pooled else VANTAGES)
    return runs_per_month * streams / BUDGET


@dataclass(frozen=True, slots=True)
class Observed:
    """One series of the corpus: each run's slot and start (µs), and its samples."""

    slots: Ints
    starts: Ints
    values: Floats  # runs × samples × phases (the CSV's phase columns), NaN: not timed
    names: tuple[str, ...]

    def phases(self, series: Series) -> Floats:
        return self.values[:, :, [self.names.index(p) for p in series.phases]]


@dataclass(frozen=True, slots=True)
class OracleDelay:
    scenario: str
    group: str
    kind: str
    target: str
    vantage: str | None
    nats_one: float  # per run at the most informative vantage
    nats_pooled: float
    threshold_one: float
    threshold_pooled: float
    one: int | None  # None: no alarm within HORIZON_DAYS
    pooled: int | None
    pre_alarms: int  # the one-vantage CUSUMs on the runs before the change
    pre_runs: int


def read_observed(path: Path, targets: set[str], labels: Labels) -> dict[tuple[str, str], Observed]:
    """The runs of the given targets, per (target, vantage), in time order."""
    runs: dict[str, tuple[str, str, str, list[list[float]]]] = {}
    with path.open(newline="") as handle:
        reader = csv.reader(handle)
        names = tuple(name.removesuffix("_ms") for name in next(reader)[6:])
        for row in reader:
            if row[1] not in targets:
                continue
            rows = runs.setdefault(row[3], (row[1], row[2], row[0], []))[3]
            timed = row[4] in TIMED
            rows.append([float(c) if timed and c else math.nan for c in row[6:]])
    grouped: dict[tuple[str, str], list[tuple[str, list[list[float]]]]] = {}
    for target, vantage, first, rows in runs.values():
        grouped.setdefault((target, vantage), []).append((first, rows))
    return {key: _observed(found, names, labels) for key, found in grouped.items()}


def _observed(
    found: list[tuple[str, list[list[float]]]], names: tuple[str, ...], labels: Labels
) -> Observed:
    found.sort(key=lambda item: item[0])
    width = max(len(rows) for _, rows in found)
    values = np.full((len(found), width, len(names)), np.nan)
    for i, (_, rows) in enumerate(found):
        values[i, : len(rows)] = rows
    starts = np.array([int(parse_time(first).timestamp() * MICROS) for first, _ in found])
    origin = int(labels.start.timestamp() * MICROS)
    slots = (starts - origin) // int(labels.interval_s * MICROS)
    return Observed(slots, starts, values, names)


@dataclass(frozen=True, slots=True)
class Side:
    """One vantage of an event: its series, hypotheses, and per-slot statistics."""

    series: Series
    fitted: Fitted
    slots: Ints
    logmed: Floats
    counts: Floats


def side(series: Series, fitted: Fitted, observed: Observed) -> Side:
    values = observed.phases(series)
    kept = np.isfinite(values).any(axis=(1, 2)) & np.isfinite(values[:, :, fitted.load]).any(axis=1)
    stats = run_stats(values[kept], fitted.load, fitted.edges)
    logmed = stats.logmed.copy()
    logmed[:, fitted.load] -= np.log(cycle(series, observed.starts[kept]))
    return Side(series, fitted, observed.slots[kept], logmed, stats.counts)


def on_slots(increments: Floats, slots: Ints, first: int, count: int) -> Floats:
    """Per slot from ``first`` on (``count`` of them); a slot with no run adds 0."""
    out = np.zeros(count)
    inside = (slots >= first) & (slots < first + count)
    out[slots[inside] - first] = increments[inside]
    return out


@dataclass(frozen=True, slots=True)
class Verdict:
    delay: int | None
    threshold: float
    nats: float
    pre_alarms: int = 0
    pre_runs: int = 0


def _stream(sides: list[Side], labels: Labels) -> Stream:
    pre, post = (
        (sides[0].fitted.pre, sides[0].fitted.post)
        if len(sides) == 1
        else pooled([s.fitted for s in sides])
    )
    offsets = np.cumsum([0, *(len(s.fitted.pre.gauss.mean) for s in sides)])[:-1]
    loads = tuple(int(o) + s.fitted.load for o, s in zip(offsets, sides, strict=True))
    p = params_of(labels)
    null = tuple(s.fitted.null for s in sides)
    return Stream(pre, post, loads, p.load_sigma, p.load_rho, p.day_sigma, _per_day(labels), null)


def judge(sides: list[Side], labels: Labels, first: int, horizon: int) -> Verdict:
    """The oracle on these vantages together (one: a vantage alone), from slot ``first``."""
    stream = _stream(sides, labels)
    common = sides[0].slots
    for s in sides[1:]:
        common = np.intersect1d(common, s.slots)
    rows = [np.searchsorted(s.slots, common) for s in sides]
    logmed = np.concatenate([s.logmed[r] for s, r in zip(sides, rows, strict=True)], axis=1)
    counts = tuple(s.counts[r] for s, r in zip(sides, rows, strict=True))
    increments = llr(stream.pre, stream.post, logmed, counts)
    threshold = calibrate(stream, arl(labels.interval_s, pooled=len(sides) > 1))
    delay = first_alarm(on_slots(increments, common, first, horizon), threshold)
    before = increments[common < first]
    nats = information(stream.pre, stream.post, params_of(labels).samples)
    return Verdict(delay, threshold, nats, alarms(before, threshold), len(before))


def _per_day(labels: Labels) -> int:
    return max(1, int(86400 // labels.interval_s))


def event_delay(labels: Labels, event: Event, sides: list[Side]) -> OracleDelay:
    first = round((event.start - labels.start).total_seconds() / labels.interval_s)
    horizon = int(HORIZON_DAYS * _per_day(labels))
    changed = [s for s in sides if event.vantage in (None, s.series.vantage)]
    alone = [judge([s], labels, first, horizon) for s in changed]
    together = judge(sides, labels, first, horizon) if len(sides) > 1 else alone[0]
    delays = [v.delay for v in alone if v.delay is not None]
    return OracleDelay(
        scenario=labels.scenario,
        group=event.group,
        kind=_kind(labels.scenario, event.group),
        target=event.target,
        vantage=event.vantage,
        nats_one=float(max(v.nats for v in alone)),
        nats_pooled=float(together.nats),
        threshold_one=max(v.threshold for v in alone),
        threshold_pooled=together.threshold,
        one=min(delays) if delays else None,
        pooled=together.delay,
        pre_alarms=sum(v.pre_alarms for v in alone),
        pre_runs=sum(v.pre_runs for v in alone),
    )


def _kind(scenario: str, group: str) -> str:
    """A scenario's kind; the fleet's groups are ``<kind>:<id>`` (bench/detection/fleet.py)."""
    part, colon, _ = group.partition(":")
    name = part if colon else scenario
    return KINDS.get(name, name)


def changes(labels: Labels) -> list[Event]:
    """The abrupt changes with a delay: the first event of each required group."""
    found: dict[str, Event] = {}
    for event in labels.events:
        if event.abrupt and not event.slo and not event.optional:
            found.setdefault(event.group, event)
    return list(found.values())


def scenario_delays(labels: Labels, path: Path) -> list[OracleDelay]:
    """The oracle's delay on each abrupt change of one scenario's corpus file."""
    events = changes(labels)
    if not events:
        return []
    built = structural(labels)
    observed = read_observed(path, {e.target for e in events}, labels)
    params = params_of(labels)
    rng = np.random.default_rng([params.seed, 35])
    out = []
    for event in events:
        sides = []
        for series in built[event.target]:
            fitted = fit(*regimes(series, event.start), params, rng)
            sides.append(side(series, fitted, observed[event.target, series.vantage]))
        out.append(event_delay(labels, event, sides))
    return out
