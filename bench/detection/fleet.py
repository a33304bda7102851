"""A fleet-shaped corpus: hundreds of targets, most quiet, most seen from one vantage,
10 samples a run, with a few of every kind of change and nuisance among them.

One scenario (``fleet``) whose targets come from the standard builders, each kind in a
*part*: the part's targets are named ``fleet.<kind>.<name>`` and its events
``<kind>:<id>``, so the scores and the oracle can be read per kind (``split``). A part's
target keeps one vantage with probability ``fleet_one_vantage`` (near ties keep seoul-1,
where the tie is). The slow degradations fit in the fleet's 21 days: 5 days steady, then
14 days of drift.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from bench.detection import degradations, history, scenarios
from bench.detection.labels import Alert, Labels
from bench.detection.model import Load, Profile, Series
from bench.detection.scenario import CHAT, REASONING, VANTAGES, Context

NAME = "fleet"
SAMPLES = 10  # per run: what a fleet's probes can afford
QUEUE_BOUND = replace(
    CHAT,
    rtt_ms={"seoul-1": 45.0, "frankfurt-1": 130.0},
    server_ms={"queue": 350.0, "prefill": 30.0, "generation": 120.0, "transfer": 3.0},
)
HOMEPAGE = Profile(
    kind="http",
    rtt_ms={"seoul-1": 40.0, "frankfurt-1": 110.0},
    server_ms={"server": 260.0, "transfer": 15.0},
)


def quiet_mix(ctx: Context) -> None:
    """Chat, reasoning with a deadline, queue-bound and plain HTTP targets, in turn."""
    deadline = replace(REASONING, deadline_ms=ctx.params.deadline_ms)
    profiles = (("chat", CHAT), ("reasoning", deadline), ("queue", QUEUE_BOUND))
    profiles += (("http", HOMEPAGE),)
    for n in range(ctx.params.replicas):
        label, profile = profiles[n % len(profiles)]
        ctx.target(f"{label}{n}", ctx.jittered(profile), f"quiet {label}")


Builder = Callable[[Context], None]
# kind → (builder, targets, the vantage a one-vantage target keeps: None = drawn)
PARTS: dict[str, tuple[Builder, str, str | None]] = {
    "quiet": (quiet_mix, "fleet_quiet", None),
    "near_tie": (scenarios.near_tie, "fleet_near_ties", "seoul-1"),
    "correlated_runs": (history.correlated_runs, "fleet_correlated", None),
    "uniform_slowdown": (degradations.uniform_slowdown, "fleet_uniform", None),
    "phase_slowdown": (degradations.phase_slowdown, "fleet_phase", None),
    "slow_queue_tail_degradation": (
        degradations.slow_queue_tail_degradation,
        "fleet_slow_tail",
        None,
    ),
    "slow_generation_growth": (degradations.slow_generation_growth, "fleet_slow_gen", None),
    "abrupt_generation_collapse": (
        scenarios.abrupt_generation_collapse,
        "fleet_collapses",
        None,
    ),
    "queue_growth": (history.queue_growth, "fleet_queue_growths", None),
    "one_vantage_route": (scenarios.one_vantage_route, "fleet_routes", None),
}


class Part(Context):
    """One kind's share of the fleet: its own random generator, names and replicas, the
    fleet's scenario and run grid."""

    def __init__(self, fleet: Context, kind: str, replicas: int, keep: str | None) -> None:
        p = fleet.params
        self.params = replace(
            p, replicas=replicas, degradation_days=p.fleet_days, steady_days=5.0, drift_days=14.0
        )
        self.rng = np.random.default_rng([p.seed, zlib.crc32(f"{NAME}:{kind}".encode())])
        self.scenario = fleet.scenario
        self.slots = fleet.slots
        self.kind = kind
        self.keep = keep

    def target(
        self, name: str, profile: Profile, note: str = "", load: Load | None = None
    ) -> list[Series]:
        if self.rng.random() < self.params.fleet_one_vantage:
            kept = self.keep or str(self.rng.choice(VANTAGES))
            profile = replace(profile, rtt_ms={kept: profile.rtt_ms[kept]})
        return super().target(f"{self.kind}.{name}", profile, note, load)

    def event(self, **fields: Any) -> None:
        fields["id"] = f"{self.kind}:{fields['id']}"
        super().event(**fields)


def fleet(ctx: Context) -> None:
    for kind, (builder, count, keep) in PARTS.items():
        builder(Part(ctx, kind, int(getattr(ctx.params, count)), keep))


def kind_of(target: str) -> str:
    """A fleet target's kind: ``fleet.<kind>.<name>`` → ``<kind>``."""
    return target.split(".")[1]


def split(labels: Labels) -> dict[str, Labels]:
    """The fleet's labels, one set per kind (its targets and their events)."""
    out: dict[str, Labels] = {}
    for kind in dict.fromkeys(kind_of(t.name) for t in labels.targets):
        targets = tuple(t for t in labels.targets if kind_of(t.name) == kind)
        names = {t.name for t in targets}
        events = tuple(e for e in labels.events if e.target in names)
        out[f"{NAME}/{kind}"] = replace(labels, targets=targets, events=events)
    return out


def alerts_of(labels: Labels, alerts: list[Alert]) -> list[Alert]:
    names = {t.name for t in labels.targets}
    return [a for a in alerts if a.target in names]
