"""Deadline misses as an SLO with an error budget: burn rates over time windows.

The objective is the share of timed requests (answered or cut at the deadline) that finish
within the deadline, over a budget window (99 % over 30 days by default). The error rate
of a window is its censored share; its **burn rate** is that rate over the budget's
(1 − objective): at 1× the budget lasts exactly the budget window, at 14.4× two per cent
of it goes in an hour. The multiwindow, multi-burn-rate alert of the SRE workbook (ch. 5)
pairs a long window (is a real share of the budget gone?) with a short one (is it still
burning now?), so it fires fast on a fast burn and stops firing soon after the burn stops.

Pure: counts and times in, numbers out. The ledger keeps each run's counts for the last
hours and folds older runs into hourly buckets, so its size is bounded by the budget window
whatever the probing interval.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np

HOUR = timedelta(hours=1)
FINE_FOR = timedelta(hours=7)  # runs kept one by one: every window up to 6 h is exact


@dataclass(frozen=True, slots=True)
class BurnWindow:
    """Alert when both windows burn at ``factor`` or more (the workbook's pairs)."""

    long: timedelta
    short: timedelta
    factor: float

    def budget_share(self, budget: timedelta) -> float:
        """The share of the budget a burn at ``factor`` spends over the long window."""
        return self.factor * (self.long / budget)


@dataclass(frozen=True, slots=True)
class Counts:
    timed: int = 0
    censored: int = 0
    runs: int = 0
    runs_missing: int = 0  # runs with at least one miss: the run is the unit

    def __add__(self, other: Counts) -> Counts:
        return Counts(
            self.timed + other.timed,
            self.censored + other.censored,
            self.runs + other.runs,
            self.runs_missing + other.runs_missing,
        )

    def budget_left(self, objective: float) -> float | None:
        """The share of the budget these requests allow that is not spent (below 0:
        overspent); None without a request."""
        allowed = (1 - objective) * self.timed
        return None if allowed == 0 else 1.0 - self.censored / allowed

    def burn(self, objective: float) -> float | None:
        """The error rate over the budget's rate; None for a window with no request."""
        if self.timed == 0:
            return None
        return (self.censored / self.timed) / (1 - objective)


Sums = tuple[int, int, int, int]  # timed, censored, runs, runs with a miss
NO_SUMS: Sums = (0, 0, 0, 0)


class MissLedger:
    """Timed and censored counts by run start, newest last, for window sums."""

    def __init__(self) -> None:
        self._times: list[datetime] = []  # a run's start, or an hour bucket's start
        self._counts: list[Sums] = []
        self._prefix: list[Sums] = [NO_SUMS]  # sums of everything before index i
        self._fine_from = 0  # index of the first entry that is a run, not a bucket

    @classmethod
    def of(cls, runs: Iterable[tuple[datetime, int, int]], now: datetime) -> MissLedger:
        """A ledger of ``runs`` (start, timed, censored; oldest first) as of ``now``, in one
        pass: runs older than ``FINE_FOR`` go straight into their hour's bucket."""
        ledger = cls()
        edge = (now - FINE_FOR).replace(minute=0, second=0, microsecond=0)
        buckets: dict[datetime, Sums] = {}
        newest: datetime | None = None
        for at, timed, censored in runs:
            if newest is not None and at <= newest:
                continue
            newest, counts = at, (timed, censored, 1, int(censored > 0))
            if at < edge:
                hour = at.replace(minute=0, second=0, microsecond=0)
                buckets[hour] = _plus(buckets.get(hour, NO_SUMS), counts)
            else:
                ledger._times.append(at)
                ledger._counts.append(counts)
        times, counts_ = [*buckets, *ledger._times], [*buckets.values(), *ledger._counts]
        ledger._rebuild(times, counts_, len(buckets))
        return ledger

    def add(self, at: datetime, timed: int, censored: int) -> None:
        """One run's counts; a run older than the newest one is not taken (returns)."""
        if self._times and at <= self._times[-1]:
            return
        counts = (timed, censored, 1, int(censored > 0))
        self._times.append(at)
        self._counts.append(counts)
        t, c, r, m = self._prefix[-1]
        self._prefix.append((t + timed, c + censored, r + 1, m + counts[3]))
        if at - self._times[self._fine_from] > FINE_FOR + 2 * HOUR:
            self._fold(at - FINE_FOR)

    def since(self, start: datetime, *, at_least_one: bool = False) -> Counts:
        """Counts of the runs that started at or after ``start`` (buckets by their hour).
        ``at_least_one``: a window shorter than the interval holds the newest run."""
        first = bisect.bisect_left(self._times, start)
        if at_least_one and first == len(self._times) and self._times:
            first -= 1
        last, before = self._prefix[-1], self._prefix[first]
        return Counts(
            last[0] - before[0], last[1] - before[1], last[2] - before[2], last[3] - before[3]
        )

    def burns(self, start: datetime, objective: float, factor: float) -> bool:
        """``since(start, at_least_one=True)`` burns at ``factor`` or more: the same
        arithmetic as ``Counts.burn``, without a Counts (asked after every run)."""
        first = bisect.bisect_left(self._times, start)
        if first == len(self._times) and self._times:
            first -= 1
        last, before = self._prefix[-1], self._prefix[first]
        timed = last[0] - before[0]
        return timed != 0 and ((last[1] - before[1]) / timed) / (1 - objective) >= factor

    def prune(self, before: datetime) -> None:
        """Forget what started before ``before`` (older than the budget window)."""
        cut = bisect.bisect_left(self._times, before)
        if cut:
            self._rebuild(self._times[cut:], self._counts[cut:], max(self._fine_from - cut, 0))

    def _fold(self, until: datetime) -> None:
        """Runs that started before ``until`` (whole hours only) into hourly buckets."""
        edge = until.replace(minute=0, second=0, microsecond=0)
        first = self._fine_from
        fine = bisect.bisect_left(self._times, edge, lo=first)
        buckets: dict[datetime, Sums] = {}
        for at, counts in zip(self._times[first:fine], self._counts[first:fine], strict=True):
            hour = at.replace(minute=0, second=0, microsecond=0)
            held = buckets.get(hour, NO_SUMS)
            buckets[hour] = (
                held[0] + counts[0],
                held[1] + counts[1],
                held[2] + 1,
                held[3] + counts[3],
            )
        self._times[first:fine] = buckets
        self._counts[first:fine] = buckets.values()
        # The sums before the buckets and from the first run after them stay as they were.
        sums = [self._prefix[first]]
        for counts in buckets.values():
            sums.append(_plus(sums[-1], counts))
        self._prefix[first : fine + 1] = sums
        self._fine_from = first + len(buckets)

    def _rebuild(self, times: list[datetime], counts: list[Sums], fine_from: int) -> None:
        self._times, self._counts, self._fine_from = times, counts, fine_from
        sums = np.cumsum(np.array(counts, dtype=np.int64).reshape(-1, 4), axis=0)
        self._prefix = [NO_SUMS, *map(tuple, sums.tolist())]


def _plus(a: Sums, b: Sums) -> Sums:
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] + b[3])


@dataclass(frozen=True, slots=True)
class WindowBurn:
    window: BurnWindow
    long: Counts
    short: Counts
    long_burn: float | None
    short_burn: float | None

    @property
    def burning(self) -> bool:
        """The long window burns at the factor: the budget is going."""
        return reaches(self.long_burn, self.window.factor)

    @property
    def triggered(self) -> bool:
        """Both windows burn at the factor: the budget is going, and still now."""
        return self.burning and reaches(self.short_burn, self.window.factor)


def reaches(rate: float | None, factor: float) -> bool:
    """A burn rate at or over ``factor`` (a window without a request burns nothing)."""
    return rate is not None and rate >= factor


def window_burn(
    ledger: MissLedger, window: BurnWindow, now: datetime, objective: float
) -> WindowBurn:
    long = ledger.since(now - window.long, at_least_one=True)
    short = ledger.since(now - window.short, at_least_one=True)
    return WindowBurn(window, long, short, long.burn(objective), short.burn(objective))


def budget_left(ledger: MissLedger, now: datetime, budget: timedelta, objective: float) -> float:
    """The share of the error budget not yet spent in the budget window (can go below 0)."""
    left = ledger.since(now - budget).budget_left(objective)
    return 1.0 if left is None else left
