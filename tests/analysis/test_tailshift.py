"""tail_shift on constructed runs: its CUSUMs rise on a heavier tail and stay low on
ordinary ones, busy hours and whole slower runs; the load phase's is pooled over vantages."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta

import numpy as np
import pytest

from app.alerts.identity import Identity
from app.analysis import detectors as d
from app.analysis.detectors import Signal
from app.analysis.detectors.tailshift import NAME, Cusums, judge, reset, sentence
from app.analysis.dominance import phase_mix
from app.analysis.runs import RunData
from app.analysis.slo import MissLedger
from app.analysis.tail import TailState
from app.analysis.tailcusum import MEMBERS, caps, tail_reference
from tests.runfactory import EVERY, LLM, T0, make_run

PARAMS = d.DetectorParams()
WEEK2 = T0 + timedelta(days=7)
QUIET_HOUR = WEEK2 + timedelta(hours=3)


def runs(seed: int, at: datetime, count: int, vantage: str = "eu", **kw: float) -> list[RunData]:
    rng = np.random.default_rng(seed)
    medians = kw.pop("medians", LLM)
    return [make_run(rng, at + i * EVERY, medians, vantage=vantage, **kw) for i in range(count)]  # type: ignore[arg-type]


def week(seed: int, busy_hour: int | None = 18, vantage: str = "eu") -> list[RunData]:
    """A week of runs every 15 minutes; at ``busy_hour`` every day 30 % of samples wait
    300 ms more in the queue."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(7 * 96):
        at = T0 + i * EVERY
        slow = 0.3 if at.hour == busy_hour else 0.0
        out.append(make_run(rng, at, slow=slow, slow_ms=300.0, vantage=vantage))
    return out


def reference(history: Sequence[RunData]) -> d.Reference:
    return d.Reference(
        built_at=history[-1].at,
        runs=len(history),
        span=history[-1].at - history[0].at,
        mix=phase_mix(history),
        tail=tail_reference(history),
        composition=None,
    )


@pytest.fixture(scope="module")
def busy() -> d.Reference:
    return reference(week(5))


def inputs(ref: d.Reference, recent: list[RunData], cusums: dict[str, list[float]]) -> d.Inputs:
    return d.Inputs(
        window=recent[-4:], recent=recent[-4:], reference=ref, params=PARAMS,
        rng=np.random.default_rng(0), now=recent[-1].at, tail=TailState(),
        onset=lambda n: recent[-n:], misses=MissLedger(), dominant_open=False, cusums=cusums,
    )  # fmt: skip


def replay(ref: d.Reference, recent: list[RunData]) -> tuple[list[float], list[d.Finding]]:
    """Each run advanced then judged at one vantage: the highest CUSUM after each, and the
    last findings."""
    memory: dict[str, list[float]] = {}
    highest, found = [], []
    for i, run in enumerate(recent):
        state = d.advance_tail(memory, [], run, ref, PARAMS)
        assert state is not None
        highest.append(state.scores[0])
        found = judge(inputs(ref, recent[: i + 1], memory)) if i >= 3 else []
    return highest, found


def test_a_heavier_queue_tail_hits_within_a_few_runs(busy: d.Reference) -> None:
    heavier = runs(6, QUIET_HOUR, 12, slow=0.3, slow_ms=300.0)
    highest, found = replay(busy, heavier)
    first = next(i for i, h in enumerate(highest) if h >= PARAMS.tail_threshold)
    assert first <= 6
    assert [f.signal for f in found] == [Signal.HIT]
    numbers = found[0].numbers
    assert numbers["channel"] == "queue" and numbers["recent_share_pct"] > 5
    text = sentence(Identity("tail_shift", "chat", "eu", "vantage"), numbers)
    assert text.startswith(f"queue {numbers['quantile']} is ") and "its usual" in text


def test_ordinary_runs_never_leave_the_clear_zone(busy: d.Reference) -> None:
    highest, found = replay(busy, runs(7, QUIET_HOUR, 24))
    assert max(highest) < PARAMS.tail_threshold / 2
    assert [f.signal for f in found] == [Signal.CLEAR]


def test_the_daily_busy_hour_is_part_of_the_reference_not_a_change(busy: d.Reference) -> None:
    at_busy_hour = runs(8, WEEK2 + timedelta(hours=18), 4, slow=0.3, slow_ms=300.0)
    assert max(replay(busy, at_busy_hour)[0]) < PARAMS.tail_threshold / 2
    at_quiet_hour = runs(8, QUIET_HOUR, 8, slow=0.3, slow_ms=300.0)
    assert replay(busy, at_quiet_hour)[0][-1] >= PARAMS.tail_threshold


@pytest.mark.parametrize("slower", [1.3, 1.6, 2.5])
def test_whole_runs_slower_together_are_not_a_heavier_tail(
    busy: d.Reference, slower: float
) -> None:
    medians = {name: slower * value for name, value in LLM.items()}
    assert max(replay(busy, runs(17, QUIET_HOUR, 12, medians=medians))[0]) < 2.0  # type: ignore[arg-type]
    heavier = runs(17, QUIET_HOUR, 12, medians=medians, slow=0.25, slow_ms=600.0)  # type: ignore[arg-type]
    assert replay(busy, heavier)[0][-1] >= PARAMS.tail_threshold


def test_no_evidence_is_gathered_before_the_reference_spans_tail_min_days() -> None:
    one_day = reference(week(9)[:96])
    memory: dict[str, list[float]] = {}
    heavier = runs(10, T0 + timedelta(days=1, hours=3), 4, slow=0.3, slow_ms=300.0)
    assert all(d.advance_tail(memory, [], run, one_day, PARAMS) is None for run in heavier)
    assert memory == {} and judge(inputs(one_day, heavier, memory)) == []


