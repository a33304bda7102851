"""Has a tail got heavier? A likelihood-ratio CUSUM over a family of heavier tails.

The counts of a run's ratios in the reference's bins (app/analysis/tail.py) are
multinomial under no change, with the reference's probabilities for the run's slot. What a
heavier tail looks like is not known beforehand, so the alternative is a small **family**
(app/analysis/tailfamily.py): the mass beyond one edge × 1.5 to 8, and tails heavier from
the p90 or p95 on, growing most at the p99.9. Each member's per-run log-likelihood ratio
is the run's bin counts times the member's per-bin log ratios for the run's slot.

Each member runs its own CUSUM and the detector reads the highest: a GLR over the family,
whose few members cost a fraction of a nat of threshold (they are strongly correlated) where
a fully estimated alternative would cost several. The smallest inflation, 1.5×, is what the
detector calls material; smaller tail changes never grow a CUSUM.

Samples of a run are not independent draws (the tail's scale follows the shared load), and
neither are neighbouring runs, so the counts are **overdispersed**; and the reference's
probabilities are estimates. Each member's increments are scored on the reference's own
days, each day against the others (``dispersion``), and divided by the factor that gives
their CUSUM the false-alarm rate of a true likelihood ratio's — so the threshold means the
same for a steady target and a wobbly one. One threshold, calibrated on the benchmark's
quiet corpora, decides: no gate after it (bench/detection/README.md has the numbers).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from app.analysis.runs import Array, RunData
from app.analysis.tail import (
    BINS,
    NAMES,
    QUANTILES,
    Channel,
    TailReference,
    bin_counts,
    channel_reference,
    channels,
    ratios,
    slot,
    smoothed,
    times,
)
from app.analysis.tailfamily import (
    MAX_MASS,
    MEMBER_EDGES,
    MEMBER_RATIOS,
    MEMBER_SHOWN,
    MEMBERS,
    weights,
)

__all__ = ["MAX_MASS", "MEMBER_EDGES", "MEMBER_RATIOS", "MEMBERS"]  # the family, read here
BLOCK = 8  # runs summed for the dispersion: two hours at 15 minutes
MAX_DISPERSION = 8.0
# Runs of an ordinary tail that bring a member's CUSUM from its threshold to half of it, at
# the most: a member that falls slower (a 1.5× rise of the p99.9, a few samples a week)
# would hold an alert for days after the tail is back, and would take as long to find its
# own change; it is left out of the family for this channel.
WIND_DOWN = 48
_NO_COUNTS = np.zeros((0, BINS))  # a built reference's Channel.counts (its calibration done)
_NO_RUNS = np.zeros(0, dtype=np.int64)


def tail_reference(runs: Sequence[RunData]) -> TailReference | None:
    """The channels of the newest run's kind (end-to-end, and the load phase), each with
    its members' dispersion; None when no run has a body to read."""
    if not runs:
        return None
    built: dict[str, Channel] = {}
    for name in channels(runs[-1]):
        channel = channel_reference(runs, name)
        if channel is not None:
            phi, fall = calibrate(channel)
            # The runs' counts, slots and days are the calibration's material only: kept,
            # they were most of a reference's memory (a fleet keeps one per series).
            built[name] = replace(
                channel, dispersion=phi, fall=fall, counts=_NO_COUNTS, slots=_NO_RUNS, days=_NO_RUNS
            )
    return TailReference(built, len(runs)) if built else None


def beyond(probs: Array) -> Array:
    """Each row's mass beyond each edge (… × edges): bins above edge j are j+1 …"""
    cumulative = np.cumsum(probs[..., ::-1], axis=-1)[..., ::-1]
    return np.asarray(cumulative[..., 1:], dtype=np.float64)


def member_llr(counts: Array, tails: Array) -> tuple[Array, Array]:
    """Each member's log-likelihood ratio for runs' ``counts`` (runs × BINS) whose slots'
    mass beyond each edge is ``tails`` (runs × edges), and its variance per run under no
    change (multinomial): both runs × ``MEMBERS``."""
    logs, p = weights(tails)
    llr = (logs * counts[:, None, :]).sum(axis=-1)  # as ``increments`` sums a run's
    n = counts.sum(axis=1, keepdims=True)
    mean = (p * logs).sum(axis=-1)
    variance = n * ((p * logs**2).sum(axis=-1) - mean**2)
    return np.asarray(llr, dtype=np.float64), np.asarray(variance, dtype=np.float64)


def dispersion(channel: Channel) -> Array:
    """``calibrate``'s dispersion alone."""
    return calibrate(channel)[0]


def calibrate(channel: Channel) -> tuple[Array, Array]:
    """Per member, what its increments are divided by so that its CUSUM runs as long
    between false alarms as a true log-likelihood ratio's would (≥ 1, ≤ ``MAX_DISPERSION``).

    Each reference day's runs are scored against probabilities from the *other* days
    (``smoothed``), as a new day is scored against the reference: the slots' estimation
    error and the day-to-day wobble are in it. A CUSUM of steps with mean −μ and long-run
    variance σ² per run crosses h about once in e^{h·2μ/σ²} runs; a log-likelihood ratio
    has 2μ = σ², so dividing by σ²/2μ puts the exponent back at 1. σ² is from the sums of
    ``BLOCK`` consecutive runs (neighbouring runs share a busy stretch); fewer than three
    blocks, or a mean that does not fall, say too little, and the most is assumed.

    Also returns how far each member's divided steps fall per run under no change: how fast
    its CUSUM winds down once a tail is back."""
    llr = _held_out(channel)
    blocks = len(llr) // BLOCK
    if blocks < 3:
        # As a multinomial would fall, at the most dispersion.
        probs = channel.probs[channel.slots]
        expected = channel.counts.sum(axis=1, keepdims=True) * probs
        fall = -member_llr(expected, beyond(probs))[0].mean(axis=0) / MAX_DISPERSION
        return np.full(MEMBERS, MAX_DISPERSION), np.asarray(fall, dtype=np.float64)
    sums = llr[: blocks * BLOCK].reshape(blocks, BLOCK, MEMBERS).sum(axis=1)
    variance = sums.var(axis=0, ddof=1) / BLOCK
    fall = -llr.mean(axis=0)
    ratio = np.where(fall > 0, variance / np.maximum(2 * fall, 1e-12), MAX_DISPERSION)
    phi = np.asarray(np.clip(ratio, 1.0, MAX_DISPERSION), dtype=np.float64)
    return phi, np.asarray(np.maximum(fall / phi, 0.0), dtype=np.float64)


