"""Alert evaluation for runs agents push, on a thread of its own and coalesced.

A push answers once its run is stored; the evaluation follows here. Runs wait by
(target, vantage), the latest one kept: while evaluation keeps up every run is evaluated,
as in ``serve``; when it falls behind (many agents at once), a (target, vantage) pushed
again before its turn is evaluated once, on its newest run — the evaluator reads the last
runs from the database anyway. The push never waits for the detectors, and each
evaluation waits (a bounded time) for a moment no push is being served
(``app.runtime.foreground``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from app.runtime.foreground import Foreground
from app.store.records import RunRecord, RunStatus

log = logging.getLogger(__name__)


class Evaluations:
    def __init__(
        self, evaluate: Callable[[RunRecord], object], foreground: Foreground | None = None
    ) -> None:
        self.evaluate = evaluate
        self.foreground = foreground or Foreground()
        self.coalesced = 0  # runs whose evaluation a newer run of theirs took over
        self._pending: dict[tuple[str, str], RunRecord] = {}
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._idle = threading.Condition(self._lock)
        self._busy = False
        self._thread: threading.Thread | None = None

    def submit(self, record: RunRecord) -> None:
        if record.status != RunStatus.COMPLETE:
            return
        with self._lock:
            key = (record.target, record.vantage)
            if key in self._pending:
                self.coalesced += 1
            self._pending[key] = record
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name="evaluate", daemon=True)
                self._thread.start()
            self._wake.notify()

    def pending(self) -> int:
        with self._lock:
            return len(self._pending)

    def wait_idle(self, timeout_s: float) -> bool:
        """Until nothing waits and nothing is being evaluated (tests, benchmarks)."""
        with self._lock:
            return self._idle.wait_for(lambda: not self._pending and not self._busy, timeout_s)

    def _work(self) -> None:
        while True:
            with self._lock:
                while not self._pending:
                    self._busy = False
                    self._idle.notify_all()
                    self._wake.wait()
                key = next(iter(self._pending))
                record = self._pending.pop(key)
                self._busy = True
            self.foreground.quiet()  # pushes first: see app.runtime.foreground
            try:
                self.evaluate(record)
            except Exception:
                log.exception("evaluating after run %s of %s", record.id, record.target)
