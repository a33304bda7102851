"""The family of heavier tails tail_shift weighs (app/analysis/tailfamily.py), member by
member: the mass each puts beyond each edge, and its per-bin log-likelihood ratios."""

from __future__ import annotations

import math

import numpy as np
import pytest

from app.analysis.tailcusum import beyond, member_llr
from app.analysis.tailfamily import (
    HEAVIER,
    HEAVIER_RATIOS,
    MAX_MASS,
    MEMBER_EDGES,
    MEMBER_RATIOS,
    MEMBER_SLOPES,
    MEMBERS,
    SLOPE,
    survivals,
    weights,
)

P = np.array([0.5, 0.25, 0.15, 0.05, 0.04, 0.009, 0.001])  # bins: p50 … beyond the p99.9
TAILS = beyond(P)  # 0.5, 0.25, 0.1, 0.05, 0.01, 0.001


def _member(edge: int, ratio: float, slope: float) -> int:
    found = (MEMBER_EDGES == edge) & (MEMBER_RATIOS == ratio) & (MEMBER_SLOPES == slope)
    return int(np.flatnonzero(found)[0])


@pytest.mark.parametrize(
    ("edge", "ratio", "slope", "expected"),
    [
        # An inflation: × r beyond its edge, the mass below scaled to make room.
        (
            4,
            2.0,
            0.0,
            [
                1 - 0.5 * 0.98 / 0.99,
                1 - 0.75 * 0.98 / 0.99,
                1 - 0.9 * 0.98 / 0.99,
                1 - 0.95 * 0.98 / 0.99,
                0.02,
                0.002,
            ],
        ),
        # A heavier tail from the p90: × 1.5 there, × 1.5 · (0.1 / S)^0.6 further out.
        (
            2,
            1.5,
            SLOPE,
            [
                1 - 0.5 * 0.85 / 0.9,
                1 - 0.75 * 0.85 / 0.9,
                0.15,
                0.15 * 0.5**0.4,
                0.15 * 0.1**0.4,
                0.15 * 0.01**0.4,
            ],
        ),
        (
            3,
            3.0,
            SLOPE,
            [
                1 - 0.5 * 0.85 / 0.95,
                1 - 0.75 * 0.85 / 0.95,
                1 - 0.9 * 0.85 / 0.95,
                0.15,
                0.15 * 0.2**0.4,
                0.15 * 0.02**0.4,
            ],
        ),
        (2, 8.0, 0.0, [1 - 0.5 * 0.2 / 0.9, 1 - 0.75 * 0.2 / 0.9, 0.8, 0.4, 0.08, 0.008]),
    ],
)
def test_a_member_s_mass_beyond_each_edge(
    edge: int, ratio: float, slope: float, expected: list[float]
) -> None:
    got = survivals(TAILS[None, :])[0, _member(edge, ratio, slope)]
    assert got.tolist() == pytest.approx(expected)


def test_every_member_is_a_distribution_heavier_from_its_edge_on() -> None:
    tails = np.array([TAILS, beyond(np.array([0.5, 0.2, 0.2, 0.05, 0.04, 0.0099, 0.0001]))])
    s = survivals(tails)
    assert s.shape == (2, MEMBERS, 6)
    assert (np.diff(s, axis=-1) <= 1e-12).all()  # a survival: never rising
    assert (s[..., -1] > 0).all() and (s[..., 0] < 1).all()
    beyond_edge = np.arange(6)[None, :] >= MEMBER_EDGES[:, None]
    ratio = s / tails[:, None, :]
    assert (ratio[:, beyond_edge] >= 1.5 - 1e-9).all()  # heavier from the edge on
    logs, _ = weights(tails)
    below_edge = np.arange(7)[None, :] <= MEMBER_EDGES[:, None]  # the bins up to the edge
    assert (logs[:, below_edge] <= 1e-12).all()  # each of them lighter: room made
    assert (s <= MAX_MASS + 1e-12).all()


@pytest.mark.parametrize(
    ("counts", "heavier"),
    [
        ([10, 5, 3, 1, 1, 0, 0], False),  # an ordinary run: evidence against
        ([9, 4, 2, 1, 2, 1, 1], True),  # samples beyond the p95, p99 and p99.9 at once
        ([10, 4, 2, 1, 1, 1, 1], True),
    ],
)
def test_a_heavier_tail_s_llr_is_each_bin_s_log_ratio(counts: list[int], heavier: bool) -> None:
    member = _member(2, 2.0, SLOPE)
    logs, p = weights(TAILS[None, :])
    q = np.diff(np.concatenate([[1.0], survivals(TAILS[None, :])[0, member], [0.0]])) * -1
    assert logs[0, member] == pytest.approx(np.log(q / P))
    assert p[0, 0] == pytest.approx(P)
    llr, _ = member_llr(np.array([counts], dtype=float), TAILS[None, :])
    assert llr[0, member] == pytest.approx(float(np.dot(counts, np.log(q / P))))
    assert (llr[0, member] > 0) == heavier


@pytest.mark.parametrize(
    ("counts", "inflation", "heavier"),
    [
        # Slow samples at every edge at once, as a blown-up queue tail gives: the best
        # inflation (p99.9 × 8) counts the p95 … p99 ones as evidence against.
        ([9, 4, 2, 1, 2, 1, 1], 2.84, 4.53),
        ([10, 4, 2, 1, 1, 1, 1], 2.84, 3.80),
        # All beyond the p95 and p99 and none beyond the p99.9: the inflations' case.
        ([8, 4, 3, 1, 2, 2, 0], 2.84, 2.74),
    ],
)
def test_a_tail_heavier_at_every_edge_weighs_more_on_a_heavier_tail(
    counts: list[int], inflation: float, heavier: float
) -> None:
    llr, _ = member_llr(np.array([counts], dtype=float), TAILS[None, :])
    assert llr[0, MEMBER_SLOPES == 0].max() == pytest.approx(inflation, abs=0.01)
    assert llr[0, MEMBER_SLOPES > 0].max() == pytest.approx(heavier, abs=0.01)


def test_a_member_s_llr_has_the_kl_as_its_mean_under_no_change() -> None:
    rng = np.random.default_rng(4)
    counts = rng.multinomial(20, P, size=40_000).astype(float)
    llr, variance = member_llr(counts, np.tile(TAILS, (len(counts), 1)))
    for member in (_member(2, 1.5, SLOPE), _member(3, 3.0, SLOPE)):
        q = np.diff(np.concatenate([[1.0], survivals(TAILS[None, :])[0, member], [0.0]])) * -1
        kl = 20 * float(np.dot(P, np.log(q / P)))
        assert llr[:, member].mean() == pytest.approx(kl, abs=0.02)
        assert llr[:, member].var() == pytest.approx(variance[0, member], rel=0.1)


def test_the_family_is_each_inflation_and_each_heavier_tail_once() -> None:
    triples = set(
        zip(MEMBER_EDGES.tolist(), MEMBER_RATIOS.tolist(), MEMBER_SLOPES.tolist(), strict=True)
    )
    assert len(triples) == MEMBERS == 20 + len(HEAVIER) * len(HEAVIER_RATIOS)
    assert min(MEMBER_RATIOS) == 1.5
    assert math.isclose(SLOPE, 0.6)
