"""The scenarios: steady-state profiles, what changes in each, and the labels it earns.

Every target has a daily load cycle on its queue (peak ± 30 %), lighter weekends, a
small right tail, rare cold starts, outliers and failures (bench/detection/model.py).
Each steady-state median is drawn ±10 % around the profile's, and each change starts at
a random run boundary, so a new seed gives a new corpus with the same phenomena.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np

from bench.detection.model import MICROS, Profile, Series
from bench.detection.scenario import (
    ABRUPT,
    CHAT,
    DAY,
    REASONING,
    SLOWER,
    Context,
    after,
    day_mean,
    heavier_tail,
    hours,
    leader_change,
)


def abrupt_generation_collapse(ctx: Context) -> None:
    for n in range(ctx.params.replicas):
        at = ctx.at_fraction(0.4, 0.6)
        series = ctx.target(f"r{n}", ctx.jittered(REASONING), "reasoning model")
        for s in series:
            s.medians[after(s, at), s.column("generation")] *= ctx.params.collapse_factor
        was, now = leader_change(series[0], at, ctx.params.interval_s)
        ctx.event(
            id=f"collapse-r{n}",
            kind="dominant_shift",
            target=series[0].target,
            vantage=None,
            start=at,
            window=(at, at + DAY),
            abrupt=True,
            accept=("dominant_shift",),
            tolerate=ABRUPT,
            note=f"reasoning off: generation × {ctx.params.collapse_factor} ({was} → {now})",
        )


def generation_drift(ctx: Context) -> None:
    base = replace(
        REASONING,
        rtt_ms={"seoul-1": 180.0, "frankfurt-1": 240.0},
        server_ms={"queue": 90.0, "prefill": 40.0, "generation": 520.0, "transfer": 3.0},
    )
    span = 0.5 * ctx.params.days * DAY
    for n in range(ctx.params.replicas):
        begin = ctx.at_fraction(0.25, 0.35)
        series = ctx.target(f"d{n}", ctx.jittered(base), "generation shrinks over days")
        crossings = [_drift(ctx, s, begin, span) for s in series]
        first, last = min(crossings), max(crossings)
        ctx.event(
            id=f"drift-d{n}",
            kind="dominant_shift",
            target=series[0].target,
            vantage=None,
            start=first,
            window=(first - DAY, last + 2 * DAY),
            abrupt=False,
            accept=("dominant_shift",),
            tolerate=ABRUPT,
            tolerate_window=(begin, last + 2 * DAY),
            note=f"generation × {ctx.params.drift_to} from {begin:%m-%d %H:%M} over "
            f"{span / DAY:g} days; crosses the runner-up {first:%m-%d %H:%M}..{last:%m-%d %H:%M}",
        )


def _drift(ctx: Context, series: Series, begin: datetime, span: timedelta) -> datetime:
    """Scale generation linearly from 1 to ``drift_to``; return when it loses the lead."""
    start = begin.timestamp() * MICROS
    progress = np.clip((series.starts - start) / (span.total_seconds() * MICROS), 0, 1)
    gen = series.column("generation")
    series.medians[:, gen] *= 1 - (1 - ctx.params.drift_to) * progress
    others = np.delete(series.medians, gen, axis=1)
    runner_up = np.max(
        np.stack([day_mean(c, ctx.params.interval_s) for c in others.T], axis=1), axis=1
    )
    lost = np.flatnonzero(series.medians[:, gen] < runner_up)
    index = int(lost[0]) if len(lost) else len(series.starts) - 1
    return datetime.fromtimestamp(series.starts[index] / MICROS, UTC)


def queue_tail_blowup(ctx: Context) -> None:
    p = ctx.params
    for n in range(p.replicas):
        at = ctx.at_fraction(0.4, 0.6)
        series = ctx.target(f"t{n}", ctx.jittered(CHAT), "chat model")
        heavier_tail(series, at, p.tail_share, p.tail_scale)
        ctx.event(
            id=f"tail-t{n}",
            kind="tail_shift",
            target=series[0].target,
            vantage=None,
            start=at,
            window=(at, at + DAY),
            abrupt=True,
            accept=("tail_shift",),
            tolerate=SLOWER,
            note=f"{p.tail_share:.0%} of samples get a Lomax(1.5) queue tail × {p.tail_scale}",
        )


def daily_busy_hours(ctx: Context) -> None:
    p = ctx.params
    # Busy at the daily peak, or (every other target) in the Asian morning.
    variants = ((REASONING, 14), (replace(CHAT, server_ms={**CHAT.server_ms, "queue": 80.0}), 1))
    for n in range(p.replicas):
        profile, busy_from = variants[n % len(variants)]
        series = ctx.target(f"b{n}", ctx.jittered(profile), f"busy {busy_from}:00 UTC")
        for s in series:
            busy = (hours(s) - busy_from) % 24 < p.busy_hours
            s.medians[busy, s.column("queue")] *= p.busy_factor
            s.tail_p[busy] = 0.10
            s.tail_scale_ms[busy] *= 2 * p.busy_factor


def near_tie(ctx: Context) -> None:
    ties: list[tuple[str, str, Profile]] = [
        # network ≈ generation at seoul-1 (frankfurt-1: network leads clearly)
        (
            "network",
            "generation",
            replace(
                CHAT,
                rtt_ms={"seoul-1": 150.0, "frankfurt-1": 260.0},
                server_ms={"queue": 60.0, "prefill": 30.0, "generation": 150.0, "transfer": 3.0},
            ),
        ),
        # prefill ≈ generation: a long prompt, a short answer (both vantages)
        (
            "prefill",
            "generation",
            replace(
                CHAT,
                rtt_ms={"seoul-1": 45.0, "frankfurt-1": 120.0},
                server_ms={"queue": 70.0, "prefill": 220.0, "generation": 220.0, "transfer": 3.0},
            ),
        ),
    ]
    for n in range(ctx.params.replicas):
        first, second, profile = ties[n % len(ties)]
        profile = ctx.jittered(profile)
        gap = ctx.rng.uniform(*ctx.params.tie_gap) * ctx.rng.choice([-1.0, 1.0])
        reference = profile.medians("seoul-1")[first]
        tied = {**profile.server_ms, second: reference * (1 + gap)}
        ctx.target(f"n{n}", replace(profile, server_ms=tied), f"{first} ≈ {second} at seoul-1")


def one_vantage_route(ctx: Context) -> None:
    base = replace(
        CHAT,
        rtt_ms={"seoul-1": 60.0, "frankfurt-1": 90.0},
        server_ms={"queue": 90.0, "prefill": 40.0, "generation": 170.0, "transfer": 3.0},
    )
    for n in range(ctx.params.replicas):
        at = ctx.at_fraction(0.4, 0.6)
        series = ctx.target(f"p{n}", ctx.jittered(base), "one vantage's route lengthens")
        hit = series[int(ctx.rng.integers(len(series)))]
        hit.medians[after(hit, at), hit.column("network")] += ctx.params.route_extra_ms
        was, now = leader_change(hit, at, ctx.params.interval_s)
        ctx.event(
            id=f"route-p{n}",
            kind="dominant_shift",
            target=hit.target,
            vantage=hit.vantage,
            start=at,
            window=(at, at + DAY),
            abrupt=True,
            accept=("*",),
            note=f"{hit.vantage}: network + {ctx.params.route_extra_ms:.0f} ms ({was} → {now})",
        )


def edge_switch(ctx: Context) -> None:
    p = ctx.params
    base = replace(
        REASONING,
        rtt_ms={"seoul-1": 90.0, "frankfurt-1": 130.0},
        server_ms={"queue": 90.0, "prefill": 50.0, "generation": 650.0, "transfer": 3.0},
        deadline_ms=p.deadline_ms,
    )
    for n in range(p.replicas):
        at = ctx.at_fraction(0.4, 0.6)
        series = ctx.target(f"e{n}", ctx.jittered(base), f"deadline {p.deadline_ms:.0f} ms")
        for s in series:
            later = after(s, at)
            s.medians[later, s.column("network")] *= 0.2
            s.medians[later, s.column("queue")] *= 0.6
            s.medians[later, s.column("generation")] *= p.edge_slowdown
            s.sample_sigma[later, s.column("generation")] = 0.2
            s.cold_p[later], s.cold_ms[later] = p.edge_cold_p, 900.0
        # The misses are SLO episodes (bench/detection/slo.py); the mix moves too.
        ctx.event(
            id=f"edge-e{n}",
            kind="dominant_shift",
            target=series[0].target,
            vantage=None,
            start=at,
            window=(at, at + DAY),
            abrupt=True,
            accept=("dominant_shift", *ABRUPT, "tail_shift"),
            tolerate=SLOWER,  # generation × 1.5 and cold starts: slower at both vantages
            optional=True,
            note=f"edge: RTT × 0.2, generation × {p.edge_slowdown}, "
            f"cold starts in {p.edge_cold_p:.0%}",
        )


def isolated_bad_runs(ctx: Context) -> None:
    p = ctx.params
    profiles = (replace(REASONING, deadline_ms=p.deadline_ms), CHAT)
    for n in range(p.replicas):
        profile = profiles[n % len(profiles)]
        series = ctx.target(f"i{n}", ctx.jittered(profile), f"{p.bad_runs} isolated bad runs")
        for moment in _spread_moments(ctx, p.bad_runs):
            both = ctx.rng.random() < 0.5
            chosen = series if both else [series[int(ctx.rng.integers(len(series)))]]
            slow = ctx.rng.random() < 0.5
            for s in chosen:
                index = int(np.searchsorted(s.starts, int(moment.timestamp() * MICROS)))
                if index >= len(s.starts):
                    continue
                if slow:
                    s.slow[index] = ctx.rng.uniform(10, 30)
                else:
                    s.error_p[index] = ctx.rng.uniform(0.5, 0.9)


def _spread_moments(ctx: Context, count: int) -> list[datetime]:
    """Run boundaries at least half a day apart, after the first day and a half."""
    first = 1.5 / ctx.params.days
    cuts = np.linspace(first, 1.0, count + 1)
    return [
        ctx.at_fraction(low + 0.02, high - 0.02) for low, high in zip(cuts, cuts[1:], strict=False)
    ]


def quiet(ctx: Context) -> None:
    queue_bound = replace(
        CHAT,
        rtt_ms={"seoul-1": 45.0, "frankfurt-1": 130.0},
        server_ms={"queue": 350.0, "prefill": 30.0, "generation": 120.0, "transfer": 3.0},
    )
    homepage = Profile(
        kind="http",
        rtt_ms={"seoul-1": 40.0, "frankfurt-1": 110.0},
        server_ms={"server": 260.0, "transfer": 15.0},
    )
    ctx.target("chat", ctx.jittered(CHAT), "chat model")
    deadline = replace(REASONING, deadline_ms=ctx.params.deadline_ms)
    ctx.target("reasoning", ctx.jittered(deadline), "reasoning model with a deadline")
    ctx.target("queue-bound", ctx.jittered(queue_bound), "queue leads")
    ctx.target("homepage", ctx.jittered(homepage), "plain HTTP")
