"""The what-if for a stream's rhythm: ``tpot_ms`` and ``stall_ms`` follow the generation's
pace (a change to generation scales them by its after/before, any other leaves them), are
judged by the objectives' counting rules, and count in goodput."""

from __future__ import annotations

import math

import numpy as np
import pytest

from app.analysis.objectives import Objective
from app.analysis.whatif import SampleSet, levers, objective_levers, parse_changes, predict
from app.analysis.whatif.apply import apply, settle
from app.analysis.whatif.objectiveshares import shares
from app.analysis.whatif.rhythm import rhythm_of, scaled

PHASES = ("connect", "network", "queue", "prefill", "generation", "transfer")
TPOT = Objective("tpot_ms", 0.99, 40)
STALL = Objective("stall_ms", 0.99, 250)
NAN = math.nan


def samples(tpot: list[float], stall: list[float], generation: float = 100.0) -> SampleSet:
    """One sample a run, each 5+20+50+25 ms before its first token, ``generation`` ms after."""
    n = len(tpot)
    ms = np.tile([5.0, 20.0, 50.0, 25.0, generation, 5.0], (n, 1))
    rhythm = {"tpot_ms": np.array(tpot), "stall_ms": np.array(stall)}
    return SampleSet(PHASES, ms, np.arange(n), np.zeros(n, dtype=bool), None, rhythm)


def test_halving_generation_halves_each_samples_tpot_and_stall() -> None:
    measured = samples([30, 50, NAN], [100, 200, NAN])
    applied = apply(measured, parse_changes(["generation*0.5"]), {}, np.random.default_rng(0))
    np.testing.assert_array_equal(applied.rhythm["tpot_ms"], [15, 25, NAN])
    np.testing.assert_array_equal(applied.rhythm["stall_ms"], [50, 100, NAN])
    set_to = apply(measured, parse_changes(["generation=25ms"]), {}, np.random.default_rng(0))
    np.testing.assert_array_equal(set_to.rhythm["tpot_ms"], [7.5, 12.5, NAN])
    queue = apply(measured, parse_changes(["queue*0.5"]), {}, np.random.default_rng(0))
    np.testing.assert_array_equal(queue.rhythm["stall_ms"], [100, 200, NAN])


def test_without_generation_time_the_rhythm_stays_as_measured() -> None:
    ms = np.array([[10.0, 0.0], [10.0, 40.0]])
    found = scaled(("queue", "generation"), ms, ms * 3, {"tpot_ms": np.array([5.0, 20.0])})
    np.testing.assert_array_equal(found["tpot_ms"], [5.0, 60.0])
    assert scaled(("queue", "generation"), ms, ms, {}) == {}


@pytest.mark.parametrize(
    ("tpot", "stall", "change", "before", "after"),
    [
        # TPOT 30, 50, 60, 90 against 40 ms: 1 of 4; halved 15, 25, 30, 45: 3 of 4. Stalls
        # 100, 200, 300, 600 against 250 ms: 2 of 4; halved 50 … 300: 3 of 4. Goodput needs
        # both: 1 of 4, then 3 of 4.
        (
            [30, 50, 60, 90],
            [100, 200, 300, 600],
            "generation*0.5",
            {"tpot_ms": 0.25, "stall_ms": 0.5, "goodput": 0.25},
            {"tpot_ms": 0.75, "stall_ms": 0.75, "goodput": 0.75},
        ),
        # A shorter queue leaves the rhythm as measured.
        (
            [30, 50, 60, 90],
            [100, 200, 300, 600],
            "queue*0.5",
            {"tpot_ms": 0.25, "stall_ms": 0.5, "goodput": 0.25},
            {"tpot_ms": 0.25, "stall_ms": 0.5, "goodput": 0.25},
        ),
        # A sample without a rhythm (a whole answer) is not counted, and not good in goodput.
        (
            [30, NAN, 60, 90],
            [100, NAN, 300, 600],
            "generation*0.5",
            {"tpot_ms": 1 / 3, "stall_ms": 1 / 3, "goodput": 0.25},
            {"tpot_ms": 2 / 3, "stall_ms": 2 / 3, "goodput": 0.5},
        ),
    ],
)
def test_each_rhythm_objective_and_goodput_before_and_after(
    tpot: list[float],
    stall: list[float],
    change: str,
    before: dict[str, float],
    after: dict[str, float],
) -> None:
    prediction = predict(
        samples(tpot, stall), parse_changes([change]), resamples=20, objectives=[TPOT, STALL]
    )
    found = {o.metric: o for o in prediction.objectives}
    assert list(found) == ["tpot_ms", "stall_ms", "goodput"]
    assert {m: o.before.value for m, o in found.items() if o.before} == pytest.approx(before)
    assert {m: o.after.value for m, o in found.items() if o.after} == pytest.approx(after)
    assert not [note for note in prediction.notes if "not predicted" in note]
    tpot_now = found["tpot_ms"].before
    assert tpot_now is not None and tpot_now.lo <= tpot_now.value <= tpot_now.hi


