"""A vantage's reference window is read when a reference can be built, not on every run:
a new target has none for its first day, and reading its whole history after each of its
runs grew memory and CPU with every run (a soak of 100 targets at 10 s); and its runs'
times tell a span too short before any run is read (each hourly retry read the window, and
the database history kept it: a hundred new targets' windows at once, every hour)."""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np

from app.alerts.evaluate import Evaluator
from app.alerts.history import MemoryHistory
from app.alerts.references import RETRY_SHORT
from app.analysis.detectors import DetectorParams
from app.analysis.runs import RunData
from tests.runfactory import T0, make_run

PARAMS = DetectorParams(enabled=("probe_failing", "tail_shift"))


class CountedHistory(MemoryHistory):
    """``MemoryHistory`` that counts the reference windows asked of it."""

    def __init__(self) -> None:
        super().__init__()
        self.windows = 0

    def window(self, target: str, vantage: str, start: datetime, end: datetime) -> list[RunData]:
        self.windows += 1
        return super().window(target, vantage, start, end)


class Feed:
    def __init__(self) -> None:
        self.history = CountedHistory()
        self.evaluator = Evaluator(self.history, lambda _target: PARAMS)
        self.rng = np.random.default_rng(3)

    def run(self, at: datetime, *, evaluate: bool = True) -> None:
        self.history.add(make_run(self.rng, at, n=5))
        if evaluate:
            self.evaluator.evaluate("chat", "eu", at)

    def has_reference(self) -> bool:
        return self.evaluator.memory("chat", "eu").reference is not None


def test_a_new_target_asks_for_its_reference_once_a_day_can_be_spanned_not_every_run() -> None:
    feed = Feed()
    every = timedelta(minutes=2)
    runs = int(timedelta(hours=25) / every)
    built_at = None
    for k in range(runs):
        feed.run(T0 + k * every)
        if built_at is None and feed.has_reference():
            built_at, asked = k, feed.history.windows
    # Not once a run (724 times before), nor at each hourly retry (for runs a spool may
    # flush late) while the runs' times could not span a day (25 times before): once, the
    # read that built it.
    assert built_at is not None and asked == 1
    # Built at the first run whose reference window (before the 4 recent runs) spans a day.
    assert T0 + (built_at - 4) * every - T0 >= timedelta(days=1)
    assert T0 + (built_at - 5) * every - T0 < timedelta(days=1)


def test_runs_flushed_late_and_older_are_found_within_the_retry_bound() -> None:
    feed = Feed()
    now = T0 + timedelta(days=3)
    for k in range(6):
        feed.run(now + k * timedelta(minutes=1))
    assert not feed.has_reference()
    # A spool flushes 37 hours of older runs at once; the wait set by the first runs (a day
    # after them) is cut to ``RETRY_SHORT``.
    for k in range(150):
        feed.run(T0 + timedelta(days=1) + k * timedelta(minutes=15), evaluate=False)
    later = now + timedelta(minutes=10)
    feed.run(later)
    assert not feed.has_reference()
    feed.run(now + RETRY_SHORT + timedelta(minutes=1))
    assert feed.has_reference()
