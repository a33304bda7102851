"""The pooled lane where the new leader led each of a vantage's newest runs: a load that
climbs for hours under a strongly correlated load has the pooled mean of a change, not its
step (app.alerts.pooling ``EACH_RUN_STEP_Z``; bench/detection/README.md, "eachrun")."""

from __future__ import annotations

import math
from datetime import datetime, timedelta

import numpy as np
import pytest

from app.alerts.pooling import EACH_RUN_STEP_Z
from app.analysis.detectors import DetectorParams
from app.analysis.runs import RunData
from tests.alerts.test_evaluator import Replay
from tests.alerts.test_level_shift import FAR, NET
from tests.runfactory import EVERY, T0, make_run

PARAMS = DetectorParams(enabled=("dominant_shift",), resamples=200)
DAYS = 5
CHANGE = T0 + DAYS * 96 * EVERY
CLIMB = [1.0, 1.3, 1.7, 2.2, 2.8, 3.3, 3.8, 4.2, 4.5, 4.5]  # two hours up to × 4.5
STEP = [1.0] * 8 + [4.5, 4.5]


def correlated(seed: int, tail: list[float]) -> list[RunData]:
    """Both vantages' queue under one load of σ 0.45 and lag-1 0.9 (the benchmark's
    ``correlated_runs``) for ``DAYS`` days, then × ``tail`` run by run (its last after)."""
    rng = np.random.default_rng(seed)
    runs, load = [], 0.0
    for i in range(DAYS * 96 + len(tail) + 4):
        load = 0.9 * load + math.sqrt(1 - 0.9**2) * rng.normal(0.0, 0.45)
        factor = tail[min(i - DAYS * 96, len(tail) - 1)] if i >= DAYS * 96 else 1.0
        for offset, (vantage, mix) in enumerate((("eu", NET), ("us", FAR))):
            at = T0 + i * EVERY + timedelta(minutes=4 * offset)
            medians = dict(mix, queue=mix["queue"] * factor * math.exp(load))
            runs.append(make_run(rng, at, medians, vantage=vantage))
    return sorted(runs, key=lambda run: run.at)


def run_of(at: datetime) -> int:
    return math.floor((at - CHANGE) / EVERY) + 1


@pytest.mark.parametrize(
    ("seed", "tail", "fired"),
    [
        # The climb leads each of the near vantage's newest runs with a pooled z of 4.1
        # and 4.2 (main before the step guard: fired on run 5 and 11); it hardly stepped.
        (1, CLIMB, []),
        (2, CLIMB, []),
        # A step to the same height, with the pooled lane's step on its round.
        (4, STEP, [10]),
    ],
)
def test_a_climb_of_a_correlated_load_is_not_the_services_change_a_step_is(
    seed: int, tail: list[float], fired: list[int]
) -> None:
    replay = Replay(PARAMS)
    replay.feed(correlated(seed, tail))
    firing = [t for t in replay.changes() if t.after.value == "firing"]
    assert [run_of(t.at) for t in firing] == fired
    for transition in firing:
        assert transition.identity.to_phase == "queue"
        assert float(transition.numbers["pooled_step_z"]) >= EACH_RUN_STEP_Z
