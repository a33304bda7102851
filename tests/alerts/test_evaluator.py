"""The evaluator over stored runs (in memory): detectors → signals → alert transitions."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import numpy as np

from app.alerts.evaluate import Evaluator
from app.alerts.history import MemoryHistory
from app.alerts.identity import Transition
from app.alerts.state import State
from app.analysis.detectors import DetectorParams
from app.analysis.runs import RunData
from tests.runfactory import EVERY, LLM, T0, make_run

PARAMS = DetectorParams(enabled=("dominant_shift",), resamples=200)
CHANGE = T0 + timedelta(days=1, hours=12)  # after a reference that has seen a whole day
SLOW_DECODE = LLM | {"generation": 240.0}  # decode throughput collapsed: generation leads
ROUTE = LLM | {"network": 300.0}  # a longer route: the network leads at that vantage
FAR = LLM | {"network": 60.0}  # a farther vantage, same service

Mix = Mapping[str, float]


@dataclass
class Replay:
    """Feeds runs to one evaluator in time order and keeps every transition."""

    params: DetectorParams = PARAMS
    history: MemoryHistory = field(default_factory=MemoryHistory)
    transitions: list[Transition] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.evaluator = Evaluator(self.history, lambda _target: self.params, seed=1)

    def feed(self, runs: list[RunData]) -> list[Transition]:
        new = []
        for run in runs:
            self.history.add(run)
            new += self.evaluator.evaluate(run.target, run.vantage, run.at + timedelta(seconds=5))
        self.transitions += new
        return new

    def changes(self, kind: str = "dominant_shift") -> list[Transition]:
        return [t for t in self.transitions if t.identity.kind == kind and t.moved]


def timeline(
    seed: int,
    vantages: Mapping[str, Mix | Callable[[datetime], Mix]],
    start: datetime = T0,
    end: datetime = CHANGE + timedelta(hours=8),
) -> list[RunData]:
    """A run every 15 minutes at each vantage (a few minutes apart), oldest first; a
    vantage's mix is fixed or a function of the run's time."""
    rng = np.random.default_rng(seed)
    runs = []
    for offset, (vantage, mix) in enumerate(vantages.items()):
        at = start + timedelta(minutes=4 * offset)
        while at < end:
            medians = mix(at) if callable(mix) else mix
            runs.append(make_run(rng, at, medians, vantage=vantage))
            at += EVERY
    return sorted(runs, key=lambda run: run.at)


def switch(before: Mix, after: Mix, at: datetime = CHANGE) -> Callable[[datetime], Mix]:
    return lambda when: after if when >= at else before


def states(transitions: list[Transition]) -> list[tuple[str, str]]:
    return [(t.before.value, t.after.value) for t in transitions]


def test_a_generation_collapse_seen_at_two_vantages_is_one_service_alert() -> None:
    replay = Replay()
    replay.feed(timeline(1, {"eu": switch(LLM, SLOW_DECODE), "us": switch(FAR, SLOW_DECODE)}))
    changes = replay.changes()
    assert states(changes) == [("inactive", "pending"), ("pending", "firing")]
    identities = {t.identity for t in changes}
    assert len(identities) == 1
    (identity,) = identities
    assert (identity.scope, identity.vantage) == ("service", None)
    assert (identity.from_phase, identity.to_phase) == ("queue", "generation")
    pending, firing = changes
    # Two confirming evaluations: a combined round is one interval (both vantages ran).
    assert firing.at - pending.at == EVERY
    assert firing.at - CHANGE <= 5 * EVERY
    assert firing.numbers["vantages_agreeing"] == 2
    assert "at 2/2 vantages" in firing.summary
    assert any(t.refresh for t in replay.transitions)  # still firing: refreshed


def test_one_new_server_side_leader_over_different_old_ones_is_one_service_alert() -> None:
    # Reasoning switched back on: generation overtakes the network at a far vantage and
    # the queue at a near one. The losers differ; the winner, a server phase, is the same.
    far_slow = ROUTE | {"generation": 700.0}
    replay = Replay()
    replay.feed(timeline(9, {"eu": switch(LLM, SLOW_DECODE), "us": switch(ROUTE, far_slow)}))
    changes = replay.changes()
    assert states(changes) == [("inactive", "pending"), ("pending", "firing")]
    (identity,) = {t.identity for t in changes}
    assert (identity.scope, identity.vantage) == ("service", None)
    assert (identity.from_phase, identity.to_phase) == (None, "generation")
    firing = changes[-1]
    assert firing.at - CHANGE <= 5 * EVERY
    assert "generation now leads" in firing.summary and "network" in firing.summary
    assert "queue" in firing.summary and "at 2/2 vantages" in firing.summary


def test_a_route_change_at_one_vantage_is_a_path_alert_there() -> None:
    replay = Replay()
    replay.feed(timeline(2, {"eu": LLM, "us": switch(FAR, ROUTE)}))
    changes = replay.changes()
    assert states(changes) == [("inactive", "pending"), ("pending", "firing")]
    identity = changes[0].identity
    assert (identity.scope, identity.vantage) == ("path", "us")
    assert (identity.from_phase, identity.to_phase) == ("queue", "network")


def test_a_server_side_change_seen_at_one_vantage_only_raises_nothing() -> None:
    replay = Replay()
    replay.feed(timeline(3, {"eu": LLM, "us": switch(FAR, SLOW_DECODE)}))
    assert replay.transitions == []


def test_a_single_vantage_target_gets_scope_vantage() -> None:
    replay = Replay()
    replay.feed(timeline(4, {"eu": switch(LLM, SLOW_DECODE)}))
    changes = replay.changes()
    assert states(changes) == [("inactive", "pending"), ("pending", "firing")]
    assert (changes[0].identity.scope, changes[0].identity.vantage) == ("vantage", "eu")


def test_acknowledged_change_resolves_and_does_not_fire_again_on_the_same_data() -> None:
    replay = Replay()
    vantages = {"eu": switch(LLM, SLOW_DECODE), "us": switch(FAR, SLOW_DECODE)}
    runs = timeline(5, vantages, end=CHANGE + timedelta(days=3))
    split = next(i for i, run in enumerate(runs) if run.at >= CHANGE + timedelta(hours=3))
    replay.feed(runs[:split])
    (alert,) = replay.evaluator.alerts.values()
    assert alert.position.state is State.FIRING
    acked = replay.evaluator.acknowledge(alert.id, runs[split].at)
    assert acked is not None and acked.acknowledged
    assert (acked.before, acked.after) == (State.FIRING, State.RESOLVED)
    assert replay.evaluator.alerts == {}
    # Two and a half more days of the new normal: the reference re-based onto it.
    assert replay.feed(runs[split:]) == []
    reference = replay.evaluator.memory("chat", "eu").reference
    assert reference is not None and reference.mix.dominant == "generation"


def test_unknown_alert_cannot_be_acknowledged() -> None:
    assert Replay().evaluator.acknowledge("no-such-alert", T0) is None


def test_a_lead_hovering_around_delta_fires_once_and_does_not_flap() -> None:
    # Generation about 5 pp ahead of the queue: some windows above delta, some under.
    hovering = LLM | {"generation": 137.0}
    replay = Replay()
    replay.feed(timeline(6, {"eu": switch(LLM, hovering)}, end=CHANGE + timedelta(days=1)))
    changes = replay.changes()
    into_firing = [t for t in changes if t.after is State.FIRING]
    assert len(into_firing) == 1
    assert not [t for t in changes if t.after in (State.RECOVERING, State.RESOLVED)]
    # The noise did show: the alert was evaluated on both sides of delta while firing
    # (what a refresh read is under "now": its facts are the firing's).
    leads = [t.numbers["now"]["lead_pp"] for t in replay.transitions if t.refresh]
    assert min(leads) < PARAMS.dominant_lead_pp <= max(leads)


def test_a_near_tie_that_swaps_run_to_run_never_fires() -> None:
    tie = LLM | {"generation": 121.0}
    replay = Replay()
    replay.feed(timeline(7, {"eu": switch(LLM, tie)}, end=CHANGE + timedelta(days=1)))
    assert not [t for t in replay.changes() if t.after is State.FIRING]


def test_a_change_that_reverts_resolves_without_a_reverse_alert() -> None:
    back = CHANGE + timedelta(hours=4)

    def mix(at: datetime) -> Mix:
        return SLOW_DECODE if CHANGE <= at < back else LLM

    replay = Replay()
    replay.feed(timeline(8, {"eu": mix}, end=back + timedelta(hours=6)))
    changes = replay.changes()
    assert states(changes) == [
        ("inactive", "pending"),
        ("pending", "firing"),
        ("firing", "recovering"),
        ("recovering", "resolved"),
    ]
    assert {(t.identity.from_phase, t.identity.to_phase) for t in changes} == {
        ("queue", "generation")
    }
    resolved = changes[-1].numbers["now"]  # what the resolved notification says of now
    assert resolved["from_share_pct"] > resolved["to_share_pct"]
    assert resolved["lead_pp"] < 0


def test_a_network_change_reaching_the_second_vantage_a_run_later_is_one_alert() -> None:
    # An edge switch: the first vantage sees it one run before the second.
    edge = LLM | {"network": 300.0}
    vantages = {"eu": switch(LLM, edge), "us": switch(FAR, edge, CHANGE + EVERY)}
    replay = Replay()
    replay.feed(timeline(9, vantages))
    fired = {t.identity for t in replay.changes() if t.after is State.FIRING}
    assert [(i.scope, i.vantage) for i in fired] == [("service", None)]
