"""An alert's facts stay those of its firing: later evaluations add what the numbers read
now beside them, never in their place (app/alerts/facts.py)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

import numpy as np
import pytest
from sqlalchemy.orm import Session, sessionmaker

from app.alerts.facts import NOW, kept
from app.alerts.identity import Identity
from app.alerts.summary import summarize_alert
from app.alerts.views import alert_detail
from app.analysis.detectors import DetectorParams
from app.store.models import AlertRow, AlertTransitionRow
from tests.alerts.test_engine import Watch, deliveries, rows
from tests.alerts.test_evaluator import CHANGE, SLOW_DECODE, Replay, switch, timeline
from tests.runfactory import LLM, T0, make_run

FIRED = {"lead_pp": 28.6, "to_share_pct": 36.6}
LATER = {"lead_pp": 52.3, "to_share_pct": 60.2}
OLDER = {"lead_pp": 40.0, "to_share_pct": 50.0}


@pytest.mark.parametrize(
    ("numbers", "fresh", "fired", "kept_numbers"),
    [
        ({}, FIRED, False, FIRED),  # pending or firing now: the newest numbers are the facts
        (OLDER, FIRED, False, FIRED),  # a pending streak: the newest replace the last
        (FIRED, {}, False, FIRED),  # no numbers given (a hold): kept as they are
        (FIRED, LATER, True, FIRED | {NOW: LATER}),  # fired: the facts stay, now beside
        (FIRED | {NOW: OLDER}, LATER, True, FIRED | {NOW: LATER}),  # now is the newest
        (FIRED | {NOW: OLDER}, {}, True, FIRED | {NOW: OLDER}),  # an ack: nothing moves
        (FIRED, {}, True, FIRED),  # fired, nothing since: no now
    ],
)
def test_the_numbers_an_alert_keeps(
    numbers: dict[str, Any], fresh: dict[str, Any], fired: bool, kept_numbers: dict[str, Any]
) -> None:
    assert kept(numbers, fresh, fired) == kept_numbers


SHIFT = Identity("dominant_shift", "chat", "eu", "vantage", "generation", "network")
SHIFT_FIRED = {
    "from_phase": "generation",
    "to_phase": "network",
    "from_share_before_pct": 48.5,
    "from_share_pct": 30.1,
    "to_share_pct": 36.6,
    "lead_pp": 6.5,
    "top": ["network", 36.6],
}
SHIFT_NOW = SHIFT_FIRED | {
    "from_share_pct": 7.9,
    "to_share_pct": 60.2,
    "lead_pp": 52.3,
    "top": ["network", 60.2],
}
SERVICE = Identity("dominant_shift", "chat", None, "service", "generation", "network")
SERVICE_FIRED = SHIFT_FIRED | {"vantages_agreeing": 2, "vantages": 2}
SERVICE_NOW = SHIFT_NOW | {
    "vantages_agreeing": 1,
    "vantages": 2,
    "leaders": {"eu": ["network", 60.2], "us": ["network", 41.0]},
    "from_now": {"eu": ["generation", 7.9], "us": ["generation", 20.5]},
    "tops": {"eu": ["network", 60.2], "us": ["queue", 44.0]},
}
TAIL = Identity("tail_shift", "chat", "eu", "vantage")
TAIL_FIRED = {
    "channel": "queue",
    "cusum": 13.4,
    "threshold": 13.0,
    "vantages_pooled": 1,
    "quantile": "p99",
    "inflation": 3.0,
    "recent_share_pct": 5.0,
    "reference_share_pct": 0.86,
    "recent_ratio": 4.5,
    "reference_ratio": 2.57,
    "samples": 260,
    "recent_ms": 856.3,
    "reference_ms": 431.1,
}
DEADLINE = Identity("deadline_miss", "chat", "eu", "vantage")
DEADLINE_FIRED = {
    "objective_pct": 99.0,
    "budget_window": "30d",
    "budget_left_pct": 40.0,
    "burn_rates": {"1h": 24.0, "5m": 25.0},
    "window": "1h",
    "factor": 14.4,
    "samples": 100,
    "rate_pct": 24.0,
}
TAIL_SAID = (
    "queue p99 is 1.8× its usual over the run median on chat (4.5× the median, usually"
    " 2.57×): 5 % of samples beyond the usual p99, against 0.86 % (p99 431.1 → 856.3 ms;"
    " 260 samples) at eu"
)
MIX = Identity("composition_shift", "chat", "eu", "vantage")
MIX_FIRED = {"distance": 0.9, "p_value": 0.001, "moved_most": "prefill"}
SILENT = Identity("vantage_silent", "_vantages", "eu", "vantage")
SILENT_FIRED = {"silent_s": 3700.0, "interval_s": 900.0, "after": 4}


@pytest.mark.parametrize(
    ("identity", "numbers", "said"),
    [
        (
            SHIFT,
            SHIFT_FIRED | {NOW: SHIFT_NOW},
            "dominant phase moved on chat: generation 48.5 % → network 36.6 % (lead 6.5 pp) at"
            " eu; now generation 7.9 %, network 60.2 %",
        ),
        (  # what leads now is said of the numbers now, not of the firing's
            SHIFT,
            SHIFT_FIRED | {NOW: SHIFT_NOW | {"top": ["queue", 61.0]}},
            "dominant phase moved on chat: generation 48.5 % → network 36.6 % (lead 6.5 pp) at"
            " eu; now generation 7.9 %, network 60.2 %; queue leads now (61 %)",
        ),
        (  # across vantages: the shares now at each, where it fired at 2/2
            SERVICE,
            SERVICE_FIRED | {NOW: SERVICE_NOW},
            "dominant phase moved on chat: generation 48.5 % → network 36.6 % (lead 6.5 pp) at"
            " 2/2 vantages; now generation 7.9 %, network 60.2 % at eu, generation 20.5 %,"
            " network 41 % at us; queue leads now at us (44 %)",
        ),
        (  # a resolution's numbers lack the gate's: the CUSUM then
            TAIL,
            TAIL_FIRED | {NOW: {"channel": "queue", "cusum": 0.0, "threshold": 13.0}},
            f"{TAIL_SAID}; now CUSUM 0 of 13",
        ),
        (
            TAIL,
            TAIL_FIRED | {NOW: TAIL_FIRED | {"recent_share_pct": 7.5}},
            f"{TAIL_SAID}; now 7.5 % beyond the usual p99",
        ),
        (
            DEADLINE,
            DEADLINE_FIRED | {NOW: DEADLINE_FIRED | {"rate_pct": 3.0, "budget_left_pct": -20.0}},
            "deadline SLO burning on chat: 24 % of 100 samples over 1h missed the deadline"
            " (burn 24× the budget, alert at 14.4×; objective 99 %, 40 % of the 30d budget"
            " left) at eu; now 3 % missed over 1h (burn 24×), the 30d budget spent 1.2×",
        ),
        (
            MIX,
            MIX_FIRED | {NOW: MIX_FIRED | {"distance": 0.2, "moved_most": "queue"}},
            "phase mix moved on chat without a leader change: prefill moved most (Aitchison"
            " distance 0.9, p = 0.001) at eu; now distance 0.2, queue moved most",
        ),
        (
            SILENT,
            SILENT_FIRED | {NOW: SILENT_FIRED | {"silent_s": 7300.0}},
            "vantage silent: no run for 3700 s, over 4 of its 900 s intervals at eu; now 7300 s",
        ),
        (  # fired, not evaluated since: the firing's sentence alone
            SHIFT,
            SHIFT_FIRED,
            "dominant phase moved on chat: generation 48.5 % → network 36.6 % (lead 6.5 pp) at eu",
        ),
    ],
)
def test_a_fired_alert_says_its_firing_then_what_it_reads_now(
    identity: Identity, numbers: dict[str, Any], said: str
) -> None:
    assert summarize_alert(identity, numbers) == said


DEEPER = LLM | {"generation": 600.0}  # decode slower still: generation holds even more


def test_a_shift_s_firing_facts_stay_while_the_shares_move_on() -> None:
    replay = Replay()
    later = CHANGE + timedelta(hours=3)

    def mix(at: datetime) -> Mapping[str, float]:
        return DEEPER if at >= later else switch(LLM, SLOW_DECODE)(at)

    replay.feed(timeline(4, {"eu": mix}, end=later + timedelta(hours=3)))
    shift = [t for t in replay.transitions if t.identity.kind == "dominant_shift"]
    fired = next(t for t in shift if t.moved and t.after.value == "firing")
    facts = fired.numbers
    assert NOW not in facts and facts["from_share_before_pct"] > 35  # queue ≈ 43 % before
    refreshes = [t for t in shift if t.refresh and t.at > later + timedelta(hours=1)]
    assert refreshes
    for refresh in refreshes:
        assert {k: v for k, v in refresh.numbers.items() if k != NOW} == facts
        assert refresh.summary.startswith(fired.summary + "; now queue ")
    now = refreshes[-1].numbers[NOW]
    # What moved is said as now: generation ≈ 75 %, queue ≈ 15 % (at firing ≈ 55 %, 27 %).
    assert now["to_share_pct"] > facts["to_share_pct"] + 10
    assert now["from_share_pct"] < facts["from_share_pct"] - 5
    assert f"generation {now['to_share_pct']:g} %" in refreshes[-1].summary


def test_the_stored_alert_its_notifications_and_its_view_keep_the_firing_facts(
    sessions: sessionmaker[Session],
) -> None:
    quick = DetectorParams(
        enabled=("dominant_shift",), min_reference_runs=8, min_reference_days=0.1, resamples=200
    )
    watch = Watch(sessions, params=quick)
    rng = np.random.default_rng(3)
    every = timedelta(minutes=20)
    for i in range(40):
        medians = DEEPER if i >= 30 else SLOW_DECODE if i >= 20 else LLM
        watch.feed(make_run(rng, T0 + i * every, medians, n=10))
    steps = rows(sessions, AlertTransitionRow, AlertTransitionRow.id)
    fired = next(step for step in steps if step.after == "firing")
    assert NOW not in fired.numbers and fired.numbers["from_share_before_pct"] > 35
    (alert,) = rows(sessions, AlertRow)
    assert alert.state == "firing"
    assert {k: v for k, v in alert.numbers.items() if k != NOW} == fired.numbers
    assert alert.numbers[NOW]["to_share_pct"] > fired.numbers["to_share_pct"] + 10
    assert alert.summary.startswith(fired.summary + "; now queue ")
    refreshed = [row.payload for row in deliveries(sessions) if row.payload["previous"] == "firing"]
    last = refreshed[-1]
    assert {k: v for k, v in last["numbers"].items() if k != NOW} == fired.numbers
    assert last["summary"] == alert.summary
    with sessions() as session:
        view = alert_detail(session, str(alert.id))
    assert view is not None and view.explanation == alert.summary
    assert view.numbers["from_share_before_pct"] == fired.numbers["from_share_before_pct"]
