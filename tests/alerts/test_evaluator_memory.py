"""The evaluator's memory through its public boundary: one target's part saved and put
back (``snapshot``/``restore``: how the engine undoes an evaluation that failed to
commit), and signals judged elsewhere moved by ``apply``."""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np

from app.alerts.evaluate import Evaluator
from app.alerts.history import MemoryHistory
from app.alerts.identity import Identity, Transition
from app.alerts.state import Rules, State
from app.analysis.detectors import DetectorParams, Finding, Signal
from tests.runfactory import EVERY, T0, failed_run, make_run

# dominant_shift for the rounds of vantages combined (no reference yet: it finds nothing).
PARAMS = DetectorParams(enabled=("probe_failing", "dominant_shift"), refire_hold=6 * 3600)


class Feed:
    """Runs every 15 minutes, failing or not, at the vantages of a target asked for."""

    def __init__(self) -> None:
        self.history = MemoryHistory()
        self.evaluator = Evaluator(self.history, lambda _target: PARAMS)
        self.at = T0
        self.rng = np.random.default_rng(5)

    def runs(self, target: str, *vantages: str, failing: bool = True) -> list[Transition]:
        found = []
        for k, vantage in enumerate(vantages):
            at = self.at + timedelta(minutes=k)
            run = (
                failed_run(at, target=target, vantage=vantage)
                if failing
                else make_run(self.rng, at, target=target, vantage=vantage)
            )
            self.history.add(run)
            found += self.evaluator.evaluate(target, vantage, at)
        self.at += EVERY
        return found

    def states(self, target: str) -> list[State]:
        alerts = self.evaluator.alerts.items()
        return [alert.position.state for i, alert in alerts if i.target == target]


def test_restore_puts_back_all_an_evaluation_of_the_target_changed() -> None:
    feed = Feed()
    for _ in range(3):
        feed.runs("chat", "eu", "us")
    saved = feed.evaluator.snapshot("chat")
    assert [a.position.state for a in saved.alerts.values()] == [State.PENDING] * 2
    assert sorted(saved.memories) == ["eu", "us"] and saved.last_round is not None
    fired = feed.runs("chat", "eu", "us")
    assert [t.after for t in fired] == [State.FIRING] * 2
    feed.evaluator.restore(saved)
    assert feed.evaluator.snapshot("chat") == saved
    again = feed.runs("chat", "eu", "us")  # the evaluator did not move on meanwhile
    assert [(t.before, t.after) for t in again] == [(State.PENDING, State.FIRING)] * 2


def test_restore_puts_back_a_hold_counted_since() -> None:
    feed = Feed()
    for _ in range(4):
        feed.runs("chat", "eu")
    feed.runs("chat", "eu", failing=False)
    (resolved,) = feed.runs("chat", "eu", failing=False)
    assert resolved.after is State.RESOLVED
    saved = feed.evaluator.snapshot("chat")
    assert list(saved.cooling) == [resolved.identity]
    for _ in range(4):
        assert feed.runs("chat", "eu") == []  # held back: the hold counts the hits
    assert feed.evaluator.snapshot("chat").cooling != saved.cooling
    feed.evaluator.restore(saved)
    assert feed.evaluator.snapshot("chat") == saved


def test_restore_leaves_every_other_target_as_it_is() -> None:
    feed = Feed()
    for _ in range(3):
        feed.runs("chat", "eu")
        feed.runs("mail", "eu")
    saved = feed.evaluator.snapshot("chat")
    assert {identity.target for identity in saved.alerts} == {"chat"}
    (fired,) = feed.runs("mail", "eu")
    mail = feed.evaluator.snapshot("mail")
    feed.evaluator.restore(saved)
    assert feed.states("mail") == [State.FIRING]
    assert feed.evaluator.snapshot("mail") == mail
    assert (
        feed.evaluator.memory("mail", "eu").last_run == feed.history.last("mail", "eu", 1)[0].run_id
    )
    assert fired.identity.target == "mail"


def test_restore_forgets_a_vantage_first_seen_since_the_snapshot() -> None:
    feed = Feed()
    feed.runs("chat", "eu")
    saved = feed.evaluator.snapshot("chat")
    feed.runs("chat", "us")
    assert sorted(feed.evaluator.memories("chat")) == ["eu", "us"]
    feed.evaluator.restore(saved)
    assert list(feed.evaluator.memories("chat")) == ["eu"]


def test_a_snapshot_can_be_put_back_more_than_once() -> None:
    feed = Feed()
    for _ in range(3):
        feed.runs("chat", "eu")
    saved, pending = feed.evaluator.snapshot("chat"), feed.evaluator.snapshot("chat")
    for _ in range(2):
        (fired,) = feed.runs("chat", "eu")
        assert (fired.before, fired.after) == (State.PENDING, State.FIRING)
        feed.evaluator.restore(saved)
        assert feed.evaluator.snapshot("chat") == saved == pending


SILENT = Identity("vantage_silent", "*", "fra-1", "vantage")
HOLD = Rules(confirm=1, recover=1, refire_hold=timedelta(hours=1))


def apply(evaluator: Evaluator, signal: Signal, at: datetime) -> list[State]:
    moved = evaluator.apply({SILENT: Finding(signal)}, at, lambda _identity: HOLD)
    return [t.after for t in moved]


def test_apply_moves_signals_judged_elsewhere_by_the_rules_given() -> None:
    evaluator = Evaluator(MemoryHistory(), lambda _target: PARAMS)
    assert apply(evaluator, Signal.CLEAR, T0) == []  # only a hit opens an alert
    assert apply(evaluator, Signal.HIT, T0) == [State.FIRING]  # confirm=1
    assert apply(evaluator, Signal.CLEAR, T0 + EVERY) == [State.RESOLVED]  # recover=1
    assert apply(evaluator, Signal.HIT, T0 + 2 * EVERY) == []  # inside the refire hold
    assert apply(evaluator, Signal.CLEAR, T0 + 3 * EVERY) == []
    assert apply(evaluator, Signal.CLEAR, T0 + 7 * EVERY) == []  # quiet for the hold: over
    assert apply(evaluator, Signal.HIT, T0 + 8 * EVERY) == [State.FIRING]
