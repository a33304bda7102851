"""``deadline_miss`` — the deadline as an SLO with an error budget, alerted on burn rate.

Two alerts per (target, vantage), as the SRE workbook's multiwindow, multi-burn-rate
alerts: a **page** (critical) when the budget burns fast (14.4× over 1 h and its short
window, or 6× over 6 h and its short window) and a **ticket** (warning) when it burns
slowly (1× over 3 days and 6 h). Each fires when a pair's long *and* short window burn at
its factor, and stays firing while a long window still does: a steady violation is one
alert per episode. A probe sends a few requests a run, so a window's rate is a noisy
estimate of its burn: the long window must burn at its factor beyond chance (exact
one-sided binomial test against the factor's rate) and its misses come from more than one
run (one run that missed wholesale is one moment, not a rate). The ticket waits while the
page fires for the same burn.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from app.analysis.detectors.base import CRITICAL, WARNING, Detector, Finding, Inputs, Named, Signal
from app.analysis.slo import (
    BurnWindow,
    Counts,
    MissLedger,
    WindowBurn,
    budget_left,
    reaches,
    window_burn,
)

if TYPE_CHECKING:
    from app.analysis.detectors.params import BurnWindowParams, SloParams


KIND = "deadline_miss"


@dataclass(frozen=True, slots=True)
class Budget:
    """One SLO's error budget as a burn-rate detector judges it: its alert kind, the
    ledger of its runs' counts and its parameters (the objective and the windows)."""

    kind: str
    ledger: MissLedger
    slo: SloParams


def judge(inputs: Inputs) -> list[Finding]:
    return burn_findings(inputs, Budget(KIND, inputs.misses, inputs.params.slo))


def burn_findings(inputs: Inputs, budget: Budget) -> list[Finding]:
    """A page and a ticket for ``budget``: the deadline's, or another objective's."""
    slo = budget.slo
    paging = (budget.kind, CRITICAL) in inputs.active
    ticketed = (budget.kind, WARNING) in inputs.active
    fastest = tuple(sorted(slo.page, key=lambda pair: pair.burn)[-1:])
    page = _finding(inputs, budget, fastest if ticketed else slo.page, CRITICAL)
    ticket = _finding(inputs, budget, slo.ticket, WARNING)
    if ticket.signal is Signal.HIT and (paging or page.signal is Signal.HIT):
        ticket = replace(ticket, signal=Signal.HOLD)  # one burn, one new alert: the page
    return [page, ticket]


def _finding(
    inputs: Inputs, budget: Budget, pairs: tuple[BurnWindowParams, ...], severity: str
) -> Finding:
    slo, ledger = budget.slo, budget.ledger
    windows = _windows(pairs)
    active = (budget.kind, severity) in inputs.active
    if not windows or not (_any_burning(inputs.now, ledger, slo, windows) or active):
        return Finding(Signal.CLEAR, severity=severity)  # nothing to tell, nothing to update
    burns = [window_burn(ledger, window, inputs.now, slo.objective) for window in windows]
    burning = any(burn.burning for burn in burns)
    numbers = _numbers(inputs.now, ledger, burns, slo)
    if any(burn.triggered and _beyond_chance(burn, slo) for burn in burns):
        return Finding(Signal.HIT, numbers, severity)
    if burning:
        return Finding(Signal.HOLD, numbers, severity)  # still burning: no recovery yet
    return Finding(Signal.CLEAR, numbers, severity)


def _any_burning(
    now: datetime, ledger: MissLedger, slo: SloParams, windows: tuple[BurnWindow, ...]
) -> bool:
    """The long windows alone (the cheap half of the question, asked after every run)."""
    return any(ledger.burns(now - window.long, slo.objective, window.factor) for window in windows)


@functools.cache
def _windows(pairs: tuple[BurnWindowParams, ...]) -> tuple[BurnWindow, ...]:
    return tuple(pair.window() for pair in pairs)


def _beyond_chance(burn: WindowBurn, slo: SloParams) -> bool:
    """The long window's misses say the burn is at least the factor, at level ``alpha``."""
    counts = burn.long
    if counts.runs_missing < slo.min_runs_missing:
        return False
    from scipy.stats import binomtest  # only when a window burns: rare, and costly to import

    rate = min(burn.window.factor * (1 - slo.objective), 1.0)
    test = binomtest(counts.censored, counts.timed, rate, alternative="greater")
    return float(test.pvalue) < slo.alpha


