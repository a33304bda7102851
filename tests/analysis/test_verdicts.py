"""One sample judged against its target's objectives: each objective met or not (or not
counted), and every one at once (goodput's verdict, the CSV's ``good``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from app.analysis.objectives import Objective, Seen, goodput, readings, tally
from app.analysis.verdicts import NO_VERDICT, VERDICT_METRICS, Verdict, verdict

TTFT = Objective("ttft_ms", 0.99, 300)
E2E = Objective("end_to_end_ms", 0.99, 1000)
UP = Objective("availability", 0.995)
ALL = (TTFT, E2E, UP)


def first_token(ms: float) -> dict[str, Any]:
    return {"first_answer_token": int(ms * 1e6)}


@pytest.mark.parametrize(
    ("seen", "good", "met"),
    [
        (("ok", 500.0, first_token(200), {}), True, {"ttft_ms": True, "end_to_end_ms": True}),
        (("ok", 500.0, first_token(400), {}), False, {"ttft_ms": False, "end_to_end_ms": True}),
        (("ok", 1500.0, first_token(200), {}), False, {"ttft_ms": True, "end_to_end_ms": False}),
        # No first token mark (a plain HTTP answer): ttft not counted, and not good.
        (("ok", 500.0, {}, {}), False, {"ttft_ms": None, "end_to_end_ms": True}),
        # Cut at the deadline after its first token: ttft met, the rest a miss.
        (
            ("deadline_exceeded", 1000.0, first_token(200), {}),
            False,
            {"ttft_ms": True, "end_to_end_ms": False},
        ),
        # Cut before its first token, past ttft's bound: a miss of both.
        (
            ("deadline_exceeded", 1000.0, {}, {}),
            False,
            {"ttft_ms": False, "end_to_end_ms": False},
        ),
        # A failed request: unavailable; its latencies are not counted.
        (("error", 30.0, {}, {}), False, {"ttft_ms": None, "end_to_end_ms": None}),
    ],
)
def test_a_sample_meets_each_objective_and_all_at_once(
    seen: tuple[str, float, dict[str, Any], dict[str, Any]],
    good: bool,
    met: dict[str, bool | None],
) -> None:
    found = verdict(ALL, seen)
    assert found.good is good
    assert found.met == {**met, "availability": seen[0] == "ok"}


def test_a_cut_before_a_bound_it_had_not_reached_is_not_counted() -> None:
    found = verdict((TTFT,), ("deadline_exceeded", 250.0, {}, {}))
    assert found == Verdict(False, {"ttft_ms": None})


def test_without_objectives_there_is_no_verdict() -> None:
    assert verdict((), ("ok", 1.0, {}, {})) is NO_VERDICT
    assert NO_VERDICT.cells() == (None,) * (1 + len(VERDICT_METRICS))


def test_cells_follow_the_registry_order_with_none_for_objectives_the_target_lacks() -> None:
    cells = verdict((TTFT,), ("ok", 500.0, first_token(200), {})).cells()
    assert cells == (True, *(True if m == "ttft_ms" else None for m in VERDICT_METRICS))


def test_verdicts_count_as_the_objectives_and_goodput_count_a_run() -> None:
    """Sample by sample, the same answers as the run's tallies (app.analysis.objectives)."""
    rng = np.random.default_rng(8)
    objectives = (TTFT, E2E, UP, Objective("stall_ms", 0.99, 50))
    seens: list[Seen] = []
    for _ in range(400):
        status = str(rng.choice(["ok", "ok", "deadline_exceeded", "error"]))
        total = float(rng.uniform(100, 1500))
        marks = first_token(float(rng.uniform(50, total))) if rng.random() < 0.8 else {}
        stall = float(rng.uniform(0, 100))
        stream = {"answer_tokens": 5, "reasoning_tokens": 0, "arrivals": 5, "stall_ms": stall,
                  "itl_ms": {"p50": 9.0, "p90": 12.0, "max": stall}, "stall_at_ms": 10.0,
                  "stall_token": 3, "stall_open": status != "ok"}  # fmt: skip
        seens.append((status, total, marks, {"stream": stream} if rng.random() < 0.5 else {}))
    found = [verdict(objectives, seen) for seen in seens]
    timed = [seen for seen in seens if seen[0] in ("ok", "deadline_exceeded")]
    reads = readings(timed)
    for objective in objectives:
        ok = sum(seen[0] == "ok" for seen in seens)
        counted = tally(objective, len(seens), ok, reads)
        met = [v.met[objective.metric] for v in found]
        assert {True, False} <= set(met)  # the draws reach both sides of every bound
        assert (counted.counted, counted.bad) == (
            sum(m is not None for m in met),
            sum(m is False for m in met),
        )
    cut = np.array([seen[0] == "deadline_exceeded" for seen in timed])
    expected = goodput(objectives, len(seens), reads, cut)
    assert expected.bad == sum(v.good is False for v in found)
