"""The tail's shape, binned: each sample over its own run's median, against the reference.

A sample's **ratio** is its time (end-to-end, or one phase's) over its own run's median of
the same. Samples of one run share the moment's load: when the shared queue is busy the
whole run is slower, body and tail alike. Dividing by the run's median takes that moment
out, so what is left is the tail proper: how far a run's slow samples stray from its
typical one. A busy hour, a slow day or a stretch of correlated runs moves the body and
leaves the ratios alone; a heavier tail (a share of requests waiting much longer) moves
them. The level itself is other detectors' business.

Each run's ratios are counted in ``BINS`` bins split at the reference's p50, p75, p90,
p95, p99 and p99.9 of that ratio (the edges: one set for the whole reference). The bins'
probabilities are the reference's own *for that hour of the day, on that kind of day*
(weekday or weekend, UTC), each slot shrunk towards its hour's over all days and the
hour's towards the whole reference's (``smoothed``): busy hours that widen the tail every
weekday are part of the reference. app/analysis/tailcusum.py turns
the counts into evidence.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
from numpy.typing import NDArray

from app.analysis.runs import Array, RunData

HOURS = 24
SLOTS = 2 * HOURS  # (weekday or weekend) × hour of day, UTC
QUANTILES = (0.5, 0.75, 0.9, 0.95, 0.99, 0.999)
NAMES = ("p50", "p75", "p90", "p95", "p99", "p99.9")
BINS = len(QUANTILES) + 1
PRIOR_SAMPLES = 20.0  # samples beyond an edge: a slot seen little there leans on its hour
FLOOR = 0.25  # pseudo-samples per bin over the whole reference: no bin is ever impossible
MIN_RUN_SAMPLES = 5  # a run's median from fewer says little about its body
TOTAL = "total"  # the end-to-end channel's name; the others are phases'
LOAD_PHASES = ("queue", "server")  # the phase that carries the server's load, if any
Ints = NDArray[np.int64]


def slot(at: datetime) -> int:
    """Weekday hours 0–23, weekend hours 24–47 (UTC)."""
    return (HOURS if at.weekday() >= 5 else 0) + at.hour


def channels(run: RunData) -> tuple[str, ...]:
    """What a run's tail is read on: end-to-end, and the load phase where it has one."""
    load = next((name for name in LOAD_PHASES if name in run.phase_names), None)
    return (TOTAL,) if load is None else (TOTAL, load)


def ratios(run: RunData, channel: str) -> Array:
    """Each timed sample's time on ``channel`` over the run's median of it; empty for a run
    too small to have a body (or without the phase, or with a median of 0)."""
    return run.memo(("ratios", channel), _ratios, run, channel)


def times(run: RunData, channel: str) -> Array:
    """Each timed sample's time on ``channel``, in ms (empty for a phase the run lacks)."""
    if channel == TOTAL:
        return run.totals
    if channel in run.phase_names:
        return run.phases[:, run.phase_names.index(channel)]
    return np.empty(0)


def _ratios(run: RunData, channel: str) -> Array:
    values = times(run, channel)
    if run.timed < MIN_RUN_SAMPLES or not len(values):
        return np.empty(0)
    ordered, half = np.sort(values), len(values) // 2
    body = float(ordered[half] if len(values) % 2 else (ordered[half - 1] + ordered[half]) / 2)
    return values / body if body > 0 else np.empty(0)


def median(run: RunData, channel: str) -> float:
    """``np.median(times(run, channel))``, from the run's kept medians."""
    if channel == TOTAL:
        return run.total_median()
    # The run's own medians, picked (``medians((channel,))`` builds an array of one: a daily
    # reference asks this of every run of its week).
    if channel not in run.phase_names:
        return 0.0
    return float(run.medians(run.phase_names)[run.phase_names.index(channel)])


def binned_runs(pooled: Array, sizes: Ints, edges: Array) -> Array:
    """``bin_counts`` of each run's values (``pooled``: the runs' values one after another,
    ``sizes`` of them each), as a runs × bins matrix, in one pass over all of them."""
    bins = len(edges) + 1
    owner = np.repeat(np.arange(len(sizes), dtype=np.int64), sizes)
    index = owner * bins + np.searchsorted(edges, pooled, side="right")
    flat = np.bincount(index, minlength=len(sizes) * bins)
    return flat.reshape(len(sizes), bins).astype(np.float64)


def bin_counts(values: Array, edges: Array) -> Array:
    """How many of ``values`` fall in each of the ``BINS`` bins split at ``edges`` (a value on
    an edge is in the bin above it)."""
    index = np.searchsorted(edges, values, side="right")
    return np.bincount(index, minlength=len(edges) + 1).astype(np.float64)


