"""``vantage_silent``: the decision table (pure), and the check over a real database as the
service runs it — one alert per silent vantage through the state table and the outbox,
resolved once the vantage reports again, restored (never re-fired) after a restart."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import numpy as np
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.agents.server.book import VantageBook
from app.agents.server.watch import VantageWatch
from app.alerts import silent
from app.alerts.engine import AlertEngine
from app.alerts.evaluate import Evaluator
from app.alerts.silent import Heard
from app.alerts.state import State
from app.analysis.detectors import DetectorParams, Signal
from app.config import Target, TargetsFile
from app.runtime.targetsync import target_values
from app.store.dbhistory import DatabaseHistory
from app.store.ingest import store_run
from app.store.models import AlertRow, AlertTransitionRow, DeliveryRow
from app.store.targets import sync_targets
from tests.runfactory import T0, make_run, record_of

MINUTE = timedelta(minutes=1)
H, C, HOLD = Signal.HIT, Signal.CLEAR, Signal.HOLD


# The decision ---------------------------------------------------------------------------

# (interval s, last run: minutes before now or None, server started: minutes before now,
#  after) -> signal
CASES = [
    (60.0, 0.5, 60, 3, C),  # heard lately
    (60.0, 2.0, 60, 3, C),  # at most after − 1 intervals: clear
    (60.0, 2.5, 60, 3, HOLD),  # between: hold (hysteresis)
    (60.0, 3.0, 60, 3, HOLD),  # exactly after intervals: not yet silent
    (60.0, 3.5, 60, 3, H),  # more than after intervals
    (60.0, None, 60, 3, H),  # never heard, the server up for an hour
    (60.0, None, 1, 3, C),  # never heard, but the server just started
    (1.0, None, 0.5, 3, C),  # short intervals: the start's grace (a minute) still holds
    (1.0, None, 1.1, 3, H),
    (60.0, 90.0, 2, 3, C),  # heard before the server's start: counted from the grace's end
    (60.0, 90.0, 4, 3, HOLD),
    (60.0, 90.0, 5, 3, H),
    (60.0, 4.5, 60, 5, HOLD),  # a longer setting waits longer
    (60.0, 5.5, 60, 5, H),
    (1.0, 3.5, 60, 3, H),  # seconds-long intervals alike
    (None, None, 60, 3, C),  # nothing assigned: nothing to report
]


@pytest.mark.parametrize(("interval", "last", "started", "after", "signal"), CASES)
def test_a_vantage_is_silent_after_n_intervals_without_a_run(
    interval: float | None, last: float | None, started: float, after: int, signal: Signal
) -> None:
    now = T0 + 24 * 60 * MINUTE
    heard = Heard("fra-1", interval, None if last is None else now - last * MINUTE)
    finding = silent.judge(heard, now - started * MINUTE, now, after)
    assert finding.signal is signal


# (interval s, last run: minutes before now or None, server started: minutes before now,
#  own vantage on schedule, alert open) -> silent now, as the API, the page and /metrics say
SILENT_NOW = [
    (1.0, None, 8 / 60, False, False, False),  # 8 s after the start: the grace, as the alert
    (1.0, None, 61 / 60, False, False, False),  # 1 s past the grace: within 3 intervals
    (1.0, None, 64 / 60, False, False, True),  # 4 s past it: silent, as the alert fires
    (60.0, 2.5, 60, False, False, False),  # the hysteresis band: as its alert stands
    (60.0, 2.5, 60, False, True, True),
    (60.0, 2.0, 60, False, True, False),  # heard within after − 1: no longer silent
    (60.0, 3.5, 60, False, False, True),
    (1.0, 5.0, 60, True, False, False),  # the server's own, its scheduler on schedule:
    (1.0, None, 60, True, True, False),  # a loaded minute stores nothing, it is not silent
    (None, None, 60, False, True, False),  # nothing assigned
]


@pytest.mark.parametrize(("interval", "last", "started", "kept", "open_", "quiet"), SILENT_NOW)
def test_silent_now_is_the_alert_s_own_rule(
    interval: float | None,
    last: float | None,
    started: float,
    kept: bool,
    open_: bool,
    quiet: bool,
) -> None:
    now = T0 + 24 * 60 * MINUTE
    at = None if last is None else now - last * MINUTE
    heard = Heard("v", interval, at, on_schedule=kept)
    since = now - started * MINUTE
    assert silent.is_silent(heard, since, now, 3, alert_open=open_) is quiet
    if not open_:  # with no alert open, silent now is the alert's own decision: fire
        assert (silent.judge(heard, since, now, 3).signal is Signal.HIT) is quiet


def test_a_silent_finding_says_how_long_and_how_many_intervals() -> None:
    now = T0 + 60 * MINUTE
    finding = silent.judge(Heard("fra-1", 60.0, now - 4 * MINUTE), T0, now, 3)
    sentence = silent.sentence(silent.identity("fra-1"), finding.numbers)
    assert sentence == "vantage silent: no run for 240 s, over 3 of its 60 s intervals"


# The check over a database --------------------------------------------------------------

VANTAGES = {"agent-a": {"token": "token-a-0123456789abcdef"}, "agent-b": {"token": "t" * 20}}
TARGET = Target(name="chat", url="http://chat.invalid/", interval="1m", vantages=[*VANTAGES, "own"])
FILE = TargetsFile(targets=[TARGET], vantages=VANTAGES)  # type: ignore[arg-type]
NOTIFIERS = ["hook", "am"]


@dataclass
class Check:
    """The service's check: engine, book and watch over one database, on a test clock."""

    sessions: sessionmaker[Session]
    now: datetime = T0
    # The server's own scheduler ("own" here): keeping to its schedule at a time?
    on_schedule: Callable[[datetime], bool] = lambda _now: False
    book: VantageBook = field(init=False)
    watch: VantageWatch = field(init=False)

    def __post_init__(self) -> None:
        with self.sessions.begin() as session:
            sync_targets(session, target_values([TARGET]), T0)
        self.book = VantageBook(since=T0)
        self.restart()

    def restart(self) -> None:
        evaluator = Evaluator(DatabaseHistory(self.sessions), lambda _t: DetectorParams())
        engine = AlertEngine(self.sessions, evaluator, lambda _t: list(NOTIFIERS), self.clock)
        own = ("own", [TARGET])
        self.watch = VantageWatch(
            engine, self.book, lambda: FILE, lambda: True, lambda: own, self.clock, self.on_schedule
        )

    def clock(self) -> datetime:
        return self.now

    def at(self, minutes: float) -> list[tuple[str | None, State]]:
        self.now = T0 + minutes * MINUTE
        return [(t.identity.vantage, t.after) for t in self.watch.check() if t.moved]

    def ran(self, vantage: str, minutes: float) -> None:
        """A run stored at ``vantage`` (the agents' pushed, as the agent API does)."""
        run = make_run(np.random.default_rng(1), T0 + minutes * MINUTE, vantage=vantage, n=3)
        with self.sessions.begin() as session:
            store_run(session, record_of(run), self.now)
        if vantage in VANTAGES:
            self.book.pushed(vantage, T0 + minutes * MINUTE, None, None)


