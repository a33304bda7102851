"""Due runs the scheduler did not start: each counted by target and reason, and said once a
streak, never silent (``phasewatch_runs_skipped_total``).

The reasons:

- ``running``: the previous run of the target was still going (runs never overlap);
- ``late``: it would have started over the misfire grace late;
- ``turn``: it waited its whole interval for a turn (``max_runs_in_flight`` runs probing);
- ``woke_late``: the scheduler itself woke after the slot's cell was over (the process had
  no CPU, or its loop was busy, for longer than an interval) and went on with the slot due
  now. APScheduler coalesces such slots into the last one without a word, so they are found
  here: by the grid cells between two due times it names for one target.

A target whose streak reaches ``STREAK_PROBLEM`` due runs is not probed now: /healthz says so
(``problems``) until a run of it begins.
"""

from __future__ import annotations

import logging
from collections import Counter
from datetime import datetime

from app.runs.slots import Grid

# The scheduler's log: its lines about a target's runs, skipped or not, under one name.
log = logging.getLogger("app.runtime.scheduler")

RUNNING, LATE, TURN, WOKE_LATE = "running", "late", "turn", "woke_late"
# One skipped slot is a slow run's ordinary cost; two in a row are an interval and more with
# no sample of the target.
STREAK_PROBLEM = 2
WHY = {
    RUNNING: "the previous run is still going",
    TURN: "it waited its whole interval for a turn (max_runs_in_flight runs were probing)",
    WOKE_LATE: "the scheduler woke after its time (no CPU, or a busy loop, for an interval)",
}


class Skips:
    def __init__(self, misfire_grace_s: float) -> None:
        self.why = {**WHY, LATE: f"it would start over {misfire_grace_s:g} s late"}
        self.total: Counter[tuple[str, str]] = Counter()  # (target, reason): since the start
        self.streak: dict[str, int] = {}  # since each target's last run began
        self._last: dict[str, str] = {}  # the reason of each streak's latest skip
        self._said: dict[str, int] = {}  # ... as the streak's first line said it
        self._named: dict[str, tuple[Grid, datetime]] = {}  # the last due time named

    def named(self, target: str, grid: Grid, due: datetime) -> None:
        """The scheduler named ``due`` as ``target``'s due time (to run or to skip): the
        cells of ``grid`` strictly between the last one named and this one were skipped."""
        last = self._named.get(target)
        if last is not None and last[1] >= due:
            return  # named again (a skip of a run already submitted), or from before
        self._named[target] = (grid, due)
        if last is not None and last[0] == grid:
            missed = (grid.slot(due) - grid.slot(last[1])) // grid.interval_ms - 1
            if missed > 0:
                self.skip(target, WOKE_LATE, missed)

    def forget(self, target: str | None = None) -> None:
        """Start over for ``target`` (every target when None): the scheduler paused, the
        target was removed or its grid changed, so the slots since are no skips and a streak
        is no longer this process's to report (the totals stay)."""
        for kept in (self._named, self.streak, self._said, self._last):
            if target is None:
                kept.clear()
            else:
                kept.pop(target, None)

    def passed(self, target: str) -> None:
        """A slot of ``target`` went to another replica: its streak here is over, unsaid."""
        for kept in (self.streak, self._said, self._last):
            kept.pop(target, None)

    def skip(self, target: str, reason: str, count: int = 1) -> None:
        self.total[target, reason] += count
        streak = self.streak.get(target, 0)
        self.streak[target] = streak + count
        self._last[target] = reason
        if streak == 0:
            self._said[target] = count
            what = "a due run" if count == 1 else f"{count} due runs"
            log.warning("target %s: %s skipped, %s", target, what, self.why[reason])

    def began(self, target: str) -> None:
        """A run of ``target`` began: its streak of skips, if longer than its first line
        said, is said whole, and ends."""
        count, said = self.streak.pop(target, 0), self._said.pop(target, 0)
        self._last.pop(target, None)
        if count > said:
            log.warning("target %s: %d due runs were skipped before this one began", target, count)

    def problems(self) -> list[str]:
        """A line for each target skipped ``STREAK_PROBLEM`` or more times in a row, by name."""
        return [
            f"target {target}: {count} due runs skipped in a row, the latest because"
            f" {self.why[self._last[target]]}"
            for target, count in sorted(self.streak.items())
            if count >= STREAK_PROBLEM
        ]

    def by_target(self) -> dict[str, dict[str, int]]:
        """The totals as an agent reports them: target → reason → count."""
        found: dict[str, dict[str, int]] = {}
        for (target, reason), n in self.total.items():
            found.setdefault(target, {})[reason] = n
        return found

    def counts(self, vantage: str) -> dict[tuple[str, ...], int]:
        """The totals as ``/metrics`` labels them: (target, vantage, reason)."""
        return {(target, vantage, reason): n for (target, reason), n in self.total.items()}
