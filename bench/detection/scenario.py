"""What every scenario builder shares: the parameters, the run grid, targets, events.

A builder gets a ``Context`` (parameters and its own random generator) and returns a
``Scenario``: the series to draw and the labels. Changes start on a run boundary, so
the first run at or after ``start`` is the first one that shows them.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from bench.detection.labels import Event, Labels, TargetInfo
from bench.detection.model import (
    MICROS,
    Floats,
    Ints,
    Load,
    Profile,
    Series,
    make_series,
    shared_load,
)

DAY = timedelta(days=1)
VANTAGES = ("seoul-1", "frankfurt-1")

# Network + queue + prefill ≈ 40 %, generation (reasoning tokens) ≈ 60 %.
REASONING = Profile(
    kind="openai",
    rtt_ms={"seoul-1": 45.0, "frankfurt-1": 200.0},
    server_ms={"queue": 110.0, "prefill": 50.0, "generation": 450.0, "transfer": 3.0},
)
CHAT = Profile(
    kind="openai",
    rtt_ms={"seoul-1": 60.0, "frankfurt-1": 150.0},
    server_ms={"queue": 150.0, "prefill": 40.0, "generation": 300.0, "transfer": 3.0},
)
ABRUPT = ("composition_shift",)  # true of any abrupt change of the mix: tolerated
# True of any change that makes the target slower: its level moved, and it drifted
# away from any older baseline.
SLOWER = ("level_shift", "baseline_drift")


@dataclass(frozen=True, slots=True)
class Params:
    seed: int = 1
    days: float = 14.0
    quiet_days: float = 30.0
    interval_s: float = 900.0
    samples: int = 20
    spacing_s: float = 1.0
    jitter_s: float = 30.0
    replicas: int = 2  # targets per event scenario
    deadline_ms: float = 1500.0
    skip_p: float = 0.002  # a run that did not happen (probe host restarting)
    profile_spread: float = 0.1  # each steady-state median × U(1 − this, 1 + this)
    start: datetime = datetime(2025, 3, 3, tzinfo=UTC)  # a Monday
    # Scenario knobs (see the builders): the size of each phenomenon.
    collapse_factor: float = 0.08
    drift_to: float = 0.2
    tail_share: float = 0.12
    tail_scale: float = 3.0
    busy_hours: int = 3
    busy_factor: float = 2.2
    tie_gap: tuple[float, float] = (0.027, 0.054)
    route_extra_ms: float = 150.0
    edge_slowdown: float = 1.5
    edge_cold_p: float = 0.5
    bad_runs: int = 6
    # Shared load on every target (model.shared_load): log-sd, lag-1 correlation, per day.
    load_sigma: float = 0.2
    load_rho: float = 0.7
    day_sigma: float = 0.08
    weekends_days: float = 22.0  # quiet_weekends: days (≥ 3 weekends)
    gap_hours: float = 6.0  # probing_gap: hours without runs
    slo_objective: float = 0.01  # share of timed samples allowed to miss the deadline
    slo_tail_share: float = 0.15  # persistent_violation_after_tail_change: tailed samples
    slo_tail_scale: float = 4.0  # … and the tail's scale × the queue median
    queue_growth: float = 4.5  # queue_growth: the queue median × this
    slowdown: float = 1.25  # uniform_slowdown: every phase × this
    phase_slowdown: float = 2.0  # phase_slowdown: prefill or transfer × this
    degradation_days: float = 35.0  # slow_*: days (a steady week, the drift, steady again)
    steady_days: float = 7.0  # slow_*: days before the drift starts (+ up to one)
    drift_days: float = 21.0  # slow_*: the drift's length
    tail_drift: tuple[float, float] = (0.02, 0.12)  # slow_queue_tail_degradation: tail share
    growth_to: float = 1.6  # slow_generation_growth: generation × this at the end
    # The fleet (bench/detection/fleet.py): its days, one-vantage share, targets per kind.
    fleet_days: float = 21.0
    fleet_one_vantage: float = 0.7
    fleet_quiet: int = 170
    fleet_near_ties: int = 15
    fleet_correlated: int = 10
    fleet_uniform: int = 3
    fleet_phase: int = 3
    fleet_slow_tail: int = 5
    fleet_slow_gen: int = 5
    fleet_collapses: int = 3
    fleet_queue_growths: int = 3
    fleet_routes: int = 3
    # The untuned kinds (bench/detection/heldout.py).
    heldout_days: float = 22.0

    @property
    def load(self) -> Load:
        return Load(self.load_sigma, self.load_rho, self.day_sigma)

    def as_json(self) -> dict[str, Any]:
        raw = {name: getattr(self, name) for name in self.__dataclass_fields__}
        raw["start"] = self.start.isoformat()
        raw["tie_gap"] = list(self.tie_gap)
        raw["tail_drift"] = list(self.tail_drift)
        return raw


@dataclass(slots=True)
class Scenario:
    name: str
    description: str
    params: Params
    start: datetime
    end: datetime
    series: list[Series] = field(default_factory=list)
    targets: list[TargetInfo] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)

    def labels(self) -> Labels:
        return Labels(
            scenario=self.name,
            description=self.description,
            start=self.start,
            end=self.end,
            interval_s=self.params.interval_s,
            samples_per_run=self.params.samples,
            targets=tuple(self.targets),
            events=tuple(self.events),
            params=self.params.as_json(),
        )


class Context:
    """One scenario's parameters, random generator and run grid."""

    def __init__(self, name: str, description: str, params: Params, days: float) -> None:
        self.params = params
        self.rng = np.random.default_rng([params.seed, zlib.crc32(name.encode())])
        end = params.start + timedelta(days=days)
        self.scenario = Scenario(name, description, params, params.start, end)
        self.slots = int(days * 86400 // params.interval_s)

    @property
    def start(self) -> datetime:
        return self.scenario.start

    def at_fraction(self, low: float, high: float) -> datetime:
        """A run boundary drawn uniformly between two fractions of the scenario."""
        slot = int(self.rng.uniform(low, high) * self.slots)
        return self.start + timedelta(seconds=slot * self.params.interval_s)

    def jittered(self, profile: Profile) -> Profile:
        spread = self.params.profile_spread

        def one(value: float) -> float:
            return float(value * self.rng.uniform(1 - spread, 1 + spread))

        return replace(
            profile,
            rtt_ms={k: one(v) for k, v in profile.rtt_ms.items()},
            server_ms={k: (one(v) if k != "transfer" else v) for k, v in profile.server_ms.items()},
        )

    def target(
        self, name: str, profile: Profile, note: str = "", load: Load | None = None
    ) -> list[Series]:
        """The target's series, one per vantage of its profile, added to the scenario.
        The shared load is the target's: every vantage sees the same one."""
        full = f"{self.scenario.name}.{name}"
        per_day = int(86400 // self.params.interval_s)
        factor = shared_load(self.slots, per_day, load or self.params.load, self.rng)
        found = []
        for vantage in profile.rtt_ms:
            starts, slots = self._starts()
            found.append(make_series(full, vantage, profile, starts, factor[slots]))
        self.scenario.series.extend(found)
        info = TargetInfo(full, profile.kind, tuple(profile.rtt_ms), profile.deadline_ms, note)
        self.scenario.targets.append(info)
        return found

    def event(self, **fields: Any) -> None:
        fields.setdefault("group", fields["id"])
        window = fields["window"]
        fields["window"] = (window[0], min(window[1], self.scenario.end))
        self.scenario.events.append(Event(**fields))

    def _starts(self) -> tuple[Ints, Ints]:
        """Run starts (up to ``jitter_s`` late, a few skipped) and their slot numbers."""
        p = self.params
        base = int(self.start.timestamp() * MICROS)
        slots = np.arange(self.slots, dtype=np.int64) * int(p.interval_s * MICROS)
        jitter = (self.rng.uniform(0, p.jitter_s, self.slots) * MICROS).astype(np.int64)
        kept = np.flatnonzero(self.rng.random(self.slots) >= p.skip_p)
        return np.asarray((base + slots + jitter)[kept], dtype=np.int64), kept


def after(series: Series, moment: datetime) -> np.ndarray[Any, np.dtype[np.bool_]]:
    return np.asarray(series.starts >= int(moment.timestamp() * MICROS))


def heavier_tail(series: list[Series], moment: datetime, share: float, scale: float) -> None:
    """From ``moment`` on, ``share`` of samples get the queue tail, ``scale`` × longer."""
    for s in series:
        later = after(s, moment)
        s.tail_p[later] = share
        s.tail_scale_ms[later] *= scale


def weekend(series: Series) -> np.ndarray[Any, np.dtype[np.bool_]]:
    days = (series.starts // (86400 * MICROS)).astype(np.int64)
    return np.asarray((days + 3) % 7 >= 5)  # 1970-01-01 was a Thursday


def drop_runs(series: Series, gone: np.ndarray[Any, np.dtype[np.bool_]]) -> None:
    """Take runs out of the series (the probe did not run): every per-run array."""
    kept = ~gone
    for name in (
        "starts",
        "medians",
        "run_sigma",
        "sample_sigma",
        "tail_p",
        "tail_scale_ms",
        "cold_p",
        "cold_ms",
        "error_p",
        "slow",
    ):
        setattr(series, name, getattr(series, name)[kept])


def hours(series: Series) -> Floats:
    return np.asarray((series.starts / MICROS % 86400) / 3600, dtype=np.float64)


def day_mean(values: Floats, interval_s: float) -> Floats:
    """A centred 24-hour moving mean: a median freed of the daily cycle."""
    width = max(1, int(86400 // interval_s))
    padded = np.pad(values, (width // 2, width - 1 - width // 2), mode="edge")
    return np.convolve(padded, np.ones(width) / width, mode="valid")


def leaders(series: Series, smooth: Callable[[Floats], Floats] | None = None) -> list[str]:
    """The dominant phase of each run from the model's medians (no noise)."""
    medians = series.medians.copy()
    if smooth is not None:
        medians = np.stack([smooth(column) for column in medians.T], axis=1)
    return [series.phases[i] for i in np.argmax(medians, axis=1)]


def leader_change(series: Series, moment: datetime, interval_s: float) -> tuple[str, str]:
    """The day-averaged leader just before and a day after ``moment``."""
    smoothed = leaders(series, lambda column: day_mean(column, interval_s))
    index = int(np.searchsorted(series.starts, int(moment.timestamp() * MICROS)))
    later = min(len(smoothed) - 1, index + int(86400 // interval_s))
    return smoothed[max(0, index - 1)], smoothed[later]
