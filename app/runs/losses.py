"""Runs lost: neither stored, nor spooled, nor held in memory (the disk full and the memory
backlog full while the sink is away), or refused for good and not set aside either.

A loss is counted (``total``, ``phasewatch_runs_lost_total``) and told in the log once per
episode, not once per run: one line when losses begin, one with the number when a run is
kept again. An episode of thousands of runs is two lines, whatever its length.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime

from app.clock import utcnow

log = logging.getLogger(__name__)


class Losses:
    def __init__(self, clock: Callable[[], datetime] = utcnow) -> None:
        self.clock = clock
        self.total = 0  # since the process started
        self._episode = 0  # lost since the last run kept
        self._since: datetime | None = None
        self._lock = threading.Lock()

    @property
    def ongoing(self) -> str | None:
        """What /healthz says while runs are being lost; None when the last run was kept."""
        since = self._since
        if not self._episode or since is None:
            return None
        return f"runs lost: {self._episode} since {since:%H:%M:%S}Z"

    def lost(self, count: int, why: str) -> None:
        """``count`` runs lost, for ``why`` (said once an episode: its first loss)."""
        with self._lock:
            self.total += count
            first = self._episode == 0
            self._episode += count
            if first:
                self._since = self.clock()
        if first:
            log.error(
                "runs are being lost: %s; counted in phasewatch_runs_lost_total, the number"
                " told once runs are kept again",
                why,
            )

    def told(self, count: int, why: str) -> None:
        """``count`` runs lost at once and told now, with the number (a flush's refused
        runs that could not be set aside, runs left at shutdown)."""
        with self._lock:
            self.total += count
        log.error("%d run(s) lost: %s", count, why)

    def kept(self) -> None:
        """A run was kept (stored, spooled or held): the episode, if any, is over."""
        if not self._episode:
            return
        with self._lock:
            count, since, self._episode, self._since = self._episode, self._since, 0, None
        if count:
            began = f"{since:%H:%M:%S}Z" if since is not None else "?"
            log.warning("%d run(s) lost since %s; runs are kept again", count, began)
