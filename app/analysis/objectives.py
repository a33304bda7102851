"""Objectives beside the deadline: each an SLO over one per-sample value, and goodput.

A target may hold several objectives (``alerts.objectives`` in the targets file):
``ttft_ms: {p: 99, below: 500}`` (99 % of requests get their first token within 500 ms),
``availability: {target: 99.5}`` (99.5 % of requests answered without error). Each is an
SLO with the deadline's error budget and burn-rate alerts (app.analysis.slo, the
``*_slo`` detectors); **goodput** is the share of requests meeting every objective at once.

``METRICS`` is the registry "objective metric name → per-sample value": a metric measured
from a sample's status, total, marks and details plugs in by one entry (``tpot_ms`` and
``stall_ms`` read the streamed answer's rhythm, app.analysis.llmmetrics). One whose values
a version does not measure is listed with ``read=None`` and a reason, so a targets file
naming it is refused with that reason.

Counting, per sample: ``availability`` — good when the status is ``ok``, bad for any other
status (errors, HTTP errors, timeouts, deadline misses, and any status added later).
A latency metric — good when its value is at most ``below``; bad above it; a sample cut
(deadline) before the value was reached has only a lower bound, the cut: bad when the cut
is at or past ``below``, else not counted (it might have made it) — for the times counted
from the request's start (``from_start``); a cut sample without a TPOT or a stall is not
counted. A sample without the value at all (an error, a plain HTTP target's first token)
is not counted.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from app.analysis.llmmetrics import llm_value
from app.analysis.summary import Timed

AVAILABILITY = "availability"
CUT = "deadline_exceeded"

# One value per timed sample (NaN: none), and whether it is only a lower bound (cut).
Values = NDArray[np.float64]
Cut = NDArray[np.bool_]
Reading = tuple[Values, Cut]
# status, total_ms, marks (ns from the request's start), details → the value in ms, or None.
Reader = Callable[[str, float, Mapping[str, Any], Mapping[str, Any]], float | None]
Seen = tuple[str, float, Mapping[str, Any], Mapping[str, Any]]  # a Reader's arguments


def _end_to_end(_status: str, total_ms: float, *_: Mapping[str, Any]) -> float | None:
    return total_ms


def _streamed(name: str) -> Reader:
    def read(
        status: str, total_ms: float, marks: Mapping[str, Any], details: Mapping[str, Any]
    ) -> float | None:
        return llm_value(name, status, total_ms, marks, details)

    return read


def _ttft(_status: str, _total_ms: float, marks: Mapping[str, Any], *_: Any) -> float | None:
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
    # Counted from the request's start: a cut sample's missing value lies past its cut.
    from_start: bool = True


METRICS: dict[str, Metric] = {
    metric.name: metric
    for metric in (
        Metric(AVAILABILITY, "share of requests with status ok (any other status fails)", None),
        Metric("end_to_end_ms", "end-to-end time; a cut sample: at least its cut", _end_to_end),
        Metric("ttft_ms", "time to the first token of any kind (reasoning or answer)", _ttft, True),
        Metric(
            "tpot_ms",
            "time per output token after the first (a streamed answer's)",
            _streamed("tpot_ms"),
            True,
            from_start=False,
        ),
        Metric(
            "stall_ms",
            "the longest wait for a token while the answer streamed",
            _streamed("stall_ms"),
            True,
            from_start=False,
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


def readings(timed: Sequence[Seen]) -> dict[str, Reading]:
    """Each latency metric's value for each timed sample (status, total_ms, marks, details)."""
    cut = np.array([seen[0] == CUT for seen in timed], dtype=np.bool_)
    found: dict[str, Reading] = {}
    for name in LATENCY:
        read = METRICS[name].read
        assert read is not None
        values = [read(*sample) for sample in timed]
        as_array = np.array([np.nan if v is None else v for v in values], dtype=np.float64)
        # A cut sample's missing value lies past its cut; an end-to-end time is its cut.
        bound = np.array([s[1] for s in timed], dtype=np.float64)
        missing = np.isnan(as_array) & cut & METRICS[name].from_start
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


def seen_of(sample: Timed) -> Seen:
    """What an objective reads of a sample: a stored record's status, total, marks and
    details, or a probe sample's as it would store them."""
    return sample.status, sample.total_ms, _marks_of(sample), _details_of(sample)


def _details_of(sample: Timed) -> Mapping[str, Any]:
    """A stored record's details (the streamed rhythm, the token counts), or a probe
    sample's as it would store them."""
    details = getattr(sample, "details", None)
    if isinstance(details, Mapping):
        return details
    as_json = getattr(sample, "to_json", None)
    found: Mapping[str, Any] = as_json() if callable(as_json) else {}
    return found


def _marks_of(sample: Timed) -> Mapping[str, Any]:
    """A stored record's marks (a dict), a probe sample's (``Marks``), or none."""
    marks = getattr(sample, "marks", None)
    if marks is None or isinstance(marks, Mapping):
        return marks or {}
    as_dict: Mapping[str, Any] = marks.as_dict()
    return as_dict
