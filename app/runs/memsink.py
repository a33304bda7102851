"""A ``Sink`` in memory, for tests: keeps the runs in the order they came, and can be told
to be away (every store raises ``SinkAway``) or to refuse a run (``SinkRefused``)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Sequence

from app.runs.sink import LastAttempt, SinkAway, SinkRefused, Stored, answer
from app.store.records import RunRecord


class MemorySink:
    def __init__(self, batches: bool = False) -> None:
        self.name = "memory"
        self.batches = batches
        self.runs: dict[uuid.UUID, RunRecord] = {}  # in the order stored
        self.slots: dict[tuple[str, str, int], uuid.UUID] = {}  # who holds each slot
        self._away: str | None = None
        self._refusing: dict[uuid.UUID, str] = {}
        self._last = LastAttempt()
        self._lock = threading.Lock()

    @property
    def problem(self) -> str | None:
        return self._last.problem

    def go_away(self, why: str) -> None:
        self._away = why

    def come_back(self) -> None:
        self._away = None

    def refuse(self, run_id: uuid.UUID, why: str) -> None:
        self._refusing[run_id] = why

    def store(self, record: RunRecord) -> bool:
        return self._last(lambda: self._store(record))

    def store_batch(self, records: Sequence[RunRecord]) -> list[Stored]:
        return self._last(lambda: [answer(self._store, record) for record in records])

    def _store(self, record: RunRecord) -> bool:
        if self._away is not None:
            raise SinkAway(self._away)
        if record.id in self._refusing:
            raise SinkRefused(self._refusing[record.id])
        with self._lock:
            slot = None if record.slot is None else (record.target, record.vantage, record.slot)
            if record.id in self.runs or (slot is not None and slot in self.slots):
                return False
            self.runs[record.id] = record
            if slot is not None:
                self.slots[slot] = record.id
            return True
