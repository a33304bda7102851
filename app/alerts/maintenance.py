"""The maintenance windows in effect: the targets file's and those made through the API
(stored), as one list the evaluator and the engine ask.

Stored windows are read back when older than ``REREAD_EVERY`` (another process may have
made one) and at once after a change made here. Should the read fail, the last list read
stays, and the failure is logged.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from pydantic import ValidationError

from app.analysis.maintenance import MaintenanceWindow, in_any, merged, spans_between
from app.store import maintenancerows
from app.store.db import Sessions
from app.store.maintenancerows import MaintenanceRecord

log = logging.getLogger(__name__)

REREAD_EVERY = timedelta(seconds=30)


class WindowNotFound(LookupError):
    """No stored maintenance window has this id."""


def window_of(record: MaintenanceRecord) -> MaintenanceWindow | None:
    """A stored window as a spec; None (logged) for one that no longer validates."""
    try:
        return MaintenanceWindow.model_validate(record.spec)
    except ValidationError as exc:
        log.warning("maintenance window %s left out: %s", record.id, exc)
        return None


class Maintenance:
    def __init__(
        self,
        sessions: Sessions | None,
        from_file: Callable[[], Sequence[MaintenanceWindow]],
        clock: Callable[[], datetime],
    ) -> None:
        self.sessions = sessions
        self.from_file = from_file
        self.clock = clock
        self._lock = threading.Lock()
        self._stored: list[MaintenanceWindow] = []
        self._read_at: datetime | None = None

    def windows(self) -> list[MaintenanceWindow]:
        """Every window: the file's, then the stored ones."""
        return [*self.from_file(), *self._stored_windows()]

    def covers(self, target: str, vantage: str | None, at: datetime) -> bool:
        """Whether a window of ``target`` at ``vantage`` is open at ``at``."""
        return in_any(self.windows(), target, vantage, at)

    def spans(
        self, target: str, vantage: str, a: datetime, b: datetime
    ) -> list[tuple[datetime, datetime]]:
        """The spans over [a, b] of every window of ``target`` at ``vantage``, merged."""
        covering = [w for w in self.windows() if w.covers(target, vantage)]
        return merged(sorted(s for w in covering for s in spans_between(w, a, b)))

    def records(self) -> list[MaintenanceRecord]:
        if self.sessions is None:
            return []
        with self.sessions() as session:
            return maintenancerows.all_windows(session)

    def create(
        self, window: MaintenanceWindow, created_by: str, now: datetime
    ) -> MaintenanceRecord:
        assert self.sessions is not None
        spec: dict[str, Any] = window.model_dump(mode="json", by_alias=True, exclude_none=True)
        record = MaintenanceRecord(
            uuid.uuid4(), window.name, spec, created_by, window.comment or "", now
        )
        with self.sessions.begin() as session:
            found = maintenancerows.insert_window(session, record)
        self._read_at = None
        return found

    def delete(self, window_id: uuid.UUID) -> MaintenanceRecord:
        assert self.sessions is not None
        with self.sessions.begin() as session:
            found = maintenancerows.delete_window(session, window_id)
        if found is None:
            raise WindowNotFound(f"no maintenance window {window_id}")
        self._read_at = None
        return found

    def _stored_windows(self) -> list[MaintenanceWindow]:
        if self.sessions is None:
            return []
        with self._lock:
            now = self.clock()
            if self._read_at is None or now - self._read_at >= REREAD_EVERY:
                try:
                    read = [window_of(record) for record in self.records()]
                except Exception as exc:
                    log.warning("maintenance windows: the stored ones not read again: %s", exc)
                else:
                    self._stored = [window for window in read if window is not None]
                self._read_at = now
            return self._stored
