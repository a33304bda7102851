"""A target's vantages present at a time, answered from their runs' start times as known,
the database asked again only when those cannot decide (``DatabaseHistory.vantages``).

An evaluation asks at its own time, and the service lane at the run's start: a cache kept
for one time read the database again at nearly every evaluation (bench/README.md, vant9).
So a read at ``now`` keeps, per vantage, when its oldest complete run started, its newest
at or before ``now`` and its newest at all, counting from ``since`` = ``now`` − 7 days −
``EARLIER``: no other run started before the first, between the second and ``now``, nor
after the third. Runs seen since (stored by this process, or read for ``last`` and
``window``) are kept as known times, the newest ``KEPT_TIMES`` a vantage; one dropped moves
those bounds past it.

A vantage is present at ``now`` when a known time is in [now − 7 days, now]; absent when
the bounds prove no run in it; else the database is read. A run stored by another process
is found at the next read, as before.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from datetime import datetime, timedelta

# The contract's 7 days (app.alerts.history, not imported: alerts already import store).
PRESENT_FOR = timedelta(days=7)
# How much earlier than a read a time can be asked of it: a run measured that long before
# its evaluation (a spool flushed late) is asked about without a read. Read with it: a
# 7-day read covers 7 days and 6 hours of runs.
EARLIER = timedelta(hours=6)
KEPT_TIMES = 4


def reach(now: datetime) -> datetime:
    """The earliest start a read at ``now`` asks for."""
    return now - PRESENT_FOR - EARLIER


@dataclass(slots=True)
class _Vantage:
    """What is known of one vantage's runs from the read's ``since`` on: each run started
    before ``first``, after ``after``, or after ``before`` and at or before the read's ``now``
    is in ``times`` (a bound None: from ``since`` on; ``first`` None: no such bound). A known
    time dropped (the oldest) moves the bounds past it."""

    first: datetime | None
    before: datetime | None
    after: datetime | None
    times: list[datetime] = field(default_factory=list)  # the newest known, oldest first

    def know(self, at: datetime, read_at: datetime) -> None:
        if at in self.times:
            return
        bisect.insort(self.times, at)
        for dropped in self.times[:-KEPT_TIMES]:
            if self.first is not None and dropped < self.first:
                self.first = None
            if self.after is None or dropped > self.after:
                self.after = dropped
            if dropped <= read_at and (self.before is None or dropped > self.before):
                self.before = dropped
        del self.times[:-KEPT_TIMES]

    def present(self, now: datetime, read_at: datetime) -> bool | None:
        """Whether a run started in [now − 7 days, now]; None when what is known cannot say."""
        start = now - PRESENT_FOR
        if any(
            start <= at <= now for at in (*self.times, self.before, self.after) if at is not None
        ):
            return True
        if self.after is None or self.after < start:
            return False
        if self.first is not None and now < self.first:
            return False
        if now <= read_at and (self.before is None or self.before < start):
            return False
        return None


class KnownVantages:
    """One target's, from a read at ``read_at``: fresh for a ``now`` from ``read_at`` −
    ``EARLIER`` on, and up to a TTL after the latest time the target was read at."""

    def __init__(
        self,
        read_at: datetime,
        found: dict[str, tuple[datetime, datetime | None, datetime]],
        earlier: KnownVantages | None = None,
    ) -> None:
        # A read at an earlier time than the one before it is as fresh: the TTL counts on.
        self.read_at = read_at
        self.latest: datetime = read_at if earlier is None else max(read_at, earlier.latest)
        self.since = reach(read_at)
        self._vantages: dict[str, _Vantage] = {}
        for vantage, (first, before, newest) in found.items():
            known = self._vantages[vantage] = _Vantage(first, before, newest)
            kept = earlier.times(vantage) if earlier is not None else []
            for at in [*self._carried(kept, first, before, newest), first, newest]:
                known.know(at, read_at)
            if before is not None:
                known.know(before, read_at)

    def _carried(
        self, times: list[datetime], first: datetime, before: datetime | None, newest: datetime
    ) -> list[datetime]:
        """Of the runs known before this read, those it says nothing of: after its time up to
        its newest, and from ``EARLIER`` before its time up to its newest at or before it
        (not older: a run that old may have been pruned since)."""
        recent = self.read_at - EARLIER
        return [
            at
            for at in times
            if first <= at <= newest
            and (at > self.read_at or (before is not None and recent < at <= before))
        ]

    def times(self, vantage: str) -> list[datetime]:
        """The known start times of ``vantage``'s runs, oldest first."""
        known = self._vantages.get(vantage)
        return list(known.times) if known is not None else []

    def fresh(self, now: datetime, ttl: timedelta) -> bool:
        return self.since <= now - PRESENT_FOR and now < self.latest + ttl

    def seen(self, vantage: str, at: datetime) -> None:
        """A complete run of ``vantage`` that started at ``at`` is stored."""
        if at >= self.since:
            self._vantages.setdefault(vantage, _Vantage(None, None, None)).know(at, self.read_at)

    def present(self, now: datetime) -> list[str] | None:
        """The vantages with a run started in [now − 7 days, now], by name; None when what
        is known cannot decide for one of them (read again)."""
        found = []
        for vantage, known in self._vantages.items():
            present = known.present(now, self.read_at)
            if present is None:
                return None
            if present:
                found.append(vantage)
        return sorted(found)
