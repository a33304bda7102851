"""level_shift through the evaluator, and a one-vantage server-side leader confirmed by the
vantages' pooled evidence (app/alerts/pooling.py)."""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import datetime, timedelta

import pytest

from app.alerts.pooling import STEADY_Z
from app.analysis.detectors import DetectorParams
from tests.alerts.test_evaluator import LLM, Mix, Replay, states, switch, timeline
from tests.runfactory import EVERY, T0

PARAMS = DetectorParams(enabled=("dominant_shift", "level_shift"), resamples=200)
CHANGE = T0 + timedelta(days=4, hours=10)  # after a reference of four days
END = CHANGE + timedelta(hours=6)


def times(factor: float, mix: Mix = LLM, **only: float) -> Mix:
    return {name: value * (only.get(name, 1.0) if only else factor) for name, value in mix.items()}


def busy(mix: Mix, factor: float = 2.2) -> Callable[[datetime], Mix]:
    """The queue × ``factor`` from 15:00 to 18:00 every day."""
    return lambda at: times(1.0, mix, queue=factor) if at.hour in (15, 16, 17) else mix


def runs_to_fire(replay: Replay, kind: str) -> list[int]:
    return [
        math.floor((t.at - CHANGE) / EVERY) + 1
        for t in replay.changes(kind)
        if t.after.value == "firing"
    ]


def test_a_uniform_slowdown_fires_within_three_runs_and_says_by_how_much() -> None:
    replay = Replay(PARAMS)
    replay.feed(timeline(1, {"eu": switch(LLM, times(1.25), CHANGE)}, end=END))
    assert runs_to_fire(replay, "level_shift") and runs_to_fire(replay, "level_shift")[0] <= 3
    assert replay.changes("dominant_shift") == []
    firing = next(t for t in replay.changes("level_shift") if t.after.value == "firing")
    assert (firing.identity.scope, firing.identity.vantage) == ("vantage", "eu")
    assert firing.summary.startswith("end-to-end is 2")  # about 25 % slower
    assert "slower than usual at these hours" in firing.summary
    assert "queue +" in firing.summary and "generation +" in firing.summary


def test_one_phase_slowing_names_that_phase() -> None:
    replay = Replay(PARAMS)
    replay.feed(timeline(2, {"eu": switch(LLM, times(1.0, prefill=1.6), CHANGE)}, end=END))
    firing = next(t for t in replay.changes("level_shift") if t.after.value == "firing")
    assert runs_to_fire(replay, "level_shift")[0] <= 3
    assert firing.numbers["series"] in ("prefill", "end-to-end")
    assert "prefill" in firing.numbers["crossed"]


def test_busy_hours_seen_every_day_are_no_slowdown() -> None:
    replay = Replay(PARAMS)
    replay.feed(timeline(3, {"eu": busy(LLM)}, end=T0 + timedelta(days=7)))
    assert replay.changes("level_shift") == []


def test_a_speed_up_is_not_news() -> None:
    replay = Replay(PARAMS)
    replay.feed(timeline(4, {"eu": switch(LLM, times(0.7), CHANGE)}, end=END))
    assert replay.transitions == []


def test_one_wild_run_cannot_fire_alone() -> None:
    wild = CHANGE + 2 * EVERY

    def mix(at: datetime) -> Mix:
        return times(20.0) if wild <= at < wild + EVERY else LLM

    replay = Replay(PARAMS)
    replay.feed(timeline(5, {"eu": mix}, end=END))
    assert replay.changes("level_shift") == []


def test_a_leader_change_is_dominant_shifts_alone() -> None:
    replay = Replay(PARAMS)
    collapsed = times(1.0, generation=4.0)  # generation 320 ms overtakes the queue's 120
    replay.feed(timeline(6, {"eu": switch(LLM, collapsed, CHANGE)}, end=END))
    assert states(replay.changes("dominant_shift"))[:2] == [
        ("inactive", "pending"),
        ("pending", "firing"),
    ]
    assert replay.changes("level_shift") == []


NET = LLM | {"network": 200.0, "queue": 60.0}  # network-led at the near vantage
FAR = NET | {"network": 400.0}


def test_a_queue_grown_at_every_vantage_but_leading_at_one_is_the_services_change() -> None:
    # The queue × 4.5 (270 ms) overtakes the near vantage's 200 ms of network but not the
    # far one's 400: the far vantage never agrees on the leader, the pooled evidence does.
    params = DetectorParams(enabled=("dominant_shift",), resamples=200)
    replay = Replay(params)
    near, far = (
        switch(NET, times(1.0, NET, queue=4.5), CHANGE),
        switch(FAR, times(1.0, FAR, queue=4.5), CHANGE),
    )
    replay.feed(timeline(7, {"eu": near, "us": far}, end=END))
    changes = replay.changes()
    # The pooled evidence spans the newest runs of both vantages: its first hit fires.
    assert states(changes)[:1] == [("inactive", "firing")]
    identity = changes[0].identity
    assert (identity.scope, identity.vantage) == ("service", None)
    assert (identity.from_phase, identity.to_phase) == ("network", "queue")
    assert runs_to_fire(replay, "dominant_shift")[0] <= 3
    firing = changes[0]
    assert firing.numbers["pooled_phase"] == "queue"
    assert firing.numbers["pooled_z"] >= params.pooled_min_z
    assert firing.numbers["vantages_agreeing"] == 1


