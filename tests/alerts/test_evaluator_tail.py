"""tail_shift through the evaluator: a heavier queue tail at two vantages is one service
alert from the CUSUM pooled over both, fired on its first hit (no confirmation after a
calibrated threshold); the CUSUM lives in each vantage's memory and an ended episode resets
it."""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np

from app.alerts.evaluate import Evaluator
from app.alerts.history import MemoryHistory
from app.alerts.identity import Transition
from app.alerts.state import State
from app.analysis.detectors import DetectorParams
from app.analysis.detectors.tailshift import NAME, Cusums
from app.analysis.runs import RunData
from tests.runfactory import EVERY, LLM, T0, make_run

PARAMS = DetectorParams(enabled=("tail_shift",))
CHANGE = T0 + timedelta(days=3, hours=2)
BACK = CHANGE + timedelta(hours=6)


def timeline(seed: int, end: datetime, vantages: tuple[str, ...]) -> list[RunData]:
    """A run every 15 minutes at each vantage; from CHANGE until BACK, 15 % of samples wait
    400 ms more in the queue."""
    rng = np.random.default_rng(seed)
    runs = []
    for offset, vantage in enumerate(vantages):
        at = T0 + timedelta(minutes=4 * offset)
        while at < end:
            slow = 0.15 if CHANGE <= at < BACK else 0.0
            runs.append(make_run(rng, at, LLM, vantage=vantage, slow=slow, slow_ms=400.0))
            at += EVERY
    return sorted(runs, key=lambda run: run.at)


def replay(runs: list[RunData]) -> tuple[Evaluator, list[Transition]]:
    history = MemoryHistory()
    evaluator = Evaluator(history, lambda _target: PARAMS, seed=1)
    moved = []
    for run in runs:
        history.add(run)
        found = evaluator.evaluate(run.target, run.vantage, run.at + timedelta(seconds=5))
        moved += [t for t in found if t.moved]
    return evaluator, moved


def test_a_heavier_queue_tail_at_two_vantages_is_one_service_alert() -> None:
    evaluator, moved = replay(timeline(1, BACK, ("eu", "us")))
    firing = [t for t in moved if t.after is State.FIRING]
    assert len(firing) == 1
    fired = firing[0]
    assert (fired.identity.vantage, fired.identity.scope) == (None, "service")
    assert fired.before is State.INACTIVE  # fired on its first hit
    assert CHANGE < fired.at < CHANGE + timedelta(hours=2)
    assert fired.numbers["vantages_pooled"] == 2 and fired.numbers["channel"] == "queue"
    assert fired.summary.startswith("queue p")
    # Both vantages carry the same pooled CUSUM.
    eu, us = (Cusums.of(evaluator.memory("chat", v).cusums[NAME]) for v in ("eu", "us"))
    assert eu.scores[1] == us.scores[1] and max(eu.scores[1]) >= PARAMS.tail_threshold


def test_the_tail_s_return_resolves_the_alert_and_resets_the_cusums() -> None:
    evaluator, moved = replay(timeline(2, BACK + timedelta(days=1), ("eu", "us")))
    kinds = [(t.before, t.after) for t in moved]
    assert (State.INACTIVE, State.FIRING) in kinds
    assert moved[-1].after is State.RESOLVED
    assert moved[-1].at < BACK + timedelta(hours=12)
    for vantage in ("eu", "us"):
        state = Cusums.of(evaluator.memory("chat", vantage).cusums.get(NAME))
        assert max(state.scores[1]) < PARAMS.tail_threshold / 2


def test_one_vantage_alerts_for_itself() -> None:
    _, moved = replay(timeline(3, BACK, ("eu",)))
    firing = [t for t in moved if t.after is State.FIRING]
    assert [(t.identity.vantage, t.identity.scope) for t in firing] == [("eu", "vantage")]


def test_no_tail_alert_on_ordinary_runs() -> None:
    rng = np.random.default_rng(4)
    runs = [
        make_run(rng, T0 + i * EVERY + timedelta(minutes=4 * k), LLM, vantage=v)
        for i in range(5 * 96)
        for k, v in enumerate(("eu", "us"))
    ]
    assert replay(runs)[1] == []
