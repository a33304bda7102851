"""The alternatives ``tail_shift`` weighs: how a heavier tail may look, as bin probabilities.

Two kinds of member, each a set of survival ratios at the reference's edges (the mass
beyond each edge after the change over the mass before), the bins below the member's edge
scaled down to make room:

* **an inflation** at one edge: the mass beyond the p90, p95, p99 or p99.9 × ``RATIOS``
  (1.5 to 8), the shape beyond it kept — a share of requests that got a little slower,
  or a rare kind that got more frequent;
* **a heavier tail** from an edge on (``HEAVIER``): the mass beyond the p90 or p95 × r, and
  beyond each further edge more, survival S′ = r · S₀^g · S^(1−g) (S₀ the mass beyond the
  start edge, g = ``SLOPE``: at the p99.9, 100 times rarer than the p90, 16 r) — a share of
  requests that wait much longer, as a queue's tail does when it blows up (a Pareto tail
  whose index halves reads g ≈ 0.5). An inflation of one edge sees such a tail only where
  it is heaviest and counts the samples just short of it as evidence against: on the
  benchmark's blow-ups a round of runs gives this member 1.5–3 nats more than the best
  inflation (bench/detection/README.md). A gentler slope (0.3) read the p95–p99's broad
  wobble of a quiet afternoon as a change and was left out.

Each member's per-sample log-likelihood ratio per bin is ln(q / p); a run's is its counts
times those. The slope-0 member is an inflation (S′ = r · S beyond the edge).
"""

from __future__ import annotations

import numpy as np

from app.analysis.runs import Array

EDGES = (2, 3, 4, 5)  # the inflations' edges, as indices of tail.QUANTILES: p90 … p99.9
RATIOS = (1.5, 2.0, 3.0, 5.0, 8.0)
HEAVIER = (2, 3)  # the heavier tails' start edges: p90, p95
HEAVIER_RATIOS = (1.5, 2.0, 3.0)
SLOPE = 0.6
MAX_MASS = 0.9  # an inflation that would put more than this beyond its edge is capped there
# Where a heavier tail is told (the alert's quantile): its start edge's samples may stay put
# in ms while those far out move, and the alert holds unless the told quantile grew in ms.
HEAVIER_SHOWN = 4  # the p99


def _family() -> tuple[Array, Array, Array]:
    inflations = [(e, r, 0.0) for e in EDGES for r in RATIOS]
    heavier = [(e, r, SLOPE) for e in HEAVIER for r in HEAVIER_RATIOS]
    edges, ratios, slopes = zip(*(inflations + heavier), strict=True)
    return (
        np.array(edges, dtype=np.int64),
        np.array(ratios, dtype=np.float64),
        np.array(slopes, dtype=np.float64),
    )


MEMBER_EDGES, MEMBER_RATIOS, MEMBER_SLOPES = _family()
MEMBERS = len(MEMBER_EDGES)
MEMBER_SHOWN = np.where(MEMBER_SLOPES > 0, HEAVIER_SHOWN, MEMBER_EDGES)  # the alert's quantile
for _array in (MEMBER_EDGES, MEMBER_RATIOS, MEMBER_SLOPES, MEMBER_SHOWN):
    _array.flags.writeable = False


def survivals(tails: Array) -> Array:
    """Each member's mass beyond each edge, for slots' mass beyond each edge ``tails``
    (… × edges): … × ``MEMBERS`` × edges."""
    start = tails[..., MEMBER_EDGES][..., None]  # … × members × 1
    tails = tails[..., None, :]
    edge = MEMBER_EDGES[:, None]
    ratio = np.minimum(MEMBER_RATIOS[:, None], MAX_MASS / start)
    slope = MEMBER_SLOPES[:, None]
    heavier = ratio * start**slope * tails ** (1 - slope)
    below = 1 - (1 - tails) * (1 - ratio * start) / (1 - start)
    beyond_edge = np.arange(tails.shape[-1]) >= edge
    return np.asarray(np.where(beyond_edge, heavier, below), dtype=np.float64)


def weights(tails: Array) -> tuple[Array, Array]:
    """Per member, the log-likelihood ratio of one sample in each bin (… × ``MEMBERS`` ×
    bins), and the bins' probabilities under no change (… × 1 × bins)."""
    p = _bins(tails[..., None, :])
    q = _bins(survivals(tails))
    return np.asarray(np.log(q / p), dtype=np.float64), p


def _bins(tails: Array) -> Array:
    """Bin probabilities from the mass beyond each edge."""
    shape = tails.shape[:-1] + (1,)
    full = np.concatenate([np.ones(shape), tails, np.zeros(shape)], axis=-1)
    return np.asarray(full[..., :-1] - full[..., 1:], dtype=np.float64)
