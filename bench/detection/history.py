"""Scenarios that real histories showed and the first corpus lacked.

A deadline missed steadily a few percent of the time, a tail blow-up that breaks the
SLO and stays, runs slow together, quiet weekends, a probe host that fails and goes
dark, reasoning switched back on, a shared queue that grows, a steady very heavy tail.
The SLO episodes of every deadline target are labelled from the model
(bench/detection/slo.py); the builders here label the other events.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np

from bench.detection import slo
from bench.detection.model import MICROS, Load, Series
from bench.detection.scenario import (
    ABRUPT,
    CHAT,
    DAY,
    REASONING,
    SLOWER,
    Context,
    after,
    drop_runs,
    heavier_tail,
    weekend,
)

NETWORK_LED = replace(
    CHAT,
    rtt_ms={"seoul-1": 150.0, "frankfurt-1": 260.0},
    server_ms={"queue": 70.0, "prefill": 30.0, "generation": 110.0, "transfer": 3.0},
)


def steady_slo_violation(ctx: Context) -> None:
    """Generation scaled per vantage until the true miss rate is 3-5 %, from the start."""
    p = ctx.params
    base = replace(REASONING, deadline_ms=p.deadline_ms)
    for n in range(p.replicas):
        series = ctx.target(f"s{n}", ctx.jittered(base), "misses its deadline 3-5 %")
        for s in series:
            _calibrate(s, float(ctx.rng.uniform(0.03, 0.05)), ctx)


def _calibrate(series: Series, rate: float, ctx: Context) -> None:
    """Bisect a factor on generation until the mean true miss rate is ``rate`` (judged
    on every third run)."""
    thin = replace(series)
    drop_runs(thin, np.arange(len(series.starts)) % 3 != 0)
    gen, low, high = series.column("generation"), 0.8, 2.5
    original = thin.medians[:, gen].copy()
    for _ in range(9):
        middle = (low + high) / 2
        thin.medians[:, gen] = original * middle
        found = slo.true_miss_rates(thin, ctx.params.samples, ctx.params.spacing_s, 1).mean()
        low, high = (middle, high) if found < rate else (low, middle)
    series.medians[:, gen] *= (low + high) / 2


def persistent_violation_after_tail_change(ctx: Context) -> None:
    p = ctx.params
    base = replace(REASONING, deadline_ms=p.deadline_ms)
    for n in range(p.replicas):
        at = ctx.at_fraction(0.4, 0.6)
        series = ctx.target(f"v{n}", ctx.jittered(base), "a tail that breaks the SLO")
        heavier_tail(series, at, p.slo_tail_share, p.slo_tail_scale)
        ctx.event(
            id=f"slotail-v{n}",
            kind="tail_shift",
            target=series[0].target,
            vantage=None,
            start=at,
            window=(at, at + DAY),
            abrupt=True,
            accept=("tail_shift",),
            tolerate=(*ABRUPT, *SLOWER),
            note=f"{p.slo_tail_share:.0%} of samples get a queue tail × {p.slo_tail_scale}",
        )


def correlated_runs(ctx: Context) -> None:
    """Whole runs slow together: strong shared load, most of the queue's noise per run."""
    strong = Load(sigma=0.45, rho=0.9, day_sigma=0.2)
    for n in range(ctx.params.replicas):
        profile = ctx.jittered(CHAT if n % 2 == 0 else REASONING)
        for s in ctx.target(f"c{n}", profile, "runs slow together", load=strong):
            queue = s.column("queue")
            s.run_sigma[:, queue], s.sample_sigma[:, queue] = 0.45, 0.2
            s.run_sigma[:, s.column("generation")] = 0.15


def quiet_weekends(ctx: Context) -> None:
    """Weekends with a third of the load and a quarter of the tail."""
    for n in range(ctx.params.replicas):
        profile = replace(CHAT if n % 2 == 0 else REASONING, weekend_factor=0.35, tail_p=0.03)
        for s in ctx.target(f"w{n}", ctx.jittered(profile), "quiet weekends"):
            s.tail_p[weekend(s)] = 0.0075


def probing_gap(ctx: Context) -> None:
    """At one vantage the probe's runs fail for an hour, then none for hours, then back."""
    p = ctx.params
    for n in range(p.replicas):
        at = ctx.at_fraction(0.4, 0.6)
        series = ctx.target(f"g{n}", ctx.jittered(CHAT), f"{p.gap_hours:g} h without runs")
        hit = series[int(ctx.rng.integers(len(series)))]
        failing = after(hit, at - timedelta(hours=1)) & ~after(hit, at)
        hit.error_p[failing] = ctx.rng.uniform(0.8, 1.0, int(failing.sum()))
        back = at + timedelta(hours=p.gap_hours)
        drop_runs(hit, after(hit, at) & ~after(hit, back))
        first = int(np.flatnonzero(failing)[0]) if failing.any() else 0
        begin = datetime.fromtimestamp(int(hit.starts[first]) // MICROS, UTC)
        ctx.event(
            id=f"gap-g{n}",
            kind="probe_failing",
            target=hit.target,
            vantage=hit.vantage,
            start=begin,
            window=(begin, back + timedelta(hours=1)),
            abrupt=False,
            accept=("probe_failing",),
            optional=True,
            note=f"{hit.vantage}: failing from {begin:%m-%d %H:%M}, no runs until {back:%H:%M}",
        )


def generation_regrowth(ctx: Context) -> None:
    """Reasoning switched back on: generation × 1 / collapse_factor, past the network."""
    p = ctx.params
    collapsed = replace(
        REASONING,
        server_ms={**REASONING.server_ms, "generation": 450.0 * p.collapse_factor},
    )
    for n in range(p.replicas):
        at = ctx.at_fraction(0.4, 0.6)
        series = ctx.target(f"r{n}", ctx.jittered(collapsed), "reasoning switched back on")
        for s in series:
            s.medians[after(s, at), s.column("generation")] /= p.collapse_factor
        _shift(ctx, series, at, f"regrow-r{n}", f"generation × {1 / p.collapse_factor:.1f}")


def queue_growth(ctx: Context) -> None:
    """A shared queue that grows past the network (a new tenant on the cluster)."""
    p = ctx.params
    for n in range(p.replicas):
        at = ctx.at_fraction(0.4, 0.6)
        series = ctx.target(f"q{n}", ctx.jittered(NETWORK_LED), "the queue grows")
        for s in series:
            s.medians[after(s, at), s.column("queue")] *= p.queue_growth
            s.tail_scale_ms[after(s, at)] *= p.queue_growth
        _shift(ctx, series, at, f"queue-q{n}", f"queue × {p.queue_growth:g}")


def _shift(ctx: Context, series: list[Series], at: datetime, name: str, note: str) -> None:
    ctx.event(
        id=name,
        kind="dominant_shift",
        target=series[0].target,
        vantage=None,
        start=at,
        window=(at, at + DAY),
        abrupt=True,
        accept=("dominant_shift",),
        tolerate=(*ABRUPT, "tail_shift", *SLOWER),  # the whole distribution moved: true too
        note=note,
    )


def heavy_tail_steady(ctx: Context) -> None:
    """6 % of samples with a Lomax(1.5) queue tail of 4 × the queue median, all along."""
    heavy = replace(CHAT, tail_p=0.06, tail_scale=4.0, outlier_p=0.01)
    for n in range(ctx.params.replicas):
        ctx.target(f"h{n}", ctx.jittered(heavy), "a steady, very heavy tail")
