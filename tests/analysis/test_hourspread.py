"""dominant_shift's spread gate against the same hours (app/analysis/hourspread.py): a
queue that leads in the busy hours only is its normal there, and a quiet hour's growth is
read against the quiet hours' spread, not against the busy hours' swing."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import datetime, timedelta

import numpy as np
import pytest

from app.analysis import detectors as d
from app.analysis.detectors import Signal
from app.analysis.dominance import phase_mix
from app.analysis.hourspread import HourSpread, ratio_sd
from app.analysis.leadspread import MIN_RUNS, log_spread
from app.analysis.level import LevelReference
from app.analysis.runs import RunData
from tests.alerts.test_evaluator import PARAMS
from tests.runfactory import EVERY, T0, make_run

# The network leads; in the busy hours (9–17 h) the queue is × 8 and leads instead.
QUIET = {"connect": 5.0, "network": 100.0, "queue": 30.0, "generation": 40.0}
BUSY_HOURS = range(9, 18)
RHO = 17 / 20


def medians_at(at: datetime, queue_times: float = 1.0) -> dict[str, float]:
    busy = 8.0 if at.hour in BUSY_HOURS else 1.0
    return QUIET | {"queue": QUIET["queue"] * busy * queue_times}


def week(seed: int = 0) -> list[RunData]:
    rng = np.random.default_rng(seed)
    start = T0 - timedelta(days=7)
    times = [start + i * EVERY for i in range(7 * 96)]
    return [make_run(rng, at, medians_at(at), n=10, run_sigma=0.1) for at in times]


REFERENCE = week()
LEVEL = LevelReference.build(REFERENCE)
EVERY_HOUR = log_spread(REFERENCE)


def window(hour: int, queue_times: float, seed: int = 1) -> list[RunData]:
    rng = np.random.default_rng(seed)
    start = T0 + timedelta(hours=hour)
    times = [start + i * EVERY for i in range(3)]
    return [make_run(rng, at, medians_at(at, queue_times), n=10, run_sigma=0.1) for at in times]


@pytest.mark.parametrize(
    ("hour", "queue_times", "hours_low", "hours_high", "every_high"),
    [
        # A quiet hour's queue × 4: far beyond the quiet hours' spread, yet within the
        # busy hours' swing that every hour's spread holds.
        (3, 4.0, 6.0, math.inf, 5.0),
        # The busy hours' usual queue: no move against its hours, a large one against all.
        (12, 1.0, -2.0, 2.0, math.inf),
        # A quiet hour as usual: nothing either way.
        (3, 1.0, -2.0, 2.0, 2.0),
    ],
    ids=["quiet-hour-growth", "busy-hour-normal", "quiet-hour-normal"],
)
def test_a_lead_is_read_against_its_own_hours(
    hour: int, queue_times: float, hours_low: float, hours_high: float, every_high: float
) -> None:
    assert LEVEL is not None and EVERY_HOUR is not None
    runs = window(hour, queue_times)
    medians = phase_mix(runs).medians
    by_hours = HourSpread(LEVEL).moved(medians, runs, "queue", "network")
    by_all = EVERY_HOUR.moved(medians, runs, "queue", "network")
    assert by_hours is not None and by_all is not None
    assert hours_low < by_hours < hours_high
    assert by_all < every_high


def test_a_phase_the_reference_lacks_says_nothing() -> None:
    assert LEVEL is not None
    runs = window(3, 4.0)
    assert HourSpread(LEVEL).moved(phase_mix(runs).medians, runs, "prefill", "network") is None
    assert HourSpread(LEVEL).moved(phase_mix(runs).medians, [], "queue", "network") is None


@pytest.mark.parametrize(
    ("diff", "runs", "sd"),
    [
        (np.tile([1.0, -1.0], 10), 1, 1.0),  # alternating: ρ taken as 0
        (np.tile([1.0, -1.0], 10), 4, 0.5),  # and averages out over four
        (np.repeat([1.0, -1.0], 10), 1, 1.0),
        # ρ = (18 − 1) / 20 (one of 19 neighbours disagrees): four runs barely beat one
        (np.repeat([1.0, -1.0], 10), 4, math.sqrt((4 + 2 * (3 * RHO + 2 * RHO**2 + RHO**3)) / 16)),
        (np.full(20, 0.3), 3, None),  # never moved apart: no unit
        (np.array([1.0, -1.0] * (MIN_RUNS // 2 - 1)), 1, None),  # too few runs
    ],
)
def test_the_spread_of_a_window_of_a_ratio(diff: np.ndarray, runs: int, sd: float | None) -> None:
    got = ratio_sd(diff, runs)
    assert got == (None if sd is None else pytest.approx(sd))


@pytest.mark.parametrize(
    ("hours", "signal"),
    [(True, Signal.HIT), (False, Signal.HOLD)],
    ids=["same-hours", "every-hour"],
)
def test_a_quiet_hour_growth_clears_the_gate_only_against_its_hours(
    hours: bool, signal: Signal
) -> None:
    assert LEVEL is not None
    reference = reference_with(LEVEL)
    params = PARAMS.model_copy(update={"dominant_spread_hours": hours})
    spread = d.lead_spread(reference, params)
    finding = d.dominant_finding(
        window(3, 4.0), "network", "queue", params, np.random.default_rng(0), spread
    )
    assert finding.numbers["lead_low_pp"] > 0  # the bootstrap is sure either way
    assert finding.signal is signal


def reference_with(level: LevelReference | None) -> d.Reference:
    return d.Reference(
        built_at=T0,
        runs=len(REFERENCE),
        span=REFERENCE[-1].at - REFERENCE[0].at,
        mix=phase_mix(REFERENCE),
        tail=None,
        composition=None,
        spread=EVERY_HOUR,
        level=level,
    )


@pytest.mark.parametrize(
    ("hours", "level_days", "same_hours"),
    [
        (True, 7.0, True),
        (False, 7.0, False),  # turned off
        (True, 2.0, False),  # hours' levels of two days: a day held out against one other
        (True, None, False),  # no hours' levels at all
    ],
)
def test_the_gate_reads_the_same_hours_only_from_days_of_them(
    hours: bool, level_days: float | None, same_hours: bool
) -> None:
    assert LEVEL is not None
    level = None if level_days is None else replace(LEVEL, span=timedelta(days=level_days))
    params = PARAMS.model_copy(update={"dominant_spread_hours": hours})
    spread = d.lead_spread(reference_with(level), params)
    assert isinstance(spread, HourSpread) is same_hours
    assert (spread is EVERY_HOUR) is not same_hours
