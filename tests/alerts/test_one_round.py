"""dominant_shift's one-round lane (app/alerts/oneround.py): a leader change every vantage
shows in its newest run, its server-side phase far beyond its hours' normal at each, is
told on that round; one vantage's change, or a shared load that swaps the leader for a
run, is not."""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import timedelta

import numpy as np
import pytest

from app.analysis.detectors import DetectorParams
from app.analysis.runs import RunData
from tests.alerts.test_evaluator import Replay
from tests.runfactory import EVERY, LLM, T0, make_run

CHANGE = T0 + timedelta(days=4, hours=10, minutes=7)  # after four days; between two rounds
END = CHANGE + timedelta(hours=4)
REASONING = LLM | {"generation": 450.0}  # generation leads (the queue: 120 ms)
COLLAPSED = LLM | {"generation": 36.0}  # reasoning off: generation × 0.08, the queue leads
FAR = {"network": 150.0}  # the far vantage's route
PARAMS = DetectorParams(enabled=("dominant_shift", "level_shift"), resamples=200)
OFF = PARAMS.model_copy(update={"dominant_round_z": 0})

Mixes = Mapping[str, tuple[Mapping[str, float], Mapping[str, float]]]


def timeline(seed: int, mixes: Mixes, load: float = 0.0, cut: int = 0) -> list[RunData]:
    """A run every 15 min at each vantage (4 min apart), its mix the first of the pair
    before CHANGE and the second from it on; ``load``: the log-sd of a queue factor both
    vantages' runs of a slot share (whole runs slowed together); ``cut``: samples of each
    run from CHANGE on cut at the deadline."""
    rng = np.random.default_rng(seed)
    runs, at = [], T0
    while at < END:
        queue = math.exp(rng.normal(0.0, load)) if load else 1.0
        for offset, (vantage, (before, after)) in enumerate(mixes.items()):
            when = at + timedelta(minutes=4 * offset)
            mix = dict(after if when >= CHANGE else before)
            mix["queue"] = mix["queue"] * queue
            censored = cut if when >= CHANGE else 0
            runs.append(make_run(rng, when, mix, censored=censored, vantage=vantage))
        at += EVERY
    return sorted(runs, key=lambda run: run.at)


def first_firing(replay: Replay) -> tuple[str | None, int, dict[str, object]] | None:
    """The first dominant_shift that fired: its scope, the round it fired on (1: the
    first round whose runs all follow the change) and its numbers."""
    for t in replay.changes():
        if t.after.value == "firing":
            return t.identity.scope, math.floor((t.at - CHANGE) / EVERY) + 1, t.numbers
    return None


COLLAPSE = {"eu": (REASONING, COLLAPSED), "us": (REASONING | FAR, COLLAPSED | FAR)}
REGROWTH = {"eu": (COLLAPSED, REASONING), "us": (COLLAPSED | FAR, REASONING | FAR)}
AT_ONE = {"eu": (REASONING, COLLAPSED), "us": (REASONING | FAR, REASONING | FAR)}
QUIET = {"eu": (REASONING, REASONING), "us": (REASONING | FAR, REASONING | FAR)}
BURST = LLM | {"generation": 450.0, "queue": 2400.0}  # the queue × 20: a moment's load
QUEUE = {"eu": (REASONING, BURST), "us": (REASONING | FAR, BURST | FAR)}


@pytest.mark.parametrize(
    ("mixes", "pooled_phase", "sign"),
    [
        (COLLAPSE, "generation", -1),  # the leader shrank at both: generation → queue / network
        (REGROWTH, "generation", 1),  # the new leader grew at both
    ],
)
def test_a_change_every_vantage_shows_in_one_run_is_told_on_that_round(
    mixes: Mixes, pooled_phase: str, sign: int
) -> None:
    fast, slow = Replay(PARAMS), Replay(OFF)
    for replay in (fast, slow):
        replay.feed(timeline(1, mixes))
    told, later = first_firing(fast), first_firing(slow)
    assert told is not None and later is not None
    scope, runs, numbers = told
    assert (scope, runs) == ("service", 1)
    assert numbers["pooled_phase"] == pooled_phase
    assert numbers["pooled_runs"] == 1
    assert sign * float(str(numbers["pooled_z"])) >= PARAMS.dominant_round_z
    assert later[1] >= 2  # the two-run lanes: a round later at least


@pytest.mark.parametrize(
    ("name", "mixes", "load", "cut"),
    [
        ("one vantage's collapse", AT_ONE, 0.0, 0),  # not yet the service's
        ("whole runs slowed together", QUIET, 0.9, 0),  # the queue × e^(0.9 z) in both runs
        ("the queue × 20 at both", QUEUE, 0.0, 0),  # where a moment's load shows
        ("a collapse in runs cut at the deadline", COLLAPSE, 0.0, 5),  # 5 of 20 cut
    ],
)
def test_what_one_round_does_not_tell(name: str, mixes: Mixes, load: float, cut: int) -> None:
    replay = Replay(PARAMS)
    replay.feed(timeline(2, mixes, load, cut))
    assert [t for t in replay.changes() if t.numbers.get("pooled_runs") == 1] == [], name
