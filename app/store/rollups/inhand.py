"""The timed fields of the runs this process just stored, for the rollups' catch-up.

The catch-up digests each run it counts from its samples; in ``serve`` it read them back
from the database a few seconds after the store wrote them (bench/fleet.py). The database
sink hands each run to ``keep`` just before writing it (so a catch-up that counts the run
the moment it commits finds it here), and the catch-up ``take``s those it has instead of
reading them: the same fields, as stored. A run kept and then refused is never asked for;
newer runs push it out. Runs
it does not hold (stored by another process, or before this one started, or pushed out
by newer ones) are read as before.

Each replica catches up the runs of the targets it owns (``app.replicas.rollups``), which it
probed and stored itself: those are kept. A run whose target another replica owns (an
agent's push taken here) is not (``wanted``): its owner reads it back, and it would only
push this replica's own runs out. Bounded: the newest ``capacity`` runs' few fields.
``hits`` and ``misses`` count the runs the catch-up found here and those it had to read
(``phasewatch_rollup_runs_caught_up_total``).
"""

from __future__ import annotations

import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from app.store.records import RunRecord, RunStatus

KEPT_RUNS = 2048  # a catch-up pass every 10 s takes ~330 at 2,000 targets a minute


@dataclass(frozen=True, slots=True)
class HeldSample:
    """What a run's digest is made of (``app.analysis.digest.digest_of``)."""

    status: str
    total_ms: float
    phases: dict[str, float]
    provenance: dict[str, Any]


class InHand:
    """Safe to share between threads: the store keeps, the rollup loop takes."""

    def __init__(
        self, capacity: int = KEPT_RUNS, wanted: Callable[[str], bool] = lambda _: True
    ) -> None:
        self.capacity = capacity
        self.wanted = wanted  # whether this process catches up a target's runs (by name)
        self.hits = 0  # runs the catch-up took from here
        self.misses = 0  # runs it asked for and had to read back
        self._runs: OrderedDict[uuid.UUID, list[HeldSample]] = OrderedDict()
        self._lock = threading.Lock()

    def keep(self, record: RunRecord) -> None:
        """``record`` is stored: hold its samples' timed fields if it is complete and its
        target ``wanted``."""
        if record.status != RunStatus.COMPLETE or not self.wanted(record.target):
            return  # the catch-up counts complete runs only, here those of its targets
        samples = [HeldSample(s.status, s.total_ms, s.phases, s.provenance) for s in record.samples]
        with self._lock:
            self._runs[record.id] = samples
            while len(self._runs) > self.capacity:
                self._runs.popitem(last=False)

    def take(self, ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, list[HeldSample]]:
        """The samples held of ``ids``, no longer held."""
        asked = list(ids)
        with self._lock:
            taken = {i: found for i in asked if (found := self._runs.pop(i, None)) is not None}
            self.hits += len(taken)
            self.misses += len(asked) - len(taken)
        return taken

    def __len__(self) -> int:
        return len(self._runs)
