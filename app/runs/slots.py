"""Where a target's scheduled runs fall, the same in every process: a grid per (target,
vantage), and each run's slot on it (``Grid``: pure, plain values in, numbers out); and the
count of runs a sink turned away because their slot was taken (``TakenSlots``).

The grid starts at the Unix epoch plus an offset within the interval drawn from the target's
and the vantage's names (a hash: two hundred targets on one interval stay spread, and the
same target seen from two vantages is not hit at the same instant), then whole intervals.
Everything is whole milliseconds, so two processes compute exactly the same numbers.

A run's **slot** is the start of the grid cell its scheduled time falls in, in milliseconds
since the epoch. Jitter stays inside the cell (it is always shorter than the interval), so
two replicas that both probe a (target, vantage) on the same schedule name the same slot,
and the database keeps one run a slot (``app.store.ingest``). The slot is a time rather than
a cell's index: a target whose interval changes never reuses an index of its old grid for
another moment (an hourly target moved to 3601 s would meet its own runs of six days ago).
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from app import clock

log = logging.getLogger(__name__)

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MS = timedelta(milliseconds=1)


def epoch_ms(at: datetime) -> int:
    """``at`` in whole milliseconds since the epoch (floored: exact, no float)."""
    return (at - EPOCH) // MS


def slot_time(slot: int) -> datetime:
    return EPOCH + slot * MS


@dataclass(frozen=True, slots=True)
class Grid:
    offset_ms: int  # 0 <= offset_ms < interval_ms
    interval_ms: int

    @classmethod
    def of(cls, target: str, vantage: str, interval_s: float) -> Grid:
        interval_ms = max(1, round(interval_s * 1000))
        digest = hashlib.blake2b(f"{target}\0{vantage}".encode(), digest_size=8).digest()
        return cls((interval_ms * int.from_bytes(digest)) >> 64, interval_ms)

    def slot(self, at: datetime) -> int:
        """The start (ms since the epoch) of the cell ``at`` falls in."""
        ms = epoch_ms(at)
        return ms - (ms - self.offset_ms) % self.interval_ms

    def next_start(self, at: datetime) -> datetime:
        """The first cell start at or after ``at``."""
        start = slot_time(self.slot(at))
        return start if start >= at else start + self.interval_ms * MS

    def following(self, at: datetime) -> datetime:
        """The start of the cell after the one ``at`` falls in."""
        return slot_time(self.slot(at) + self.interval_ms)

    def jitter_bound_s(self, jitter_s: float) -> float:
        """``jitter_s``, kept a millisecond short of the interval: a run stays in its cell."""
        return max(0.0, min(jitter_s, (self.interval_ms - 1) / 1000))


class TakenSlots:
    """Runs a sink did not store because another run of their (target, vantage) had their
    slot (two processes probing one schedule): counted by (target, vantage) and logged once
    an episode. An episode ends when no slot of it was taken for ``QUIET_S``: two replicas
    that overlap lose slots to each other by turns, which is one episode, not a line a slot."""

    QUIET_S = 600.0

    def __init__(self, monotonic: Callable[[], float] = clock.monotonic) -> None:
        self.counts: dict[tuple[str, str], int] = {}
        self._last: dict[tuple[str, str], float] = {}
        self._monotonic = monotonic
        self._lock = threading.Lock()

    def snapshot(self) -> dict[tuple[str, str], int]:
        with self._lock:
            return dict(self.counts)

    def taken(self, target: str, vantage: str, slot: int) -> None:
        key, now = (target, vantage), self._monotonic()
        with self._lock:
            self.counts[key] = self.counts.get(key, 0) + 1
            last = self._last.get(key)
            self._last[key] = now
        if last is None or now - last > self.QUIET_S:
            log.warning(
                "a run of %s at %s not stored: its slot (%s) was probed by another run"
                " already (two processes probing one schedule?); more are only counted"
                " (phasewatch_runs_duplicate_slot_total)",
                target,
                vantage,
                f"{slot_time(slot):%Y-%m-%dT%H:%M:%S}Z",
            )