def smoothed(counts: Array, slots: Ints) -> Array:
    """Bin probabilities per slot (``SLOTS`` × bins) from runs' ``counts`` (runs × bins).

    Smoothed as a chain of conditional chances: of a sample beyond edge j, the chance it is
    beyond edge j + 1 too. Each is the slot's own count plus ``PRIOR_SAMPLES`` of its hour's
    chance, the hour's plus as many of the whole reference's — in samples beyond edge j,
    so a bin's own data decides wherever it has any: a busy hour's wider body is the
    slot's own, while the p99.9, which a slot sees once a week, is the reference's."""
    by_slot = slot_sums(counts, slots)
    by_hour = by_slot[:HOURS] + by_slot[HOURS:]
    overall = by_slot.sum(axis=0) + FLOOR
    hazard = _hazard(overall, np.zeros(len(overall) - 1), 0.0)
    hourly = _hazard(by_hour, hazard, PRIOR_SAMPLES)
    return _probs(_hazard(by_slot, np.tile(hourly, (2, 1)), PRIOR_SAMPLES))


def slot_sums(counts: Array, slots: Ints) -> Array:
    """``counts`` (runs × bins) summed per slot (``SLOTS`` × bins), each run added in turn as
    ``np.add.at`` adds them, in one ``bincount`` (add.at's per-element cost shows: a daily
    reference's calibration asks for a slot table per reference day)."""
    width = counts.shape[1]
    index = (slots[:, None] * width + np.arange(width)).ravel()
    flat = np.bincount(index, weights=counts.ravel(), minlength=SLOTS * width)
    return np.asarray(flat.reshape(SLOTS, width), dtype=np.float64)


def _hazard(counts: Array, prior: Array, weight: float) -> Array:
    """Per row, the chance of being beyond edge j + 1 once beyond edge j, shrunk to ``prior``."""
    survivors = np.cumsum(counts[..., ::-1], axis=-1)[..., ::-1]
    return np.asarray(
        (survivors[..., 1:] + weight * prior) / (survivors[..., :-1] + weight), dtype=np.float64
    )


def _probs(hazard: Array) -> Array:
    """Bin probabilities from the conditional chances (each row sums to 1)."""
    survival = np.concatenate([np.ones((len(hazard), 1)), np.cumprod(hazard, axis=1)], axis=1)
    return np.asarray(survival - np.pad(survival[:, 1:], ((0, 0), (0, 1))), dtype=np.float64)


@dataclass(slots=True)
class TailState:
    """What the store keeps of a vantage's tail CUSUM (detector_state.tail_score, tail_runs):
    its highest score and the runs since it left 0, mirrored from
    ``DetectorMemory.cusums["tail_shift"]``, which the detector reads."""

    scores: tuple[float, ...] = (0.0,)
    runs: int = 0


@dataclass(frozen=True, slots=True)
class Channel:
    """The reference of one channel's ratios: the bins' edges, their probabilities per slot,
    and each reference run's counts and slot in time order (the dispersion's material:
    empty in a reference ``tailcusum.tail_reference`` built, once calibrated)."""

    name: str
    edges: Array  # the reference's quantiles ``QUANTILES`` of the ratio
    probs: Array  # SLOTS × BINS
    counts: Array  # reference runs × BINS
    slots: Ints  # each reference run's slot
    days: Ints  # each reference run's day (UTC ordinal)
    body_ms: float  # the median of the reference runs' medians
    dispersion: Array = field(default_factory=lambda: np.empty(0))  # per member (tailcusum)
    fall: Array = field(default_factory=lambda: np.empty(0))  # per member, per run, no change
    # tailcusum's members' per-bin log ratios by slot, filled as runs ask (once a slot).
    terms: dict[int, Array] = field(default_factory=dict, init=False, repr=False, compare=False)
    # tailcusum's members' ceilings by threshold (``caps``: every run asked for the same).
    ceilings: dict[float, Array] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )


@dataclass(frozen=True, slots=True)
class TailReference:
    """A vantage's tail reference: one ``Channel`` per channel read (end-to-end first)."""

    channels: dict[str, Channel]
    runs: int


def channel_reference(runs: Sequence[RunData], name: str) -> Channel | None:
    """``name``'s reference from ``runs`` (oldest first); None when no run has a body on it."""
    shaped = [(run, ratios(run, name)) for run in runs]
    shaped = [(run, values) for run, values in shaped if len(values)]
    if not shaped:
        return None
    pooled = np.concatenate([values for _, values in shaped])
    edges = np.quantile(pooled, QUANTILES)
    sizes = np.array([len(values) for _, values in shaped], dtype=np.int64)
    counts = binned_runs(pooled, sizes, edges)
    slots = np.array([slot(run.at) for run, _ in shaped], dtype=np.int64)
    days = np.array([run.at.toordinal() for run, _ in shaped], dtype=np.int64)
    probs = smoothed(counts, slots)
    body = float(np.median([median(run, name) for run, _ in shaped]))
    edges = np.asarray(edges, dtype=np.float64)
    return Channel(name, edges, probs, counts, slots, days, body)
