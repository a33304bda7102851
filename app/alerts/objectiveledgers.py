"""Each objective's ledger at one (target, vantage): counted and bad samples per run, as
the deadline's ``MissLedger`` keeps timed and censored ones (app.analysis.slo), so the
``*_slo`` detectors judge their budgets with the deadline's arithmetic.

Built from the history when first asked, once a day after (as the miss ledger), and anew
when the target's objectives change; each new run adds its tallies. Availability is
rebuilt from the runs' counts (they outlive the samples); a latency objective from the
runs whose samples are still stored (the raw retention, 30 days by default, covers the
budget window).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from app.alerts.history import History
from app.analysis.objectives import AVAILABILITY, Objective, Tally, tally
from app.analysis.runs import RunData
from app.analysis.slo import MissLedger


@dataclass
class ObjectiveLedgers:
    objectives: tuple[Objective, ...]
    built_at: datetime
    ledgers: dict[str, MissLedger] = field(default_factory=dict)

    def add(self, run: RunData) -> None:
        for objective in self.objectives:
            found = run_tally(objective, run)
            self.ledgers[objective.metric].add(run.at, found.counted, found.bad)

    def prune(self, before: datetime) -> None:
        for ledger in self.ledgers.values():
            ledger.prune(before)


def run_tally(objective: Objective, run: RunData) -> Tally:
    return tally(objective, run.samples, run.ok, run.objective_readings())


def build(
    history: History,
    key: tuple[str, str],
    objectives: tuple[Objective, ...],
    span: tuple[datetime, datetime],
    kept_out: Callable[[datetime], bool],
) -> ObjectiveLedgers:
    """The ledgers of ``objectives`` over the runs of ``key`` (target, vantage) that
    started in ``span`` (budget window), but those ``kept_out`` (maintenance)."""
    (target, vantage), (start, now) = key, span
    built = ObjectiveLedgers(objectives, now)
    latency = [o for o in objectives if o.metric != AVAILABILITY]
    runs = history.window(target, vantage, start, now) if latency else []
    runs = [run for run in runs if not kept_out(run.at)]
    for objective in objectives:
        if objective.metric == AVAILABILITY:
            counts = history.counts(target, vantage, start, now)
            rows = [
                (c.at, c.samples, c.samples - (c.timed - c.censored))
                for c in counts
                if not kept_out(c.at)
            ]
        else:
            rows = [(run.at, *_pair(run_tally(objective, run))) for run in runs]
        built.ledgers[objective.metric] = MissLedger.of(rows, now)
    return built


def _pair(found: Tally) -> tuple[int, int]:
    return found.counted, found.bad
