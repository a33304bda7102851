"""The backtest's reader (a streamed CSV → runs in time order) and its bounded history."""

from __future__ import annotations

import io
from datetime import timedelta

import numpy as np
import pytest

from app.alerts.backtest.coverage import Coverage, duration, unjudged
from app.alerts.backtest.csvruns import BacktestError, read_runs
from app.alerts.backtest.replay import replay, retention
from app.alerts.history import MemoryHistory, Retention
from app.analysis.detectors import DetectorParams
from app.analysis.runs import RunCount
from app.csvio.layout import format_timestamp
from tests.runfactory import EVERY, T0, make_run

HEADER = "timestamp,target,vantage,run_id,status,total_ms,queue_ms,generation_ms\n"


def row(
    seconds: float, run: str, status: str = "ok", queue: str = "1.5", vantage: str = "eu"
) -> str:
    at = format_timestamp(T0 + timedelta(seconds=seconds))
    total = "" if status == "error" else "10.0"
    return f"{at},chat,{vantage},{run},{status},{total},{queue},8.5\n"


def read(*rows: str) -> list[tuple[str, float, int, int, int, tuple[str, ...]]]:
    runs = read_runs(io.StringIO(HEADER + "".join(rows)))
    return [
        (r.run_id, (r.at - T0).total_seconds(), r.timed, r.censored, r.failed, r.phase_names)
        for r in runs
    ]


def test_interleaved_runs_come_out_whole_oldest_first_ties_in_file_order() -> None:
    found = read(
        row(0, "b"),
        row(0, "a"),
        row(1, "b", "deadline_exceeded"),
        row(1, "a", "error"),
        row(2, "b"),
        row(3, "c", vantage="us"),
    )
    assert found == [
        ("b", 0.0, 3, 1, 0, ("queue", "generation")),
        ("a", 0.0, 1, 0, 1, ("queue", "generation")),
        ("c", 3.0, 1, 0, 0, ("queue", "generation")),
    ]


def test_a_run_is_at_its_earliest_sample_even_when_a_row_comes_a_little_late() -> None:
    assert [run[:2] for run in read(row(10, "a"), row(20, "b"), row(5, "a"))] == [
        ("a", 5.0),
        ("b", 20.0),
    ]


def test_a_phase_no_sample_has_is_absent_and_a_missing_cell_is_zero() -> None:
    runs = list(
        read_runs(
            io.StringIO(
                HEADER
                + row(0, "a", queue="")
                + row(1, "a", queue="")
                + row(2, "b", queue="")
                + row(3, "b")
            )
        )
    )
    assert runs[0].phase_names == ("generation",)
    assert runs[1].phase_names == ("queue", "generation")
    np.testing.assert_array_equal(runs[1].phases[:, 0], [0.0, 1.5])


@pytest.mark.parametrize(
    ("columns", "cells"),
    [
        (",ttft_ms,tpot_ms,output_tokens", (",120.0,,12.0", ",,,")),
        # The goodput columns (app.csvio.goodput): verdicts, not phases either.
        (",ttft_ms,good,met_ttft_ms", (",120.0,true,true", ",,false,")),
    ],
)
def test_the_llm_metric_and_goodput_columns_after_the_phases_are_no_phases(
    columns: str, cells: tuple[str, str]
) -> None:
    header = HEADER.removesuffix("\n") + columns + "\n"
    rows = [row(i, "a").removesuffix("\n") + cell + "\n" for i, cell in enumerate(cells)]
    (run,) = read_runs(io.StringIO(header + "".join(rows)))
    (plain,) = read_runs(io.StringIO(HEADER + row(0, "a") + row(1, "a")))
    assert run.phase_names == plain.phase_names == ("queue", "generation")
    np.testing.assert_array_equal(run.phases, plain.phases)
    np.testing.assert_array_equal(run.totals, plain.totals)


def test_runs_are_read_as_the_stream_passes_them() -> None:
    hours = [row(3600 * h, f"r{h}") for h in range(10)]
    runs = read_runs(io.StringIO(HEADER + "".join(hours)))
    # The first run is complete once the reading is two hours past it, not at the end.
    assert next(runs).run_id == "r0"


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([row(7200, "a"), row(0, "b")], "line 3: .* before a row above it"),
        ([row(0, "a"), row(4000, "a")], "line 3: run a's samples start more than 1:00:00 apart"),
        ([row(0, "a"), row(9000, "b"), row(9001, "a")], "line 4: run a goes on after"),
        (["not-a-time,chat,eu,a,ok,1,1,1\n"], "line 2: 'not-a-time' is not an ISO-8601 time"),
        ([row(0, "a"), "x,y\n"], "line 3: 2 columns, the header has 8"),
        ([row(0, "a").replace("10.0", "ten")], "the run starting at line 2: could not convert"),
        ([row(0, "a").replace("10.0", '"1,5"')], "the run starting at line 2: could not convert"),
        ([row(0, "a").replace("10.0", "true")], "the run starting at line 2: could not convert"),
    ],
)
def test_a_file_out_of_order_or_malformed_is_an_error_naming_the_line(
    rows: list[str], message: str
) -> None:
    with pytest.raises(BacktestError, match=message):
        list(read_runs(io.StringIO(HEADER + "".join(rows))))


