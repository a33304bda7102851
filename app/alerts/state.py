"""The alert lifecycle as data: (state, signal) -> next state. Pure, and tested pair by pair.

    inactive ─hit─▶ pending ─hit×confirm─▶ firing ─clear─▶ recovering ─clear×recover─▶ resolved
                       │                      ▲                 │
                       └─(anything else)─▶ inactive             └─hit─▶ firing

``hit``: the trigger condition holds. ``clear``: the resolve condition holds (detectors
use a stricter one than "no hit": hysteresis). ``hold``: neither. ``ack``: a person
accepted the new normal. Pending alerts are never notified; a pending alert that is not
confirmed on consecutive evaluations is dropped. ``recovering`` holds a firing alert
against flapping until it has been clear ``recover`` times in a row *and* for
``keep_firing_for`` (as Prometheus' rule setting of that name): one quiet window is not a
recovery. Re-firing after a resolution is held back by the evaluator (``Cooling``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from app.analysis.detectors.base import Signal


class State(StrEnum):
    INACTIVE = "inactive"
    PENDING = "pending"
    FIRING = "firing"
    RECOVERING = "recovering"
    RESOLVED = "resolved"


class Count(StrEnum):
    KEEP = "keep"
    START = "start"  # this signal is the first of a streak
    ADD = "add"  # one more of the streak


S, G, C = State, Signal, Count
TRANSITIONS: dict[tuple[State, Signal], tuple[State, Count]] = {
    (S.INACTIVE, G.HIT): (S.PENDING, C.START),
    (S.INACTIVE, G.HOLD): (S.INACTIVE, C.KEEP),
    (S.INACTIVE, G.CLEAR): (S.INACTIVE, C.KEEP),
    (S.INACTIVE, G.ACK): (S.INACTIVE, C.KEEP),
    (S.PENDING, G.HIT): (S.PENDING, C.ADD),
    (S.PENDING, G.HOLD): (S.INACTIVE, C.KEEP),
    (S.PENDING, G.CLEAR): (S.INACTIVE, C.KEEP),
    (S.PENDING, G.ACK): (S.INACTIVE, C.KEEP),
    (S.FIRING, G.HIT): (S.FIRING, C.KEEP),
    (S.FIRING, G.HOLD): (S.FIRING, C.KEEP),
    (S.FIRING, G.CLEAR): (S.RECOVERING, C.START),
    (S.FIRING, G.ACK): (S.RESOLVED, C.KEEP),
    (S.RECOVERING, G.HIT): (S.FIRING, C.KEEP),
    (S.RECOVERING, G.HOLD): (S.RECOVERING, C.KEEP),
    (S.RECOVERING, G.CLEAR): (S.RECOVERING, C.ADD),
    (S.RECOVERING, G.ACK): (S.RESOLVED, C.KEEP),
    (S.RESOLVED, G.HIT): (S.RESOLVED, C.KEEP),
    (S.RESOLVED, G.HOLD): (S.RESOLVED, C.KEEP),
    (S.RESOLVED, G.CLEAR): (S.RESOLVED, C.KEEP),
    (S.RESOLVED, G.ACK): (S.RESOLVED, C.KEEP),
}
# A streak long enough promotes: pending -> firing, recovering -> resolved.
PROMOTIONS = {S.PENDING: S.FIRING, S.RECOVERING: S.RESOLVED}


@dataclass(frozen=True, slots=True)
class Rules:
    confirm: int = 2  # consecutive hits before an alert fires
    recover: int = 2  # consecutive clears before a firing alert resolves ...
    keep_firing_for: timedelta = timedelta(0)  # ... and clear for at least this long
    refire_hold: timedelta = timedelta(0)  # a resolved alert's hold (Cooling.over)


@dataclass(frozen=True, slots=True)
class Position:
    state: State = State.INACTIVE
    streak: int = 0
    since: datetime | None = None  # when the streak began

    @property
    def open(self) -> bool:
        """Pending, firing or recovering: an episode in progress."""
        return self.state in (State.PENDING, State.FIRING, State.RECOVERING)

    @property
    def active(self) -> bool:
        """Firing or recovering: what a person has been told about."""
        return self.state in (State.FIRING, State.RECOVERING)


def step(position: Position, signal: Signal, rules: Rules, now: datetime) -> Position:
    state, count = TRANSITIONS[(position.state, signal)]
    streak = {C.KEEP: position.streak, C.START: 1, C.ADD: position.streak + 1}[count]
    since = now if count is C.START else position.since
    if state is not position.state and count is C.KEEP:
        streak, since = 0, None
    needed = {S.PENDING: rules.confirm, S.RECOVERING: rules.recover}.get(state)
    if needed is not None and streak >= needed and _long_enough(state, since, rules, now):
        return Position(PROMOTIONS[state], 0)
    return Position(state, streak, since)


def _long_enough(state: State, since: datetime | None, rules: Rules, now: datetime) -> bool:
    if state is not S.RECOVERING or since is None:
        return True
    return now - since >= rules.keep_firing_for


@dataclass
class Cooling:
    """A resolved alert's key, held back from firing again until its condition has been
    quiet for the hold time, or has held that long without a break (a lasting recurrence
    is news; one that comes and goes is a flap)."""

    quiet_since: datetime | None
    hit_since: datetime | None = None

    def saw(self, signal: Signal, now: datetime) -> None:
        if signal is Signal.HIT:
            self.quiet_since, self.hit_since = None, self.hit_since or now
        else:
            self.quiet_since, self.hit_since = self.quiet_since or now, None

    def over(self, hold: timedelta, now: datetime) -> bool:
        since = self.quiet_since or self.hit_since
        return since is not None and now - since >= hold
