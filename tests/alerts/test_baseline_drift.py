"""baseline_drift through the evaluator: a baseline frozen once from a full week, kept in
the vantage's memory, a slow drift warned of while the rolling reference absorbs it, and
an acknowledgement that makes the drifted level the new baseline."""

from __future__ import annotations

from datetime import datetime, timedelta

from app.alerts.evaluate import Evaluator
from app.alerts.history import MemoryHistory, Retention
from app.alerts.identity import Transition
from app.alerts.state import State
from app.analysis import drift as dr
from app.analysis import driftpack as dp
from app.analysis.detectors import DetectorParams
from app.analysis.runs import RunData
from tests.driftfactory import Change, runs, steady
from tests.runfactory import T0

EVERY = timedelta(minutes=30)  # half the runs of a real probe: the same days, faster tests
PARAMS = DetectorParams(enabled=("baseline_drift",))
DRIFT_FROM = 9.0  # days: a week frozen, then a day more of steady runs


def growing(day: float) -> dict[str, float]:
    """Generation × 1.6 over two weeks (the queue still leads)."""
    return {"generation": 1 + 0.6 * min(max(day - DRIFT_FROM, 0.0) / 14, 1.0)}


class Replay:
    def __init__(self, params: DetectorParams = PARAMS) -> None:
        # As a backtest keeps them: the reference's week and a little more, never older.
        self.history = MemoryHistory(lambda _: Retention(timedelta(days=8), 50))
        self.evaluator = Evaluator(self.history, lambda _: params, seed=1)
        self.fired: list[Transition] = []

    def feed(self, seed: int, start: datetime, days: float, change: Change) -> None:
        for run in runs(seed, start, days, change, every=EVERY):
            self.step(run)

    def step(self, run: RunData) -> None:
        self.history.add(run)
        for moved in self.evaluator.evaluate(
            run.target, run.vantage, run.at + timedelta(seconds=5)
        ):
            if moved.after is State.FIRING and moved.before is not State.FIRING:
                self.fired.append(moved)

    def drift(self) -> dr.Drift | None:
        return dp.unpack(self.evaluator.memory("chat", "eu").cusums.get("baseline_drift"))


def day(transition: Transition) -> float:
    return (transition.at - T0) / timedelta(days=1)


def test_a_steady_target_freezes_one_baseline_and_stays_quiet() -> None:
    replay = Replay()
    replay.feed(2, T0, 18, steady)
    assert replay.fired == []
    drift = replay.drift()
    assert drift is not None
    # Frozen once, from the first full week (the reference's daily rebuild after day 7).
    assert 7 <= (drift.frozen_at - T0.timestamp()) / 86400 < 8
    # The reference's first daily rebuild came with the first run after a day of runs.
    assert 0 <= drift.baseline.start - T0.timestamp() < 6 * 3600
    assert 10 <= len(drift.days) <= 11  # one value a day since


def test_a_slow_growth_is_warned_of_with_how_long_it_has_drifted() -> None:
    replay = Replay()
    replay.feed(3, T0, 24, growing)
    assert len(replay.fired) == 1
    (alert,) = replay.fired
    assert alert.identity.kind == "baseline_drift" and alert.identity.severity == "warning"
    # generation +20 % is reached on day 9 + 14/3; a daily value lags by up to a day.
    assert DRIFT_FROM + 14 / 3 <= day(alert) <= DRIFT_FROM + 14 / 3 + 2
    assert alert.numbers["leading"] == "generation"
    assert 2 <= alert.numbers["drifting_days"] <= day(alert) - DRIFT_FROM + 0.5
    assert alert.numbers["baseline_from"] == T0.date().isoformat()
    assert "drifting up for" in alert.summary


def test_acknowledged_the_drifted_level_becomes_the_next_baseline() -> None:
    replay = Replay()
    replay.feed(3, T0, 20, growing)
    (alert,) = replay.fired
    at = T0 + timedelta(days=20)
    acknowledged = replay.evaluator.acknowledge(replay.evaluator.alerts[alert.identity].id, at)
    assert acknowledged is not None
    opened = replay.evaluator.memory("chat", "eu").rebase_at
    assert opened is not None and opened < at
    # The change is the new normal from the alert's opening: the old baseline goes, and
    # until a full week of the new level is seen there is none to drift from.
    replay.feed(4, at, 1, lambda _: {"generation": 1.6})
    assert replay.drift() is None
    replay.feed(5, at + timedelta(days=1), 6, lambda _: {"generation": 1.6})
    drift = replay.drift()
    assert drift is not None and drift.baseline.start >= opened.timestamp()
    assert drift.frozen_at >= (opened + timedelta(days=6.5)).timestamp()
    assert len(replay.fired) == 1


def test_a_pinned_week_is_the_baseline() -> None:
    pinned = T0 + timedelta(days=3)
    replay = Replay(DetectorParams(enabled=("baseline_drift",), baseline_from=pinned))
    replay.feed(6, T0, 12, steady)
    drift = replay.drift()
    assert drift is not None and drift.pin == pinned.timestamp()
    assert drift.baseline.start >= pinned.timestamp() - 3600
    assert drift.frozen_at >= (pinned + timedelta(days=7)).timestamp()
