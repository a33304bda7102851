"""The what-if for the objectives: each latency objective's share met and goodput, from
settled samples, and how a change moves them."""

from __future__ import annotations

import numpy as np
import pytest

from app.analysis.objectives import Objective
from app.analysis.whatif import SampleSet, levers, objective_levers, parse_changes, predict
from app.analysis.whatif.apply import Settled, settle
from app.analysis.whatif.objectiveshares import shares

PHASES = ("connect", "network", "queue", "prefill", "generation", "transfer")
TTFT = Objective("ttft_ms", 0.99, 300)
E2E = Objective("end_to_end_ms", 0.99, 500)


def settled(rows: list[list[float]], cut: list[bool], deadline: float | None = None) -> Settled:
    return settle(np.array(rows, dtype=float), np.array(cut), deadline)


@pytest.mark.parametrize(
    ("rows", "cut", "deadline", "expected"),
    [
        # ttft = connect + network + queue + prefill: 200 and 390 ms; both end by 500 ms.
        (
            [[5, 20, 150, 25, 100, 5], [5, 20, 340, 25, 100, 5]],
            [False, False],
            None,
            {"ttft_ms": 0.5, "end_to_end_ms": 1.0, "goodput": 0.5},
        ),
        # Cut at 600 ms in its queue: ttft at least 600 (over 300), end-to-end a miss.
        (
            [[5, 20, 150, 25, 100, 5], [5, 20, 575, 0, 0, 0]],
            [False, True],
            600.0,
            {"ttft_ms": 0.5, "end_to_end_ms": 0.5, "goodput": 0.5},
        ),
        # Cut at 600 ms while generating: its first token came at 200 ms (met).
        (
            [[5, 20, 150, 25, 100, 5], [5, 20, 150, 25, 400, 0]],
            [False, True],
            600.0,
            {"ttft_ms": 1.0, "end_to_end_ms": 0.5, "goodput": 0.5},
        ),
    ],
)
def test_each_objective_and_goodput_from_settled_samples(
    rows: list[list[float]], cut: list[bool], deadline: float | None, expected: dict[str, float]
) -> None:
    assert shares(PHASES, settled(rows, cut, deadline), [TTFT, E2E]) == expected


def test_availability_is_not_predicted() -> None:
    found = shares(
        PHASES, settled([[5, 20, 150, 25, 100, 5]], [False]), [Objective("availability", 0.995)]
    )
    assert found == {"goodput": 1.0}


def test_a_shorter_queue_moves_the_ttft_objective_and_goodput() -> None:
    rng = np.random.default_rng(1)
    runs, per = 10, 20
    ms = np.tile([5.0, 20.0, 250.0, 25.0, 100.0, 5.0], (runs * per, 1))
    ms[:, 2] *= np.exp(rng.normal(0, 0.2, runs * per))  # queue around 250: ttft around 300
    samples = SampleSet(
        PHASES, ms, np.repeat(np.arange(runs), per), np.zeros(runs * per, dtype=bool), None
    )
    prediction = predict(samples, parse_changes(["queue*0.5"]), resamples=50, objectives=[TTFT])
    by_metric = {o.metric: o for o in prediction.objectives}
    ttft = by_metric["ttft_ms"]
    assert ttft.below_ms == 300 and ttft.before is not None and ttft.after is not None
    assert ttft.after.value == 1.0 and 0.3 < ttft.before.value < 0.8
    assert ttft.before.lo < ttft.before.value < ttft.before.hi  # runs differ: an interval
    goodput = by_metric["goodput"]
    assert goodput.after is not None and goodput.after.value == 1.0 and goodput.target is None
    as_json = prediction.to_json()["objectives"][0]
    assert as_json["metric"] == "ttft_ms" and as_json["before"] == ttft.before.value
    assert as_json["before_interval"] == [ttft.before.lo, ttft.before.hi]
    # Burn: the share missing over the 1 % the target allows; the interval's ends swap.
    burn = as_json["burn_before"]
    assert burn["value"] == pytest.approx((1 - ttft.before.value) / 0.01)
    assert burn["interval"] == pytest.approx(
        [(1 - ttft.before.hi) / 0.01, (1 - ttft.before.lo) / 0.01]
    )
    assert as_json["burn_after"] == {"value": 0.0, "interval": [0.0, 0.0]}


def test_without_objectives_a_prediction_has_none() -> None:
    samples = SampleSet(PHASES, np.ones((4, 6)), np.arange(4), np.zeros(4, dtype=bool), None)
    assert predict(samples, [], resamples=10).objectives == ()