def test_the_cusum_is_capped_and_an_ended_episode_resets_it(busy: d.Reference) -> None:
    awful = runs(9, QUIET_HOUR, 30, slow=0.6, slow_ms=900.0)
    highest = replay(busy, awful)[0]
    assert max(highest) == PARAMS.tail_threshold_end_to_end  # capped at the larger threshold
    queue = caps(busy.tail.channels["queue"], PARAMS.tail_threshold)  # type: ignore[union-attr]
    # Members too slow to wind down from a threshold within WIND_DOWN runs are left out.
    assert set(queue.tolist()) <= {0.0, PARAMS.tail_threshold} and queue.max() > 0

    class Memory:
        cusums = {NAME: [1.0] * 5, "other": [2.0]}

    memory = Memory()
    reset(memory)
    assert memory.cusums == {"other": [2.0]}


def test_the_load_phase_is_pooled_over_vantages_and_alerts_for_the_service() -> None:
    eu, us = reference(week(11, vantage="eu")), reference(week(12, vantage="us"))
    mild = {"slow": 0.12, "slow_ms": 300.0}
    at_eu, at_us = runs(13, QUIET_HOUR, 12, **mild), runs(14, QUIET_HOUR, 12, "us", **mild)
    alone: dict[str, list[float]] = {}
    first: dict[str, list[float]] = {}
    second: dict[str, list[float]] = {}
    for a, b in zip(at_eu, at_us, strict=True):
        d.advance_tail(alone, [], a, eu, PARAMS)
        d.advance_tail(first, [second], a, eu, PARAMS)
        d.advance_tail(second, [first], b, us, PARAMS)
    one, both = Cusums.of(alone[NAME]), Cusums.of(first[NAME])
    assert both.scores[1] == Cusums.of(second[NAME]).scores[1]  # one CUSUM, kept at both
    assert both.vantages == 2 and one.vantages == 1
    # Twice the evidence a round, member by member (those the cap has not stopped: a heavier
    # tail reaches it from one vantage alone here).
    grown = [(b, o) for b, o in zip(both.scores[1], one.scores[1], strict=True) if o > 1]
    open_ = [(b, o) for b, o in grown if b < PARAMS.tail_threshold]
    assert len(open_) >= 2 and all(b > 1.5 * o for b, o in open_)
    assert all(b >= min(o, PARAMS.tail_threshold) for b, o in grown)
    # End-to-end stays each vantage's own.
    assert both.scores[0] != Cusums.of(second[NAME]).scores[0]
    found = judge(inputs(eu, at_eu, first))
    assert [f.scope for f in found] == [None, "service"]
    assert found[1].signal is Signal.HIT and found[1].numbers["vantages_pooled"] == 2
    # The end-to-end tail is the queue's: it holds rather than telling the story twice.
    assert found[0].signal is Signal.HOLD


def test_a_state_of_another_shape_starts_again() -> None:
    assert Cusums.of([1.0, 2.0]).scores == [[0.0] * MEMBERS, [0.0] * MEMBERS]
    state = Cusums.of(None)
    state.runs, state.vantages = [3, 4], 2
    state.scores[1][5] = 7.5
    assert Cusums.of(state.values()) == state


def test_a_tail_heavier_only_against_a_shrunken_body_is_no_slower() -> None:
    rng = np.random.default_rng(21)
    tailed = [make_run(rng, T0 + i * EVERY, slow=0.15, slow_ms=300.0) for i in range(3 * 96)]
    ref = reference(tailed)
    # Generation collapsed: the same slow requests now stand far out of a smaller body.
    collapsed = LLM | {"generation": 0.1 * LLM["generation"]}
    at = T0 + timedelta(days=3, hours=3)
    recent = runs(22, at, 30, medians=collapsed, slow=0.15, slow_ms=300.0)  # type: ignore[arg-type]
    memory: dict[str, list[float]] = {}
    for run in recent:
        d.advance_tail(memory, [], run, ref, PARAMS)
    total = Cusums.of(memory[NAME]).scores[0]
    assert max(total) >= PARAMS.tail_threshold_end_to_end  # the shape is heavier ...
    found = judge(inputs(ref, recent, memory))
    assert [f.signal for f in found] == [Signal.HOLD]  # ... but the tail is no longer in ms
    assert found[0].numbers["recent_ms"] < found[0].numbers["reference_ms"]


# While a leader change or a level shift is told at this vantage, end-to-end's tail (whose
# shape over its median follows the mix) starts afresh each run; the load phase's does not.
@pytest.mark.parametrize(
    ("dominant_open", "active", "end_to_end_kept"),
    [
        (False, frozenset(), True),
        (True, frozenset(), False),
        (False, frozenset({("level_shift", "critical")}), False),
        (False, frozenset({("deadline_miss", "critical")}), True),
    ],
)
def test_end_to_end_evidence_restarts_while_a_change_is_told_here(
    dominant_open: bool, active: frozenset[tuple[str, str]], end_to_end_kept: bool
) -> None:
    state = Cusums.of(None)
    state.scores = [[5.0] * MEMBERS, [4.0] * MEMBERS]
    state.runs = [6, 6]
    memory = {NAME: state.values()}
    recent = runs(31, QUIET_HOUR, 4)
    told = replace(inputs(reference(week(32)), recent, memory), dominant_open=dominant_open)
    judge(replace(told, active=active))
    after = Cusums.of(memory[NAME])
    assert (after.scores[0] == state.scores[0]) is end_to_end_kept
    assert after.scores[1] == state.scores[1]
