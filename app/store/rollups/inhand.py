"""The samples of runs this process stored lately, kept for the rollups' catch-up: it
digests them from memory instead of reading them back from the database.

Reading a run's samples back (a row each, four packed documents each unpacked and parsed)
and checking them (``flaw``) were a quarter to a third of the catch-up's CPU, and the
catch-up about as much as storing the run (bench/README.md, "The push path's own CPU"). A run
kept here passed the door (``app.runs.validate``) on its way in: its samples are exactly
the rows stored, and none has a time a digest cannot hold. Only what a digest reads is
kept (status, total, phases, provenance: references, not copies), and at most ``MAX_KEPT``
runs, the oldest let go first: a run not found here (let go, stored by another process,
an import, a pass that failed after taking it) is read from the database as before.
"""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass

from app.store.records import RunRecord, RunStatus

# About 12 s of runs at 10,000 a minute (the catch-up passes every 10 s): for 20-sample
# runs 3 MB of its own (tracemalloc), plus the phases and provenance dicts it keeps alive.
MAX_KEPT = 2048


@dataclass(frozen=True, slots=True)
class KeptSample:
    """What a run digest reads of a sample (``app.analysis.digest.digest_of``)."""

    status: str
    total_ms: float
    phases: dict[str, float]
    provenance: dict[str, str]


class SamplesInHand:
    """Complete runs' samples by run id: ``keep`` as each is stored, ``take`` once."""

    def __init__(self, most: int = MAX_KEPT) -> None:
        self.most = most
        self._runs: dict[uuid.UUID, tuple[KeptSample, ...]] = {}
        self._lock = threading.Lock()

    def keep(self, record: RunRecord) -> None:
        if record.status != RunStatus.COMPLETE:
            return  # the catch-up digests complete runs only
        kept = tuple(
            KeptSample(s.status, s.total_ms, s.phases, s.provenance) for s in record.samples
        )
        with self._lock:
            self._runs[record.id] = kept
            while len(self._runs) > self.most:
                del self._runs[next(iter(self._runs))]  # the oldest kept

    def take(self, run_id: uuid.UUID) -> tuple[KeptSample, ...] | None:
        """The run's samples, no longer kept; None if they are not here."""
        with self._lock:
            return self._runs.pop(run_id, None)

    def count(self) -> int:
        with self._lock:
            return len(self._runs)
