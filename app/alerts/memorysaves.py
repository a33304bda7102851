"""Which detector memories an evaluation writes: those that changed since they were last
written.

An evaluation wrote the memory of every vantage of its target, one upsert each, though a
run at one vantage changes that vantage's memory (and the pooled lane's, kept in the first
vantage's: app.alerts.levelpool) and most often no other: on a target of 20 vantages, 20
upserts a run where one or two carry news (bench/README.md, "Pushes: only the memories that
changed written"). ``MemorySaves`` keeps, per (target, vantage), what was last written, and
``changed`` leaves out a memory equal to it but for ``updated_at`` (which therefore reads
"when this memory last changed").

What was written is recorded (``written``) only once its transaction committed: a failed
write leaves it as it was, and the next evaluation writes that memory again. A target whose
memory is read back from the database (a restart, a replica taking the target over: the
rows may be another process's since) is ``forget``-ed: its next evaluation writes every
vantage. Not thread-safe: ``AlertEngine`` calls it under its lock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from datetime import datetime

from app.alerts.memory import DetectorMemory
from app.alerts.rows import state_of
from app.store.alertwrites import DetectorState


class MemorySaves:
    def __init__(self) -> None:
        self._written: dict[tuple[str, str], DetectorState] = {}

    def changed(
        self, target: str, memories: Mapping[str, DetectorMemory], now: datetime
    ) -> list[DetectorState]:
        """The states of ``memories`` (by vantage) to write at ``now``: those not written
        before as they are."""
        states = (state_of(target, vantage, memory, now) for vantage, memory in memories.items())
        return [state for state in states if not self._same(state)]

    def written(self, states: Iterable[DetectorState]) -> None:
        """``states`` are in the database now (their transaction committed)."""
        for state in states:
            self._written[(state.target, state.vantage)] = state

    def forget(self, target: str | None = None) -> None:
        """``target``'s (None: every target's) rows may differ from what was written here."""
        if target is None:
            self._written.clear()
            return
        for key in [key for key in self._written if key[0] == target]:
            del self._written[key]

    def _same(self, state: DetectorState) -> bool:
        last = self._written.get((state.target, state.vantage))
        return last is not None and replace(last, updated_at=state.updated_at) == state
