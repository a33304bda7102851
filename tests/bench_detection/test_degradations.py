"""The slowdown and slow-degradation scenarios: each change lands where it is labelled,
is the size asked for, and leaves the leader where it was."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from bench.detection import degradations, heldout
from bench.detection.catalog import DEFAULT, SCENARIOS, UNTUNED, build
from bench.detection.labels import Event
from bench.detection.model import MICROS, Series, load_cycle
from bench.detection.scenario import SLOWER, Context, Params, Scenario, after, day_mean, leaders

QUIET_LOAD = {"load_sigma": 0.0, "day_sigma": 0.0}


def built(builder: Callable[[Context], None], days: float = 14.0, **knobs: object) -> Scenario:
    params = Params(seed=1, **{**QUIET_LOAD, **knobs})  # type: ignore[arg-type]
    ctx = Context(builder.__name__, "", params, days)
    builder(ctx)
    return ctx.scenario


def by_target(scenario: Scenario) -> dict[str, list[Series]]:
    found: dict[str, list[Series]] = {}
    for s in scenario.series:
        found.setdefault(s.target, []).append(s)
    return found


def first_changed(series: Series, event: Event) -> int:
    return int(np.argmax(after(series, event.start)))


def smoothed_leaders(series: Series) -> list[str]:
    return leaders(series, lambda column: day_mean(column, 900.0))


@pytest.mark.parametrize("factor", [1.25, 1.5])
def test_uniform_slowdown_scales_every_phase_from_the_labelled_run(factor: float) -> None:
    scenario = built(degradations.uniform_slowdown, slowdown=factor)
    events = {e.target: e for e in scenario.events}
    assert len(events) == 2
    for target, series in by_target(scenario).items():
        event = events[target]
        assert (event.kind, event.accept, event.abrupt) == ("level_shift", ("level_shift",), True)
        assert event.window[1] - event.window[0] == np.timedelta64(1, "D").item()
        for s in series:
            i = first_changed(s, event)
            fixed = [s.column(p) for p in s.phases if p != s.profile.load_phase]
            # Phases without load are constant: the step at the change is the factor.
            assert s.medians[i, fixed] == pytest.approx(factor * s.medians[i - 1, fixed])
            assert s.medians[i - 1, fixed] == pytest.approx(s.medians[0, fixed])
            assert smoothed_leaders(s)[i - 48] == smoothed_leaders(s)[i + 48]


@pytest.mark.parametrize("factor", [2.0, 1.5])
def test_phase_slowdown_moves_one_phase_and_end_to_end_by_ten_percent(factor: float) -> None:
    scenario = built(degradations.phase_slowdown, phase_slowdown=factor)
    events = {e.target: e for e in scenario.events}
    slowed = {"phase_slowdown.s0": "prefill", "phase_slowdown.s1": "transfer"}
    for target, series in by_target(scenario).items():
        event, phase = events[target], slowed[target]
        for s in series:
            i = first_changed(s, event)
            ratio = s.medians[i] / s.medians[i - 1]
            others = [s.column(p) for p in s.phases if p not in (phase, s.profile.load_phase)]
            assert ratio[s.column(phase)] == pytest.approx(factor)
            assert ratio[others] == pytest.approx(np.ones(len(others)))
            day = 96
            total_before = s.medians[i - day : i].sum(axis=1).mean()
            total_after = s.medians[i : i + day].sum(axis=1).mean()
            if factor == 2.0:
                assert total_after / total_before >= 1.10
            assert smoothed_leaders(s)[i - day] == smoothed_leaders(s)[i + day] == "generation"


def test_slow_queue_tail_grows_linearly_from_the_labelled_start() -> None:
    scenario = built(degradations.slow_queue_tail_degradation, days=35.0)
    for event in scenario.events:
        assert (event.kind, event.abrupt, event.window) == (
            "baseline_drift",
            False,
            (event.start, scenario.end),
        )
        assert event.accept == ("baseline_drift", "tail_shift", "level_shift")
        assert 7.0 <= (event.start - scenario.start).total_seconds() / 86400 <= 8.0
        for s in by_target(scenario)[event.target]:
            i = first_changed(s, event)
            assert s.tail_p[:i] == pytest.approx(0.02)
            assert s.tail_p[-1] == pytest.approx(0.12)
            assert np.all(np.diff(s.tail_p) >= 0)
            middle = int(np.searchsorted(s.starts, s.starts[i] + int(10.5 * 86400 * MICROS)))
            assert s.tail_p[middle] == pytest.approx(0.07, abs=0.001)


@pytest.mark.parametrize("growth", [1.6, 1.4])
def test_slow_generation_growth_reaches_its_factor_and_never_leads(growth: float) -> None:
    scenario = built(degradations.slow_generation_growth, days=35.0, growth_to=growth)
    for event in scenario.events:
        assert event.accept == ("baseline_drift", "level_shift", "dominant_shift")
        for s in by_target(scenario)[event.target]:
            gen = s.medians[:, s.column("generation")]
            i = first_changed(s, event)
            assert gen[:i] == pytest.approx(gen[0])
            assert gen[-1] / gen[0] == pytest.approx(growth)
            assert set(smoothed_leaders(s)) == {"queue"}


@pytest.mark.parametrize(
    ("scenario", "slower"),
    [
        ("queue_growth", True),
        ("generation_regrowth", True),
        ("queue_tail_blowup", True),
        ("persistent_violation_after_tail_change", True),
        ("edge_switch", True),
        ("abrupt_generation_collapse", False),  # faster: no level shift, no drift
    ],
)
def test_slowdowns_are_tolerated_only_where_the_target_got_slower(
    scenario: str, slower: bool
) -> None:
    events = [e for e in build(scenario, Params(seed=1, days=4.0)).events if not e.slo]
    assert events
    for event in events:
        assert all(event.tolerates(kind) for kind in SLOWER) is slower


def test_retrieval_prompts_hand_the_lead_to_prefill() -> None:
    scenario = built(heldout.retrieval_prompts)
    for event in scenario.events:
        for s in by_target(scenario)[event.target]:
            i = first_changed(s, event)
            assert smoothed_leaders(s)[i - 96] == "generation"
            assert smoothed_leaders(s)[i + 96] == "prefill"


def test_weekly_batch_window_triples_the_queue_on_wednesday_nights_only() -> None:
    scenario = built(heldout.weekly_batch_window, days=22.0)
    assert scenario.events == []
    for s in scenario.series:
        p = s.profile
        cycle = load_cycle(s.starts, p.daily_amplitude, p.peak_hour, p.weekend_factor)
        ratio = s.medians[:, s.column("queue")] / cycle
        ratio /= np.median(ratio)
        assert set(np.round(ratio, 6).tolist()) == {1.0, heldout.BATCH_QUEUE}
        busy = ratio > 1.5
        days = (s.starts // (86400 * MICROS) + 3) % 7
        hour = s.starts / MICROS % 86400 / 3600
        assert set(days[busy].tolist()) == {2}
        assert np.all((hour[busy] >= 1) & (hour[busy] < 4))
        assert busy.sum() == pytest.approx(3 * 12, abs=2)  # 3 weeks × 12 runs


def test_the_default_corpus_leaves_out_the_fleet_and_the_untuned_kinds() -> None:
    assert set(UNTUNED) <= set(SCENARIOS)
    assert not set(DEFAULT) & {*UNTUNED, "fleet"}
    assert {"uniform_slowdown", "slow_generation_growth"} <= set(DEFAULT)
