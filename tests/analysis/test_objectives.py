"""Objectives beside the deadline: each sample's value from its marks, what a run counts
against each objective, goodput, and the burn rates the deadline's arithmetic gives them."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest

from app.analysis.objectives import (
    METRICS,
    Objective,
    Seen,
    Tally,
    goodput,
    latency_tally,
    readings,
    share,
    tally,
)
from app.analysis.runs import run_from_samples
from app.analysis.slo import Counts
from app.store.records import SampleRecord

T0 = datetime(2026, 3, 2, tzinfo=UTC)
MS = 1_000_000  # ns


def sample(
    status: str, total: float, details: dict[str, Any] | None = None, **marks: float
) -> Seen:
    return status, total, {name: int(at * MS) for name, at in marks.items()}, details or {}


def streamed(stall_ms: float, tokens: int = 11, open_: bool = False) -> dict[str, Any]:
    """A streamed answer's details as the probe stores them (app.probe.cadence)."""
    stream = {"answer_tokens": tokens, "reasoning_tokens": 0, "arrivals": tokens,
              "itl_ms": {"p50": 9.0, "p90": 12.0, "max": stall_ms}, "stall_ms": stall_ms,
              "stall_at_ms": 300.0, "stall_token": 3, "stall_open": open_}  # fmt: skip
    return {"tokens": {"prompt": 20, "completion": tokens}, "stream": stream}


@pytest.mark.parametrize(
    ("timed", "ttft", "lower"),
    [
        # The first token of any kind: reasoning before the answer counts.
        ([sample("ok", 900, first_reasoning_token=120, first_answer_token=400)], [120.0], [False]),
        ([sample("ok", 900, first_answer_token=300)], [300.0], [False]),
        # No token at all (an empty answer): no value, not counted.
        ([sample("ok", 900)], [np.nan], [False]),
        # Cut before its first token: only a lower bound, the cut.
        ([sample("deadline_exceeded", 1500)], [1500.0], [True]),
        # Cut after its first token: the value is known.
        ([sample("deadline_exceeded", 1500, first_answer_token=200)], [200.0], [False]),
    ],
)
def test_ttft_is_the_first_token_mark_and_a_cut_before_it_is_a_lower_bound(
    timed: list[Seen], ttft: list[float], lower: list[bool]
) -> None:
    values, bound = readings(timed)["ttft_ms"]
    np.testing.assert_array_equal(values, ttft)
    assert bound.tolist() == lower


def test_end_to_end_of_a_cut_sample_is_a_lower_bound() -> None:
    values, bound = readings([sample("ok", 800), sample("deadline_exceeded", 1500)])[
        "end_to_end_ms"
    ]
    assert values.tolist() == [800.0, 1500.0] and bound.tolist() == [False, True]


@pytest.mark.parametrize(
    ("values", "lower", "below", "expected"),
    [
        ([100, 400, 600], [False] * 3, 500, Tally(3, 1)),
        ([500], [False], 500, Tally(1, 0)),  # at the bound: met
        ([np.nan, 100], [False, False], 500, Tally(1, 0)),  # no value: not counted
        ([700], [True], 500, Tally(1, 1)),  # cut past the bound: surely over
        ([500], [True], 500, Tally(1, 1)),  # cut at the bound: over it
        ([300], [True], 500, Tally(0, 0)),  # cut before the bound: unknown, not counted
    ],
)
def test_a_latency_objective_counts_met_and_missed_samples(
    values: list[float], lower: list[bool], below: float, expected: Tally
) -> None:
    reading = (np.array(values, dtype=float), np.array(lower))
    assert latency_tally(reading, below) == expected


@pytest.mark.parametrize(
    ("samples", "ok", "expected"),
    [
        (20, 20, Tally(20, 0)),
        (20, 14, Tally(20, 6)),  # errors, timeouts, misses, any other status: unavailable
        (0, 0, Tally(0, 0)),
    ],
)
def test_availability_is_the_share_of_samples_answered_ok(
    samples: int, ok: int, expected: Tally
) -> None:
    assert tally(Objective("availability", 0.995), samples, ok, {}) == expected


