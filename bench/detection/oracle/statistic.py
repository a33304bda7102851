"""A run's statistic and its likelihood under a known model.

Per run and vantage: the log median of each phase over the run's timed samples, and the
counts of the load phase's samples over the run's own load median in bins (edges: the
pre-change model's quantiles of that ratio). Under a hypothesis the log medians of the
vantages are jointly Gaussian (the shared load makes the load phase's medians at two
vantages covary) and the bin counts multinomial; the per-run log-likelihood ratio of
the post- to the pre-change hypothesis is what the oracle's CUSUM adds up.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.linalg import cho_factor, cho_solve

Floats = NDArray[np.float64]
QUANTILES = (0.5, 0.75, 0.9, 0.95, 0.99, 0.999)
FLOOR_MS = 1e-3  # a phase a censored sample never reached is 0 ms: log of this instead


@dataclass(frozen=True, slots=True)
class RunStats:
    """Per run: log phase medians (runs × phases) and tail-bin counts (runs × bins)."""

    logmed: Floats
    counts: Floats


def run_stats(values: Floats, load: int, edges: Floats) -> RunStats:
    """``values``: runs × samples × phases in ms, NaN where a sample was not timed; every
    run has at least one timed sample."""
    medians = np.nanmedian(values, axis=1)
    logmed = np.log(np.maximum(medians, FLOOR_MS))
    ratio = values[:, :, load] / np.maximum(medians[:, load, None], FLOOR_MS)
    return RunStats(logmed, bin_counts(ratio, edges))


def bin_counts(ratio: Floats, edges: Floats) -> Floats:
    """Counts per bin of each row's finite values; bins split at ``edges``."""
    index = np.searchsorted(edges, np.nan_to_num(ratio, nan=0.0), side="right")
    onehot = index[..., None] == np.arange(len(edges) + 1)
    return np.asarray((onehot & np.isfinite(ratio)[..., None]).sum(axis=-2), dtype=np.float64)


def tail_edges(ratio: Floats) -> Floats:
    """Bin edges: the quantiles of the load phase's sample-to-run-median ratio."""
    return np.asarray(np.nanquantile(ratio, QUANTILES), dtype=np.float64)


@dataclass(frozen=True, slots=True)
class Gauss:
    mean: Floats
    cov: Floats

    def logpdf(self, x: Floats) -> Floats:
        """Log density of each row of ``x``."""
        factor = cho_factor(self.cov, lower=True)
        centred = (x - self.mean).T
        quad = np.sum(centred * cho_solve(factor, centred), axis=0)
        logdet = 2 * np.sum(np.log(np.diag(factor[0])))
        return np.asarray(-0.5 * (quad + logdet + len(self.mean) * np.log(2 * np.pi)))


@dataclass(frozen=True, slots=True)
class Hypothesis:
    """One model of a run at one or more vantages: the log medians of all vantages side by
    side (Gaussian), each vantage's tail-bin probabilities."""

    gauss: Gauss
    probs: tuple[Floats, ...]


def llr(pre: Hypothesis, post: Hypothesis, logmed: Floats, counts: tuple[Floats, ...]) -> Floats:
    """Per-run log-likelihood ratio, post over pre. ``logmed``: runs × (vantages × phases);
    ``counts``: per vantage, runs × bins."""
    gauss = post.gauss.logpdf(logmed) - pre.gauss.logpdf(logmed)
    bins = sum(
        (c @ np.log(q / p) for c, p, q in zip(counts, pre.probs, post.probs, strict=True)),
        np.zeros(len(logmed)),
    )
    return np.asarray(gauss + bins, dtype=np.float64)


def kl_gauss(post: Gauss, pre: Gauss) -> float:
    """KL(post ‖ pre) in nats: the expected Gaussian part of the LLR after the change."""
    inverse = np.linalg.inv(pre.cov)
    diff = pre.mean - post.mean
    _, logdet_pre = np.linalg.slogdet(pre.cov)
    _, logdet_post = np.linalg.slogdet(post.cov)
    trace = float(np.trace(inverse @ post.cov))
    logdets = float(logdet_pre - logdet_post)
    return 0.5 * (trace + float(diff @ inverse @ diff) - len(diff) + logdets)


def information(pre: Hypothesis, post: Hypothesis, samples: int) -> float:
    """Nats per run after the change: E_post[LLR] (Gaussian KL + multinomial KL)."""
    pairs = zip(pre.probs, post.probs, strict=True)
    bins = sum(samples * float(q @ np.log(q / p)) for p, q in pairs)
    return kl_gauss(post.gauss, pre.gauss) + bins
