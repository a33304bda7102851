"""dominant_shift of a target seen from one vantage: the pooled lane over that vantage
alone, its step guards (steady_z, step_z) in either case (app.alerts.crossvantage
``_alone``; bench/detection/README.md, "fleetq")."""

from __future__ import annotations

import pytest

from app.alerts.pooling import STEADY_Z
from app.analysis.detectors import DetectorParams
from tests.alerts.test_evaluator import Replay, timeline
from tests.alerts.test_level_shift import END, NET, busy, queue_by_run, runs_to_fire

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