def _held_out(channel: Channel) -> Array:
    """Each reference run's member LLRs against the other days' probabilities (runs ×
    members, in the reference's order); with one day only, against its own."""
    llr = np.empty((len(channel.counts), MEMBERS))
    days = np.unique(channel.days)
    for day in days:
        mine = channel.days == day
        others = ~mine if len(days) > 1 else mine
        probs = smoothed(channel.counts[others], channel.slots[others])
        # A day's ~96 runs fall in at most 24 slots: each slot's per-bin log ratios once
        # (row by row, so the same numbers as worked out for every run), then picked.
        used, at = np.unique(channel.slots[mine], return_inverse=True)
        logs = weights(beyond(probs[used]))[0]
        llr[mine] = (logs[at] * channel.counts[mine][:, None, :]).sum(axis=-1)
    return llr


def increments(run: RunData, channel: Channel) -> Array | None:
    """Each member's evidence from ``run`` (its LLR over its dispersion); None when the
    run has no body on the channel."""
    values = ratios(run, channel.name)
    if not len(values):
        return None
    llr = (_slot_logs(channel, slot(run.at)) * bin_counts(values, channel.edges)).sum(axis=-1)
    return np.asarray(llr / channel.dispersion, dtype=np.float64)


def _slot_logs(channel: Channel, at_slot: int) -> Array:
    """The members' per-bin log ratios (``MEMBERS`` × BINS) for the slot's probabilities,
    worked out once per reference and slot (every run of a day asks, and the slot's 48
    answers are all there are)."""
    logs = channel.terms.get(at_slot)
    if logs is None:
        logs = channel.terms[at_slot] = weights(beyond(channel.probs[at_slot])[None, :])[0][0]
        logs.flags.writeable = False
    return logs


def cusum(scores: Sequence[float], steps: Array, cap: Array | float) -> list[float]:
    """Each member's CUSUM after one step: max(0, score + step), at most ``cap``."""
    found: list[float] = np.minimum(np.maximum(np.asarray(scores) + steps, 0.0), cap).tolist()
    return found


def caps(channel: Channel, threshold: float) -> Array:
    """Each member's ceiling: the threshold (a long episode must not take days of ordinary
    runs to wind down); 0 for a member that falls too slowly to wind down from it to half
    of it within ``WIND_DOWN`` runs."""
    found = channel.ceilings.get(threshold)
    if found is None:  # the same for every run against this reference: worked out once
        quick = WIND_DOWN * channel.fall >= threshold / 2
        found = channel.ceilings[threshold] = np.where(quick, threshold, 0.0).astype(np.float64)
        found.flags.writeable = False  # shared by every run's step
    return found


@dataclass(frozen=True, slots=True)
class Shape:
    """The member whose CUSUM is highest, put in words: its edge's name (``p99``), how the
    recent runs' share beyond it compares with the reference's, and the ratio at that
    quantile now against the reference's edge."""

    quantile: str
    inflation: float  # the member's
    recent_share: float  # of the recent samples beyond the reference's edge
    reference_share: float  # the reference's, at the recent runs' slots
    recent_ratio: float  # the recent samples' quantile of the ratio
    reference_ratio: float  # the reference's (the edge)
    samples: int
    recent_ms: float  # the recent samples' quantile itself
    reference_ms: float  # the edge at the reference's median


def shape(best: int, recent: Sequence[RunData], channel: Channel) -> Shape | None:
    """Member ``best`` on ``recent``'s ratios, at the quantile it is told at (an inflation's
    edge; a heavier tail's p99); None when they have none."""
    parts = [(run, ratios(run, channel.name)) for run in recent]
    parts = [(run, values) for run, values in parts if len(values)]
    if not parts:
        return None
    edge = int(MEMBER_SHOWN[best])
    values = np.concatenate([values for _, values in parts])
    weights = np.array([len(values) for _, values in parts], dtype=np.float64)
    tails = beyond(channel.probs[[slot(run.at) for run, _ in parts]])[:, edge]
    q = float(np.quantile(values, QUANTILES[edge]))
    own = np.concatenate([times(run, channel.name) for run, _ in parts])
    return Shape(
        quantile=NAMES[edge],
        inflation=float(MEMBER_RATIOS[best]),
        recent_share=float(np.mean(values > channel.edges[edge])),
        reference_share=float(np.average(tails, weights=weights)),
        recent_ratio=q,
        reference_ratio=float(channel.edges[edge]),
        samples=len(values),
        recent_ms=float(np.quantile(own, QUANTILES[edge])),
        reference_ms=float(channel.edges[edge]) * channel.body_ms,
    )