def queue_by_run(factors: list[float], mix: Mix) -> Callable[[datetime], Mix]:
    """The queue × ``factors[i]`` in the i-th run from CHANGE (the last one after them),
    × 1 before."""

    def at(when: datetime) -> Mix:
        if when < CHANGE:
            return mix
        i = min(math.floor((when - CHANGE) / EVERY), len(factors) - 1)
        return times(1.0, mix, queue=factors[i])

    return at


@pytest.mark.parametrize(
    ("factors", "runs"),
    [
        # × 4.5 (270 ms, past the near network's 200) and × 3 (180, not) in turn: grown in
        # every run at both vantages, leading the near one's newest run every other run.
        ([4.5, 3.0] * 12, 3),
        ([3.0, 4.5] * 12, 2),
    ],
)
def test_a_queue_grown_in_every_run_leading_in_the_newest_is_the_services_change(
    factors: list[float], runs: int
) -> None:
    params = DetectorParams(enabled=("dominant_shift",), resamples=200)
    replay = Replay(params)
    near, far = queue_by_run(factors, NET), queue_by_run(factors, FAR)
    replay.feed(timeline(7, {"eu": near, "us": far}, end=END))
    firing = [t for t in replay.changes() if t.after.value == "firing"]
    assert runs_to_fire(replay, "dominant_shift")[:1] == [runs]
    assert (firing[0].identity.scope, firing[0].identity.to_phase) == ("service", "queue")
    assert float(firing[0].numbers["pooled_least_z"]) >= STEADY_Z
    assert float(firing[0].numbers["pooled_step_z"]) >= params.pooled_min_z


@pytest.mark.parametrize(
    "factors",
    [
        [20.0, 1.0],  # one wild run of the queue at both vantages
        [1.2, 20.0, 1.0],  # a wild run after a run a little busier at both
    ],
)
def test_a_wild_run_of_the_queue_is_no_services_change(factors: list[float]) -> None:
    replay = Replay(DetectorParams(enabled=("dominant_shift",), resamples=200))
    near, far = queue_by_run(factors, NET), queue_by_run(factors, FAR)
    replay.feed(timeline(7, {"eu": near, "us": far}, end=END))
    assert [t for t in replay.changes() if t.identity.scope == "service"] == []


def test_without_pooling_the_far_vantage_is_waited_for() -> None:
    params = DetectorParams(enabled=("dominant_shift",), resamples=200, pooled_min_z=0)
    replay = Replay(params)
    near, far = (
        switch(NET, times(1.0, NET, queue=4.5), CHANGE),
        switch(FAR, times(1.0, FAR, queue=4.5), CHANGE),
    )
    replay.feed(timeline(7, {"eu": near, "us": far}, end=END))
    assert replay.changes() == []


def test_a_queue_grown_at_one_vantage_only_is_no_services_change() -> None:
    replay = Replay(DetectorParams(enabled=("dominant_shift",), resamples=200))
    near = switch(NET, times(1.0, NET, queue=4.5), CHANGE)
    replay.feed(timeline(8, {"eu": near, "us": FAR}, end=END))
    assert [t for t in replay.changes() if t.identity.scope == "service"] == []


TIED = LLM | {"generation": 125.0}  # generation leads the queue's 120 by a hair


def test_everything_slower_is_no_leader_change_even_where_the_queue_was_close() -> None:
    # Every phase × 1.3 at both vantages: the queue grew, but no more than generation did.
    replay = Replay(DetectorParams(enabled=("dominant_shift",), resamples=200))
    slower = times(1.3, TIED)
    replay.feed(
        timeline(
            9, {"eu": switch(TIED, slower, CHANGE), "us": switch(TIED, slower, CHANGE)}, end=END
        )
    )
    assert [t for t in replay.changes() if "pooled_z" in t.numbers] == []


def test_a_burst_after_a_told_slowdown_is_not_pooled_growth() -> None:
    # Everything × 1.3 at both vantages (level_shift tells it), then two hours later the
    # queue × 1.6 more for three runs: against hours' levels from before the slowdown, the
    # queue "grew" by both; the pooled lane does not read it (a vantage's own bootstrap
    # still may).
    params = DetectorParams(enabled=("dominant_shift", "level_shift"), resamples=200)
    burst = CHANGE + timedelta(hours=2)

    def mix(at: datetime) -> Mix:
        slower = times(1.3, TIED)
        if at < CHANGE:
            return TIED
        return times(1.0, slower, queue=1.6) if burst <= at < burst + 3 * EVERY else slower

    replay = Replay(params)
    replay.feed(timeline(10, {"eu": mix, "us": mix}, end=END))
    assert runs_to_fire(replay, "level_shift")
    assert [t for t in replay.changes() if "pooled_z" in t.numbers] == []