def test_any_status_but_ok_is_unavailable_whatever_its_name() -> None:
    statuses = ["ok", "ok", "error", "http_error", "timeout", "deadline_exceeded", "invalid_answer"]
    records = [
        SampleRecord(i, T0, status, 100.0, {"server": 100.0}, {}, {})
        for i, status in enumerate(statuses)
    ]
    run = run_from_samples("r", "chat", "eu", T0, records)
    assert tally(Objective("availability", 0.995), run.samples, run.ok, run.readings) == Tally(7, 5)


def test_a_run_without_a_metrics_values_counts_nothing_for_it() -> None:
    assert tally(Objective("ttft_ms", 0.99, 500), 20, 20, {}) == Tally(0, 0)


def test_goodput_counts_samples_meeting_every_objective_at_once() -> None:
    timed = [
        sample("ok", 900, first_answer_token=200),  # meets both
        sample("ok", 1200, first_answer_token=200),  # too slow end to end
        sample("ok", 900, first_answer_token=700),  # first token too late
        sample("ok", 900),  # no token: cannot be said to meet ttft
        sample("deadline_exceeded", 1500, first_answer_token=100),  # cut: never good
    ]
    reads = readings(timed)
    cut = np.array([seen[0] == "deadline_exceeded" for seen in timed])
    objectives = [
        Objective("availability", 0.995),
        Objective("end_to_end_ms", 0.99, 1000),
        Objective("ttft_ms", 0.99, 500),
    ]
    # Seven samples in all: two failed without latency.
    assert goodput(objectives, 7, reads, cut) == Tally(7, 6)
    assert goodput([Objective("availability", 0.995)], 7, reads, cut) == Tally(7, 3)
    assert share(7, 6) == pytest.approx(1 / 7) and share(0, 0) is None


@pytest.mark.parametrize(
    ("objective", "counted", "bad", "burn"),
    [
        # availability 99.5 %: 0.5 % may fail. 11 % and 30 % failing are fast burns.
        (0.995, 80, 9, 22.5),
        (0.995, 80, 24, 60.0),
        (0.995, 200, 1, 1.0),
        # ttft p99 below a bound: 1 % may miss it.
        (0.99, 100, 1, 1.0),
        (0.99, 80, 12, 15.0),
        # a p95 objective: 5 % may miss it.
        (0.95, 200, 10, 1.0),
    ],
)
def test_an_objectives_burn_rate_is_its_bad_share_over_its_budget(
    objective: float, counted: int, bad: int, burn: float
) -> None:
    assert Counts(counted, bad).burn(objective) == pytest.approx(burn)


# TPOT and the longest stall read the streamed answer's rhythm (app.analysis.llmmetrics);
# they are not counted from the request's start, so a cut sample without one is not counted
# (its cut says nothing of either), and one the file brought (an import) is read as it says.
@pytest.mark.parametrize(
    ("timed", "tpot", "stall"),
    [
        # First token at 100 ms, the 11th at 600: 500 ms over 10 tokens.
        ([sample("ok", 610, streamed(80.0), first_answer_token=100, last_answer_token=600)],
         [50.0], [80.0]),
        # Not streamed (a whole answer): neither.
        ([sample("ok", 610)], [np.nan], [np.nan]),
        # Cut while streaming, before a second token and without a stall of its own.
        ([sample("deadline_exceeded", 1500)], [np.nan], [np.nan]),
        # Cut in its longest stall: the stall so far is known.
        ([sample("deadline_exceeded", 1500, streamed(900.0, tokens=1, open_=True),
                 first_answer_token=100, last_answer_token=100)], [np.nan], [900.0]),
        # An imported sample: the file's values.
        ([sample("ok", 700, {"llm": {"tpot_ms": 12.5, "stall_ms": 40.0}})], [12.5], [40.0]),
    ],
)  # fmt: skip
def test_tpot_and_stall_objectives_read_the_streamed_rhythm(
    timed: list[Seen], tpot: list[float], stall: list[float]
) -> None:
    found = readings(timed)
    for name, expected in (("tpot_ms", tpot), ("stall_ms", stall)):
        values, lower = found[name]
        np.testing.assert_array_equal(values, expected)
        assert not lower.any()
    objective = Objective("stall_ms", 0.99, 500.0)
    assert tally(objective, 1, 1, found).counted == int(not np.isnan(stall[0]))


def test_every_objective_metric_is_measured() -> None:
    assert all(
        metric.read is not None or name == "availability" for name, metric in METRICS.items()
    )
