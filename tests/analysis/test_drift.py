"""baseline_drift's statistics on constructed runs: the frozen baseline, the day's value
against it, how long it has drifted, the floats it packs into, and when it alerts."""

from __future__ import annotations

import functools
import json
import math
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from pydantic import ValidationError

from app.analysis import drift as dr
from app.analysis import driftpack as dp
from app.analysis.detectors import DETECTORS, DetectorParams, Finding, Inputs, Signal
from app.analysis.detectors.drift import drift_finding, sentence, wants_baseline
from app.analysis.runs import RunData
from app.analysis.slo import MissLedger
from app.analysis.tail import TailState
from tests.driftfactory import Change, runs
from tests.runfactory import LLM, T0

PARAMS = DetectorParams()


@functools.cache
def week(seed: int = 1) -> dr.Baseline:
    baseline = dr.freeze(list(runs(seed, T0, 7)))
    assert baseline is not None
    return baseline


def follow(baseline: dr.Baseline, start: datetime, days: float, change: Change) -> dr.Drift:
    drift = dr.Drift.start(baseline, start.timestamp())
    for run in runs(7, start, days, change):
        dr.observe(drift, run)
        value = dr.today(drift, run.at)
        if value is not None:
            dr.keep_day(drift, run.at, value)
    return drift


def test_a_week_frozen_into_hours_and_kinds_of_day() -> None:
    baseline = week()
    assert baseline.phases == ("connect", "network", "queue", "prefill", "generation", "transfer")
    assert baseline.means.shape == (dr.SLOTS, 7) and baseline.tail_q.shape == (dr.SLOTS, 6)
    queue = 1 + baseline.phases.index("queue")
    # The queue's daily cycle is in the profile: 15:00 busier than 03:00 by ~1.3/0.7.
    assert baseline.means[15, queue] - baseline.means[3, queue] == pytest.approx(
        math.log(1.3 / 0.7), abs=0.15
    )
    assert baseline.tail0 == pytest.approx(np.full(6, 0.05), abs=0.012)
    # The day's level of the queue (σ 0.08) is in its spread, at its upper bound from
    # seven days (× 1.9); a day's tail share is a binomial share of ~1,900 samples (≈ ±10 %).
    assert np.all(baseline.spread > 0)
    assert baseline.spread[3] == pytest.approx(1.9 * 0.08, abs=0.08)
    assert np.all(baseline.spread[:7] < 0.25) and np.all(baseline.spread[7:] < 0.25)
    assert baseline.shares[baseline.phases.index("queue")] == pytest.approx(120 / 280, abs=0.08)


def test_too_few_runs_freeze_nothing() -> None:
    assert dr.freeze(list(runs(1, T0, 0.05))) is None


@pytest.mark.parametrize(
    ("change", "metric", "expected"),
    [
        (lambda _: {}, "end-to-end", 0.0),
        (lambda _: {"generation": 1.5}, "generation", math.log(1.5)),
        (lambda _: dict.fromkeys(LLM, 1.3), "end-to-end", math.log(1.3)),
        (lambda _: {"queue": 0.5}, "queue", math.log(0.5)),
    ],
)
def test_the_day_against_the_baseline_at_its_hours(
    change: Change, metric: str, expected: float
) -> None:
    baseline = week()
    drift = follow(baseline, T0 + timedelta(days=14), 1, change)
    value = dr.today(drift, T0 + timedelta(days=15))
    assert value is not None
    names = ("end-to-end", *baseline.phases, *(f"{name} tail" for name in baseline.phases))
    assert value[names.index(metric)] == pytest.approx(expected, abs=0.07)


def test_a_thicker_tail_is_more_samples_over_the_baselines_p95() -> None:
    drift = follow(week(), T0 + timedelta(days=14), 1, lambda _: {"slow": 0.12})
    value = dr.today(drift, T0 + timedelta(days=15))
    assert value is not None
    assert math.exp(value[1 + 6 + week().phases.index("queue")]) > 1.6
    assert abs(value[0]) < 0.08  # the median hardly moved


def test_no_day_until_most_of_its_hours_were_seen() -> None:
    start = T0 + timedelta(days=14)
    drift = follow(week(), start, (dr.MIN_HOURS - 1) / 24, lambda _: {})
    assert dr.today(drift, start + timedelta(hours=dr.MIN_HOURS - 1)) is None
    follow_on = runs(3, start + timedelta(hours=dr.MIN_HOURS - 1), 1 / 24)
    for run in follow_on:
        dr.observe(drift, run)
    assert dr.today(drift, start + timedelta(hours=dr.MIN_HOURS)) is not None