def test_a_sample_that_misses_the_deadline_after_the_change_has_no_tpot_but_its_stall() -> None:
    # Ends at 205 ms; generation*3 ends them at 405 ms, past a 300 ms deadline: a cut answer
    # has no TPOT (not counted), its stall counts as streamed (tripled: 300 and 900 ms).
    measured = samples([10, 20], [100, 300])
    prediction = predict(
        measured, parse_changes(["generation*3", "deadline=300ms"]), resamples=10,
        objectives=[TPOT, STALL],
    )  # fmt: skip
    found = {o.metric: o for o in prediction.objectives}
    assert found["tpot_ms"].before is not None and found["tpot_ms"].before.value == 1.0
    assert found["tpot_ms"].after is None  # nothing counted
    assert found["stall_ms"].after is not None and found["stall_ms"].after.value == 0.0
    assert found["goodput"].after is not None and found["goodput"].after.value == 0.0


def test_samples_read_without_their_rhythm_say_so() -> None:
    bare = SampleSet(PHASES, np.ones((2, 6)), np.arange(2), np.zeros(2, dtype=bool), None)
    prediction = predict(bare, [], resamples=10, objectives=[TPOT])
    assert [n for n in prediction.notes if "not predicted" in n] == [
        "the tpot_ms objective is not predicted (the samples were read without a stream's"
        " rhythm): goodput here counts only the objectives above"
    ]
    assert [o.metric for o in prediction.objectives] == ["goodput"]
    assert rhythm_of([TPOT, Objective("ttft_ms", 0.99, 300)]) == ("tpot_ms",)
    assert rhythm_of([STALL, TPOT]) == ("tpot_ms", "stall_ms")


def paced() -> SampleSet:
    """Queue and generation alike around 100 ms; TPOT around 40 ms with generation's pace."""
    rng = np.random.default_rng(5)
    runs, per = 10, 20
    ms = np.tile([5.0, 20.0, 100.0, 25.0, 100.0, 5.0], (runs * per, 1))
    ms[:, 2] *= np.exp(rng.normal(0, 0.3, runs * per))
    ms[:, 4] *= np.exp(rng.normal(0, 0.3, runs * per))
    rhythm = {"tpot_ms": ms[:, 4] * 0.4, "stall_ms": ms[:, 4] * 2.0}
    n = runs * per
    return SampleSet(PHASES, ms, np.repeat(np.arange(runs), per), np.zeros(n, bool), None, rhythm)


def test_generation_is_the_one_lever_of_the_rhythm_objectives() -> None:
    measured = paced()
    found = levers(measured, objectives=[TPOT, STALL])
    by_metric = {o.metric: o for o in objective_levers(measured, found, [TPOT, STALL])}
    for metric in ("tpot_ms", "stall_ms"):
        assert [phase for phase, _ in by_metric[metric].levers] == ["generation"]
        assert f"{metric} ≤ " in by_metric[metric].headline()
        assert "the biggest lever is generation: halved" in by_metric[metric].headline()
    halved = measured.ms.copy()
    halved[:, 4] *= 0.5
    rhythm = {name: values * 0.5 for name, values in measured.rhythm.items()}
    expected = shares(PHASES, settle(halved, measured.censored, None), [TPOT, STALL], rhythm)
    generation = next(lever for lever in found if lever.phase == "generation")
    assert {o.metric: o.halved for o in generation.objectives} == expected
