"""Objectives beside the deadline: each an SLO over one per-sample value, and goodput.

A target may hold several objectives (``alerts.objectives`` in the targets file):
``ttft_ms: {p: 99, below: 500}`` (99 % of requests get their first token within 500 ms),
``availability: {target: 99.5}`` (99.5 % of requests answered without error). Each is an
SLO with the deadline's error budget and burn-rate alerts (app.analysis.slo, the
``*_slo`` detectors); **goodput** is the share of requests meeting every objective at once.

``METRICS`` is the registry "objective metric name → per-sample value": a metric measured
from a sample's status, total and marks plugs in by one entry. Those whose values this
version does not measure yet (``tpot_ms``, ``stall_ms``: per-chunk stamps) are listed with
``read=None`` and a reason, so a targets file naming them is refused with that reason.

Counting, per sample: ``availability`` — good when the status is ``ok``, bad for any other
status (errors, HTTP errors, timeouts, deadline misses, and any status added later).
A latency metric — good when its value is at most ``below``; bad above it; a sample cut
(deadline) before the value was reached has only a lower bound, the cut: bad when the cut
is at or past ``below``, else not counted (it might have made it). A sample without the
value at all (an error, a plain HTTP target's first token) is not counted.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

AVAILABILITY = "availability"
CUT = "deadline_exceeded"

# One value per timed sample (NaN: none), and whether it is only a lower bound (cut).
Values = NDArray[np.float64]
Cut = NDArray[np.bool_]
Reading = tuple[Values, Cut]
# status, total_ms, marks (ns from the request's start) → the value in ms, or None.
Reader = Callable[[str, float, Mapping[str, Any]], float | None]


def _end_to_end(_status: str, total_ms: float, _marks: Mapping[str, Any]) -> float | None:
    return total_ms


def _ttft(_status: str, _total_ms: float, marks: Mapping[str, Any]) -> float | None:
    """The first token of any kind (reasoning or answer); a whole answer's first byte."""
    found = [
        marks[key] for key in ("first_reasoning_token", "first_answer_token") if marks.get(key)
    ]
    return min(found) / 1e6 if found else None


@dataclass(frozen=True, slots=True)
class Metric:
    name: str
    summary: str  # one line for the docs
    read: Reader | None  # None: not measured by this version (``pending`` says why)
    tokens: bool = False  # needs a token stream: not for ``kind: http``
    pending: str = ""


METRICS: dict[str, Metric] = {
    metric.name: metric
    for metric in (
        Metric(AVAILABILITY, "share of requests with status ok (any other status fails)", None),
        Metric("end_to_end_ms", "end-to-end time; a cut sample: at least its cut", _end_to_end),
        Metric("ttft_ms", "time to the first token of any kind (reasoning or answer)", _ttft, True),
        Metric(
            "tpot_ms",
            "time per output token after the first",
            None,
            True,
            "its values need per-chunk token stamps, not recorded yet",
        ),
        Metric(
            "stall_ms",
            "the longest gap between two streamed chunks",
            None,
            True,
            "its values need per-chunk stamps, not recorded yet",
        ),
    )
}
LATENCY = tuple(
    name for name, metric in METRICS.items() if name != AVAILABILITY and metric.read is not None
)


@dataclass(frozen=True, slots=True)
class Objective:
    """``metric`` meets ``target`` (a share, 0–1): good samples over counted ones.
    ``below_ms``: a latency metric's bound (None for availability)."""

    metric: str
    target: float
    below_ms: float | None = None


def readings(
    timed: Sequence[tuple[str, float, Mapping[str, Any]]],
) -> dict[str, Reading]:
    """Each latency metric's value for each timed sample (status, total_ms, marks)."""
    cut = np.array([status == CUT for status, _, _ in timed], dtype=np.bool_)
    found: dict[str, Reading] = {}
    for name in LATENCY:
        read = METRICS[name].read
        assert read is not None
        values = [read(*sample) for sample in timed]
        as_array = np.array([np.nan if v is None else v for v in values], dtype=np.float64)
        # A cut sample's missing value lies past its cut; an end-to-end time is its cut.
        bound = np.array([s[1] for s in timed], dtype=np.float64)
        missing = np.isnan(as_array) & cut
        as_array[missing] = bound[missing]
        lower = cut & (missing | (name == "end_to_end_ms"))
        found[name] = (as_array, lower)
    return found


@dataclass(frozen=True, slots=True)
class Tally:
    """One run's samples against one objective: counted and bad (not meeting it)."""

    counted: int
    bad: int


def latency_tally(reading: Reading, below_ms: float) -> Tally:
    values, lower = reading
    known = ~np.isnan(values)
    exact = known & ~lower
    good = int(np.count_nonzero(exact & (values <= below_ms)))
    bad = int(np.count_nonzero(exact & (values > below_ms)))
    bad += int(np.count_nonzero(known & lower & (values >= below_ms)))
    return Tally(good + bad, bad)


def tally(objective: Objective, samples: int, ok: int, reads: Mapping[str, Reading]) -> Tally:
    """A run's samples (``samples`` in all, ``ok`` of them with status ok) against one
    objective; a metric the run has no reading of counts nothing."""
    if objective.metric == AVAILABILITY:
        return Tally(samples, samples - ok)
    reading = reads.get(objective.metric)
    if reading is None or objective.below_ms is None:
        return Tally(0, 0)
    return latency_tally(reading, objective.below_ms)


def goodput(
    objectives: Sequence[Objective], samples: int, reads: Mapping[str, Reading], cut: Cut
) -> Tally:
    """Of all ``samples``, those meeting every objective at once: status ok (a cut or
    failed sample never is) and each latency value known and within its bound. ``cut``:
    the timed samples that were cut, aligned with ``reads``."""
    good = ~cut
    for objective in objectives:
        if objective.metric == AVAILABILITY or objective.below_ms is None:
            continue
        reading = reads.get(objective.metric)
        if reading is None:
            good = np.zeros_like(good)
            break
        values, lower = reading
        good = good & ~lower & (values <= objective.below_ms)  # NaN compares False
    return Tally(samples, samples - int(np.count_nonzero(good)))


def share(counted: int, bad: int) -> float | None:
    """The good share; None when nothing was counted."""
    return None if counted == 0 else 1.0 - bad / counted