@pytest.mark.parametrize(
    ("daily", "expected"),
    [
        # A climb of 0.1 a day whose first day's value (over the 24 h before) was 0.1:
        # it began half a day before that day, 5.5 days before now.
        ([0.0, 0.0, 0.1, 0.2, 0.3, 0.4], 5.5),
        ([0.0, 0.0, 0.0, 0.4, 0.4], 2.0),  # a step: since the first day above
        ([0.3, 0.3, 0.3, 0.4], 4.0),  # all along since the first kept day
        ([0.4, 0.0, 0.0, 0.4], 1.0),  # a lone bad day long ago is not this drift
        ([], 0.0),
    ],
)
def test_how_long_it_has_drifted(daily: list[float], expected: float) -> None:
    drift = dr.Drift.start(week(), 0.0)
    first = T0 + timedelta(days=10)
    for i, value in enumerate(daily):
        dr.keep_day(drift, first + timedelta(days=i), np.full(drift.baseline.width, value))
    now = first + timedelta(days=len(daily))
    latest = daily[-1] if daily else 0.0
    assert dr.drifting_for(drift, 0, latest, now, 0.2) == pytest.approx(expected)


def test_one_value_a_day_kept() -> None:
    drift = dr.Drift.start(week(), 0.0)
    for hours in (0, 5, 23, 24, 30):
        dr.keep_day(drift, T0 + timedelta(hours=hours), np.full(drift.baseline.width, hours))
    assert drift.days[:, 1].tolist() == [0.0, 24.0]


def test_packed_and_read_back() -> None:
    drift = follow(week(), T0 + timedelta(days=14), 2, lambda _: {"generation": 1.2})
    drift.pin = 123.0
    floats = dp.pack(drift)
    back = dp.unpack(floats)
    assert back is not None and dp.pack(back) == floats
    json.dumps(floats, allow_nan=False)  # stored as JSON (detector_state.cusums)
    unpinned = dp.unpack(dp.pack(dr.Drift.start(week(), 0.0)))
    assert unpinned is not None and math.isnan(unpinned.pin)
    assert back.baseline.phases == drift.baseline.phases and back.pin == 123.0
    assert len(back.days) == len(drift.days) == 2
    assert dp.unpack(None) is None and dp.unpack([]) is None
    assert dp.unpack([99.0, *floats[1:]]) is None  # another layout's version
    assert dp.unpack(floats[:-1]) is None  # cut short
    kept = dp.Packed(drift)  # as the detector keeps it: read back without unpacking
    assert kept == floats and dp.unpack(kept) is drift
    copied = dp.unpack(list(kept))  # a copy of the memory: unpacked afresh, the same
    assert copied is not drift and copied is not None and dp.pack(copied) == floats


def _value(baseline: dr.Baseline, **moved: float) -> np.ndarray:
    names = ("end-to-end", *baseline.phases, *(f"{name} tail" for name in baseline.phases))
    value = np.zeros(baseline.width)
    for name, factor in moved.items():
        value[names.index(name)] = math.log(factor)
    return value


@pytest.mark.parametrize(
    ("moved", "signal", "leading"),
    [
        ({}, Signal.CLEAR, None),
        ({"end-to-end": 1.25}, Signal.HIT, "end-to-end"),
        ({"end-to-end": 1.15}, Signal.HOLD, "end-to-end"),  # over half the needed 20 %
        ({"generation": 1.6, "end-to-end": 1.1}, Signal.HIT, "generation"),
        ({"prefill": 1.25}, Signal.HOLD, "prefill"),  # adds 14 % × 25 % < 5 % of end-to-end
        ({"transfer": 3.0}, Signal.CLEAR, None),  # 2 % of end-to-end: not material
        ({"queue tail": 2.0}, Signal.HIT, "queue tail"),
        ({"queue tail": 1.3}, Signal.HOLD, "queue tail"),
        ({"transfer tail": 3.0}, Signal.CLEAR, None),
        ({"end-to-end": 0.6, "queue": 0.4}, Signal.CLEAR, None),  # faster is no alert
    ],
)
def test_when_the_drift_is_material(
    moved: dict[str, float], signal: Signal, leading: str | None
) -> None:
    steady = replace(week(), spread=np.zeros(week().width))  # the least changes alone
    value = _value(steady, **moved)
    finding = drift_finding(dr.Drift.start(steady, 0.0), value, PARAMS, T0 + timedelta(days=20))
    assert finding.signal is signal
    assert finding.numbers.get("leading") == leading


def test_a_target_whose_days_differ_needs_more() -> None:
    steady = replace(week(), spread=np.full(week().width, 0.01))
    noisy = replace(week(), spread=np.full(week().width, 0.1))
    value = _value(steady, **{"end-to-end": 1.4})  # ln 1.4 < 5 × 0.1
    assert drift_finding(dr.Drift.start(noisy, 0.0), value, PARAMS, T0).signal is Signal.HOLD
    assert drift_finding(dr.Drift.start(steady, 0.0), value, PARAMS, T0).signal is Signal.HIT


