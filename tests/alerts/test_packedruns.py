"""Runs kept packed (app/alerts/packedruns.py) come back as they went in: the same numbers,
the same memos (types included), the same counts; a run that does not pack is kept whole;
a MemoryHistory that packs answers every window and ``last`` as one that does not."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import numpy as np
import pytest

from app.alerts.history import MemoryHistory, Retention
from app.alerts.packedruns import BLOCK, PackedCounts, PackedRuns
from app.analysis.runs import RunCount, RunData
from app.analysis.tail import ratios
from tests.runfactory import EVERY, T0, failed_run, make_run


def _plain(index: int) -> RunData:
    return make_run(np.random.default_rng(index), T0 + index * EVERY, run_id=f"r{index}")


def _memos_asked(index: int) -> RunData:
    run = _plain(index)
    run.total_median()
    run.medians(run.phase_names)
    ratios(run, "total")
    return run


def _memos_packed(index: int) -> RunData:
    run = _memos_asked(index)
    run.forget_windows()  # the memos as one array, each a slice of it
    run.memo(("late", 1), lambda: np.arange(3.0))  # and one asked for after
    return run


def _censored(index: int) -> RunData:
    rng = np.random.default_rng(index)
    return make_run(rng, T0 + index * EVERY, n=7, censored=2, failed=3, run_id=f"r{index}")


def _no_timed(index: int) -> RunData:
    failed = failed_run(T0 + index * EVERY)
    return RunData(**{**_fields(failed), "run_id": f"r{index}"})


def _larger_than_a_block(index: int) -> RunData:
    rng = np.random.default_rng(index)
    return make_run(rng, T0 + index * EVERY, n=BLOCK // 4, run_id=f"r{index}")


def _with_readings(index: int) -> RunData:
    run = _plain(index)
    return RunData(**{**_fields(run), "readings": {"x": (run.totals, run.cut_mask())}})


def _odd_memo(index: int) -> RunData:
    run = _plain(index)
    run.memo("text", lambda: "not a number")
    return run


def _fields(run: RunData) -> dict[str, object]:
    names = ("run_id", "target", "vantage", "at", "phase_names", "phases", "totals")
    counts = ("censored", "failed", "samples", "readings")
    return {name: getattr(run, name) for name in names + counts}


MAKERS: list[Callable[[int], RunData]] = [
    _plain,
    _memos_asked,
    _memos_packed,
    _censored,
    _no_timed,
    _larger_than_a_block,
    _with_readings,
    _odd_memo,
]


def assert_same(rebuilt: RunData, original: RunData) -> None:
    assert _fields(rebuilt).keys() == _fields(original).keys()
    for name, value in _fields(original).items():
        if isinstance(value, np.ndarray):
            again = getattr(rebuilt, name)
            assert again.shape == value.shape and again.tobytes() == value.tobytes(), name
        elif name != "readings":
            assert getattr(rebuilt, name) == value, name
    memos = dict(original.memos())
    assert [key for key, _ in rebuilt.memos()] == list(memos)
    for key, value in rebuilt.memos():
        assert type(value) is type(memos[key]), key
        assert np.asarray(value).tobytes() == np.asarray(memos[key]).tobytes(), key


@pytest.mark.parametrize("make", MAKERS, ids=lambda make: make.__name__.strip("_"))
def test_a_packed_run_comes_back_with_its_numbers_and_memos(make: Callable[[int], RunData]) -> None:
    packed, originals = PackedRuns(), [make(i) for i in range(5)]
    for run in originals:
        packed.append(run)
    for index, original in enumerate(originals):
        rebuilt = packed.run(index, (original.at, original.run_id), "chat", "eu")
        assert_same(rebuilt, original)


def test_a_run_that_does_not_pack_is_kept_as_it_is() -> None:
    packed, run = PackedRuns(), _with_readings(0)
    packed.append(run)
    assert packed.run(0, (run.at, run.run_id), "chat", "eu") is run


def test_dropping_the_oldest_runs_frees_their_blocks_and_keeps_the_rest() -> None:
    packed, originals = PackedRuns(), [maker(i) for i, maker in enumerate(MAKERS * 40)]
    for run in originals:
        packed.append(run)
    blocks = len(packed._blocks)  # noqa: SLF001
    packed.drop(200)
    assert len(packed) == len(originals) - 200
    assert len(packed._blocks) < blocks  # noqa: SLF001
    for index, original in enumerate(originals[200:]):
        assert_same(packed.run(index, (original.at, original.run_id), "chat", "eu"), original)
    packed.drop(len(packed))
    assert len(packed) == 0 and not packed._blocks  # noqa: SLF001
    packed.append(originals[0])
    assert_same(packed.run(0, (originals[0].at, "r0"), "chat", "eu"), originals[0])


def _histories(pack_after: int) -> tuple[MemoryHistory, MemoryHistory]:
    far = timedelta(days=3650)
    return MemoryHistory(), MemoryHistory(lambda _: Retention(far, 0, far, pack_after))


def test_a_packing_history_leaves_its_newest_runs_memos_as_they_are() -> None:
    """It packs them itself a few runs later: packed here too, they were copied twice."""
    history = MemoryHistory(lambda _: Retention(timedelta(days=1), 1, pack_after=3))
    first = _memos_asked(0)
    medians = first.medians(first.phase_names)
    history.add(first)
    history.add(_plain(1))  # ``first`` is no recent window's end any more
    assert first.medians(first.phase_names) is medians
    plain = MemoryHistory()
    second = _memos_asked(2)
    medians = second.medians(second.phase_names)
    plain.add(second)
    plain.add(_plain(3))
    kept = second.medians(second.phase_names)
    assert kept is not medians and kept.base is not None  # packed: a view of one array
    np.testing.assert_array_equal(kept, medians)


@pytest.mark.parametrize("pack_after", [1, 3])
def test_a_history_that_packs_answers_as_one_that_does_not(pack_after: int) -> None:
    plain, packing = _histories(pack_after)
    # Three late runs, each at the time of another (ids below and above it): among the
    # packed, and among the newest.
    order = [*range(30), 4, 29, 12]
    runs = [_memos_asked(i) for i in range(30)]
    added = []
    for step, index in enumerate(order):
        run = runs[index] if step < 30 else _late_copy(runs[index], "q" if index % 2 else "s")
        added.append(run)
        plain.add(run)
        packing.add(run)
        for count in (1, 2, 5, 40):
            _assert_lists(packing.last("chat", "eu", count), plain.last("chat", "eu", count))
    for start, end in [(0, 30), (3, 9), (25, 31), (10, 10)]:
        args = ("chat", "eu", T0 + start * EVERY, T0 + end * EVERY)
        _assert_lists(packing.window(*args), plain.window(*args))
    assert packing.counts(*args) == plain.counts(*args)
    everything = packing.window("chat", "eu", T0, T0 + 31 * EVERY)
    expected = sorted(added, key=lambda run: (run.at, run.run_id))
    assert [run.run_id for run in everything] == [run.run_id for run in expected]


def _late_copy(run: RunData, prefix: str) -> RunData:
    return RunData(**{**_fields(run), "run_id": prefix + run.run_id})


def _assert_lists(got: list[RunData], expected: list[RunData]) -> None:
    assert [run.run_id for run in got] == [run.run_id for run in expected]
    for rebuilt, original in zip(got, expected, strict=True):
        assert_same(rebuilt, original)


COUNTS = [
    pytest.param([(0, 10, 0, 10), (1, 9, 1, 12)], id="in order"),
    pytest.param([(0, 10, 0, 10), (2, 9, 1, 12), (1, 5, 5, 5)], id="a late one"),
    pytest.param([(1, 10, 0, 10), (1, 3, 0, 3), (1, 7, 2, 9), (0, 1, 1, 1)], id="ties by counts"),
]


@pytest.mark.parametrize("given", COUNTS)
def test_packed_counts_keep_the_order_of_their_tuples(given: list[tuple[int, ...]]) -> None:
    counts = [RunCount(T0 + at * EVERY, *numbers) for at, *numbers in given]
    packed = PackedCounts()
    for count in counts:
        packed.add(count)
    assert packed.between(0, len(packed)) == sorted(counts)
    packed.drop(1)
    assert packed.between(0, len(packed)) == sorted(counts)[1:]
