"""What follows a run an agent pushed, once it is stored: the service's ``after_store``
(alert evaluation, then /metrics: the road every probed run takes), on a thread of its own
and coalesced.

A push answers once its run is stored; the rest follows here. Runs wait by (target,
vantage): while evaluation keeps up every run is evaluated, as in ``serve``; when it falls
behind (many agents at once), the runs of a (target, vantage) pushed before its turn are
evaluated once, on the newest complete one — the evaluator reads the last runs from the
database anyway. The push never waits for the detectors, and each turn waits (a bounded
time) for a moment no push is being served (``app.runtime.foreground``).

Each run submitted goes to exactly one of two functions, in the order pushed:

- ``after_store``, for the newest complete run of its turn;
- ``count`` (``RunMetrics.observe_run`` alone) for every other one: a complete run whose
  evaluation a newer one took over, and a run not complete (nothing to evaluate; the
  evaluator skips it too). So /metrics counts every pushed run exactly once, coalesced or
  not — once its turn comes, not when its push is answered.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from app.runtime.foreground import Foreground
from app.store.records import RunRecord, RunStatus

log = logging.getLogger(__name__)

Then = Callable[[RunRecord], object]


class Evaluations:
    def __init__(
        self, after_store: Then, count: Then, foreground: Foreground | None = None
    ) -> None:
        self.after_store = after_store
        self.count = count
        self.foreground = foreground or Foreground()
        self.coalesced = 0  # complete runs whose evaluation a newer run of theirs took over
        self._pending: dict[tuple[str, str], list[RunRecord]] = {}
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._idle = threading.Condition(self._lock)
        self._busy = False
        self._thread: threading.Thread | None = None

    def submit(self, record: RunRecord) -> None:
        with self._lock:
            self._pending.setdefault((record.target, record.vantage), []).append(record)
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name="evaluate", daemon=True)
                self._thread.start()
            self._wake.notify()

    def pending(self) -> int:
        """How many (target, vantage) wait for their turn."""
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
                runs = self._pending.pop(key)
                self._busy = True
            self.foreground.quiet()  # pushes first: see app.runtime.foreground
            self._turn(runs)

    def _turn(self, runs: list[RunRecord]) -> None:
        complete = [run for run in runs if run.status == RunStatus.COMPLETE]
        newest = complete[-1] if complete else None
        self.coalesced += max(len(complete) - 1, 0)
        for run in runs:
            self._then(self.after_store if run is newest else self.count, run)

    def _then(self, step: Then, run: RunRecord) -> None:
        try:
            step(run)
        except Exception:
            log.exception("after storing pushed run %s of %s", run.id, run.target)