@pytest.mark.parametrize(
    "cells",
    [
        ["10.0", "1e1", "-0.5", "1E-3", "3", "12345678901234567890", "0.1", "2.675"],  # JSON's
        ["10.0", ".5", "5.", "+2", "nan", "1e400"],  # numpy's alone
    ],
)
def test_numbers_read_as_numpy_reads_them_json_or_not(cells: list[str]) -> None:
    lines = [f"{row(i, 'a').rsplit(',', 2)[0]},{c},8.5\n" for i, c in enumerate(cells)]
    (run,) = read_runs(io.StringIO(HEADER + "".join(lines)))
    expected = np.array(cells, dtype=np.float64)
    np.testing.assert_array_equal(run.phases[:, 0], expected)
    assert run.phases[:, 0].tobytes() == expected.tobytes()


def test_times_with_another_offset_are_read_as_utc() -> None:
    text = HEADER + "2026-03-02T01:00:00+01:00,chat,eu,a,ok,10.0,1.5,8.5\n"
    (run,) = read_runs(io.StringIO(text))
    assert run.at == T0


def test_the_bounded_history_keeps_what_the_evaluator_can_still_ask_for() -> None:
    rules = Retention(runs_for=timedelta(days=1), last=3, counts_for=timedelta(days=2))
    history = MemoryHistory(lambda _target: rules)
    rng = np.random.default_rng(1)
    runs = [make_run(rng, T0 + i * EVERY) for i in range(4 * 96)]
    for run in runs:
        history.add(run)
    newest = runs[-1].at
    kept = history.window("chat", "eu", T0, newest + EVERY)
    assert kept[0].at == newest - timedelta(days=1)
    assert len(kept) == 97
    assert history.counts("chat", "eu", T0, newest)[0] == RunCount(
        newest - timedelta(days=2), 20, 0, 20
    )
    # A vantage that paused keeps its last runs however old.
    history.add(make_run(rng, newest + timedelta(days=5), vantage="us"))
    history.add(make_run(rng, newest + timedelta(days=9), vantage="us"))
    assert len(history.last("chat", "us", 3)) == 2


def test_the_backtest_keeps_a_reference_window_and_two_hours_and_the_tail_onset_reach() -> None:
    rules = retention(DetectorParams(reference_days=7, recent_runs=4))
    assert (rules.runs_for, rules.last) == (timedelta(days=7, hours=2), 16)
    assert rules.counts_for == timedelta(days=31)


def replayed_coverage(params: DetectorParams, runs: int = 12) -> Coverage:
    rows = [
        row(i * 900 + k, f"r{i}", queue=str(1.5 + k / 10)) for i in range(runs) for k in range(5)
    ]
    coverage = Coverage()
    list(
        replay(read_runs(io.StringIO(HEADER + "".join(rows))), lambda _: params, coverage=coverage)
    )
    return coverage


def test_a_file_too_short_for_a_reference_says_which_detectors_never_judged() -> None:
    params = DetectorParams()
    assert unjudged(replayed_coverage(params), lambda _: params) == [
        "chat: dominant_shift and tail_shift never judged: they need a reference of 24 runs"
        " over 1 day (min_reference_runs, min_reference_days) before the newest 4; the file"
        " holds 12 runs over 2.8 h at eu"
    ]


def test_a_reference_too_short_for_tail_shift_says_so_and_nothing_more() -> None:
    params = DetectorParams(min_reference_runs=4, min_reference_days=0)
    assert unjudged(replayed_coverage(params), lambda _: params) == [
        "chat: tail_shift never judged: it needs a reference over 2 days (tail_min_days);"
        " the longest here was 45 min"  # built once the first 4 were there; rebuilt daily
    ]
    ready = DetectorParams(min_reference_runs=4, min_reference_days=0, tail_min_days=0)
    assert unjudged(replayed_coverage(ready), lambda _: ready) == []


@pytest.mark.parametrize(
    ("span", "said"),
    [
        (timedelta(minutes=40), "40 min"),
        (timedelta(hours=3), "3 h"),
        (timedelta(hours=8, minutes=30), "8.5 h"),
        (timedelta(days=2, hours=12), "2.5 d"),
    ],
)
def test_a_files_length_reads_as_a_person_would_say_it(span: timedelta, said: str) -> None:
    assert duration(span) == said


def test_a_cell_holding_a_comma_is_refused_as_numpy_refuses_it_among_plain_rows() -> None:
    lines = [row(0, "a"), row(1, "a", queue='"1,5"'), row(2, "a")]
    with pytest.raises(BacktestError, match=r"line 2: could not convert string to float: '1,5'"):
        list(read_runs(io.StringIO(HEADER + "".join(lines))))


def test_a_run_with_a_phase_missing_in_some_rows_reads_them_as_zero() -> None:
    lines = [row(0, "a"), row(1, "a", queue=""), row(2, "a", status="error")]
    (run,) = read_runs(io.StringIO(HEADER + "".join(lines)))
    assert run.phase_names == ("queue", "generation")
    np.testing.assert_array_equal(run.phases[:, 0], [1.5, 0.0])
    assert (run.timed, run.failed, run.samples) == (2, 1, 3)
