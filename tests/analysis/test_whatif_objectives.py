"""The what-if for the objectives: each latency objective's share met and goodput, from
settled samples, and how a change moves them."""

from __future__ import annotations

import numpy as np
import pytest

from app.analysis.objectives import Objective
from app.analysis.whatif import SampleSet, parse_changes, predict
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
    assert ttft.below_ms == 300 and ttft.before is not None and ttft.after == 1.0
    assert 0.3 < ttft.before < 0.8
    assert by_metric["goodput"].after == 1.0
    assert prediction.to_json()["objectives"][0]["metric"] == "ttft_ms"


def test_without_objectives_a_prediction_has_none() -> None:
    samples = SampleSet(PHASES, np.ones((4, 6)), np.arange(4), np.zeros(4, dtype=bool), None)
    assert predict(samples, [], resamples=10).objectives == ()
