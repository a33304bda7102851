"""Replay a CSV of samples through the production detectors on a simulated clock.

The runs (``app.alerts.backtest.csvruns`` reads them from a CSV, streamed) are fed, oldest first,
to the very ``Evaluator`` that ``serve`` uses; only the history is in memory and the clock
is each run's own time. The history keeps only what the evaluator can still ask for, so
memory stays flat however long the file.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from datetime import timedelta

from app.alerts.backtest.coverage import Coverage
from app.alerts.backtest.csvruns import MAX_SPAN
from app.alerts.evaluate import Evaluator
from app.alerts.history import MemoryHistory, Retention
from app.alerts.identity import Transition
from app.analysis.detectors import DetectorParams
from app.analysis.detectors.tailshift import ONSET_WINDOWS
from app.analysis.runs import RunData

# Runs kept beyond a reference window. The runs come oldest first (read_numbered), so a
# reference never reaches back further than its window from the newest run; this covers
# runs a little out of order if a caller sends them so. It was a day: an eighth of the
# runs kept, for nothing (a fleet keeps some 200,000).
SLACK = 2 * MAX_SPAN
COUNTS_SLACK = timedelta(days=1)  # counts beyond an SLO's budget window (a few bytes each)
# A series' newest runs kept as RunData: twice the farthest ``last`` reaches. The older ones
# (a reference's week, read once a day) are packed (app.alerts.packedruns).
PACK_AFTER = 2


def replay(
    runs: Iterable[RunData],
    params_for: Callable[[str], DetectorParams],
    *,
    seed: int = 0,
    progress: Callable[[int], None] | None = None,
    coverage: Coverage | None = None,
) -> Iterator[Transition]:
    numbered = replay_numbered(enumerate(runs), params_for, seed=seed, coverage=coverage)
    for done, (_, transitions) in enumerate(numbered, start=1):
        yield from transitions
        if progress is not None:
            progress(done)


def replay_numbered(
    runs: Iterable[tuple[int, RunData]],
    params_for: Callable[[str], DetectorParams],
    *,
    seed: int = 0,
    coverage: Coverage | None = None,
) -> Iterator[tuple[int, list[Transition]]]:
    """Each run's number and the transitions its evaluation made, in the order given;
    ``coverage`` notes what each was judged against."""
    history = MemoryHistory(lambda target: retention(params_for(target)))
    evaluator = Evaluator(history, params_for, seed=seed)
    for number, run in runs:
        history.add(run)
        transitions = evaluator.evaluate(run.target, run.vantage, run.at)
        if coverage is not None:
            coverage.add(run, evaluator.memory(run.target, run.vantage).reference)
        yield number, transitions


def retention(params: DetectorParams) -> Retention:
    """All the evaluator can still ask of a target with these ``params``: its reference
    window and ``SLACK`` more; for ``last``, the tail onset's reach; for ``counts``, the SLO's
    budget window and a day more. Runs beyond ``PACK_AFTER`` reaches are kept packed."""
    reach = max(ONSET_WINDOWS * params.recent_runs, params.failing_runs, params.dominant_runs, 2)
    counts_for = max(params.slo.budget_window + COUNTS_SLACK, timedelta(days=31))
    kept = timedelta(days=params.reference_days) + SLACK
    return Retention(kept, reach, counts_for, pack_after=PACK_AFTER * reach)
