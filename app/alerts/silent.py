"""``vantage_silent`` — a vantage stopped reporting: no run from it for ``after`` of its
shortest assigned interval. Pure: what the server has heard, the time, and the setting.

One alert per vantage (the agent, or the server's own), over all its targets: its target
is ``TARGET``. It goes through the same state table, outbox and notifiers as the
detectors' alerts; hysteresis keeps it from flapping: it fires after ``after`` intervals
of silence, and clears only once the vantage's latest run is at most ``after − 1``
intervals old (then ``recover`` such checks in a row, as any alert). Silence is counted
from ``START_GRACE`` after the server's start for a vantage not heard from since, so a
restarted server does not call every agent silent before it had a chance to report.

The server's own vantage reports to the server itself: its liveness is its scheduler's. While
the scheduler keeps to its schedule (``Heard.on_schedule``: running, and no due run more
than its misfire grace, a minute, overdue) the own vantage is not silent, however late a
loaded minute starts its runs or slow the database makes their store (lateness is
``phasewatch_schedule_lateness_seconds``, a store that waits a /healthz problem); a
scheduler that stops keeping time is judged by its stored runs like any vantage.

``is_silent`` is the one answer to "is this vantage silent now?" that the API, the
vantages page and /metrics give: the alert's own ``judge``.

A vantage that has never reported at all (a declared agent not started yet) is a warning,
not a page: nothing that worked has stopped, someone has yet to start it. Once it has
reported, its silence pages (critical). Each vantage has both identities; the one that does
not apply is told to clear (``findings``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from app.alerts.identity import Identity
from app.alerts.state import Rules
from app.analysis.detectors.base import CRITICAL, WARNING, Finding, Named, Signal

KIND = "vantage_silent"
TARGET = "*"  # every target of the vantage: one alert per vantage, not per target
SCOPE = "vantage"
DEFAULT_AFTER = 3
# Fires on its first hit (the silence itself already spans ``after`` intervals); resolves
# after two clear checks in a row, like the detectors' alerts.
RULES = Rules(confirm=1, recover=2)
# An agent retries a push with backoff up to a minute: after the server (re)starts, a
# vantage not yet heard from gets that long to report before its silence counts.
START_GRACE = timedelta(minutes=1)


@dataclass(frozen=True, slots=True)
class Heard:
    """What the server knows of one vantage at a check."""

    vantage: str
    interval_s: float | None  # its shortest assigned interval; None: nothing assigned
    last_run: datetime | None  # its latest run (stored or pushed); None: none seen lately
    ever: bool = False  # any run from it at all, ever (a latest run says so too)
    # The server's own vantage while its scheduler keeps to its schedule: heard now.
    on_schedule: bool = False

    @property
    def never_reported(self) -> bool:
        """No run from it, ever: a declared agent not started yet."""
        return not self.ever and self.last_run is None


def judge(heard: Heard, since: datetime, now: datetime, after: int) -> Finding:
    """HIT: silent for more than ``after`` intervals; CLEAR: heard within ``after − 1``
    (or nothing is assigned to it any more); HOLD between. A vantage not heard from since
    the server started at ``since`` is counted from ``START_GRACE`` after it. The server's
    own vantage, its scheduler on schedule, is heard now."""
    if heard.interval_s is None or heard.on_schedule:
        return Finding(Signal.CLEAR)
    last = since + START_GRACE  # not heard from since the start
    if heard.last_run is not None and heard.last_run >= since:
        last = heard.last_run
    quiet_s = (now - last).total_seconds()
    numbers: dict[str, Any] = {
        "silent_s": round(quiet_s, 1),
        "interval_s": heard.interval_s,
        "after": after,
        "last_run": None if heard.last_run is None else heard.last_run.isoformat(),
        "never": heard.never_reported,
        "vantage": heard.vantage,
    }
    if quiet_s > after * heard.interval_s:
        return Finding(Signal.HIT, numbers)
    # No numbers: the alert keeps the silence's, as last seen, to explain it.
    if quiet_s <= (after - 1) * heard.interval_s:
        return Finding(Signal.CLEAR)
    return Finding(Signal.HOLD)


def is_silent(
    heard: Heard, since: datetime, now: datetime, after: int, alert_open: bool = False
) -> bool:
    """Silent now, by the alert's rule (``judge``): past ``after`` intervals; between
    ``after − 1`` and ``after`` (its hysteresis) as its alert stands (``alert_open``)."""
    signal = judge(heard, since, now, after).signal
    return signal is Signal.HIT or (signal is Signal.HOLD and alert_open)


def identity(vantage: str, severity: str = CRITICAL) -> Identity:
    return Identity(KIND, TARGET, vantage, SCOPE, severity=severity)


def identities(vantage: str) -> tuple[Identity, Identity]:
    """A vantage's two: silent after reporting (critical), never reported (warning)."""
    return identity(vantage, CRITICAL), identity(vantage, WARNING)


def findings(heard: Heard, since: datetime, now: datetime, after: int) -> dict[Identity, Finding]:
    """The judgement under the identity it belongs to (never reported: the warning), and a
    clear for the other, so an agent that starts ends its "never reported" at once."""
    stopped, never = identities(heard.vantage)
    judged, other = (never, stopped) if heard.never_reported else (stopped, never)
    return {judged: judge(heard, since, now, after), other: Finding(Signal.CLEAR)}


def rules(heard: Heard, after: int) -> Rules:
    """``RULES``, and a resolved silence fires again only once quiet, or silent, for as
    long as it takes to fire at all: a vantage that drops out for good is news, one that
    blinks is not."""
    return replace(RULES, refire_hold=timedelta(seconds=after * (heard.interval_s or 0.0)))


def sentence(identity: Named, n: dict[str, Any]) -> str:
    if n.get("never"):
        return (
            f"vantage never reported: no run from it in the {n['silent_s']:g} s since the"
            f" server started (its intervals are {n['interval_s']:g} s); is its agent running?"
            f" (phasewatch agent --vantage {n.get('vantage', '…')})"
        )
    return (
        f"vantage silent: no run for {n['silent_s']:g} s,"
        f" over {n['after']} of its {n['interval_s']:g} s intervals"
    )


def current(identity: Named, n: dict[str, Any]) -> str:
    return f"{n['silent_s']:g} s"
