"""Bucketed series maths, pure numpy: every bucket of a chart computed at once.

A bucket's quantile is the quantile of all its samples (merged sketches, within 1 %, see
app.analysis.sketch), never a mean of run quantiles. Shares and the dominant phase follow
app.analysis.summary, for every bucket at once. An empty bucket holds None.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

import numpy as np
from numpy.typing import NDArray

from app.analysis.digest import QUANTILES, Digest
from app.analysis.runs import phase_order
from app.analysis.sketch import Sketch, row_quantiles, stack

STEPS = (60, 300, 900, 3600, 21600, 86400)  # 1 min, 5 min, 15 min, 1 h, 6 h, 1 day
TARGET_BUCKETS = 500
DAY = 86400

Series = list[float | None]


def pick_bucket(start: datetime, end: datetime, interval_s: float = 0.0) -> int:
    """The finest step of ``STEPS`` that cuts [start, end) into at most 500 buckets and is
    no finer than the target's ``interval_s``.

    A bucket finer than the interval puts each run between empty buckets: a chart of them
    is a row of isolated points, and a line through them is no line at all. Beyond 500
    days (or an interval over a day), whole days.
    """
    span = max((end - start).total_seconds(), 1.0)
    for step in STEPS:
        if step >= interval_s and math.ceil(span / step) <= TARGET_BUCKETS:
            return step
    return DAY * max(math.ceil(span / DAY / TARGET_BUCKETS), math.ceil(interval_s / DAY))


def window_json(target: str, vantage: str | None, start: datetime, end: datetime) -> dict[str, Any]:
    """What every answer about a window of one target begins with."""
    return {"target": target, "vantage": vantage, "from": start.isoformat(), "to": end.isoformat()}


def rounded(values: Series, digits: int) -> Series:
    return [None if v is None else round(v, digits) for v in values]


def digest_columns(groups: list[list[Digest]]) -> dict[str, Any]:
    """Every series of a chart from each bucket's digests, each for all buckets at once."""
    phases = list(phase_order(name for group in groups for d in group for name in d.phases))
    per_phase = {
        name: quantile_series([[_phase(d, name) for d in g] for g in groups]) for name in phases
    }
    # Shaped explicitly: with no phase at all (only failed runs), -1 cannot be inferred.
    medians = np.array([per_phase[n]["p50"] for n in phases]).reshape(len(phases), len(groups))
    shares, dominant = shares_and_dominant(medians, phases, len(groups))
    return {
        "phases": phases,
        "runs": [sum(d.runs for d in group) for group in groups],
        "samples": [sum(d.n for d in group) for group in groups],
        "deadline_misses": [sum(d.deadline_exceeded for d in group) for group in groups],
        "errors": [sum(d.errors for d in group) for group in groups],
        "total": _as_series(quantile_series([[d.total for d in g] for g in groups])),
        "phase_quantiles": {name: _as_series(q) for name, q in per_phase.items()},
        "shares": {name: listed(shares[i]) for i, name in enumerate(phases)},
        "dominant": dominant,
    }


def summary_columns(count: int, summaries: list[tuple[int, dict[str, Any]]]) -> dict[str, Any]:
    """The series from each bucket's stored quantiles (bucket index, a rollup's summary)."""
    phases = list(phase_order(name for _, data in summaries for name in data["phases"]))
    counts = {name: [0] * count for name in ("runs", "n", "deadline_exceeded", "errors")}
    total = np.full((len(QUANTILES), count), np.nan)
    per_phase = np.full((len(phases), len(QUANTILES), count), np.nan)
    for i, data in summaries:
        for name, column in counts.items():
            column[i] = data[name]
        total[:, i] = [np.nan if v is None else v for v in data["total"]]
        if data["n"]:
            # As summarize: a timed sample without a phase counts 0 ms in it.
            per_phase[:, :, i] = [data["phases"].get(name, [0.0] * 4) for name in phases]
    shares, dominant = shares_and_dominant(per_phase[:, 0, :], phases, count)
    return {
        "phases": phases,
        "runs": counts["runs"],
        "samples": counts["n"],
        "deadline_misses": counts["deadline_exceeded"],
        "errors": counts["errors"],
        "total": {q: listed(total[j]) for j, q in enumerate(QUANTILES)},
        "phase_quantiles": {
            name: {q: listed(per_phase[k, j]) for j, q in enumerate(QUANTILES)}
            for k, name in enumerate(phases)
        },
        "shares": {name: listed(shares[k]) for k, name in enumerate(phases)},
        "dominant": dominant,
    }


def _phase(digest: Digest, name: str) -> Sketch:
    found = digest.phases.get(name)
    return found if found is not None else Sketch.zeros(digest.n)


def quantile_series(groups: list[list[Sketch]]) -> dict[str, NDArray[np.float64]]:
    """Each of ``QUANTILES`` of every group of sketches merged; NaN for an empty group."""
    low, matrix = stack(groups)
    return row_quantiles(low, matrix, QUANTILES)


def shares_and_dominant(
    medians: NDArray[np.float64], phases: list[str], buckets: int
) -> tuple[NDArray[np.float64], list[str | None]]:
    """As summary.shares and summary.dominant_phase, for every bucket at once."""
    if not phases:
        return np.zeros((0, buckets)), [None] * buckets
    whole = medians.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        shares = np.where(whole > 0, medians / np.where(whole > 0, whole, 1.0), 0.0)
    shares = np.where(np.isnan(whole), np.nan, shares)
    best = np.argmax(np.nan_to_num(shares, nan=-1.0), axis=0)
    dominant = [
        phases[int(best[i])] if not np.isnan(whole[i]) and shares[best[i], i] > 0 else None
        for i in range(buckets)
    ]
    return shares, dominant


def _as_series(quantiles: dict[str, NDArray[np.float64]]) -> dict[str, Series]:
    return {name: listed(values) for name, values in quantiles.items()}


def listed(values: NDArray[np.float64]) -> Series:
    return [None if math.isnan(v) else float(v) for v in values.tolist()]
