"""The demo's story: what each simulated endpoint does, hour by hour. Pure data and lookups.

``translate-prod`` sits in a far region (275 ms round trip). For four hours reasoning is on
and generation dominates (about half of end-to-end); then reasoning is turned off,
generation falls to about 10 % and network (then queue) take over: ``dominant_shift``.
From hour 5.5 busy hours on the shared infrastructure raise the queue median by two thirds
(it stays under the round trip) and its p99 to about ten seconds: ``tail_shift``.

``translate-edge`` is a candidate near the user (25 ms round trip), tried from hour 4.5 to
hour 7, when network has just become prod's biggest phase. It generates 1.5 × slower, sits
on a small pool with a noisy queue, and scales to zero between runs, so each run opens on
a two-second cold start: requests miss the client's 1,500 ms deadline: ``deadline_miss``.

The last scene: from prod's own samples since reasoning went off, ``phasewatch whatif``
predicts what a dedicated deployment near the users would give (``NEARBY``).

The detector settings the compressed story needs (a reference after four runs instead of
a day's worth) are in ``TARGETS``, as a user would write them in a targets file (the demo
writes them out as one, for ``phasewatch backtest`` of its export); everything else is the
production default.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from app.demo.sim.core import SimConfig

HOUR_S = 3600.0


@dataclass(frozen=True)
class Endpoint:
    """One simulated endpoint: from which hour it is probed, and its configs by hour."""

    name: str
    probed_from_h: float
    probed_until_h: float
    changes: tuple[tuple[float, SimConfig], ...]  # (from hour, config), in order

    def config_at(self, hour: float) -> SimConfig:
        """The config in force at ``hour`` (the first one before the first change)."""
        current = self.changes[0][1]
        for starts_h, config in self.changes:
            if starts_h <= hour:
                current = config
        return current

    def probed_at(self, hour: float) -> bool:
        return self.probed_from_h <= hour < self.probed_until_h


PROD_REASONING = SimConfig(
    one_way_ms=137.5,
    queue_median_ms=150.0,
    queue_sigma=0.3,
    prefill_ms=40.0,
    tokens=4,
    tokens_per_s=50.0,
    reasoning_tokens=19,
    cold_after_idle_s=3600.0,
    seed=275,
)
PROD_DIRECT = replace(PROD_REASONING, reasoning_tokens=0)
# The median rises by half and stays under the round trip; the tail grows heavy.
PROD_BUSY = replace(PROD_DIRECT, queue_median_ms=250.0, queue_sigma=1.6)
EDGE = SimConfig(
    one_way_ms=12.5,
    queue_median_ms=400.0,
    queue_sigma=0.9,
    prefill_ms=60.0,
    tokens=4,
    tokens_per_s=50.0 / 1.5,
    cold_start_ms=2000.0,
    cold_after_idle_s=600.0,
    seed=25,
)

SWITCH_H = 4.0
# A dedicated fast chip close to the users: a 10 ms round trip, no shared queue, prefill
# and generation twice as fast. The story's finale predicts it for prod.
NEARBY = ("network=10ms", "queue=0", "prefill*0.5", "generation*0.5")
EDGE_FROM_H = 4.5
EDGE_UNTIL_H = 7.0
BUSY_H = 5.5
END_H = 8.5

ENDPOINTS = (
    Endpoint(
        "translate-prod",
        0.0,
        END_H,
        ((0.0, PROD_REASONING), (SWITCH_H, PROD_DIRECT), (BUSY_H, PROD_BUSY)),
    ),
    Endpoint("translate-edge", EDGE_FROM_H, EDGE_UNTIL_H, ((0.0, EDGE),)),
)
VANTAGES = ("seoul-old", "seoul-new")
INTERVAL_S = 1800.0
SAMPLES = 38
DEADLINE_MS = 1500.0

# What the demo's targets file would say, less the URLs (the sim's ports are known only
# once it listens). The compressed story cannot wait a day for a reference.
_STORY_ALERTS = {"min_reference_runs": 4, "min_reference_days": 0.06, "tail_min_days": 0}
_BODY = {
    "model": "translate-1",
    "stream": True,
    "messages": [{"role": "user", "content": "Translate to Korean: where is the station?"}],
}
TARGETS: dict[str, dict[str, Any]] = {
    "translate-prod": {
        "kind": "openai",
        "body": _BODY,
        "interval": INTERVAL_S,
        "samples": SAMPLES,
        "timeout": 30.0,
        "alerts": _STORY_ALERTS,
    },
    "translate-edge": {
        "kind": "openai",
        "body": _BODY,
        "interval": INTERVAL_S,
        "samples": SAMPLES,
        "deadline_ms": DEADLINE_MS,
        "alerts": _STORY_ALERTS,
    },
}


def endpoint(name: str) -> Endpoint:
    return next(e for e in ENDPOINTS if e.name == name)


def run_hours(offset_s: float, interval_s: float, start_h: float, end_h: float) -> list[float]:
    """The hours at which a target probed every ``interval_s``, first at ``offset_s`` into
    its interval, runs between ``start_h`` (included) and ``end_h`` (excluded)."""
    hours = []
    k = 0
    while (at := (offset_s + k * interval_s) / HOUR_S) < end_h:
        if at >= start_h:
            hours.append(at)
        k += 1
    return hours