def test_a_vantage_that_stops_reporting_fires_once_and_resolves_when_it_reports(
    sessions: sessionmaker[Session],
) -> None:
    check = Check(sessions)
    for vantage in ("agent-a", "agent-b", "own"):
        check.ran(vantage, 0.5)
    assert check.at(2) == []
    for vantage in ("agent-a", "own"):
        check.ran(vantage, 3)
    assert check.at(4) == [("agent-b", State.FIRING)]  # 3.5 min since its last run
    check.ran("agent-a", 4.5)
    check.ran("own", 4.5)
    assert check.at(5) == []  # still silent: a refresh, no change
    check.ran("agent-b", 5.5)
    assert check.at(6) == [("agent-b", State.RECOVERING)]
    assert check.at(6.2) == [("agent-b", State.RESOLVED)]  # two clear checks in a row

    with sessions() as session:
        (alert,) = session.scalars(select(AlertRow))
        moves = [(t.before, t.after) for t in session.scalars(select(AlertTransitionRow))]
        sent = sorted(
            (d.notifier, d.payload["state"]) for d in session.scalars(select(DeliveryRow))
        )
    assert (alert.kind, alert.target, alert.vantage, alert.state) == (
        "vantage_silent",
        "*",
        "agent-b",
        "resolved",
    )
    assert moves == [("inactive", "firing"), ("firing", "recovering"), ("recovering", "resolved")]
    # Fired and resolved to each notifier; the refresh only to those that want one (all here).
    assert sent == [(n, s) for n in sorted(NOTIFIERS) for s in ("firing", "firing", "resolved")]
    # Explained by the silence when it fired (210 s since 0.5 min), and as last seen (a
    # refresh at 5 min: 270 s).
    assert (
        alert.summary
        == "vantage silent: no run for 210 s, over 3 of its 60 s intervals at agent-b;"
        " now 270 s"
    )