E2E_LONG = Objective("end_to_end_ms", 0.99, 700)


def two_objective_samples() -> SampleSet:
    """The queue decides ttft (about 300 ms), generation's long tail the end-to-end past
    700 ms."""
    rng = np.random.default_rng(3)
    runs, per = 10, 20
    ms = np.tile([5.0, 20.0, 250.0, 25.0, 250.0, 5.0], (runs * per, 1))
    ms[:, 2] *= np.exp(rng.normal(0, 0.2, runs * per))
    ms[:, 4] *= np.exp(rng.normal(0, 0.6, runs * per))
    return SampleSet(
        PHASES, ms, np.repeat(np.arange(runs), per), np.zeros(runs * per, dtype=bool), None
    )


def test_each_lever_says_each_objectives_share_and_goodputs_halved_and_gone() -> None:
    samples = two_objective_samples()
    found = {lever.phase: lever for lever in levers(samples, objectives=[TTFT, E2E_LONG])}
    queue = {o.metric: o for o in found["queue"].objectives}
    assert list(queue) == ["ttft_ms", "end_to_end_ms", "goodput"]
    ms = samples.ms.copy()
    ms[:, 2] *= 0.5
    halved = shares(PHASES, settle(ms, samples.censored, None), [TTFT, E2E_LONG])
    assert [queue[m].halved for m in queue] == [halved[m] for m in queue]
    now = shares(PHASES, settle(samples.ms, samples.censored, None), [TTFT, E2E_LONG])
    assert now["ttft_ms"] < halved["ttft_ms"]  # type: ignore[operator]
    assert queue["ttft_ms"].removed == 1.0
    assert levers(samples)[0].objectives == ()


@pytest.mark.parametrize(
    ("metric", "first", "absent"),
    [
        ("ttft_ms", "queue", "generation"),  # generation comes after the first token
        ("end_to_end_ms", "generation", None),  # generation's tail holds the 500 ms misses
        ("goodput", "queue", None),
    ],
)
def test_the_levers_of_each_objective_rank_the_phases_that_raise_it(
    metric: str, first: str, absent: str | None
) -> None:
    samples = two_objective_samples()
    found = levers(samples, objectives=[TTFT, E2E_LONG])
    by_metric = {o.metric: o for o in objective_levers(samples, found, [TTFT, E2E_LONG])}
    ranked = by_metric[metric]
    phases = [phase for phase, _ in ranked.levers]
    assert phases[0] == first and absent not in phases
    halved = [met.halved for _, met in ranked.levers]
    assert halved == sorted(halved, reverse=True)  # type: ignore[type-var]
    assert ranked.now is not None and all(h > ranked.now for h in halved)  # type: ignore[operator]
    assert (
        ranked.headline().startswith(f"{metric}")
        and f"lever is {first}: halved" in ranked.headline()
    )


def test_an_objective_no_lever_raises_says_so() -> None:
    samples = two_objective_samples()
    easy = Objective("ttft_ms", 0.99, 10_000)  # met by every sample already
    found = levers(samples, objectives=[easy])
    (ttft, _) = objective_levers(samples, found, [easy])
    assert (
        ttft.levers == ()
        and ttft.headline() == "ttft_ms ≤ 10000 ms, 100.0% met now: no lever raises it"
    )
    assert objective_levers(samples, levers(samples), []) == []


@pytest.mark.parametrize(
    ("objectives", "note"),
    [
        ([TTFT, Objective("availability", 0.995)], None),
        (
            [TTFT, Objective("tpot_ms", 0.99, 40)],
            "the tpot_ms objective is not predicted (the samples were read without a"
            " stream's rhythm): goodput here counts only the objectives above",
        ),
        (
            [Objective("tpot_ms", 0.99, 40), Objective("stall_ms", 0.99, 500)],
            "the tpot_ms and stall_ms objectives are not predicted (the samples were read"
            " without a stream's rhythm): goodput here counts only the objectives above",
        ),
    ],
)
def test_a_prediction_says_which_objectives_it_cannot_answer_for(
    objectives: list[Objective], note: str | None
) -> None:
    prediction = predict(two_objective_samples(), [], resamples=10, objectives=objectives)
    said = [n for n in prediction.notes if "not predicted" in n]
    assert said == ([] if note is None else [note])
    assert "tpot_ms" not in {o.metric for o in prediction.objectives}
