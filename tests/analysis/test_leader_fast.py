"""The leader change's fast lane: a large lead judged on the newest two runs."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest

from app.analysis import detectors as d
from app.analysis.detectors import DetectorParams, Signal
from app.analysis.runs import RunData
from tests.alerts.test_evaluator import CHANGE, PARAMS, Replay, states, switch, timeline
from tests.runfactory import EVERY, LLM, make_run

# Reasoning switched on: generation takes five times as long and leads by ~40 pp.
REASONING = LLM | {"generation": 400.0}
SLOW_DECODE = LLM | {"generation": 240.0}  # leads by ~23 pp
NEAR = LLM | {"generation": 150.0}  # leads by ~8 pp: over δ, under the fast lane's lead


def runs(seed: int, *medians: dict[str, float]) -> list[RunData]:
    rng = np.random.default_rng(seed)
    return [make_run(rng, CHANGE + i * EVERY, m) for i, m in enumerate(medians)]


@pytest.mark.parametrize(
    ("window", "params", "expected"),
    [
        (runs(1, LLM, REASONING, REASONING), PARAMS, "generation"),
        (runs(2, LLM, SLOW_DECODE, SLOW_DECODE), PARAMS, "generation"),
        (runs(3, LLM, NEAR, NEAR), PARAMS, None),  # a lead under 20 pp waits for 3 runs
        (runs(4, LLM, LLM, REASONING), PARAMS, None),  # one changed run is not two
        (runs(5, REASONING, LLM, REASONING), PARAMS, None),  # nor are two that disagree
        (runs(6, REASONING), PARAMS, None),  # fewer runs than the fast lane reads
        (
            runs(7, LLM, REASONING, REASONING),
            PARAMS.model_copy(update={"dominant_fast_lead_pp": 0}),
            None,
        ),
    ],
    ids=["collapse", "large-lead", "small-lead", "one-run", "disagree", "too-few", "off"],
)
def test_the_fast_lane_judges_only_a_large_lead_in_both_newest_runs(
    window: list[RunData], params: DetectorParams, expected: str | None
) -> None:
    fast = d.fast_dominant(window, "queue", params, np.random.default_rng(0))
    assert (fast[0] if fast else None) == expected
    if fast is not None:
        finding = fast[1]
        assert finding.signal is Signal.HIT
        assert finding.numbers["runs"] == params.dominant_fast_runs
        assert finding.numbers["lead_pp"] >= params.dominant_fast_lead_pp


def fired_after_change(params: DetectorParams) -> timedelta:
    replay = Replay(params)
    replay.feed(timeline(1, {"eu": switch(LLM, REASONING), "us": switch(LLM, REASONING)}))
    changes = replay.changes()
    assert states(changes) == [("inactive", "pending"), ("pending", "firing")]
    (identity,) = {t.identity for t in changes}
    assert (identity.scope, identity.from_phase, identity.to_phase) == (
        "service",
        "queue",
        "generation",
    )
    return changes[-1].at - CHANGE


def test_a_large_leader_change_fires_one_run_sooner_on_the_fast_lane() -> None:
    # The first changed run is run 1: two runs judge, the third confirms.
    assert fired_after_change(PARAMS) < 3 * EVERY
    # Without the pooled lane either (app/alerts/pooling.py), also a run or two sooner.
    slow = PARAMS.model_copy(update={"dominant_fast_lead_pp": 0.0, "pooled_min_z": 0.0})
    assert 3 * EVERY <= fired_after_change(slow) < 4 * EVERY