def _numbers(
    now: datetime, ledger: MissLedger, burns: list[WindowBurn], slo: SloParams
) -> dict[str, Any]:
    worst = max(burns, key=lambda burn: (burn.long_burn or 0.0) / burn.window.factor)
    rates: dict[str, float | None] = {}
    for burn in burns:
        rates[label(burn.window.long)] = _round(burn.long_burn)
        rates[label(burn.window.short)] = _round(burn.short_burn)
    left = budget_left(ledger, now, slo.budget_window, slo.objective)
    return {
        "objective_pct": round(100 * slo.objective, 3),
        "budget_window": label(slo.budget_window),
        "budget_left_pct": round(100 * left, 1),
        "burn_rates": rates,
        "window": label(worst.window.long),
        "factor": worst.window.factor,
        "misses": worst.long.censored,
        "samples": worst.long.timed,
        "runs": worst.long.runs,
        "runs_missing": worst.long.runs_missing,
        "rate_pct": round(100 * worst.long.censored / max(worst.long.timed, 1), 2),
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


@functools.cache
def label(span: timedelta) -> str:
    """``5m``, ``6h``, ``3d``: a window as people name it."""
    seconds = int(span.total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def sentence(identity: Named, n: dict[str, Any]) -> str:
    burn = n["burn_rates"].get(n["window"])
    return (
        f"deadline SLO burning on {identity.target}: {n['rate_pct']:g} % of {n['samples']} "
        f"samples over {n['window']} missed the deadline (burn {burn or 0:g}× the budget, "
        f"alert at {n['factor']:g}×; objective {n['objective_pct']:g} %, {_budget(n)})"
    )


def current(identity: Named, n: dict[str, Any]) -> str:
    burn = n["burn_rates"].get(n["window"])
    return f"{n['rate_pct']:g} % missed over {n['window']} (burn {burn or 0:g}×), {_budget(n)}"


def _budget(n: dict[str, Any]) -> str:
    left = n["budget_left_pct"]
    if left >= 0:
        return f"{left:g} % of the {n['budget_window']} budget left"
    return f"the {n['budget_window']} budget spent {(100 - left) / 100:.3g}×"


DETECTOR = Detector(
    name="deadline_miss",
    summary="the deadline SLO's error budget burns: a page when fast, a ticket when slow",
    sentence=sentence,
    judge=judge,
    # An SLO violation is not a change of the distribution: its runs stay in the reference.
    excludes_runs=False,
    current=current,
)


# What the surfaces show (target page, API, /metrics) -----------------------------------


@dataclass(frozen=True, slots=True)
class SloStatus:
    """The SLO now: budget left and each window's burn rate (None: no request in it)."""

    objective: float
    budget_window: str
    budget_left: float | None
    burn_rates: dict[str, float | None]
    burning: tuple[str, ...]  # the severities whose long window burns at its factor

    def to_json(self) -> dict[str, Any]:
        return {
            "objective": self.objective,
            "budget_window": self.budget_window,
            "budget_left": self.budget_left,
            "burn_rates": self.burn_rates,
            "burning": list(self.burning),
        }


def spans(slo: SloParams) -> list[timedelta]:
    """Every window the status needs, the budget's last."""
    pairs = [*slo.page, *slo.ticket]
    found = {span for pair in pairs for span in (pair.window().long, pair.window().short)}
    return [*sorted(found), slo.budget_window]


def slo_status(counts: dict[timedelta, Counts], slo: SloParams) -> SloStatus:
    """``counts``: the sums over each of ``spans(slo)``, ending now."""
    left = counts.get(slo.budget_window, Counts()).budget_left(slo.objective)
    burning = tuple(
        severity
        for severity, pairs in ((CRITICAL, slo.page), (WARNING, slo.ticket))
        if any(
            reaches(counts.get(pair.window().long, Counts()).burn(slo.objective), pair.burn)
            for pair in pairs
        )
    )
    return SloStatus(
        objective=slo.objective,
        budget_window=label(slo.budget_window),
        budget_left=None if left is None else round(left, 4),
        burn_rates={
            label(span): _round(counts.get(span, Counts()).burn(slo.objective))
            for span in spans(slo)[:-1]
        },
        burning=burning,
    )
