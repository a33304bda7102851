"""One sample judged against its target's objectives: each objective met or not (or not
counted), and every one at once (goodput's verdict, the CSV's ``good``)."""

from __future__ import annotations

from typing import Any

import pytest

from app.analysis.objectives import Objective
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
