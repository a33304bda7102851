"""Slowdowns the leader does not show: a level shift of everything or of one phase, and
degradations spread over weeks.

A uniform slowdown (every phase × 1.25) and a slowdown of one phase that does not lead
(prefill or transfer × 2) move end-to-end by 15-25 % with the leader unchanged: no mix
changes, so only a level-shift alert tells of them. The slow ones grow over three weeks
after a steady week (the queue's tail share 2 % → 12 %, or generation × 1.6 without
taking the lead): a reference that rolls with the data absorbs them.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

import numpy as np

from bench.detection.model import MICROS, Floats, Series
from bench.detection.scenario import ABRUPT, CHAT, DAY, REASONING, Context, after

LEVEL = ("level_shift",)
DRIFT = "baseline_drift"

# Long prompts: prefill is second to generation but large enough to matter (~17 %).
LONG_PROMPT = replace(
    CHAT,
    rtt_ms={"seoul-1": 60.0, "frankfurt-1": 150.0},
    server_ms={"queue": 90.0, "prefill": 120.0, "generation": 420.0, "transfer": 3.0},
)
# Large answers: the body's transfer is ~14 % of the time, generation leads.
BIG_ANSWER = replace(
    CHAT,
    rtt_ms={"seoul-1": 60.0, "frankfurt-1": 150.0},
    server_ms={"queue": 100.0, "prefill": 40.0, "generation": 380.0, "transfer": 110.0},
)
# Queue-led: generation × 1.6 stays well under the queue's daily trough.
QUEUE_LED = replace(
    CHAT,
    rtt_ms={"seoul-1": 45.0, "frankfurt-1": 120.0},
    server_ms={"queue": 520.0, "prefill": 30.0, "generation": 140.0, "transfer": 3.0},
)


def uniform_slowdown(ctx: Context) -> None:
    """Every phase × ``slowdown`` at every vantage (the tail's scale with the queue)."""
    p = ctx.params
    profiles = (CHAT, REASONING)
    for n in range(p.replicas):
        at = ctx.at_fraction(0.4, 0.6)
        profile = ctx.jittered(profiles[n % len(profiles)])
        series = ctx.target(f"u{n}", profile, "everything slows together")
        for s in series:
            later = after(s, at)
            s.medians[later] *= p.slowdown
            s.tail_scale_ms[later] *= p.slowdown
        ctx.event(
            id=f"uniform-u{n}",
            kind="level_shift",
            target=series[0].target,
            vantage=None,
            start=at,
            window=(at, at + DAY),
            abrupt=True,
            accept=LEVEL,
            tolerate=(*ABRUPT, "tail_shift", DRIFT),  # the tail moves with the queue
            note=f"every phase × {p.slowdown:g}, leader unchanged",
        )


def phase_slowdown(ctx: Context) -> None:
    """One phase that does not lead (prefill, or transfer) × ``phase_slowdown``."""
    p = ctx.params
    variants = (("prefill", LONG_PROMPT), ("transfer", BIG_ANSWER))
    for n in range(p.replicas):
        phase, base = variants[n % len(variants)]
        at = ctx.at_fraction(0.4, 0.6)
        series = ctx.target(f"s{n}", ctx.jittered(base), f"{phase} slows, generation leads")
        for s in series:
            s.medians[after(s, at), s.column(phase)] *= p.phase_slowdown
        ctx.event(
            id=f"phase-s{n}",
            kind="level_shift",
            target=series[0].target,
            vantage=None,
            start=at,
            window=(at, at + DAY),
            abrupt=True,
            accept=LEVEL,
            tolerate=(*ABRUPT, DRIFT),
            note=f"{phase} × {p.phase_slowdown:g}, generation still leads",
        )


def ramp(series: Series, begin: datetime, span: timedelta) -> Floats:
    """Per run: 0 before ``begin``, rising linearly to 1 over ``span``, then 1."""
    start = begin.timestamp() * MICROS
    progress = (series.starts - start) / (span.total_seconds() * MICROS)
    return np.asarray(np.clip(progress, 0.0, 1.0), dtype=np.float64)


def _drift_start(ctx: Context) -> tuple[datetime, timedelta]:
    """A week steady (plus up to a day), then ``drift_days`` of drift."""
    p = ctx.params
    days = p.degradation_days
    begin = ctx.at_fraction(p.steady_days / days, (p.steady_days + 1) / days)
    return begin, timedelta(days=p.drift_days)


def slow_queue_tail_degradation(ctx: Context) -> None:
    p = ctx.params
    low, high = p.tail_drift
    for n in range(p.replicas):
        begin, span = _drift_start(ctx)
        profile = replace(ctx.jittered(CHAT), tail_p=low)
        series = ctx.target(f"t{n}", profile, "the queue's tail thickens over weeks")
        for s in series:
            s.tail_p[:] = low + (high - low) * ramp(s, begin, span)
        _drift_event(
            ctx,
            series,
            begin,
            f"slowtail-t{n}",
            ("baseline_drift", "tail_shift", "level_shift"),
            f"queue tail share {low:.0%} → {high:.0%} over {span / DAY:g} days",
        )


def slow_generation_growth(ctx: Context) -> None:
    p = ctx.params
    for n in range(p.replicas):
        begin, span = _drift_start(ctx)
        series = ctx.target(f"g{n}", ctx.jittered(QUEUE_LED), "generation grows over weeks")
        for s in series:
            s.medians[:, s.column("generation")] *= 1 + (p.growth_to - 1) * ramp(s, begin, span)
        _drift_event(
            ctx,
            series,
            begin,
            f"slowgen-g{n}",
            ("baseline_drift", "level_shift", "dominant_shift"),
            f"generation × {p.growth_to:g} over {span / DAY:g} days, the queue still leads",
        )


def _drift_event(
    ctx: Context,
    series: list[Series],
    begin: datetime,
    name: str,
    accept: tuple[str, ...],
    note: str,
) -> None:
    ctx.event(
        id=name,
        kind="baseline_drift",
        target=series[0].target,
        vantage=None,
        start=begin,
        window=(begin, ctx.scenario.end),
        abrupt=False,
        accept=accept,
        tolerate=ABRUPT,  # the mix moves along
        note=f"from {begin:%m-%d %H:%M}: {note}",
    )
