"""The tail's statistics, table by table: the bins, the slot probabilities, each member's
log-likelihood ratio, the overdispersion and the CUSUM (app/analysis/tail.py, tailcusum.py)."""

from __future__ import annotations

import math
from datetime import timedelta

import numpy as np
import pytest

from app.analysis.tail import BINS, HOURS, SLOTS, Channel, bin_counts, ratios, smoothed
from app.analysis.tailcusum import (
    BLOCK,
    MAX_DISPERSION,
    MAX_MASS,
    MEMBER_EDGES,
    MEMBER_RATIOS,
    MEMBERS,
    beyond,
    calibrate,
    cusum,
    dispersion,
    increments,
    member_llr,
)
from app.analysis.tailfamily import MEMBER_SLOPES, weights
from tests.runfactory import T0, make_run

EDGES = np.array([1.0, 1.2, 1.5, 1.8, 2.5, 8.0])
P = np.array([0.5, 0.25, 0.15, 0.05, 0.04, 0.009, 0.001])


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([0.5, 0.9], [2, 0, 0, 0, 0, 0, 0]),
        ([1.0, 1.1, 1.3], [0, 2, 1, 0, 0, 0, 0]),  # on an edge: the bin above it
        ([1.9, 3.0, 9.0, 100.0], [0, 0, 0, 0, 1, 1, 2]),
        ([], [0, 0, 0, 0, 0, 0, 0]),
    ],
)
def test_bin_counts(values: list[float], expected: list[int]) -> None:
    assert bin_counts(np.array(values), EDGES).tolist() == expected


def test_a_ratio_is_over_the_run_s_own_median_per_channel() -> None:
    run = make_run(np.random.default_rng(1), T0, n=9)
    for channel, values in (("total", run.totals), ("queue", run.phases[:, 2])):
        got = ratios(run, channel)
        assert np.median(got) == pytest.approx(1.0)
        assert got == pytest.approx(values / np.median(values))
    assert len(ratios(run, "server")) == 0  # a phase the run lacks
    assert len(ratios(make_run(np.random.default_rng(1), T0, n=4), "total")) == 0  # no body


@pytest.mark.parametrize(
    ("seen", "slot", "near"),
    [
        # A slot seen a lot is its own; one never seen is its hour's (over all days); an
        # hour never seen is the whole reference's.
        ({3: ([0, 0, 0, 0, 0, 0, 100], 100)}, 3, "own"),
        ({3: ([0, 0, 0, 0, 0, 0, 100], 100)}, HOURS + 3, "hour"),
        ({3: ([0, 0, 0, 0, 0, 0, 100], 100)}, 7, "overall"),
    ],
)
def test_slot_probabilities_lean_on_the_hour_then_the_reference(
    seen: dict[int, tuple[list[int], int]], slot: int, near: str
) -> None:
    base = np.array([10.0, 5, 3, 1, 1, 0, 0])  # 20 ordinary samples a run
    rows, slots = [], []
    for s in range(SLOTS):
        if s == HOURS + 3:
            continue  # weekend 03:00 never seen
        rows += [base] * 20
        slots += [s] * 20
    heavy, runs = seen[3]
    rows += [np.array(heavy, dtype=float) / runs * 20] * runs
    slots += [3] * runs
    probs = smoothed(np.array(rows), np.array(slots, dtype=np.int64))
    assert probs.shape == (SLOTS, BINS)
    assert probs.sum(axis=1) == pytest.approx(np.ones(SLOTS))
    last = {"own": (0.75, 1.0), "hour": (0.6, 0.9), "overall": (0.0, 0.05)}[near]
    assert last[0] < probs[slot, -1] < last[1]


def test_beyond_is_the_mass_above_each_edge() -> None:
    assert beyond(P).tolist() == pytest.approx([0.5, 0.25, 0.1, 0.05, 0.01, 0.001])


