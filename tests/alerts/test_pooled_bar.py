"""The pooled lane's bar: ``pooled_min_z`` × ``ALONE_Z`` (√2) for a target seen from one
vantage ever, the usual ``pooled_min_z`` for a target of several whose others are late this
round (app.alerts.pooling ``grown(..., alone=...)``; bench/detection/README.md, "fleetq")."""

from __future__ import annotations

import pytest

from app.alerts.pooling import ALONE_Z
from app.analysis.detectors import DetectorParams
from tests.alerts.test_crossvantage_late import stops
from tests.alerts.test_evaluator import Replay, timeline
from tests.alerts.test_level_shift import CHANGE, END, queue_by_run, runs_to_fire

PARAMS = DetectorParams(enabled=("dominant_shift",), resamples=200)
# The queue (180 ms) a little behind the network (200): × 1.15–1.25 takes the lead, a growth
# of 4–6 spreads of two runs' mean, between the usual bar and the one-vantage one.
CLOSE = {
    "connect": 5.0,
    "network": 200.0,
    "queue": 180.0,
    "prefill": 10.0,
    "generation": 20.0,
    "transfer": 5.0,
}
FAR = CLOSE | {"network": 400.0}


@pytest.mark.parametrize(
    ("late", "factor", "seed", "runs"),
    [
        # Two vantages, the far one silent from the change: late, not waited for. The
        # growth's pooled z (4.9–5.3) clears 4, not 4 × √2: with that bar these fired on
        # run 5–12, when the far vantage was away and the target counted as one vantage's.
        (True, 1.25, 2, 3),
        (True, 1.25, 5, 3),
        (True, 1.25, 7, 3),
        (True, 1.25, 8, 3),
        # Seen from one vantage ever: the bar is 4 × √2. This growth's z of 5.0 on run 2
        # fires there without it.
        (False, 1.15, 7, None),
    ],
)
def test_the_one_vantage_bar_is_for_a_target_of_one_vantage_not_for_one_with_the_others_late(
    late: bool, factor: float, seed: int, runs: int | None
) -> None:
    mixes = {"eu": queue_by_run([factor], CLOSE)}
    if late:
        mixes["us"] = queue_by_run([factor], FAR)
    replay = Replay(PARAMS)
    replay.feed(stops(timeline(seed, mixes, end=END), "us", CHANGE))
    firing = [t for t in replay.changes() if t.after.value == "firing"]
    if runs is None:
        assert firing == []
        return
    assert runs_to_fire(replay, "dominant_shift")[:1] == [runs]
    assert (firing[0].identity.scope, firing[0].identity.to_phase) == ("service", "queue")
    assert firing[0].numbers["vantages_late"] == ["us"]
    assert PARAMS.pooled_min_z <= firing[0].numbers["pooled_z"] < PARAMS.pooled_min_z * ALONE_Z
