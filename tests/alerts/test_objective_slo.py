"""Objectives beside the deadline through the evaluator: availability pages on a partial
outage that probe_failing never sees, a short incident pages when it burns fast enough,
and each objective is its own alert."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from datetime import timedelta

import numpy as np
import pytest

from app.alerts.backtest.replay import replay
from app.alerts.identity import Transition
from app.alerts.state import State
from app.analysis.detectors import DetectorParams
from app.analysis.runs import RunData
from tests.runfactory import EVERY, T0, make_run

AVAILABILITY = DetectorParams.model_validate(
    {
        "enabled": ["availability_slo", "probe_failing"],
        "objectives": {"availability": {"target": 99.5}},
    }
)


def timeline(
    failing: dict[int, int], runs: int = 6 * 96, every: timedelta = EVERY
) -> list[RunData]:
    """``runs`` runs of 20 samples; run ``i`` has ``failing[i]`` more that failed."""
    rng = np.random.default_rng(7)
    return [make_run(rng, T0 + i * every, failed=failing.get(i, 0)) for i in range(runs)]


def moves(transitions: list[Transition]) -> list[tuple[str, str, str]]:
    return [
        (t.identity.kind, t.identity.severity, t.after.value)
        for t in transitions
        if t.moved and t.after in (State.FIRING, State.RESOLVED)
    ]


def test_a_fifth_of_requests_failing_for_forty_minutes_pages_and_is_not_probe_failing() -> None:
    # Runs every 5 minutes, 20 % of each failing for 40 minutes: 40× a 99.5 % budget.
    incident = dict.fromkeys(range(300, 308), 5)
    found = list(replay(timeline(incident, every=timedelta(minutes=5)), lambda _: AVAILABILITY))
    assert moves(found) == [
        ("availability_slo", "critical", "firing"),
        ("availability_slo", "critical", "resolved"),
    ]
    fired = next(t for t in found if t.after is State.FIRING)
    assert T0 + 303 * timedelta(minutes=5) < fired.at <= T0 + 306 * timedelta(minutes=5)
    assert "availability SLO burning on chat" in fired.summary
    assert "failed (no ok answer)" in fired.summary


@pytest.mark.parametrize("first", [200, 96])  # 96: the day's rebuild of the ledgers
def test_an_incident_of_two_runs_pages_when_it_burns_fast_enough(first: int) -> None:
    # Two 15-minute runs with 30 % failing (9 of 29): 60× the budget in the short
    # window, 30× over the hour, from two runs: the workbook's short window lets it page.
    found = list(replay(timeline({first: 9, first + 1: 9}), lambda _: AVAILABILITY))
    assert moves(found)[:1] == [("availability_slo", "critical", "firing")]
    fired = next(t for t in found if t.after is State.FIRING)
    assert fired.at < T0 + (first + 2) * EVERY


def test_one_bad_run_alone_does_not_page() -> None:
    found = list(replay(timeline({200: 9}), lambda _: AVAILABILITY))
    assert moves(found) == []


def test_a_slow_availability_leak_opens_a_ticket_not_a_page() -> None:
    # 1 failed of 21 in every 8th run: ~0.6 % over days, above the 0.5 % the budget allows.
    leak = {i: 1 for i in range(0, 6 * 96) if i % 8 == 0} | {
        i: 1 for i in range(0, 6 * 96) if i % 8 == 4
    }
    found = list(replay(timeline(leak), lambda _: AVAILABILITY))
    assert Counter(moves(found)) == Counter({("availability_slo", "warning", "firing"): 1})


def with_ttft(run: RunData, ttft_ms: float) -> RunData:
    values = np.full(run.timed, ttft_ms)
    return replace(run, readings={"ttft_ms": (values, np.zeros(run.timed, dtype=np.bool_))})


def test_a_ttft_objective_pages_on_its_own_alert_not_the_deadlines() -> None:
    params = DetectorParams.model_validate(
        {
            "enabled": ["ttft_ms_slo", "deadline_miss", "availability_slo"],
            "objectives": {"ttft_ms": {"p": 99, "below": 500}, "availability": {"target": 99}},
        }
    )
    runs = [
        with_ttft(run, 900.0 if 200 <= i < 204 else 200.0) for i, run in enumerate(timeline({}))
    ]
    found = list(replay(runs, lambda _: params))
    assert moves(found)[:1] == [("ttft_ms_slo", "critical", "firing")]
    assert {kind for kind, _, _ in moves(found)} == {"ttft_ms_slo"}
    fired = next(t for t in found if t.after is State.FIRING)
    assert "ttft_ms SLO burning" in fired.summary and "took over 500 ms" in fired.summary


def test_a_target_without_objectives_raises_nothing_from_them() -> None:
    params = DetectorParams(enabled=("availability_slo", "ttft_ms_slo"))
    assert moves(list(replay(timeline({200: 9, 201: 9}), lambda _: params))) == []


def test_an_end_to_end_objective_judges_runs_made_without_marks() -> None:
    # A backtest's runs come from a CSV (no marks): their end-to-end times still count.
    params = DetectorParams.model_validate(
        {"enabled": ["end_to_end_ms_slo"], "objectives": {"end_to_end_ms": {"p": 99, "below": 600}}}
    )
    rng = np.random.default_rng(3)
    slow = {"connect": 5.0, "network": 30.0, "queue": 900.0, "prefill": 40.0, "generation": 80.0}
    runs = [
        make_run(rng, T0 + i * EVERY, **({"medians": slow} if 200 <= i < 203 else {}))
        for i in range(6 * 96)
    ]
    found = list(replay(runs, lambda _: params))
    assert moves(found)[:1] == [("end_to_end_ms_slo", "critical", "firing")]