def test_the_sentence_says_by_how_much_since_when_and_for_how_long() -> None:
    drift = follow(week(), T0 + timedelta(days=7), 12, lambda day: {"generation": 1 + 0.1 * day})
    value = dr.today(drift, T0 + timedelta(days=19))
    assert value is not None
    finding = drift_finding(drift, value, PARAMS, T0 + timedelta(days=19))
    assert finding.signal is Signal.HIT
    n = finding.numbers
    assert n["leading"] == "generation" and n["baseline_from"] == "2026-03-02"
    assert 7 <= n["drifting_days"] <= 12

    class Who:
        target, from_phase, to_phase = "chat", None, None

    text = sentence(Who(), n)
    assert text.startswith(
        "chat drifted from its baseline of 2026-03-02…2026-03-08: generation median is"
    )
    assert f"drifting up for {n['drifting_days']:g} days" in text


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("2026-11-02", datetime(2026, 11, 2, tzinfo=UTC)),
        ("2026-11-02T10:00:00+02:00", datetime(2026, 11, 2, 8, tzinfo=UTC)),
        (None, None),
    ],
)
def test_a_pinned_baseline_is_a_date(raw: str | None, expected: datetime | None) -> None:
    assert DetectorParams(baseline_from=raw).baseline_from == expected


def test_a_pin_that_is_no_date_is_refused() -> None:
    with pytest.raises(ValidationError, match="baseline_from"):
        DetectorParams(baseline_from="last tuesday")


@pytest.mark.parametrize(
    ("pin", "stored_pin", "rebase_days", "age_days", "wants"),
    [
        (None, None, None, 10, False),  # a baseline, young enough
        (None, None, None, 40, True),  # older than baseline_max_age_days
        ("2026-03-20", None, None, 10, True),  # a new pin
        ("2026-03-20", "2026-03-20", None, 40, False),  # a pinned baseline does not age
        (None, "2026-03-20", None, 10, True),  # the pin taken away
        (None, None, 12, 10, True),  # a change acknowledged after the freeze
        (None, None, 5, 10, False),  # … before it
    ],
)
def test_when_a_baseline_is_frozen_anew(
    pin: str | None, stored_pin: str | None, rebase_days: int | None, age_days: int, wants: bool
) -> None:
    baseline = week()
    stored = (
        math.nan
        if stored_pin is None
        else datetime.fromisoformat(stored_pin).replace(tzinfo=UTC).timestamp()
    )
    drift = dr.Drift.start(baseline, baseline.end + 3600, stored)
    now = datetime.fromtimestamp(baseline.end, UTC) + timedelta(days=age_days)
    rebase = None if rebase_days is None else T0 + timedelta(days=rebase_days)
    params = DetectorParams(baseline_from=pin)
    assert wants_baseline(dp.pack(drift), params, rebase, now) is wants
    assert wants_baseline(None, params, rebase, now) is True


def judge_after(
    drift: dr.Drift, run: RunData, dominant_open: bool, active: frozenset[tuple[str, str]]
) -> list[Finding]:
    cusums = {"baseline_drift": dp.pack(drift)}
    inputs = Inputs(
        window=[run], recent=[run], reference=None, params=PARAMS, rng=np.random.default_rng(0),
        now=run.at, tail=TailState(), onset=lambda _n: [run], misses=MissLedger(),
        dominant_open=dominant_open, active=active, cusums=cusums,
    )  # fmt: skip
    found = DETECTORS["baseline_drift"].judge(inputs)  # type: ignore[misc]
    assert dp.unpack(cusums["baseline_drift"]) is not None  # the run was taken in, kept
    return found


@pytest.mark.parametrize(
    ("dominant_open", "active", "signal"),
    [
        (False, frozenset(), Signal.HIT),
        (False, frozenset({("deadline_miss", "warning")}), Signal.HIT),  # misses, not speed
        (False, frozenset({("baseline_drift", "warning")}), Signal.HIT),
        (True, frozenset(), Signal.HOLD),  # the leader change told of it
        (False, frozenset({("tail_shift", "critical")}), Signal.HOLD),
        (False, frozenset({("level_shift", "critical")}), Signal.HOLD),
    ],
)
def test_a_change_another_alert_tells_of_is_not_told_twice(
    dominant_open: bool, active: frozenset[tuple[str, str]], signal: Signal
) -> None:
    start = T0 + timedelta(days=14)
    slower: Change = lambda _: {"generation": 1.6}  # noqa: E731
    drift = follow(week(), start, 1, slower)
    (run,) = runs(9, start + timedelta(days=1), 0.01, slower)
    (finding,) = judge_after(drift, run, dominant_open, active)
    assert finding.signal is signal
    assert finding.numbers["leading"] == "generation"


def test_packed_again_after_a_run_reuses_the_profile_to_the_same_floats() -> None:
    drift = follow(week(), T0 + timedelta(days=14), 1, lambda _: {"generation": 1.2})
    before = dp.Packed(drift)
    for run in runs(8, T0 + timedelta(days=15), 0.2, lambda _: {}):
        dr.observe(drift, run)
    after = dp.Packed(drift, before)  # as the detector packs it after every run
    assert after.profile is before.profile and after == dp.pack(drift)
    fresh = dr.Drift.start(week(2), 0.0)  # a new freeze: its own profile
    assert dp.Packed(fresh, after) == dp.pack(fresh) and dp.Packed(fresh, list(after)) == dp.pack(
        fresh
    )
