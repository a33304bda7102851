"""What a maintenance window does to evaluation: the runs inside it enter neither the
reference nor the error budgets (the deadline-miss ledger, each objective's ledger); the
runs outside do."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np

from app.alerts.evaluate import Evaluator
from app.alerts.history import MemoryHistory
from app.alerts.maintenance import Maintenance
from app.alerts.memory import DetectorMemory
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


def evaluator_after(
    windows: list[MaintenanceWindow], params: d.DetectorParams = PARAMS
) -> tuple[Evaluator, MemoryHistory]:
    """An evaluator that judged ``chat`` at ``eu`` after three days of hourly runs, each
    of 10 timed samples (one cut at the deadline) and one failed."""
    rng = np.random.default_rng(7)
    history = MemoryHistory()
    start = NOW - timedelta(days=3)
    for k in range(int((NOW - start) / EVERY) + 1):
        history.add(make_run(rng, start + k * EVERY, n=10, censored=1, failed=1))
    maintenance = Maintenance(None, lambda: windows, lambda: NOW)
    evaluator = Evaluator(history, lambda _name: params, maintenance=maintenance.spans)
    evaluator.evaluate("chat", "eu", NOW)
    return evaluator, history


def evaluated(windows: list[MaintenanceWindow]) -> tuple[d.Reference | None, int]:
    """The reference built after the three days, and how many runs the miss ledger
    counted over those days."""
    memory = evaluator_after(windows)[0].memory("chat", "eu")
    assert memory.misses is not None
    return memory.reference, memory.misses.since(NOW - timedelta(days=3)).runs


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


OBJECTIVES = PARAMS.model_copy(
    update={
        "objectives": d.DetectorParams.model_validate(
            {
                "objectives": {
                    "availability": {"target": 99.5},
                    "end_to_end_ms": {"p": 99, "below": 1},
                }
            }
        ).objectives
    }
)
LATER = NOW + timedelta(hours=13)  # Tuesday 01:00: inside the nightly window


def objective_runs(memory: DetectorMemory) -> dict[str, tuple[int, int]]:
    """Per objective: the runs its ledger counted over the three days and after, and the
    bad samples among them."""
    assert memory.objectives is not None
    found = {}
    for metric, ledger in memory.objectives.ledgers.items():
        counts = ledger.since(NOW - timedelta(days=3))
        found[metric] = (counts.runs, counts.censored)
    return found


def test_runs_in_a_window_stay_out_of_every_objectives_error_budget() -> None:
    """Built from the history, and run by run after: a run in the window adds nothing to
    any objective's ledger, one outside adds to each."""
    times = [NOW - timedelta(days=3) + k * EVERY for k in range(73)]
    counted = {"plain": 0, "kept": 0}
    for name, windows in (("plain", []), ("kept", [NIGHTS])):
        evaluator, history = evaluator_after(windows, OBJECTIVES)
        history.add(make_run(np.random.default_rng(8), LATER, n=10, censored=1, failed=1))
        evaluator.evaluate("chat", "eu", LATER)
        found = objective_runs(evaluator.memory("chat", "eu"))
        assert set(found) == {"availability", "end_to_end_ms"}
        runs = {runs for runs, _ in found.values()}
        assert len(runs) == 1, found  # every objective counted the same runs
        counted[name] = runs.pop()
        # availability: the failed and the cut sample of each run are bad; end_to_end_ms
        # (below 1 ms): every timed one is.
        assert found["availability"][1] == 2 * counted[name]
        assert found["end_to_end_ms"][1] == 10 * counted[name]
    assert counted["plain"] == len(times) + 1
    assert counted["kept"] == sum(1 for at in times if not in_window(at))