def test_the_server_s_own_vantage_is_watched_too(sessions: sessionmaker[Session]) -> None:
    check = Check(sessions)
    for vantage in ("agent-a", "agent-b"):
        check.ran(vantage, 3.5)
    assert check.at(4) == []  # never heard: counted from a minute after the start
    assert check.at(4.2) == [("own", State.FIRING)]


def test_the_server_s_own_vantage_is_not_silent_while_its_scheduler_keeps_time(
    sessions: sessionmaker[Session],
) -> None:
    kept = [True]
    check = Check(sessions, on_schedule=lambda _now: kept[0])
    for vantage in ("agent-a", "agent-b"):
        check.ran(vantage, 3.5)
    # A loaded stretch: no run of its own stored for minutes, the scheduler still on time.
    assert check.at(4.2) == []
    kept[0] = False  # the scheduler stopped keeping time: its silence counts as any
    assert check.at(4.3) == [("own", State.FIRING)]


def test_a_restart_restores_an_open_silence_without_firing_it_again(
    sessions: sessionmaker[Session],
) -> None:
    check = Check(sessions)
    check.ran("agent-b", 0.5)
    check.ran("agent-a", 3.5)
    check.ran("own", 3.5)
    assert check.at(4) == [("agent-b", State.FIRING)]
    check.restart()
    assert check.at(4.5) == []
    check.ran("agent-b", 4.6)
    assert check.at(5) == [("agent-b", State.RECOVERING)]


def test_a_blink_after_a_resolution_is_held_back(sessions: sessionmaker[Session]) -> None:
    """Silent again within the hold (3 intervals) of its resolution: no new alert."""
    check = Check(sessions)
    check.ran("agent-b", 0.5)
    check.ran("agent-a", 3.5)
    check.ran("own", 3.5)
    assert check.at(4) == [("agent-b", State.FIRING)]
    check.ran("agent-b", 4.5)
    assert check.at(4.6) == [("agent-b", State.RECOVERING)]
    assert check.at(4.7) == [("agent-b", State.RESOLVED)]
    check.ran("agent-a", 8)
    check.ran("own", 8)
    assert check.at(8.1) == []  # agent-b silent 3.6 min, but resolved 3.4 min ago
    assert check.at(11) == []  # silent since 8.1: not yet for the whole hold
    check.ran("agent-a", 11)
    check.ran("own", 11)
    assert check.at(11.2) == [("agent-b", State.FIRING)]  # now for the whole hold: news


def test_a_vantage_that_never_reported_is_a_warning_until_it_does_then_its_silence_pages(
    sessions: sessionmaker[Session],
) -> None:
    check = Check(sessions)
    check.ran("agent-a", 3.5)
    check.ran("own", 3.5)
    assert check.at(4.2) == [("agent-b", State.FIRING)]
    with sessions() as session:
        (alert,) = session.scalars(select(AlertRow).where(AlertRow.vantage == "agent-b"))
    assert (alert.severity, alert.state) == ("warning", "firing")
    assert alert.summary.startswith("vantage never reported: no run from it in the 192 s since")
    assert "phasewatch agent --vantage agent-b" in alert.summary
    check.ran("agent-b", 4.5)  # the agent starts: its "never reported" ends at once
    assert check.at(4.6) == [("agent-b", State.RECOVERING)]
    assert check.at(4.7) == [("agent-b", State.RESOLVED)]
    for vantage in ("agent-a", "own"):
        check.ran(vantage, 8.5)
    assert check.at(8.6) == [("agent-b", State.FIRING)]  # it reported once: silence pages
    with sessions() as session:
        severities = {a.severity: a.state for a in session.scalars(select(AlertRow))}
    assert severities == {"warning": "resolved", "critical": "firing"}


def test_an_agent_quiet_since_before_the_window_but_heard_once_pages_not_warns(
    sessions: sessionmaker[Session],
) -> None:
    """Its runs are older than the window the check reads: it has reported, so its
    silence is a page, not a "never reported" warning."""
    check = Check(sessions)
    check.ran("agent-b", -600)  # ten hours before the server started
    check.book = VantageBook(since=T0)  # a restarted server: it heard nothing of it
    check.restart()
    check.ran("agent-a", 4)
    check.ran("own", 4)
    assert check.at(4.2) == [("agent-b", State.FIRING)]
    with sessions() as session:
        (alert,) = session.scalars(select(AlertRow).where(AlertRow.vantage == "agent-b"))
    assert alert.severity == "critical" and alert.summary.startswith("vantage silent: no run")
