"""SLO labels: the deadline's violation episodes, from the model's true miss probabilities.

For every series with a deadline (objective: ``1 − slo_objective`` of timed samples
within it, 99 % by default):

* ``p`` of a run = the expected share of its timed samples that miss the deadline, from
  ``REPLICAS`` fresh draws of that very run from the model (its medians, shared load,
  tail, cold start, failures): the truth, not the corpus's samples.
* the *day rate* = the centred 24-hour mean of ``p`` (edges: what there is).
* an *episode* = a span where the day rate is ≥ ``MARGIN`` × the objective's budget rate
  (2 % with a 1 % budget: the budget gone in 15 days), spans less than a day apart
  merged. It starts and ends where the miss rate crosses the budget rate for good: the
  lowest and highest points of the cumulative excess Σ (p − budget) from a day before
  the span to a day after (a level shift's change points). A span holding
  fewer than ``MIN_RUNS`` runs over the line is no episode: a run or two that miss
  wholesale are blips, not a rate.
* a *grey zone* = a span of ≥ ``GREY_MIN`` where the day rate is ≥ 1× the budget but no
  episode is: a ticket there is true but not asked for (an optional event). Its day rate
  leaves out runs that miss wholesale (``p`` ≥ ½): one broken run is no grey zone either.
* detection window = start → start + max(6 h, 1.5 × 72 h / burn), burn = the mean ``p``
  over the episode's first day ÷ the budget: a 1×-over-3-days ticket needs ~72 h / burn
  from a clean history (36 h at 3×, 11 h at 10×); a fast burn pages sooner.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np

from bench.detection.labels import Event
from bench.detection.model import MICROS, STATUS_DEADLINE, STATUS_OK, Floats, Series, draw
from bench.detection.scenario import Scenario

REPLICAS = 8
MARGIN = 2.0
MIN_RUNS = 4
MERGE = timedelta(days=1)
GREY_MIN = timedelta(hours=6)
KIND = "deadline_miss"


def true_miss_rates(series: Series, samples: int, spacing_s: float, seed: int) -> Floats:
    """Each run's expected share of timed samples over the deadline (REPLICAS draws)."""
    twin = _replicated(series, REPLICAS)
    drawn = draw(twin, samples, spacing_s, np.random.default_rng(seed))
    timed = (drawn.status == STATUS_OK) | (drawn.status == STATUS_DEADLINE)
    missed = (drawn.status == STATUS_DEADLINE).sum(axis=1).reshape(-1, REPLICAS).sum(axis=1)
    counted = timed.sum(axis=1).reshape(-1, REPLICAS).sum(axis=1)
    return np.asarray(missed / np.maximum(counted, 1), dtype=np.float64)


def _replicated(series: Series, k: int) -> Series:
    def rep(values: np.ndarray) -> np.ndarray:
        return np.repeat(values, k, axis=0)

    return replace(
        series,
        starts=rep(series.starts),
        medians=rep(series.medians),
        run_sigma=rep(series.run_sigma),
        sample_sigma=rep(series.sample_sigma),
        tail_p=rep(series.tail_p),
        tail_scale_ms=rep(series.tail_scale_ms),
        cold_p=rep(series.cold_p),
        cold_ms=rep(series.cold_ms),
        error_p=rep(series.error_p),
        slow=rep(series.slow),
    )


def day_rate(p: Floats, per_day: int) -> Floats:
    """The centred 24-hour mean of ``p``; at the edges, the mean of what there is."""
    sums = np.concatenate([[0.0], np.cumsum(p)])
    index = np.arange(len(p))
    low = np.clip(index - per_day // 2, 0, len(p))
    high = np.clip(index + per_day - per_day // 2, 0, len(p))
    return np.asarray((sums[high] - sums[low]) / (high - low), dtype=np.float64)


def spans(flags: np.ndarray) -> list[tuple[int, int]]:
    """Maximal runs of True as (first, last) indices."""
    edges = np.diff(np.concatenate([[0], flags.astype(np.int8), [0]]))
    return list(zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1) - 1, strict=True))


def _merged(found: list[tuple[int, int]], starts: np.ndarray) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for first, last in found:
        if out and starts[first] - starts[out[-1][1]] < MERGE.total_seconds() * MICROS:
            out[-1] = (out[-1][0], last)
        else:
            out.append((first, last))
    return out


