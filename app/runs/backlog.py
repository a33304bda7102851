"""The runs that wait for the sink, oldest first: the spool's, then those held in memory.

A run goes to the spool; when the spool cannot take it (the disk is full, or read-only) it
is held in memory, behind the spool, and every later run goes behind it (held runs move to
the spool as soon as it takes them again), so none jumps the queue. Only when the memory is
full too is a run lost: counted, and told once an episode (``app.runs.losses``), never once
a run. A run waiting here has no in-flight journal (the writer ends it): a journal is a
file, a block of the disk that holds eight runs or more in the spool, and a held run is one
the disk had no room for. The price: a crash loses the runs held in memory.

A flush stores the spool first, then the held runs, in batches (``store_batch``: one commit
or one request for many), so a backlog drains many times faster than runs come in and the
runs that keep coming wait behind it instead of being dropped.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Iterable, Sequence
from enum import StrEnum
from itertools import islice

from app.runs.sink import SinkAway
from app.runs.spool import Spool
from app.runs.spoolbatch import StoreBatch
from app.store.records import RunRecord

log = logging.getLogger(__name__)

HELD_MAX = 1000  # runs; with a full disk, 20 targets every second for 50 s


class Placed(StrEnum):
    SPOOLED = "spooled"
    HELD = "held"
    LOST = "lost"


class Backlog:
    def __init__(self, spool: Spool, limit: int = HELD_MAX) -> None:
        self.spool = spool
        self.limit = limit
        self._held: deque[RunRecord] = deque()
        self._lock = threading.Lock()  # the writer's thread and the disk pool's place runs

    def waiting(self) -> bool:
        """True while runs wait, in the spool or in memory."""
        return bool(self._held) or self.spool.has_pending()

    def held(self) -> int:
        return len(self._held)

    def place(self, record: RunRecord) -> Placed:
        """Behind every run that waits: in the spool, else in memory, else lost (counted)."""
        with self._lock:
            self._unhold()
            if not self._held:
                try:
                    self.spool.append(record)
                except OSError:
                    pass
                else:
                    self.spool.losses.kept()
                    return Placed.SPOOLED
            if len(self._held) >= self.limit:
                why = f"the spool is {self.spool.problem} and {self.limit} runs wait in memory"
                self.spool.losses.lost(1, why)
                return Placed.LOST
            self._held.append(record)
        self.spool.losses.kept()
        return Placed.HELD

    def _unhold(self) -> None:
        """Held runs into the spool, oldest first, while it takes them."""
        while self._held:
            try:
                self.spool.append(self._held[0])
            except OSError:
                return
            self._held.popleft()

    def flush_held(self, store: StoreBatch, runs: int) -> int:
        """Store the held runs, oldest first, ``runs`` at a time; returns how many left.
        Stops when the sink goes away (or takes part of a batch): the rest wait, in order."""
        done = 0
        while True:
            with self._lock:
                batch = list(islice(self._held, runs))
            if not batch:
                return done
            try:
                answers = list(store(batch))
            except SinkAway:
                return done
            self._answered(batch, answers)
            done += len(answers)
            if len(answers) < len(batch):
                return done

    def _answered(self, batch: Sequence[RunRecord], answers: Sequence[bool | str]) -> None:
        taken = batch[: len(answers)]
        refused = [(r, a) for r, a in zip(taken, answers, strict=True) if isinstance(a, str)]
        if refused:
            log.error(
                "%d held run(s) refused, set aside in rejected.jsonl; the first: %s",
                len(refused),
                refused[0][1],
            )
            self._set_aside(record for record, _ in refused)
        ids = {record.id for record in taken}
        with self._lock:  # moved to the spool meanwhile: stored again from there, a no-op
            self._held = deque(held for held in self._held if held.id not in ids)

    def _set_aside(self, records: Iterable[RunRecord]) -> None:
        unwritten = 0
        for record in records:
            try:
                self.spool.reject(record)
            except OSError:
                unwritten += 1
        if unwritten:
            why = f"refused for good and not set aside in rejected.jsonl ({self.spool.problem})"
            self.spool.losses.told(unwritten, why)

    def keep_all(self, records: Sequence[RunRecord]) -> int:
        """At shutdown: ``records`` and the held runs into the spool; those it cannot take
        are lost (a journal, if one was written, brings its run back at the next start).
        Returns how many were spooled."""
        with self._lock:
            left = [*self._held, *records]
            self._held.clear()
        spooled = 0
        for record in left:
            try:
                self.spool.append(record)
            except OSError:
                continue
            self.spool.end(record.id)
            spooled += 1
        if spooled < len(left):
            why = f"neither stored nor spooled at shutdown (the spool is {self.spool.problem})"
            self.spool.losses.told(len(left) - spooled, why)
        return spooled
