"""The target page's "levers now": the engine's levers (app.analysis.whatif), best first, as
the template shows them, server-rendered so that they read without JavaScript."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from app.analysis.whatif import Bound, Lever
from app.analysis.whatif.levers import by_median
from app.store.db import Session
from app.web.whatifrequest import DEFAULT_SPAN, NoSamples, Scope, levers_now

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


def levers_view(session: Session, target: str, vantage: str | None, now: datetime) -> LeversView:
    scope = Scope(target, vantage, now - DEFAULT_SPAN, now)
    try:
        found = levers_now(session, scope)
    except NoSamples:
        return LeversView(WINDOW_TEXT, None, [])
    has_deadline = found.now.deadline_ms is not None
    measured = Numbers(
        found.now.p50_ms.value,
        found.now.p99_ms.value,
        found.now.miss_rate.value if has_deadline else None,
    )
    rows = [_row(lever, has_deadline) for lever in found.levers]
    median = by_median(found.levers)
    row = rows[found.levers.index(median)] if median is not None else None
    return LeversView(WINDOW_TEXT, measured, rows, found.samples, row)


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
