"""The oracle's CUSUM: its delay on a stream of per-run LLRs, and its threshold.

The threshold is calibrated by simulation: streams of runs resampled from the generator's
own pre-change runs (a run's log medians and tail counts together: a run whose queue is
fast has its tail samples further out, so the counts are not multinomial), the load phase
moved by the shared load (AR(1) over runs × a level per day, as model.py draws it, the
same at every vantage), run through the CUSUM; the threshold is the height that one
excursion of the CUSUM above 0 in ARL₀ runs reaches (the CUSUMs of all streams computed
at once, no loop over runs). Calibrations are cached by the shape of the statistic (the
two hypotheses, rounded).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from scipy.signal import lfilter

from bench.detection.oracle.statistic import Floats, Hypothesis, RunStats, llr

STREAMS = 256
ALARMS = 100  # expected false alarms at the calibrated threshold: ±10 % on ARL₀
CHUNK = 1024
_CACHE: dict[tuple[bytes, ...], float] = {}


@dataclass(frozen=True, slots=True)
class Stream:
    """Everything the calibration draws a pre-change run from."""

    pre: Hypothesis
    post: Hypothesis
    loads: tuple[int, ...]  # the load phase's places in the log-median vector
    load_sigma: float
    load_rho: float
    day_sigma: float
    runs_per_day: int
    null: tuple[RunStats, ...]  # per vantage: pre-change runs drawn, the load taken out

    def key(self, arl: float) -> tuple[bytes, ...]:
        parts = [self.pre.gauss.mean, self.pre.gauss.cov, self.post.gauss.mean]
        parts += [self.post.gauss.cov, *self.pre.probs, *self.post.probs]
        parts += [p for n in self.null for p in (n.logmed.mean(axis=0), n.counts.mean(axis=0))]
        knobs = [arl, self.load_sigma, self.load_rho, self.day_sigma, self.runs_per_day]
        return (*(np.round(p, 3).tobytes() for p in parts), np.round(knobs, 4).tobytes())


def first_alarm(increments: Floats, threshold: float) -> int | None:
    """The run (1-based) at which a CUSUM started at 0 first reaches the threshold."""
    total = 0.0
    for run, step in enumerate(increments, start=1):
        total = max(0.0, total + float(step))
        if total >= threshold:
            return run
    return None


def alarms(increments: Floats, threshold: float) -> int:
    """False alarms on a stream with no change: excursions of the CUSUM above 0 that reach
    the threshold (one per excursion, as the calibration counts them)."""
    if len(increments) == 0:
        return 0
    peaks = excursion_peaks(np.asarray(increments, dtype=np.float64)[None, :])
    return int((peaks >= threshold).sum())


def calibrate(stream: Stream, arl: float, seed: int = 0) -> float:
    """The threshold whose CUSUM has ARL₀ = ``arl`` runs on the pre-change model."""
    key = stream.key(arl)
    if key not in _CACHE:
        steps = math.ceil(ALARMS * arl / STREAMS)
        draws = np.concatenate(list(_null_llr(stream, np.random.default_rng(seed), steps)), 1)
        _CACHE[key] = threshold_for(draws, draws.size / arl, math.log(arl))
    return _CACHE[key]


def threshold_for(increments: Floats, allowed: float, bound: float) -> float:
    """The threshold that ``allowed`` excursions of the CUSUMs (streams × runs) reach; where
    fewer than that leave 0 at all (a change worth hundreds of nats a run), the simulation
    cannot tell, and ``bound`` (Lorden's: ARL₀ ≥ e^h, so ln ARL₀) stands in."""
    peaks = np.sort(excursion_peaks(increments))[::-1]
    peaks = peaks[peaks > 0]
    k = max(1, round(allowed))
    if k >= len(peaks):
        return bound
    return 0.5 * float(peaks[k - 1] + peaks[k])


def cusum_paths(increments: Floats) -> Floats:
    """The CUSUM of each row, from 0: S_t = C_t − min(0, C_1 … C_t) (Lindley)."""
    total = np.cumsum(increments, axis=1)
    return np.asarray(total - np.minimum.accumulate(np.minimum(total, 0.0), axis=1))


def excursion_peaks(increments: Floats) -> Floats:
    """The highest point of every excursion of the CUSUMs above 0 (one per excursion).

    An excursion that reaches the threshold is one false alarm; the CUSUM is back at 0
    before the next, as a reset one would be (the rate of excursions reaching h is
    1 / ARL₀ when ARL₀ is long against an excursion)."""
    paths = cusum_paths(increments)
    begins = paths == 0.0
    begins[:, 0] = True
    flat = paths.ravel()
    return np.asarray(np.maximum.reduceat(flat, np.flatnonzero(begins.ravel())))


def _null_llr(stream: Stream, rng: np.random.Generator, steps: int) -> Iterator[Floats]:
    """Per-run LLRs with no change: each vantage's runs resampled from its pre-change
    draws (a run's log medians and tail counts together, as the generator made them),
    the shared load added to the load phases."""
    load = _load(stream, rng, steps)
    shared = np.zeros(len(stream.pre.gauss.mean))
    shared[list(stream.loads)] = 1.0
    for begin in range(0, steps, CHUNK):
        part = load[:, begin : begin + CHUNK]
        picks = [rng.integers(0, len(n.counts), part.size) for n in stream.null]
        logmed = np.concatenate([n.logmed[i] for n, i in zip(stream.null, picks, strict=True)], 1)
        x = logmed + part.reshape(-1, 1) * shared
        counts = tuple(n.counts[i] for n, i in zip(stream.null, picks, strict=True))
        yield llr(stream.pre, stream.post, x, counts).reshape(part.shape)


def _load(stream: Stream, rng: np.random.Generator, steps: int) -> Floats:
    """The shared load's log per stream and run: AR(1) plus a level per day."""
    rho = stream.load_rho
    shocks = rng.standard_normal((STREAMS, steps)) * math.sqrt(1 - rho**2)
    ar = lfilter([1.0], [1.0, -rho], shocks, axis=1)
    days = rng.standard_normal((STREAMS, steps // stream.runs_per_day + 1))
    level = np.repeat(days, stream.runs_per_day, axis=1)[:, :steps]
    return np.asarray(stream.load_sigma * ar + stream.day_sigma * level, dtype=np.float64)
