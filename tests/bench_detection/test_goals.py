"""The per-kind goals of issue 35 (bench/detection/goals.py) and the tuned / untuned split."""

from __future__ import annotations

import pytest

from bench.detection import goals
from bench.detection.oracle.events import OracleDelay
from bench.detection.oracle.table import Beside
from bench.detection.report import PHASEWATCH, Scores
from bench.detection.run import apart
from bench.detection.score import Score


def beside(scenario: str, pooled: int | None, ours: int | None, group: str = "g") -> Beside:
    o = OracleDelay(scenario, group, scenario, "t", None, 2.0, 3.0, 8.0, 8.0, pooled, pooled, 0, 0)
    return Beside(o, ours)


def caught(*delays: int, missed: int = 0) -> Score:
    s = Score(groups=len(delays) + missed, detected=len(delays), delays=list(delays))
    s.missed = [f"m{n}" for n in range(missed)]
    return s


@pytest.mark.parametrize(
    ("kind", "ours", "passed"),
    [
        ("queue_growth", caught(1, 3, 5), True),  # median 3
        ("queue_growth", caught(3, 4, 5), False),
        ("uniform_slowdown", caught(2, 2), True),
        ("phase_slowdown", caught(), False),  # nothing caught: no median
        ("one_vantage_route", caught(4), False),
    ],
)
def test_large_changes_need_a_median_of_three_runs(kind: str, ours: Score, passed: bool) -> None:
    assert goals.check(kind, ours, []).passed is passed


@pytest.mark.parametrize(
    ("oracle", "ours", "passed", "worst"),
    [
        ([2, 2, 4], [3, 3, 4], True, 1.5),  # median 3 ≤ 1.5 × 2
        ([2, 2, 2], [4, 4, 4], False, 2.0),  # median 4 > 3
        ([4, 4, 1], [4, 4, 3], False, 3.0),  # median fine, one change at 3×
        ([2, None, 2], [2, 2, 2], False, None),  # no oracle delay: not judged as passed
    ],
)
def test_tail_changes_are_judged_against_the_pooled_oracle(
    oracle: list[int | None], ours: list[int], passed: bool, worst: float | None
) -> None:
    rows = [beside("queue_tail_blowup", o, d) for o, d in zip(oracle, ours, strict=True)]
    got = goals.check("queue_tail_blowup", caught(*ours), rows)
    assert (got.passed, got.worst_ratio) == (passed, worst)


def test_a_missed_tail_change_fails_its_kind() -> None:
    rows = [beside("queue_tail_blowup", 2, 2), beside("queue_tail_blowup", 2, None)]
    assert not goals.check("queue_tail_blowup", caught(2, missed=1), rows).passed


def test_fleet_rows_and_oracle_groups_count_under_their_kind() -> None:
    scores: Scores = {
        "queue_growth": {PHASEWATCH: caught(2)},
        "fleet/queue_growth": {PHASEWATCH: caught(4, 4)},
        "fleet/quiet": {PHASEWATCH: Score()},
    }
    rows = [beside("queue_growth", 1, 2), beside("fleet", 1, 4, "queue_growth:queue-q0")]
    (only,) = goals.kind_checks(scores, rows)
    assert (only.kind, only.phasewatch.delays, only.oracle_pooled) == ("queue_growth", [2, 4, 4], 1)
    assert not only.passed  # median 4


def test_untuned_kinds_are_reported_apart() -> None:
    scores: Scores = {"quiet": {}, "retrieval_prompts": {}, "weekly_batch_window": {}}
    tuned, untuned = apart(scores)
    assert (set(tuned), set(untuned)) == ({"quiet"}, {"retrieval_prompts", "weekly_batch_window"})


def test_show_prints_the_oracle_beside_each_kind(capsys: pytest.CaptureFixture[str]) -> None:
    check = goals.check("queue_tail_blowup", caught(3), [beside("queue_tail_blowup", 2, 3)])
    assert goals.show("seed 1", [check])
    out = capsys.readouterr().out
    assert "| queue_tail_blowup |" in out and "2.0 / 2.0" in out and "PASS" in out
