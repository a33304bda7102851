"""The detectors on constructed runs: what hits, what holds, what clears, and why."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

import numpy as np
import pytest
from scipy.stats import binomtest

from app.analysis import detectors as d
from app.analysis.detectors import Signal
from app.analysis.dominance import Mix, phase_mix
from app.analysis.runs import RunData
from app.analysis.slo import MissLedger
from app.analysis.tail import TailState
from tests.runfactory import EVERY, LLM, T0, failed_run, make_run

PARAMS = d.DetectorParams()
DAY2 = T0 + timedelta(days=2)
WEEK2 = T0 + timedelta(days=7)
# The queue still leads, but the network tripled and prefill shrank: a moved mix.
MOVED = LLM | {"network": 90.0, "prefill": 10.0}
# Decode throughput collapsed: generation takes three times as long and now leads.
SLOW_DECODE = LLM | {"generation": 240.0}
FAST_HTTP = {"connect": 2.0, "network": 10.0, "server": 30.0, "transfer": 3.0}


def window(
    seed: int, medians: dict[str, float] = LLM, at: datetime = DAY2, count: int = 4, **kw: float
) -> list[RunData]:
    rng = np.random.default_rng(seed)
    return [make_run(rng, at + i * EVERY, medians, **kw) for i in range(count)]  # type: ignore[arg-type]


def day_of_runs(seed: int, days: int = 1, busy_hour: int | None = None) -> list[RunData]:
    """Runs every 15 minutes; at ``busy_hour`` every day 30 % of samples wait 300 ms more."""
    rng = np.random.default_rng(seed)
    runs = []
    for i in range(days * 96):
        at = T0 + i * EVERY
        slow = 0.3 if at.hour == busy_hour else 0.0
        runs.append(make_run(rng, at, slow=slow, slow_ms=300.0))
    return runs


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


# dominant_shift -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("shares", "phase", "leader", "leads"),
    [
        ({"queue": 0.30, "prefill": 0.29, "generation": 0.17}, "queue", "generation", True),
        ({"queue": 0.30, "prefill": 0.29, "generation": 0.17}, "prefill", "generation", True),
        ({"queue": 0.21, "generation": 0.17}, "queue", "generation", False),  # 4 pp < δ
        ({"queue": 0.225, "generation": 0.17}, "queue", "generation", True),  # just over δ
        ({"generation": 0.40, "queue": 0.30}, "queue", "generation", False),  # behind
        ({"queue": 0.30}, "queue", "generation", False),  # no leader in the window
        ({"generation": 0.30}, "queue", "generation", False),  # no such phase
    ],
)
def test_a_phase_leads_by_delta_in_the_point_estimate(
    shares: dict[str, float], phase: str, leader: str, leads: bool
) -> None:
    mix = Mix(medians={}, shares=shares, dominant=None, n=10, runs=3)
    assert d.leads_by(mix, phase, leader, PARAMS) is leads


def test_challenger_needs_a_lead_of_delta_in_the_point_estimate() -> None:
    assert d.challenger(phase_mix(window(1, SLOW_DECODE)), "queue", PARAMS) == "generation"
    assert d.challenger(phase_mix(window(1)), "queue", PARAMS) is None
    near = LLM | {"generation": 125.0}  # leads the queue by about 1 pp
    assert d.challenger(phase_mix(window(1, near)), "queue", PARAMS) is None


def test_dominant_finding_hits_on_a_clear_lead_whose_interval_is_above_zero() -> None:
    finding = d.dominant_finding(window(1, SLOW_DECODE), "queue", "generation", PARAMS, rng())
    assert finding.signal is Signal.HIT
    numbers = finding.numbers
    assert numbers["lead_pp"] > 20
    assert 0 < numbers["lead_low_pp"] < numbers["lead_pp"] < numbers["lead_high_pp"]
    assert numbers["to_share_pct"] > numbers["from_share_pct"]
    assert (numbers["runs"], numbers["samples"]) == (4, 80)


def test_dominant_finding_holds_on_a_near_tie() -> None:
    near = LLM | {"generation": 125.0}
    finding = d.dominant_finding(window(1, near), "queue", "generation", PARAMS, rng())
    assert finding.signal is Signal.HOLD
    assert abs(finding.numbers["lead_pp"]) < PARAMS.dominant_lead_pp
    assert "lead_low_pp" not in finding.numbers  # no bootstrap for a lead under delta


def test_dominant_finding_holds_when_runs_disagree_although_the_pooled_lead_is_large() -> None:
    # Two runs say generation leads by far, one says the queue does: runs are the units,
    # so the interval of the lead spans zero.
    ahead = {"network": 30.0, "queue": 100.0, "generation": 220.0}
    behind = {"network": 30.0, "queue": 260.0, "generation": 60.0}
    generator = rng(4)
    runs = [
        make_run(generator, DAY2, ahead, n=8),
        make_run(generator, DAY2 + EVERY, ahead, n=8),
        make_run(generator, DAY2 + 2 * EVERY, behind, n=8),
    ]
    finding = d.dominant_finding(runs, "queue", "generation", PARAMS, rng())
    assert finding.numbers["lead_pp"] >= PARAMS.dominant_lead_pp
    assert finding.numbers["lead_low_pp"] <= 0
    assert finding.signal is Signal.HOLD


def test_dominant_resolution_hits_while_the_new_leader_still_leads() -> None:
    finding = d.dominant_resolution(
        window(2, SLOW_DECODE), "queue", "generation", "queue", PARAMS, rng()
    )
    assert finding.signal is Signal.HIT


def test_dominant_resolution_clears_when_the_old_leader_is_back_with_confidence() -> None:
    finding = d.dominant_resolution(window(2), "queue", "generation", "queue", PARAMS, rng())
    assert finding.signal is Signal.CLEAR
    # In the alert's terms (queue → generation): generation is now well behind.
    numbers = finding.numbers
    assert (numbers["from_phase"], numbers["to_phase"]) == ("queue", "generation")
    assert numbers["from_share_pct"] > numbers["to_share_pct"]
    assert numbers["lead_low_pp"] < numbers["lead_pp"] < numbers["lead_high_pp"] < 0


def test_dominant_resolution_holds_between_the_two_thresholds() -> None:
    # Generation leads by under delta: neither still shifted nor back.
    between = LLM | {"generation": 128.0}
    finding = d.dominant_resolution(
        window(2, between), "queue", "generation", "queue", PARAMS, rng()
    )
    assert finding.signal is Signal.HOLD
    assert 0 < finding.numbers["lead_pp"] < PARAMS.dominant_lead_pp


def test_dominant_resolution_clears_once_the_reference_has_absorbed_the_change() -> None:
    runs = window(2, SLOW_DECODE)
    finding = d.dominant_resolution(runs, "queue", "generation", "generation", PARAMS, rng())
    assert finding.signal is Signal.CLEAR


# deadline_miss: the SLO's burn rates ------------------------------------------------------

SLO_NOW = T0 + timedelta(days=4)


def slo_inputs(runs: list[tuple[int, int]], params: d.DetectorParams = PARAMS) -> d.Inputs:
    """A ledger of 15-minute runs ending at SLO_NOW, each (timed, censored), oldest first."""
    ledger = MissLedger()
    start = SLO_NOW - len(runs) * EVERY
    for i, (timed, censored) in enumerate(runs):
        ledger.add(start + i * EVERY, timed, censored)
    return d.Inputs(
        window=[], recent=[], reference=None, params=params, rng=rng(), now=SLO_NOW,
        tail=TailState(), onset=lambda _n: [], misses=ledger, dominant_open=False,
    )  # fmt: skip


def judged(
    runs: list[tuple[int, int]], active: frozenset[tuple[str, str]] = frozenset()
) -> dict[str, d.Finding]:
    inputs = replace(slo_inputs(runs), active=active)
    findings = d.DETECTORS["deadline_miss"].judge(inputs)  # type: ignore[misc]
    return {finding.severity: finding for finding in findings}  # type: ignore[misc]


def steady(days: float, misses_every: int, per_miss: int = 1) -> list[tuple[int, int]]:
    """20-sample runs; every ``misses_every``-th run has ``per_miss`` misses."""
    return [(20, per_miss if i % misses_every == 0 else 0) for i in range(int(days * 96))]


def test_a_steady_violation_is_a_ticket_not_a_page() -> None:
    found = judged(steady(3, 1))  # 1 in 20 missed: 5 % against a 1 % budget, 5× burn
    assert found["warning"].signal is Signal.HIT
    assert found["critical"].signal is Signal.CLEAR  # 5× is under 6× over 6 h
    numbers = found["warning"].numbers
    assert numbers["window"] == "3d" and numbers["burn_rates"]["3d"] == pytest.approx(5.0)
    # As Sloth and Pyrra count it: the window's misses over what its requests allow.
    assert numbers["budget_left_pct"] == pytest.approx(100 * (1 - 5.0))


def test_a_fast_burn_pages_and_the_ticket_waits_for_it() -> None:
    runs = [*steady(1, 10**9), (20, 6), (20, 5), (20, 7), (20, 6)]  # the last hour: 30 %
    found = judged(runs)
    assert found["critical"].signal is Signal.HIT
    assert found["critical"].numbers["window"] == "1h"
    assert found["warning"].signal is Signal.HOLD  # burning too, but the page is the news


TICKETED = frozenset({("deadline_miss", "warning")})


def test_a_firing_ticket_is_not_paged_again_for_the_same_burn() -> None:
    runs = steady(3, 1, per_miss=3)  # 15 % all along: 15× over 6 h, under 14.4× beyond chance
    assert judged(runs)["critical"].signal is Signal.HIT  # the 6-hour pair alone would page
    assert judged(runs, TICKETED)["critical"].signal is not Signal.HIT


def test_a_firing_ticket_is_paged_when_the_burn_turns_fast() -> None:
    runs = [*steady(3, 1), (20, 12), (20, 11), (20, 13), (20, 12)]  # the last hour: 60 %
    found = judged(runs, TICKETED)
    assert found["critical"].signal is Signal.HIT and found["critical"].numbers["window"] == "1h"


def test_a_firing_page_keeps_the_ticket_quiet() -> None:
    found = judged(steady(3, 1), frozenset({("deadline_miss", "critical")}))
    assert found["warning"].signal is Signal.HOLD


def test_one_run_that_missed_wholesale_is_not_a_rate() -> None:
    found = judged([*steady(1, 10**9), (20, 0), (20, 0), (20, 0), (20, 20)])
    assert found["critical"].numbers["burn_rates"]["1h"] == pytest.approx(25.0)
    assert found["critical"].numbers["runs_missing"] == 1
    assert found["critical"].signal is Signal.HOLD  # burning: no page, and no all-clear


def test_a_few_early_misses_are_not_beyond_chance() -> None:
    # A new target's first two runs: 2 of 40 missed (5×), p ≈ 0.06 at the objective's rate.
    found = judged([(20, 1), (20, 1)])
    assert found["warning"].numbers["burn_rates"]["3d"] == pytest.approx(5.0)
    assert found["warning"].signal is Signal.HOLD
    exact = binomtest(2, 40, 0.01, alternative="greater").pvalue
    assert exact > PARAMS.slo.alpha


def test_the_alert_holds_while_the_long_window_burns_and_clears_when_it_stops() -> None:
    # Misses stopped 12 hours ago: the 6 h window is clean, the 3-day one still burns.
    burning = [*steady(2.5, 1), *steady(0.5, 10**9)]
    assert judged(burning)["warning"].signal is Signal.HOLD
    healed = [*steady(0.5, 1), *steady(3, 10**9)]  # the violation left the 3-day window
    assert judged(healed)["warning"].signal is Signal.CLEAR


def test_no_miss_at_all_clears_both() -> None:
    found = judged(steady(1, 10**9))
    assert {severity: f.signal for severity, f in found.items()} == {
        "critical": Signal.CLEAR,
        "warning": Signal.CLEAR,
    }


# composition_shift ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def composition_reference() -> d.CompositionReference:
    return d.CompositionReference.build(day_of_runs(15))


def test_composition_finding_hits_on_a_moved_mix_with_the_same_leader(
    composition_reference: d.CompositionReference,
) -> None:
    assert composition_reference.leader == "queue"
    moved = window(16, MOVED)
    assert {phase_mix([run]).dominant for run in moved} == {"queue"}
    finding = d.composition_finding(moved, composition_reference, PARAMS, rng())
    assert finding.signal is Signal.HIT
    assert finding.numbers["distance"] >= PARAMS.composition_min_distance
    assert finding.numbers["p_value"] < PARAMS.composition_alpha
    assert finding.numbers["moved_most"] in ("network", "prefill")


def test_composition_finding_clears_on_the_reference_s_own_mix(
    composition_reference: d.CompositionReference,
) -> None:
    finding = d.composition_finding(window(17), composition_reference, PARAMS, rng())
    assert finding.signal is Signal.CLEAR
    assert finding.numbers["distance"] < PARAMS.composition_min_distance / 2


def test_composition_finding_clears_when_any_run_of_the_window_changed_leader(
    composition_reference: d.CompositionReference,
) -> None:
    generator = rng(18)
    moved = window(18, MOVED)
    moved[2] = make_run(generator, moved[2].at, SLOW_DECODE)  # one run: generation leads
    finding = d.composition_finding(moved, composition_reference, PARAMS, rng())
    assert finding.signal is Signal.CLEAR
    assert finding.numbers == {}


# probe_failing ----------------------------------------------------------------------------


def run_of(code: str, at: datetime) -> RunData:
    """``ok``: answered in time; ``late``: every sample answered past the deadline;
    ``late+fail``: some late, the rest failed; ``fail``: no answer (errors, HTTP errors)."""
    generator = rng(19)
    if code == "fail":
        return failed_run(at)
    if code == "late":
        return make_run(generator, at, n=5, censored=5)
    if code == "late+fail":
        return make_run(generator, at, n=2, censored=2, failed=3)
    assert code == "ok"
    return make_run(generator, at)


@pytest.mark.parametrize(
    ("codes", "signal"),
    [
        (["fail", "fail"], Signal.HOLD),  # too few runs yet
        (["ok", "fail", "fail", "fail"], Signal.HIT),
        (["fail", "fail", "fail"], Signal.HIT),
        (["fail", "fail", "ok"], Signal.CLEAR),
        (["ok", "fail", "fail"], Signal.HOLD),  # the last run failed: not over yet
        (["fail", "ok", "fail"], Signal.HOLD),
        # Late answers are answers: the deadline SLO's business (deadline_miss), not this.
        (["late", "late", "late"], Signal.CLEAR),
        (["late+fail", "late+fail", "late+fail"], Signal.CLEAR),
        (["fail", "fail", "late"], Signal.CLEAR),
        (["fail", "late", "fail"], Signal.HOLD),
        (["late", "fail", "fail", "fail"], Signal.HIT),
    ],
    ids=lambda value: ",".join(value) if isinstance(value, list) else str(value),
)
def test_failing_finding_means_no_answer_not_late_answers(codes: list[str], signal: Signal) -> None:
    runs = [run_of(code, T0 + i * EVERY) for i, code in enumerate(codes)]
    assert d.failing_finding(runs, PARAMS).signal is signal


def test_failing_finding_counts_the_failed_samples_of_its_window() -> None:
    runs = [make_run(rng(19), T0), *(failed_run(T0 + i * EVERY) for i in range(1, 4))]
    assert d.failing_finding(runs, PARAMS).numbers == {"runs": 3, "failed_samples": 15}