def _member(edge: int, ratio: float) -> int:
    """The inflation (slope 0) at ``edge`` by ``ratio``; the heavier tails: test_tailfamily."""
    found = (MEMBER_EDGES == edge) & (MEMBER_RATIOS == ratio) & (MEMBER_SLOPES == 0)
    return int(np.flatnonzero(found)[0])


@pytest.mark.parametrize(
    ("counts", "edge", "ratio"),
    [
        ([10, 5, 3, 1, 1, 0, 0], 4, 2.0),  # nothing beyond the p99: evidence against
        ([10, 4, 2, 1, 1, 1, 1], 4, 5.0),  # two beyond it
        ([10, 4, 2, 1, 1, 1, 1], 5, 8.0),
        ([10, 0, 0, 0, 0, 0, 10], 2, 8.0),  # capped: 8 × 10 % would be 80 %, under MAX_MASS
        ([10, 0, 0, 0, 0, 0, 10], 2, 1.5),
    ],
)
def test_a_member_s_llr_is_binomial_at_its_edge(counts: list[int], edge: int, ratio: float) -> None:
    tails = beyond(P)[None, :]
    llr, variance = member_llr(np.array([counts], dtype=float), tails)
    n, k, mass = sum(counts), sum(counts[edge + 1 :]), float(tails[0, edge])
    r = min(ratio, MAX_MASS / mass)
    up, down = math.log(r), math.log((1 - r * mass) / (1 - mass))
    member = _member(edge, ratio)
    assert llr[0, member] == pytest.approx(k * up + (n - k) * down)
    assert variance[0, member] == pytest.approx(n * mass * (1 - mass) * (up - down) ** 2)
    assert (llr[0, member] > 0) == (k > 0 and k / n > mass * 1.5)


def test_a_member_s_llr_has_the_kl_as_its_mean_under_no_change() -> None:
    rng = np.random.default_rng(2)
    counts = rng.multinomial(20, P, size=200_000).astype(float)
    llr, variance = member_llr(counts, np.tile(beyond(P), (len(counts), 1)))
    member = _member(4, 2.0)
    mass = 0.01
    expected = 20 * (mass * math.log(2) + (1 - mass) * math.log((1 - 2 * mass) / (1 - mass)))
    assert llr[:, member].mean() == pytest.approx(expected, abs=0.002)
    assert llr[:, member].var() == pytest.approx(variance[0, member], rel=0.03)


def _channel(counts: np.ndarray) -> Channel:
    slots = np.zeros(len(counts), dtype=np.int64)
    days = np.arange(len(counts), dtype=np.int64) // 96  # a run every 15 minutes
    probs = np.tile(P, (SLOTS, 1))
    return Channel("total", EDGES, probs, counts, slots, days, 100.0)


