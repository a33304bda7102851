"""The what-if API's response models (app/web/api/whatif.py): the engine's ``to_json``
shapes (app.analysis.whatif), written out so that the OpenAPI document states them."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import Field

from app.web.schemas import Out


class IntervalOut(Out):
    value: float = Field(description="the point estimate, from every sample")
    interval: list[float] = Field(
        min_length=2, max_length=2, description="95 % interval over the run resamples"
    )


class OutcomeOut(Out):
    p50_ms: IntervalOut
    p90_ms: IntervalOut
    p99_ms: IntervalOut
    miss_rate: IntervalOut = Field(description="share of samples past the deadline")
    shares: dict[str, float] = Field(description="each phase's share of the mean end-to-end")
    dominant: str | None
    next_dominant: str | None = Field(description="the phase that would lead next")
    samples: int
    runs: int
    deadline_ms: float | None


class BoundOut(Out):
    p50_ms: float
    p90_ms: float
    p99_ms: float
    miss_rate: float


class LeverObjectiveOut(Out):
    metric: str = Field(description="a latency objective of the target's, or goodput")
    halved: float | None = Field(description="its share met were this phase halved")
    removed: float | None = Field(description="its share met were this phase gone")


class LeverOut(Out):
    phase: str
    share: float = Field(description="of the mean end-to-end now")
    halved: BoundOut = Field(description="end-to-end if this phase took half its time")
    removed: BoundOut = Field(description="end-to-end if this phase took no time")
    tail_moves: bool = Field(
        description="halved, the p99 or the miss rate moves (samples cut at the deadline"
        " stay misses whatever a phase does, so a tail of misses moves with no lever)"
    )
    median_moves: bool = Field(description="halved, the p50 moves")
    objectives: list[LeverObjectiveOut] = Field(
        default_factory=list,
        description="each latency objective's share met and goodput's, halved and gone;"
        " empty without objectives",
    )


class RankedLeverOut(LeverObjectiveOut):
    phase: str


class ObjectiveLeversOut(Out):
    metric: str = Field(description="a latency objective of the target's, or goodput")
    below_ms: float | None
    now: float | None = Field(description="share of timed samples meeting it, measured")
    levers: list[RankedLeverOut] = Field(
        description="the phases whose halving raises the share, most first (by the share"
        " if halved, then if gone); none that raise it by less than 0.05 points"
    )
    headline: str = Field(description="the biggest lever for it, as a sentence")


class CurvesOut(Out):
    percentiles: list[float]
    before_ms: list[float] = Field(description="end-to-end at each percentile, as measured")
    after_ms: list[float] = Field(description="end-to-end at each percentile, changed")


class WindowOut(Out):
    from_: datetime = Field(alias="from")
    to: datetime
    vantage: str | None = Field(description="null: every vantage pooled")


class ObjectiveWhatIfOut(Out):
    metric: str = Field(description="a latency objective of the target's, or goodput")
    below_ms: float | None
    target: float | None = Field(description="the objective's share (0-1); null: goodput")
    before: float | None = Field(description="share of timed samples meeting it, measured")
    after: float | None = Field(description="the same once the changes are made")
    before_interval: list[float] | None = Field(
        min_length=2, max_length=2, description="95 % interval of before, over the run resamples"
    )
    after_interval: list[float] | None = Field(
        min_length=2, max_length=2, description="95 % interval of after, over the run resamples"
    )
    burn_before: IntervalOut | None = Field(
        description="the share missing it over the share its target allows to miss;"
        " null for goodput"
    )
    burn_after: IntervalOut | None = Field(description="the same once the changes are made")


class WhatIfOut(Out):
    changes: list[dict[str, Any]] = Field(description="the changes read, as JSON")
    before: OutcomeOut
    after: OutcomeOut
    optimistic: BoundOut | None = Field(
        description="had each deadline-cut sample ended right after its known phases"
    )
    notes: list[str]
    window: WindowOut
    resamples: int
    curves: CurvesOut
    levers: list[LeverOut] = Field(description="the levers now, biggest first")
    objectives: list[ObjectiveWhatIfOut] = Field(
        default_factory=list,
        description="the target's latency objectives and goodput, met before and after"
        " (docs/slo.md); empty without objectives",
    )
    objective_levers: list[ObjectiveLeversOut] = Field(
        default_factory=list,
        description="for each latency objective and goodput, the levers now that raise"
        " it; empty without objectives",
    )


class LeversOut(Out):
    window: WindowOut
    samples: int
    now: BoundOut = Field(description="end-to-end as measured")
    headline: str = Field(description="the biggest lever, as a sentence")
    levers: list[LeverOut] = Field(
        description="biggest first: by the p99 if halved, then the miss rate, then the p50;"
        " a phase under 0.5 % of the time is none"
    )
    objective_levers: list[ObjectiveLeversOut] = Field(
        default_factory=list,
        description="for each latency objective and goodput, the levers that raise it;"
        " empty without objectives",
    )
