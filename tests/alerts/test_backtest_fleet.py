"""The backtest's machinery for many series: runs completed in order from a heap, and a
kept run's window memos dropped (and its own quantities packed into one array) once a
newer run of its series exists."""

from __future__ import annotations

import io
from datetime import timedelta

import numpy as np
import pytest

from app.alerts.backtest.csvruns import read_runs
from app.alerts.history import MemoryHistory
from app.analysis import level, tail
from app.analysis.dominance import phase_mix
from app.analysis.runs import _PACKED, _WINDOWS
from app.csvio.layout import format_timestamp
from tests.runfactory import T0, make_run

HEADER = "timestamp,target,vantage,run_id,status,total_ms,queue_ms,generation_ms\n"


def line(seconds: float, run: str, target: str = "chat") -> str:
    at = format_timestamp(T0 + timedelta(seconds=seconds))
    return f"{at},{target},eu,{run},ok,10.0,1.5,8.5\n"


def order(*lines: str) -> list[tuple[str, float]]:
    runs = read_runs(io.StringIO(HEADER + "".join(lines)))
    return [(run.run_id, (run.at - T0).total_seconds()) for run in runs]


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        # many runs at once, each at its own minute (rows out of minute order), each
        # hour's 3 h after the last's: oldest first
        (
            [
                line(3 * 3600 * h + 60 * m + k, f"r{h}-{m}", f"t{m}")
                for h in range(4)
                for m in (3, 1, 2)
                for k in (0, 1)
            ],
            [(f"r{h}-{m}", 3 * 3600.0 * h + 60 * m) for h in range(4) for m in (1, 2, 3)],
        ),
        # a run whose later row starts it earlier goes where its earliest row puts it
        (
            [line(100, "a"), line(110, "b"), line(50, "a"), line(5000, "c"), line(9000, "d")],
            [("a", 50.0), ("b", 110.0), ("c", 5000.0), ("d", 9000.0)],
        ),
        # the same start: in the order the file first names them
        ([line(7, "z"), line(7, "y"), line(8, "z")], [("z", 7.0), ("y", 7.0)]),
    ],
)
def test_runs_come_out_oldest_first_however_many_are_being_read(
    lines: list[str], expected: list[tuple[str, float]]
) -> None:
    assert order(*lines) == expected


def test_a_runs_window_memos_go_when_a_newer_run_of_its_series_comes() -> None:
    rng = np.random.default_rng(1)
    history = MemoryHistory()
    runs = [make_run(rng, T0 + timedelta(minutes=15 * i)) for i in range(3)]
    other = make_run(rng, T0, vantage="us")
    history.add(runs[0])
    history.add(other)
    mix = phase_mix(runs[:1] + runs[1:2])  # a window ending with runs[1], not yet added
    assert _WINDOWS in runs[1]._memo
    history.add(runs[1])
    history.add(runs[2])  # runs[1] is no longer its series' newest
    assert _WINDOWS not in runs[1]._memo
    assert phase_mix(runs[:2]) == mix  # worked out again: the same numbers
    phase_mix(runs[1:3])
    history.add(make_run(rng, T0 + timedelta(minutes=15), vantage="us"))
    assert _WINDOWS in runs[2]._memo  # another series' run leaves this one's alone


def test_a_kept_runs_own_quantities_are_packed_and_read_back_the_same() -> None:
    rng = np.random.default_rng(2)
    history = MemoryHistory()
    run, newer = make_run(rng, T0), make_run(rng, T0 + timedelta(minutes=15))
    history.add(run)
    medians = run.medians(run.phase_names).copy()
    ratios = tail.ratios(run, tail.TOTAL).copy()
    total = run.total_median()
    levels = level.log_levels(run, run.phase_names).copy()
    single = phase_mix([run])  # the newest run's own mix: a window's, not kept
    history.add(newer)  # run is no longer its series' newest: its memos are packed
    assert _PACKED in run._memo and "mix" not in run._memo
    assert sum(isinstance(value, np.ndarray) for value in run._memo.values()) == 1
    assert run.medians(run.phase_names).tolist() == medians.tolist()
    assert tail.ratios(run, tail.TOTAL).tolist() == ratios.tolist()
    assert level.log_levels(run, run.phase_names).tolist() == levels.tolist()
    assert run.total_median() == total
    assert phase_mix([run]) == single
