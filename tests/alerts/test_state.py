"""The alert state machine, pair by pair: every (state × signal), then promotion by streak."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import product

import pytest

from app.alerts.evaluate import Evaluator
from app.alerts.history import MemoryHistory
from app.alerts.identity import Alert, Identity
from app.alerts.pervantage import active_at
from app.alerts.state import TRANSITIONS, Cooling, Position, Rules, State, step
from app.analysis.detectors import DetectorParams, Finding, Signal

S, G = State, Signal
NOW = datetime(2026, 3, 2, 12, tzinfo=UTC)
# Long enough streaks that no single step promotes: each pair's own effect shows.
RULES = Rules(confirm=3, recover=3)
# A streak in progress where the state keeps one, so ADD, START and KEEP differ.
STREAK = {S.INACTIVE: 0, S.PENDING: 1, S.FIRING: 0, S.RECOVERING: 1, S.RESOLVED: 0}

# (state, signal) -> (next state, next streak), from STREAK[state] under RULES.
EXPECTED: dict[tuple[State, Signal], tuple[State, int]] = {
    (S.INACTIVE, G.HIT): (S.PENDING, 1),
    (S.INACTIVE, G.HOLD): (S.INACTIVE, 0),
    (S.INACTIVE, G.CLEAR): (S.INACTIVE, 0),
    (S.INACTIVE, G.ACK): (S.INACTIVE, 0),
    (S.PENDING, G.HIT): (S.PENDING, 2),
    (S.PENDING, G.HOLD): (S.INACTIVE, 0),
    (S.PENDING, G.CLEAR): (S.INACTIVE, 0),
    (S.PENDING, G.ACK): (S.INACTIVE, 0),
    (S.FIRING, G.HIT): (S.FIRING, 0),
    (S.FIRING, G.HOLD): (S.FIRING, 0),
    (S.FIRING, G.CLEAR): (S.RECOVERING, 1),
    (S.FIRING, G.ACK): (S.RESOLVED, 0),
    (S.RECOVERING, G.HIT): (S.FIRING, 0),
    # A hold neither counts towards recovery nor starts it again.
    (S.RECOVERING, G.HOLD): (S.RECOVERING, 1),
    (S.RECOVERING, G.CLEAR): (S.RECOVERING, 2),
    (S.RECOVERING, G.ACK): (S.RESOLVED, 0),
    (S.RESOLVED, G.HIT): (S.RESOLVED, 0),
    (S.RESOLVED, G.HOLD): (S.RESOLVED, 0),
    (S.RESOLVED, G.CLEAR): (S.RESOLVED, 0),
    (S.RESOLVED, G.ACK): (S.RESOLVED, 0),
}


def test_the_tables_cover_every_state_and_signal_pair() -> None:
    every = set(product(State, Signal))
    assert set(TRANSITIONS) == every
    assert set(EXPECTED) == every


@pytest.mark.parametrize(("state", "signal"), sorted(EXPECTED))
def test_each_state_and_signal_pair_moves_as_the_table_says(state: State, signal: Signal) -> None:
    after = step(Position(state, STREAK[state]), signal, RULES, NOW)
    assert (after.state, after.streak) == EXPECTED[(state, signal)]


@pytest.mark.parametrize("confirm", [1, 2, 3, 5])
def test_an_alert_fires_on_exactly_the_confirm_th_consecutive_hit(confirm: int) -> None:
    rules = Rules(confirm=confirm, recover=2)
    position = Position()
    states = []
    for _ in range(confirm):
        position = step(position, Signal.HIT, rules, NOW)
        states.append(position.state)
    assert states == [State.PENDING] * (confirm - 1) + [State.FIRING]
    assert position.streak == 0


@pytest.mark.parametrize("confirm", [2, 3, 5])
def test_a_pending_alert_that_misses_one_confirmation_is_dropped(confirm: int) -> None:
    rules = Rules(confirm=confirm, recover=2)
    position = Position()
    for _ in range(confirm - 1):
        position = step(position, Signal.HIT, rules, NOW)
    assert step(position, Signal.HOLD, rules, NOW) == Position(State.INACTIVE, 0)
    # Starting over needs the whole streak again.
    position = step(step(position, Signal.HOLD, rules, NOW), Signal.HIT, rules, NOW)
    assert position == (Position(State.PENDING, 1, NOW) if confirm > 1 else Position(State.FIRING))


@pytest.mark.parametrize("recover", [1, 2, 4, 7])
def test_a_firing_alert_resolves_on_exactly_the_recover_th_clear(recover: int) -> None:
    rules = Rules(confirm=2, recover=recover)
    position = Position(State.FIRING)
    states = []
    for _ in range(recover):
        position = step(position, Signal.CLEAR, rules, NOW)
        states.append(position.state)
    assert states == [State.RECOVERING] * (recover - 1) + [State.RESOLVED]


@pytest.mark.parametrize("recover", [2, 3, 5])
def test_a_hit_while_recovering_fires_again_and_recovery_starts_over(recover: int) -> None:
    rules = Rules(confirm=2, recover=recover)
    position = Position(State.FIRING)
    for _ in range(recover - 1):
        position = step(position, Signal.CLEAR, rules, NOW)
    position = step(position, Signal.HIT, rules, NOW)
    assert position == Position(State.FIRING, 0)
    for _ in range(recover - 1):
        position = step(position, Signal.CLEAR, rules, NOW)
    assert position.state is State.RECOVERING  # the earlier clears no longer count


def test_open_and_active_positions() -> None:
    opened = {state for state in State if Position(state).open}
    active = {state for state in State if Position(state).active}
    assert opened == {State.PENDING, State.FIRING, State.RECOVERING}
    assert active == {State.FIRING, State.RECOVERING}


def test_a_recovering_alert_keeps_firing_until_clear_for_keep_firing_for() -> None:
    rules = Rules(confirm=2, recover=2, keep_firing_for=timedelta(hours=1))
    position = step(Position(State.FIRING), Signal.CLEAR, rules, NOW)
    assert position == Position(State.RECOVERING, 1, NOW)
    # The second clear comes after 15 minutes: enough clears, not long enough.
    position = step(position, Signal.CLEAR, rules, NOW + timedelta(minutes=15))
    assert (position.state, position.streak) == (State.RECOVERING, 2)
    position = step(position, Signal.HOLD, rules, NOW + timedelta(minutes=30))
    assert position.state is State.RECOVERING  # a hold neither resolves nor restarts
    position = step(position, Signal.CLEAR, rules, NOW + timedelta(minutes=59))
    assert position.state is State.RECOVERING
    assert step(position, Signal.CLEAR, rules, NOW + timedelta(hours=1)).state is State.RESOLVED


def test_a_hit_while_recovering_restarts_the_keep_firing_clock() -> None:
    rules = Rules(confirm=2, recover=1, keep_firing_for=timedelta(hours=1))
    position = step(Position(State.FIRING), Signal.CLEAR, rules, NOW)
    position = step(position, Signal.HIT, rules, NOW + timedelta(minutes=50))
    assert position == Position(State.FIRING, 0, None)
    position = step(position, Signal.CLEAR, rules, NOW + timedelta(minutes=55))
    later = NOW + timedelta(minutes=65)  # an hour after the first clear, ten minutes after this one
    assert step(position, Signal.CLEAR, rules, later).state is State.RECOVERING
    assert step(position, Signal.CLEAR, rules, later + timedelta(hours=1)).state is State.RESOLVED


H = timedelta(hours=1)


@pytest.mark.parametrize(
    ("signals", "over_at", "expected"),
    [
        # (minutes after the resolution, signal) seen; asked at over_at hours: over?
        ([], 6, True),  # quiet since it resolved
        ([], 5, False),
        ([(60, G.HIT)], 6, False),  # a hit an hour in: quiet again only from its end
        ([(60, G.HIT), (75, G.CLEAR)], 7.2, False),
        ([(60, G.HIT), (75, G.CLEAR)], 7.25, True),
        ([(60, G.HIT), (75, G.HIT), (90, G.HIT)], 7, True),  # held for six hours: news
        ([(60, G.HOLD)], 6, True),  # a hold is not a hit
    ],
)
def test_cooling_ends_after_quiet_or_a_recurrence_that_lasts_the_hold(
    signals: list[tuple[int, Signal]], over_at: float, expected: bool
) -> None:
    cooling = Cooling(quiet_since=NOW)
    for minutes, signal in signals:
        cooling.saw(signal, NOW + timedelta(minutes=minutes))
    assert cooling.over(6 * H, NOW + over_at * H) is expected


# A finding that is its own confirmation (pooled evidence over every vantage's newest runs)
# fires on its first hit; any other waits for the rule's streak.
@pytest.mark.parametrize(
    ("confirmed", "states"),
    [(False, ["pending", "firing"]), (True, ["firing", "firing"])],
)
def test_a_confirmed_finding_fires_on_its_first_hit(confirmed: bool, states: list[str]) -> None:
    evaluator = Evaluator(MemoryHistory(), lambda _target: DetectorParams(), seed=1)
    identity = Identity("dominant_shift", "t", None, "service", "network", "queue")
    found = {identity: Finding(Signal.HIT, {}, confirmed=confirmed)}
    rules = Rules(confirm=2, recover=2)
    seen = []
    for k in range(2):
        moved = evaluator.apply(found, NOW + k * timedelta(minutes=15), lambda _i: rules)
        seen += [t.after.value for t in moved]
    assert seen == states


# A resolved alert that told of a lasting change re-bases the vantage's references from
# when it opened (as an acknowledgement does): a leader change once it was told for hours
# (one over within them, a burst or a drift's first hours, leaves them be), a level shift
# always (it is told for its window's runs, then resolves); other kinds never.
@pytest.mark.parametrize(
    ("kind", "firing", "rebased"),
    [
        ("dominant_shift", timedelta(hours=6), True),
        ("level_shift", timedelta(days=3), True),
        ("tail_shift", timedelta(days=3), False),
        ("dominant_shift", timedelta(minutes=15), False),  # one run: seed 4's drift
        ("dominant_shift", timedelta(hours=1), False),
        ("level_shift", timedelta(hours=5, minutes=45), True),
        ("level_shift", timedelta(minutes=30), True),  # told for its window, then over
    ],
)
def test_a_resolved_change_rebases_the_references(
    kind: str, firing: timedelta, rebased: bool
) -> None:
    evaluator = Evaluator(MemoryHistory(), lambda _target: DetectorParams(), seed=1)
    identity = Identity(kind, "t", "eu", "vantage")
    rules = Rules(confirm=1, recover=1)
    for at, signal in ((NOW, Signal.HIT), (NOW + firing, Signal.CLEAR)):
        evaluator.apply({identity: Finding(signal, {})}, at, lambda _i: rules)
    assert identity not in evaluator.alerts
    memory = evaluator.memory("t", "eu")
    assert (memory.rebase_at == NOW) is rebased
    assert memory.excluded == [(NOW, NOW + firing)]  # its own runs stay out


# What a vantage's detectors are told is firing there: its own alerts and the service's.
@pytest.mark.parametrize(
    ("where", "state", "expected"),
    [
        ("eu", State.FIRING, {("tail_shift", "critical")}),
        (None, State.FIRING, {("tail_shift", "critical")}),  # the service's pooled tail
        (None, State.PENDING, set()),  # not told yet
        ("us", State.FIRING, set()),  # another vantage's own
    ],
)
def test_the_alerts_active_at_a_vantage_include_the_services(
    where: str | None, state: State, expected: set[tuple[str, str]]
) -> None:
    identity = Identity("tail_shift", "t", where, "vantage" if where else "service")
    alerts = {identity: Alert("a", identity, Position(state), opened_at=NOW)}
    assert active_at(alerts, "t", "eu") == expected