@pytest.mark.parametrize(
    ("runs", "clustered", "low", "high"),
    [
        (40 * BLOCK, False, 1.0, 1.35),  # multinomial runs: no overdispersion
        (40 * BLOCK, True, 2.0, MAX_DISPERSION),  # tails come in two-hour bursts
        (2 * BLOCK, False, MAX_DISPERSION, MAX_DISPERSION),  # too few blocks: assume the most
    ],
)
def test_dispersion_of_the_block_sums(runs: int, clustered: bool, low: float, high: float) -> None:
    rng = np.random.default_rng(3)
    if clustered:
        # A block either has three times the tail beyond the p95, or a third of it.
        rows = []
        for _ in range(runs // BLOCK):
            scale = 3.0 if rng.random() < 0.5 else 1 / 3
            q = P.copy()
            q[4:] *= scale
            q[0] += 1 - q.sum()
            rows.append(rng.multinomial(20, q, size=BLOCK))
        counts = np.concatenate(rows).astype(float)
    else:
        counts = rng.multinomial(20, P, size=runs).astype(float)
    phi = dispersion(_channel(counts))
    assert phi.shape == (MEMBERS,)
    assert low <= float(np.median(phi)) <= high


@pytest.mark.parametrize(
    ("scores", "steps", "cap", "expected"),
    [
        ([0.0, 1.0], [0.5, -2.0], 10.0, [0.5, 0.0]),  # never below 0
        ([9.0, 3.0], [4.0, 1.0], 10.0, [10.0, 4.0]),  # never above the cap
        ([2.0, 2.0], [-1.0, 0.0], 10.0, [1.0, 2.0]),
    ],
)
def test_cusum_step(
    scores: list[float], steps: list[float], cap: float, expected: list[float]
) -> None:
    assert cusum(scores, np.array(steps), cap) == pytest.approx(expected)


def test_the_family_covers_each_edge_with_each_ratio() -> None:
    inflation = MEMBER_SLOPES == 0
    pairs = set(
        zip(MEMBER_EDGES[inflation].tolist(), MEMBER_RATIOS[inflation].tolist(), strict=True)
    )
    assert len(pairs) == int(inflation.sum()) == 20
    assert min(MEMBER_RATIOS) == 1.5
    assert T0 + timedelta(0) == T0  # the runfactory's clock, imported for make_run


def _varied_channel(seed: int) -> Channel:
    """Three days of runs every 15 minutes, each slot with probabilities of its own."""
    rng = np.random.default_rng(seed)
    runs = 3 * 96
    slots = (np.arange(runs) // 4 % HOURS + HOURS * (np.arange(runs) >= 2 * 96)).astype(np.int64)
    probs = rng.dirichlet(100 * P + 0.5, size=SLOTS)
    counts = np.array([rng.multinomial(10, probs[s]) for s in slots], dtype=float)
    days = np.arange(runs, dtype=np.int64) // 96
    return Channel("total", EDGES, probs, counts, slots, days, 100.0)


def _calibrate_run_by_run(channel: Channel) -> tuple[np.ndarray, np.ndarray]:
    """``calibrate`` as first written: each run's member LLRs against the other days'
    probabilities at its own slot, worked out run by run."""
    llr = np.empty((len(channel.counts), MEMBERS))
    for day in np.unique(channel.days):
        mine = channel.days == day
        probs = smoothed(channel.counts[~mine], channel.slots[~mine])
        llr[mine] = member_llr(channel.counts[mine], beyond(probs[channel.slots[mine]]))[0]
    blocks = len(llr) // BLOCK
    sums = llr[: blocks * BLOCK].reshape(blocks, BLOCK, MEMBERS).sum(axis=1)
    variance = sums.var(axis=0, ddof=1) / BLOCK
    fall = -llr.mean(axis=0)
    ratio = np.where(fall > 0, variance / np.maximum(2 * fall, 1e-12), MAX_DISPERSION)
    phi = np.clip(ratio, 1.0, MAX_DISPERSION)
    return phi, np.maximum(fall / phi, 0.0)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_held_out_scoring_per_slot_is_the_run_by_run_spelling(seed: int) -> None:
    channel = _varied_channel(seed)
    for found, expected in zip(calibrate(channel), _calibrate_run_by_run(channel), strict=True):
        np.testing.assert_array_equal(found, expected)


@pytest.mark.parametrize("hour", [0, 13, 23, 24 + 5, 24 + 23])  # weekdays, then weekend hours
def test_a_run_s_increments_use_its_own_slot_s_log_ratios(hour: int) -> None:
    channel = _varied_channel(4)
    channel = Channel(
        "total", EDGES, channel.probs, channel.counts, channel.slots, channel.days, 100.0,
        dispersion=np.full(MEMBERS, 1.5),
    )  # fmt: skip
    saturday = T0 + timedelta(days=(5 - T0.weekday()) % 7)
    day = saturday if hour >= HOURS else saturday - timedelta(days=2)
    run = make_run(np.random.default_rng(hour), day.replace(hour=hour % HOURS), n=20)
    logs = weights(beyond(channel.probs[hour])[None, :])[0][0]
    expected = (logs * bin_counts(ratios(run, "total"), EDGES)).sum(axis=-1) / 1.5
    np.testing.assert_array_equal(increments(run, channel), expected)
