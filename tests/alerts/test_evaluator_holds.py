"""Alerts that do not flap: the deadline SLO over a long violation, and the hold that keeps
a resolved alert from firing again for the same unchanged fact."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import numpy as np

from app.alerts.backtest.replay import replay
from app.alerts.evaluate import Evaluator
from app.alerts.history import MemoryHistory
from app.alerts.identity import Transition
from app.alerts.state import State
from app.analysis.detectors import DetectorParams
from app.analysis.runs import RunData
from tests.runfactory import EVERY, T0, failed_run, make_run


def steady_violation(days: int, vantages: tuple[str, ...], rate: float) -> list[RunData]:
    """Runs every 15 minutes at each vantage, each of 20 samples missing at ``rate``."""
    rng = np.random.default_rng(11)
    runs = [
        make_run(
            rng, at + timedelta(minutes=3 * k), censored=int(rng.binomial(20, rate)), vantage=v
        )
        for at in (T0 + i * EVERY for i in range(days * 96))
        for k, v in enumerate(vantages)
    ]
    return sorted(runs, key=lambda run: run.at)


def firings(transitions: list[Transition]) -> Counter[tuple[str, str | None, str]]:
    return Counter(
        (t.identity.kind, t.identity.vantage, t.identity.severity)
        for t in transitions
        if t.after is State.FIRING and t.moved
    )


def test_a_ten_day_steady_violation_is_one_alert_per_vantage() -> None:
    runs = steady_violation(10, ("eu", "us"), rate=0.04)  # 4 % against a 1 % budget
    params = DetectorParams(enabled=("deadline_miss",))
    transitions = list(replay(runs, lambda _target: params))
    assert firings(transitions) == {
        ("deadline_miss", "eu", "warning"): 1,
        ("deadline_miss", "us", "warning"): 1,
    }
    assert not any(t.after is State.RESOLVED for t in transitions)  # still burning at the end


def test_a_target_within_its_slo_raises_nothing_in_ten_days() -> None:
    runs = steady_violation(10, ("eu",), rate=0.005)  # half the budget
    params = DetectorParams(enabled=("deadline_miss",))
    assert firings(list(replay(runs, lambda _target: params))) == {}


def test_a_target_answering_every_request_late_pages_deadline_miss_and_is_not_failing() -> None:
    # Three hours of runs whose every sample answered past the deadline: an SLO burning as
    # fast as it can, and not one request without an answer.
    rng = np.random.default_rng(12)
    runs = [make_run(rng, T0 + i * EVERY, censored=20) for i in range(12)]
    params = DetectorParams(enabled=("deadline_miss", "probe_failing"))
    transitions = list(replay(runs, lambda _target: params))
    assert firings(transitions) == {("deadline_miss", "eu", "critical"): 1}
    assert not [t for t in transitions if t.identity.kind == "probe_failing"]


def test_a_target_whose_every_request_fails_is_failing_and_burns_no_deadline_budget() -> None:
    runs = [failed_run(T0 + i * EVERY, failed=20) for i in range(12)]
    params = DetectorParams(enabled=("deadline_miss", "probe_failing"))
    transitions = list(replay(runs, lambda _target: params))
    assert firings(transitions) == {("probe_failing", "eu", "critical"): 1}


class Feed:
    """probe_failing driven run by run: ``failing`` or not, 15 minutes apart."""

    def __init__(self, params: DetectorParams) -> None:
        self.history = MemoryHistory()
        self.evaluator = Evaluator(self.history, lambda _target: params)
        self.at = T0
        self.rng = np.random.default_rng(3)

    def runs(self, count: int, failing: bool) -> list[Transition]:
        found = []
        for _ in range(count):
            run = failed_run(self.at) if failing else make_run(self.rng, self.at)
            self.history.add(run)
            found += [t for t in self.evaluator.evaluate("chat", "eu", self.at) if t.moved]
            self.at += EVERY
        return found


PARAMS = DetectorParams(enabled=("probe_failing",), refire_hold=6 * 3600)


def states(transitions: list[Transition]) -> list[str]:
    return [t.after.value for t in transitions]


def test_a_resolved_alert_does_not_fire_again_inside_its_hold() -> None:
    feed = Feed(PARAMS)
    assert states(feed.runs(4, failing=True)) == ["pending", "firing"]
    assert states(feed.runs(2, failing=False)) == ["recovering", "resolved"]
    assert feed.runs(4, failing=True) == []  # the same outage coming back: held back
    assert feed.runs(2, failing=False) == []


def test_a_hold_ends_after_its_condition_was_quiet_that_long() -> None:
    feed = Feed(PARAMS)
    feed.runs(4, failing=True)
    feed.runs(2, failing=False)
    feed.runs(24, failing=False)  # six quiet hours
    assert states(feed.runs(4, failing=True)) == ["pending", "firing"]


def test_a_recurrence_that_lasts_the_hold_is_news() -> None:
    feed = Feed(PARAMS)
    feed.runs(4, failing=True)
    feed.runs(2, failing=False)
    held = feed.runs(24, failing=True)  # failing again for the whole six hours
    assert held == []
    assert states(feed.runs(4, failing=True)) == ["pending", "firing"]


def test_without_a_hold_the_same_outage_fires_again() -> None:
    feed = Feed(PARAMS.model_copy(update={"refire_hold": 0.0}))
    feed.runs(4, failing=True)
    feed.runs(2, failing=False)
    assert states(feed.runs(4, failing=True)) == ["pending", "firing"]
