"""The cross-vantage round waits a bounded time for a late vantage: one whose next run is
more than ``LATE_AFTER_INTERVALS`` late is left out of the round, counted in the verdict
("at 2/3 vantages"), and a round never stalls on it; one silent for longer than
``AWAY_AFTER_INTERVALS`` is not counted at all."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from app.alerts.crossvantage import AWAY, LATE, PRESENT, lateness
from app.analysis.runs import RunData
from tests.alerts.test_evaluator import CHANGE, FAR, SLOW_DECODE, Replay, switch, timeline
from tests.runfactory import EVERY, LLM


@pytest.mark.parametrize(
    ("age", "spacing", "verdict"),
    [
        (0.5 * EVERY, EVERY, PRESENT),  # its next run is not due yet
        (1.5 * EVERY, EVERY, PRESENT),  # due, up to one interval late: waited for
        (2.0 * EVERY, EVERY, PRESENT),
        (2.1 * EVERY, EVERY, LATE),  # more than one interval late: not waited for, counted
        (10 * EVERY, EVERY, LATE),
        (10.5 * EVERY, EVERY, AWAY),  # away: neither waited for nor counted
        (3 * timedelta(seconds=1), timedelta(0), LATE),  # a spacing under 1 s counts as 1 s
    ],
)
def test_a_vantage_is_waited_for_at_most_one_interval_past_its_due_run(
    age: timedelta, spacing: timedelta, verdict: str
) -> None:
    assert lateness(age, spacing) == verdict


def stops(runs: list[RunData], vantage: str, at: datetime) -> list[RunData]:
    return [run for run in runs if run.vantage != vantage or run.at < at]


def test_a_service_change_with_one_vantage_gone_quiet_fires_at_2_of_3_vantages() -> None:
    mixes = {
        "eu": switch(LLM, SLOW_DECODE),
        "us": switch(FAR, SLOW_DECODE),
        "ap": switch(FAR, SLOW_DECODE),
    }
    replay = Replay()
    replay.feed(stops(timeline(1, mixes), "ap", CHANGE))  # ap stops when the change comes
    changes = replay.changes()
    assert [(t.identity.scope, t.after.value) for t in changes] == [
        ("service", "pending"),
        ("service", "firing"),
    ]
    firing = changes[-1]
    assert firing.at - CHANGE <= 5 * EVERY  # as soon as with two vantages: no stall
    assert (firing.numbers["vantages_agreeing"], firing.numbers["vantages"]) == (2, 3)
    assert firing.numbers["vantages_late"] == ["ap"]
    assert "at 2/3 vantages (ap late, not waited for)" in firing.summary


def test_with_every_vantage_reporting_the_change_is_at_3_of_3() -> None:
    mixes = {
        "eu": switch(LLM, SLOW_DECODE),
        "us": switch(FAR, SLOW_DECODE),
        "ap": switch(FAR, SLOW_DECODE),
    }
    replay = Replay()
    replay.feed(timeline(1, mixes))
    firing = replay.changes()[-1]
    assert firing.after.value == "firing"
    assert "at 3/3 vantages" in firing.summary and "late" not in firing.summary


def test_a_vantage_away_for_long_is_not_counted() -> None:
    mixes = {
        "eu": switch(LLM, SLOW_DECODE),
        "us": switch(FAR, SLOW_DECODE),
        "ap": switch(FAR, SLOW_DECODE),
    }
    replay = Replay()
    replay.feed(stops(timeline(1, mixes), "ap", CHANGE - 12 * EVERY))
    firing = replay.changes()[-1]
    assert firing.after.value == "firing"
    assert "at 2/2 vantages" in firing.summary