def _change_points(p: Floats, line: float, first: int, last: int) -> tuple[int, int]:
    """Where a level shift over ``line`` starts and ends between two runs: the lowest and
    the highest point of the cumulative excess Σ (p − line)."""
    excess = np.concatenate([[0.0], np.cumsum(p[first : last + 1] - line)])
    begin = int(np.argmin(excess))
    end = begin + int(np.argmax(excess[begin:])) - 1
    return first + begin, first + max(begin, end)


def episodes(series: Series, p: Floats, interval_s: float, objective: float) -> list[Event]:
    """The series' SLO violation episodes (required) and grey zones (optional) as events."""
    per_day = int(86400 // interval_s)
    rate = day_rate(p, per_day)
    line = MARGIN * objective
    over = p >= line
    found: list[Event] = []
    taken = np.zeros(len(p), dtype=bool)
    for first, last in _merged(spans(rate >= line), series.starts):
        if over[first : last + 1].sum() < MIN_RUNS:
            continue
        low, high = max(0, first - per_day), min(len(p) - 1, last + per_day)
        begin, end = _change_points(p, objective, low, high)
        taken[min(first, begin) : max(last, end) + 1] = True
        found.append(_event(series, p, begin, end, objective, len(found), per_day))
    steady = day_rate(np.where(p >= 0.5, np.median(p), p), per_day)
    for first, last in spans((steady >= objective) & ~taken):
        inside = p[first : last + 1]
        if np.mean(np.where(inside >= 0.5, np.median(p), inside)) < objective:
            continue  # the centred mean leaning on a change that has not happened yet
        if _at(series, last) - _at(series, first) >= GREY_MIN:
            found.append(_grey(series, p, first, last, len(found)))
    return found


def _at(series: Series, index: int) -> datetime:
    return datetime.fromtimestamp(int(series.starts[index]) / MICROS, UTC).replace(microsecond=0)


def _event(
    series: Series, p: Floats, begin: int, end: int, objective: float, n: int, per_day: int
) -> Event:
    start = _at(series, begin) - timedelta(seconds=1)
    burn = float(np.mean(p[begin : begin + per_day])) / objective
    detect = max(timedelta(hours=6), timedelta(hours=1.5 * 72 / max(burn, 1.0)))
    return Event(
        id=f"slo-{series.target.split('.')[-1]}-{series.vantage}-{n}",
        group=f"slo-{series.target.split('.')[-1]}-{series.vantage}-{n}",
        kind=KIND,
        target=series.target,
        vantage=series.vantage,
        start=start,
        window=(start, start + detect),
        abrupt=False,
        accept=(KIND,),
        note=f"true miss rate {100 * float(np.mean(p[begin : end + 1])):.1f} % "
        f"(burn {burn:.1f}× on its first day) until {_at(series, end):%m-%d %H:%M}",
        slo=True,
        end=_at(series, end) + timedelta(seconds=1),  # the last run's first sample
    )


def _grey(series: Series, p: Floats, first: int, last: int, n: int) -> Event:
    start, end = _at(series, first), _at(series, last) + timedelta(seconds=1)
    return Event(
        id=f"slo-grey-{series.target.split('.')[-1]}-{series.vantage}-{n}",
        group=f"slo-grey-{series.target.split('.')[-1]}-{series.vantage}-{n}",
        kind=KIND,
        target=series.target,
        vantage=series.vantage,
        start=start,
        window=(start, end),
        abrupt=False,
        accept=(KIND,),
        note=f"true miss rate {100 * float(np.mean(p[first : last + 1])):.1f} %: over the "
        "budget, under the episode line",
        optional=True,
        slo=True,
        end=end,
    )


def label(scenario: Scenario, seed: int) -> dict[tuple[str, str], Floats]:
    """Add every deadline series' SLO events to the scenario; return the true rates."""
    params = scenario.params
    rates: dict[tuple[str, str], Floats] = {}
    for n, series in enumerate(scenario.series):
        if series.profile.deadline_ms is None:
            continue
        p = true_miss_rates(series, params.samples, params.spacing_s, seed * 1000 + n)
        rates[series.target, series.vantage] = p
        for event in episodes(series, p, params.interval_s, params.slo_objective):
            window = (event.window[0], min(event.window[1], scenario.end))
            scenario.events.append(replace(event, window=window))
    return rates
