"""dominant_shift of a target seen from one vantage: the pooled lane over that vantage
alone, its step guards (steady_z, step_z) in either case (app.alerts.crossvantage
``_alone``; bench/detection/README.md, "fleetq" and "fleetq2"); and a pending shift at one
vantage that keeps its winner."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

import numpy as np
import pytest

from app.alerts.pooling import STEADY_Z
from app.analysis.detectors import DetectorParams
from tests.alerts.test_evaluator import Mix, Replay, states, switch, timeline
from tests.alerts.test_level_shift import (
    CHANGE,
    END,
    NET,
    busy,
    queue_by_run,
    runs_to_fire,
    times,
)

PARAMS = DetectorParams(enabled=("dominant_shift",), resamples=200)


@pytest.mark.parametrize(
    "factors",
    [
        [4.5],  # × 4.5 from then on: leads every run
        [4.5, 3.0] * 12,  # × 4.5 and × 3 in turn: grown every run, leading every other
        [3.0, 4.5] * 12,
    ],
)
def test_a_queue_grown_at_the_only_vantage_fires_within_three_runs(factors: list[float]) -> None:
    replay = Replay(PARAMS)
    replay.feed(timeline(7, {"eu": queue_by_run(factors, NET)}, end=END))
    firing = [t for t in replay.changes() if t.after.value == "firing"]
    assert runs_to_fire(replay, "dominant_shift")[:1] in ([1], [2], [3])
    identity = firing[0].identity
    assert (identity.scope, identity.vantage, identity.to_phase) == ("vantage", "eu", "queue")
    assert float(firing[0].numbers["pooled_least_z"]) >= STEADY_Z
    assert float(firing[0].numbers["pooled_step_z"]) >= PARAMS.pooled_min_z


@pytest.mark.parametrize(
    "factors",
    [
        [20.0, 1.0],  # one wild run of the queue
        [20.0, 20.0, 1.0],  # two wild runs: no step guard holds two runs of a burst alone
    ],
)
def test_a_burst_of_the_queue_at_the_only_vantage_is_not_the_lane(factors: list[float]) -> None:
    replay = Replay(PARAMS)
    replay.feed(timeline(7, {"eu": queue_by_run(factors, NET)}, end=END))
    assert [t for t in replay.changes() if "pooled_z" in t.numbers] == []


def test_busy_hours_seen_every_day_at_the_only_vantage_are_not_the_lane() -> None:
    # The queue × 2.2 (132 ms) from 15:00 every day: these hours' normal, not a step.
    replay = Replay(PARAMS)
    replay.feed(timeline(7, {"eu": busy(NET)}, end=END))
    assert replay.changes() == []


def noisy_queue(seed: int, growth: float, spread: float = 0.4) -> Callable[[datetime], Mix]:
    """NET with the queue × e^N(0, spread) a run (its own load, the fleet's 10-sample
    queue strays ~0.3–0.4 in log from its hours' level), × ``growth`` from CHANGE on."""
    rng = np.random.default_rng(1000 + seed)
    loads: dict[datetime, float] = {}

    def at(when: datetime) -> Mix:
        load = loads.setdefault(when, float(np.exp(rng.normal(0.0, spread))))
        return times(1.0, NET, queue=load * (growth if when >= CHANGE else 1.0))

    return at


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_queue_under_its_own_load_at_the_only_vantage_is_not_the_lane(seed: int) -> None:
    replay = Replay(PARAMS)
    replay.feed(timeline(seed, {"eu": noisy_queue(seed, 1.0)}, end=END))
    assert replay.changes() == []


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5, 6])
def test_a_collapse_leaving_two_phases_tied_confirms_one_shift(seed: int) -> None:
    # Generation × 0.08 leaves the queue and prefill level: whichever the newest window
    # puts first, the pending shift keeps the one it named while that one still leads.
    tied = {"connect": 5.0, "network": 100.0, "queue": 125.0, "prefill": 125.0}
    before = tied | {"generation": 600.0, "transfer": 5.0}
    replay = Replay(PARAMS)
    replay.feed(timeline(seed, {"eu": switch(before, before | {"generation": 48.0})}, end=END))
    changes = replay.changes()
    assert states(changes) == [("inactive", "pending"), ("pending", "firing")]
    assert changes[0].identity == changes[1].identity
    assert runs_to_fire(replay, "dominant_shift")[0] <= 4
