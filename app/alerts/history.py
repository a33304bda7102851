"""The runs the evaluator reads: the ``History`` contract, and ``MemoryHistory``.

Two implementations hold it: ``MemoryHistory`` here (backtests, tests) and
``app.store.dbhistory.DatabaseHistory`` (``serve``, the demo). tests/alerts/test_history_contract.py
feeds both the same runs and asks both the same questions.

The contract, for every method:

- Complete runs only: an aborted run is never seen.
- A run's time is its start; intervals are half-open, [start, end), except ``vantages``,
  whose [now − 7 days, now] includes ``now``.
- Oldest first. Runs that started at the same instant come in the order of their run ids
  (``counts``, which has no ids, in the order of its tuples).
- A run whose raw samples were pruned, wholly or in part, cannot be rebuilt: ``window``
  and ``last`` leave it out. Its counts outlive its samples: ``counts`` includes it.
  Pruning is seen when a run is first read: one already returned may come back while an
  implementation keeps it built (DatabaseHistory's caches of the last few runs and of the
  last reference window; raw samples are kept far longer than either reaches back).
- The lists returned are the caller's to keep; the runs in them are shared, not copies
  (but a ``MemoryHistory`` with ``Retention.pack_after`` builds its packed runs again,
  new objects with the same numbers and memos, on each call that reaches them).
- Threads: ``DatabaseHistory`` may be shared by threads; ``MemoryHistory`` is for one.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from app.alerts.packedruns import PackedCounts, PackedRuns
from app.analysis.runs import RunCount, RunData

PRESENT_FOR = timedelta(days=7)  # a vantage with a run this recent is one of the target's


class History(Protocol):
    """Stored runs of (target, vantage) as the evaluator asks for them."""

    def window(self, target: str, vantage: str, start: datetime, end: datetime) -> list[RunData]:
        """The runs that started in [start, end) whose samples are all still there."""
        ...

    def last(self, target: str, vantage: str, count: int) -> list[RunData]:
        """The newest ``count`` runs that can be rebuilt (fewer if there are fewer), oldest
        first: a pruned run is skipped, not counted."""
        ...

    def vantages(self, target: str, now: datetime) -> list[str]:
        """The vantages with a complete run started in [now − 7 days, now], by name. A
        pruned run counts: a vantage is present by its runs, not by their samples."""
        ...

    def counts(self, target: str, vantage: str, start: datetime, end: datetime) -> list[RunCount]:
        """One entry per complete run that started in [start, end), oldest first, pruned
        runs included: what a long window (an SLO's month) needs, without any sample."""
        ...

    def evaluation(self) -> AbstractContextManager[None]:
        """A block of reads made for one evaluation. Within it, a run another process stores
        may be found by the next block instead (as one stored just after the block began
        would be): ``DatabaseHistory`` asks for a series' newest run once a block."""
        ...


@dataclass(frozen=True, slots=True)
class Retention:
    """What a ``MemoryHistory`` keeps of one target's runs, relative to the newest run.

    ``runs_for`` covers every window the evaluator can ask for (its reference, the recent
    window and slack); ``last`` runs of each vantage are kept whatever their age, since
    ``last`` reaches back that far for a vantage that paused. Older runs are pruned: their
    RunData dropped, their counts kept for ``counts_for``.
    """

    runs_for: timedelta
    last: int
    counts_for: timedelta = timedelta(days=31)
    # Runs of a series beyond its newest this many are kept packed (PackedRuns): built
    # again, the same numbers in new objects, when a window reaches them. None: never.
    pack_after: int | None = None


class _Series:
    """One (target, vantage): its runs and its counts, each sorted. Every run's time and id
    are in ``ats`` and ``ids`` (two lists: a tuple each cost ~70 bytes more); the newest of
    the runs are ``runs``, the older ones (with ``pack_after``) ``packed``."""

    def __init__(self, target: str, vantage: str, pack_after: int | None) -> None:
        self.target, self.vantage, self.pack_after = target, vantage, pack_after
        self.ats: list[datetime] = []
        self.ids: list[str] = []
        self.runs: list[RunData] = []
        self.packed = PackedRuns()
        self.counts = PackedCounts()

    def add(self, run: RunData) -> None:
        count = RunCount(run.at, run.timed, run.censored, run.samples)
        if not self.ats or (run.at, run.run_id) >= (self.ats[-1], self.ids[-1]):
            if self.runs:
                # No recent window ends there any more (its memos are packed later, with it).
                self.runs[-1].forget_windows(pack=self.pack_after is None)
            self.ats.append(run.at)
            self.ids.append(run.run_id)
            self.runs.append(run)
        else:  # a late run: rare, so a plain insertion
            index = self._place(run.at, run.run_id)
            if index < len(self.packed):  # among the packed: unpacked, all of them
                self.runs[:0] = self.between(0, len(self.packed))
                self.packed.drop(len(self.packed))
            self.ats.insert(index, run.at)
            self.ids.insert(index, run.run_id)
            self.runs.insert(index - len(self.packed), run)
        if self.pack_after is not None and len(self.runs) > self.pack_after:
            for older in self.runs[: len(self.runs) - self.pack_after]:
                self.packed.append(older)
            del self.runs[: len(self.runs) - self.pack_after]
        self.counts.add(count)

    def _place(self, at: datetime, run_id: str) -> int:
        """Where (at, run_id) goes: after the runs at the same time with an id not above."""
        low, high = bisect.bisect_left(self.ats, at), bisect.bisect_right(self.ats, at)
        return bisect.bisect_right(self.ids, run_id, low, high)

    def between(self, first: int, stop: int) -> list[RunData]:
        """The runs from the ``first``-th to before the ``stop``-th, oldest first."""
        packed = len(self.packed)
        if first >= packed:  # the newest runs alone (``last``, after every run)
            return self.runs[first - packed : max(stop - packed, 0)]
        rebuilt = [
            self.packed.run(i, (self.ats[i], self.ids[i]), self.target, self.vantage)
            for i in range(first, min(stop, packed))
        ]
        return rebuilt + self.runs[max(first - packed, 0) : max(stop - packed, 0)]

    def prune_runs(self, before: datetime, keep_last: int = 0) -> None:
        cut = min(bisect.bisect_left(self.ats, before), max(len(self.ats) - keep_last, 0))
        if cut:
            packed = min(cut, len(self.packed))
            self.packed.drop(packed)
            del self.ats[:cut], self.ids[:cut], self.runs[: cut - packed]

    def prune_counts(self, before: datetime) -> None:
        self.counts.drop(bisect.bisect_left(self.counts.ats, before))


class MemoryHistory:
    """Runs held in memory; ``add`` them (complete ones only), in time order or not.

    Without a ``retention`` every run is kept. With one, each ``add`` prunes the target's
    runs that the evaluator can no longer ask for, so memory stays bounded however long
    the replay: that is what lets a backtest stream a month of samples.
    """

    def __init__(self, retention: Callable[[str], Retention] | None = None) -> None:
        self.retention = retention
        self._series: dict[tuple[str, str], _Series] = {}
        self._by_target: dict[str, list[str]] = {}
        self._rules: dict[str, Retention] = {}
        # ``vantages``' answers since the last ``add`` (they read the counts alone): an
        # evaluation asks the same several times (each vantage's siblings, the round, the
        # pooled level lane).
        self._present: dict[tuple[str, datetime], list[str]] = {}

    def add(self, run: RunData) -> None:
        self._present.clear()
        rules = self._rules.get(run.target)
        if rules is None and self.retention is not None:
            rules = self._rules[run.target] = self.retention(run.target)
        series = self._series.get((run.target, run.vantage))
        if series is None:
            pack_after = rules.pack_after if rules is not None else None
            series = _Series(run.target, run.vantage, pack_after)
            self._series[(run.target, run.vantage)] = series
            self._by_target.setdefault(run.target, []).append(run.vantage)
        series.add(run)
        if rules is not None:
            series.prune_runs(run.at - rules.runs_for, rules.last)
            series.prune_counts(run.at - rules.counts_for)

    def prune(self, before: datetime) -> None:
        """Drop the samples of every run that started before ``before``, as the database's
        pruning does: those runs leave ``window`` and ``last``; their counts stay."""
        for series in self._series.values():
            series.prune_runs(before)

    def window(self, target: str, vantage: str, start: datetime, end: datetime) -> list[RunData]:
        series = self._series.get((target, vantage))
        if series is None:
            return []
        first = bisect.bisect_left(series.ats, start)
        return series.between(first, bisect.bisect_left(series.ats, end, lo=first))

    def last(self, target: str, vantage: str, count: int) -> list[RunData]:
        series = self._series.get((target, vantage))
        if series is None or count <= 0:
            return []
        return series.between(max(len(series.ats) - count, 0), len(series.ats))

    def vantages(self, target: str, now: datetime) -> list[str]:
        present = self._present.get((target, now))
        if present is None:
            present = self._present[(target, now)] = sorted(
                vantage
                for vantage in self._by_target.get(target, [])
                if self._started_between(self._series[(target, vantage)], now - PRESENT_FOR, now)
            )
        return list(present)

    def counts(self, target: str, vantage: str, start: datetime, end: datetime) -> list[RunCount]:
        series = self._series.get((target, vantage))
        if series is None:
            return []
        first = bisect.bisect_left(series.counts.ats, start)
        return series.counts.between(first, bisect.bisect_left(series.counts.ats, end, lo=first))

    def evaluation(self) -> AbstractContextManager[None]:
        return nullcontext()  # every read is of what was added: nothing to ask once

    @staticmethod
    def _started_between(series: _Series, start: datetime, end: datetime) -> bool:
        """A count at or after ``start`` that is not after ``end`` (both ends included)."""
        first = bisect.bisect_left(series.counts.ats, start)
        return first < len(series.counts) and series.counts.ats[first] <= end
