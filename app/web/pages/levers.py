"""The target page's "levers now": the engine's levers (app.analysis.whatif), best first, as
the template shows them, server-rendered so that they read without JavaScript. Computed in a
worker process, as the API's are (app.runtime.workers): while every worker is busy and the
queue full, the page says so instead of ranking them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from app.analysis.whatif import Bound, Lever
from app.analysis.whatif.levers import by_median
from app.runtime.workers import Busy, WorkerLost, Workers
from app.web.whatifrequest import DEFAULT_SPAN, LeversNow, NoSamples, Scope, levers_job

WINDOW_TEXT = "the last 7 days"


@dataclass(frozen=True)
class Numbers:
    p50_ms: float
    p99_ms: float
    miss_rate: float | None  # None: no deadline to miss


@dataclass(frozen=True)
class LeverRow:
    phase: str
    share: float
    halved: Numbers
    removed: Numbers
    change: str  # the lever in the CLI's language, for the what-if panel
    tail_moves: bool  # halved, the p99 or the misses move (cut samples stay misses)
    median_moves: bool

    def gain_ms(self, now: Numbers) -> float:
        return now.p99_ms - self.halved.p99_ms


@dataclass(frozen=True)
class LeversView:
    window_text: str
    now: Numbers | None
    rows: list[LeverRow]
    samples: int = 0
    by_median: LeverRow | None = None  # where no lever moves the tail (levers.by_median)
    busy: str | None = None  # why they could not be computed now
    # For a target with objectives: each one's and goodput's biggest lever, as a sentence.
    by_objective: tuple[str, ...] = ()


async def levers_view(
    workers: Workers, job: tuple[str, int], target: str, vantage: str | None, now: datetime
) -> LeversView:
    """``job``: the database URL and the samples a what-if reads at most."""
    scope = Scope(target, vantage, now - DEFAULT_SPAN, now)
    try:
        found = await workers.run(levers_job, job[0], scope, job[1])
    except NoSamples:
        return LeversView(WINDOW_TEXT, None, [])
    except Busy as exc:
        return LeversView(WINDOW_TEXT, None, [], busy=f"try again in {exc.retry_after_s} s")
    except WorkerLost:
        return LeversView(WINDOW_TEXT, None, [], busy="the worker computing them ended")
    return view_of(found)


def view_of(found: LeversNow) -> LeversView:
    has_deadline = found.now.deadline_ms is not None
    measured = Numbers(
        found.now.p50_ms.value,
        found.now.p99_ms.value,
        found.now.miss_rate.value if has_deadline else None,
    )
    rows = [_row(lever, has_deadline) for lever in found.levers]
    median = by_median(found.levers)
    row = rows[found.levers.index(median)] if median is not None else None
    sentences = tuple(ranked.headline() for ranked in found.by_objective)
    return LeversView(WINDOW_TEXT, measured, rows, found.samples, row, by_objective=sentences)


def _row(lever: Lever, has_deadline: bool) -> LeverRow:
    return LeverRow(
        lever.phase,
        lever.share,
        _numbers(lever.halved, has_deadline),
        _numbers(lever.removed, has_deadline),
        f"{lever.phase}*0.5",
        lever.tail_moves,
        lever.median_moves,
    )


def _numbers(bound: Bound, has_deadline: bool) -> Numbers:
    return Numbers(bound.p50_ms, bound.p99_ms, bound.miss_rate if has_deadline else None)
