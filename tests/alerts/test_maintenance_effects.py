"""What a maintenance window does to evaluation: the runs inside it enter neither the
reference nor the deadline-miss ledger (the error budget); the runs outside do."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np

from app.alerts.evaluate import Evaluator
from app.alerts.history import MemoryHistory
from app.alerts.maintenance import Maintenance
from app.analysis import detectors as d
from app.analysis.maintenance import MaintenanceWindow
from tests.runfactory import make_run

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)  # a Monday
EVERY = timedelta(hours=1)
PARAMS = d.DetectorParams.model_validate({"min_reference_runs": 4, "min_reference_days": 0.5})
# Every night from 00:00 to 06:00 UTC.
NIGHTS = MaintenanceWindow.model_validate(
    {
        "name": "nightly",
        "targets": ["chat"],
        "weekly": [
            {
                "days": ["mon", "tue", "wed", "thu", "fri", "sat", "sun"],
                "from": "00:00",
                "to": "06:00",
            }
        ],
    }
)


def evaluated(windows: list[MaintenanceWindow]) -> tuple[d.Reference | None, int]:
    """The reference built after three days of hourly runs, each with one cut sample, and
    how many runs the miss ledger counted over those days."""
    rng = np.random.default_rng(7)
    history = MemoryHistory()
    start = NOW - timedelta(days=3)
    for k in range(int((NOW - start) / EVERY) + 1):
        history.add(make_run(rng, start + k * EVERY, n=10, censored=1))
    maintenance = Maintenance(None, lambda: windows, lambda: NOW)
    evaluator = Evaluator(history, lambda _name: PARAMS, maintenance=maintenance.spans)
    evaluator.evaluate("chat", "eu", NOW)
    memory = evaluator.memory("chat", "eu")
    assert memory.misses is not None
    return memory.reference, memory.misses.since(start).runs


def in_window(at: datetime) -> bool:
    return at.hour < 6


def test_runs_in_a_window_enter_neither_the_reference_nor_the_error_budget() -> None:
    plain, counted_plain = evaluated([])
    kept, counted_kept = evaluated([NIGHTS])
    assert plain is not None and kept is not None
    start = NOW - timedelta(days=3)
    times = [start + k * EVERY for k in range(73)]
    # The reference reaches up to the recent window: it lost exactly its night runs.
    recent_from = NOW - (PARAMS.recent_runs - 1) * EVERY
    before = [at for at in times if at < recent_from]
    assert plain.runs == len(before)
    assert kept.runs == sum(1 for at in before if not in_window(at))
    # The ledger counts every run of the three days but the night ones.
    assert counted_plain == len(times)
    assert counted_kept == sum(1 for at in times if not in_window(at))


def test_a_window_of_another_target_changes_nothing() -> None:
    other = NIGHTS.model_copy(update={"targets": ["search"]})
    plain, counted_plain = evaluated([])
    kept, counted_kept = evaluated([other])
    assert plain is not None and kept is not None
    assert (kept.runs, counted_kept) == (plain.runs, counted_plain)
