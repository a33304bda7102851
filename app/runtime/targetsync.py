"""The targets file into the targets table: what the pages and the API list as configured."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from sqlalchemy.exc import IntegrityError

from app.clock import utcnow
from app.config import Target, TargetsFile
from app.store.db import Sessions, is_transient
from app.store.targets import TargetValues, sync_targets

log = logging.getLogger(__name__)

SYNC_ATTEMPTS = 3


def target_values(targets: Iterable[Target]) -> list[TargetValues]:
    """The file's targets as the targets table stores them (header values redacted)."""
    return [TargetValues(t.name, t.kind.value, t.url, t.interval, t.public()) for t in targets]


def sync_targets_file(sessions: Sessions, targets: TargetsFile) -> None:
    """Written now; a database away only delays it (logged), anything else is raised."""
    try:
        _write(sessions, targets)
    except Exception as exc:
        if not is_transient(exc):
            raise
        log.warning("targets table not updated, database unreachable: %s", exc)


def _write(sessions: Sessions, targets: TargetsFile) -> None:
    for attempt in range(SYNC_ATTEMPTS):
        try:
            with sessions.begin() as session:
                sync_targets(session, target_values(targets.targets), utcnow())
            return
        except IntegrityError:
            # Replicas starting (or reloading) together insert the same new target;
            # the loser waited for the winner's commit, so its next try finds the row.
            if attempt == SYNC_ATTEMPTS - 1:
                raise
