"""``dominant_shift`` — the bottleneck moved: another phase now leads the accepted one.

Judged per vantage here and combined across vantages by the evaluator
(app/alerts/crossvantage.py): the only detector that needs every vantage's view.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import numpy as np

from app.analysis.detectors.base import Detector, Finding, Named, Signal, ci
from app.analysis.dominance import Mix, lead, phase_mix
from app.analysis.leadspread import LogSpread, log_ratio
from app.analysis.runs import RunData

if TYPE_CHECKING:
    from app.analysis.detectors.params import DetectorParams


def challenger(mix: Mix, leader: str, params: DetectorParams) -> str | None:
    """The phase that now leads ``leader`` by at least δ in the point estimate, if any."""
    if leader not in mix.shares:
        return None
    others = [name for name in mix.shares if name != leader]
    best = max(others, key=lambda name: mix.shares[name], default=None)
    if best is None or not leads_by(mix, best, leader, params):
        return None
    return best


def leads_by(mix: Mix, phase: str, leader: str, params: DetectorParams) -> bool:
    """``phase`` leads ``leader`` by at least δ in the point estimate."""
    if leader not in mix.shares or phase not in mix.shares:
        return False
    return mix.shares[phase] - mix.shares[leader] >= params.dominant_lead_pp / 100


def dominant_finding(
    recent: Sequence[RunData],
    leader: str,
    candidate: str,
    params: DetectorParams,
    rng: np.random.Generator,
    spread: LogSpread | None = None,
) -> Finding:
    """Does ``candidate`` lead ``leader`` by δ, with the lead's lower 95 % bound above 0
    and, given the reference's ``spread``, has it gained on ``leader`` by more than
    windows of this many runs do when nothing changed (``dominant_spread_z`` of that
    spread, on the log ratio of their medians)?"""
    mix = phase_mix(recent)
    numbers = _mix_numbers(mix, leader, candidate)
    point = mix.shares.get(candidate, 0.0) - mix.shares.get(leader, 0.0)
    if point < params.dominant_lead_pp / 100:
        return Finding(Signal.HOLD, numbers)
    estimate = lead(recent, candidate, leader, rng, params.resamples)
    numbers |= {"lead_low_pp": _pp(estimate.low), "lead_high_pp": _pp(estimate.high)}
    confident = estimate.low is not None and estimate.low > 0
    moved = spreads_moved(mix, spread, candidate, leader, len(recent))
    if moved is not None and params.dominant_spread_z > 0:
        numbers["moved_spreads"] = round(moved, 1)
        confident = confident and moved > params.dominant_spread_z
    return Finding(Signal.HIT if confident else Signal.HOLD, numbers)


def spreads_moved(
    mix: Mix, spread: LogSpread | None, candidate: str, leader: str, runs: int
) -> float | None:
    """How many of the reference's run-to-run spreads (of a window of ``runs``) the log
    ratio ``candidate / leader`` has moved from the reference's; None without a spread
    (or with a spread of 0: phases that never moved apart)."""
    if spread is None:
        return None
    sd = spread.sd(candidate, leader, runs)
    usual = spread.usual(candidate, leader)
    if not sd or usual is None:
        return None
    return (log_ratio(mix.medians, candidate, leader) - usual) / sd


def fast_dominant(
    recent: Sequence[RunData],
    leader: str,
    params: DetectorParams,
    rng: np.random.Generator,
    spread: LogSpread | None = None,
) -> tuple[str, Finding] | None:
    """The fast lane: a challenger leading ``leader`` by ``dominant_fast_lead_pp`` in the
    newest ``dominant_fast_runs`` runs, the lead's lower 95 % bound above 0. A collapse or
    a new route moves the lead by tens of points at once; waiting for a third run to say
    what two already say that plainly only adds delay."""
    newest = recent[-params.dominant_fast_runs :]
    if params.dominant_fast_lead_pp <= 0 or len(newest) < params.dominant_fast_runs:
        return None
    mix = phase_mix(newest)
    candidate = challenger(mix, leader, params)
    if candidate is None:
        return None
    lead_pp = 100 * (mix.shares[candidate] - mix.shares[leader])
    if lead_pp < params.dominant_fast_lead_pp:
        return None
    finding = dominant_finding(newest, leader, candidate, params, rng, spread)
    return (candidate, finding) if finding.signal is Signal.HIT else None


def dominant_resolution(
    recent: Sequence[RunData],
    old: str,
    new: str | None,
    reference_leader: str | None,
    params: DetectorParams,
    rng: np.random.Generator,
) -> Finding:
    """For a firing shift old→new: clear when old leads again by δ with confidence
    (hysteresis), or once the reference itself has the new leader (the change became the
    normal); hit while new still leads by δ; hold in between. Only a reversal needs the
    bootstrap: staying put is the point estimate's call."""
    mix = phase_mix(recent)
    if new is None:  # a service shift whose new leader differs by vantage: this one's
        new = next((name for name in mix.ranked() if name != old), old)
    numbers = _mix_numbers(mix, old, new)
    if reference_leader not in (old, None):
        return Finding(Signal.CLEAR, numbers)  # the reference has moved on: the new normal
    if challenger(mix, new, params) == old:
        back = dominant_finding(recent, new, old, params, rng)
        if back.signal is Signal.HIT:
            # Numbers as the alert reads them (old → new): the lead of new is negative.
            low, high = back.numbers["lead_low_pp"], back.numbers["lead_high_pp"]
            return Finding(Signal.CLEAR, numbers | {"lead_low_pp": -high, "lead_high_pp": -low})
    lead_pp = numbers["lead_pp"]
    return Finding(Signal.HIT if lead_pp >= params.dominant_lead_pp else Signal.HOLD, numbers)


def _mix_numbers(mix: Mix, leader: str, candidate: str) -> dict[str, Any]:
    return {
        "from_phase": leader,
        "to_phase": candidate,
        "from_share_pct": round(100 * mix.shares.get(leader, 0.0), 1),
        "to_share_pct": round(100 * mix.shares.get(candidate, 0.0), 1),
        "lead_pp": round(100 * (mix.shares.get(candidate, 0.0) - mix.shares.get(leader, 0.0)), 1),
        "shares_pct": {name: round(100 * share, 1) for name, share in mix.shares.items()},
        # What leads this window, whichever it is: a firing shift's numbers are rewritten
        # each run, and a third phase may have overtaken its new leader since.
        "top": [mix.dominant, round(100 * mix.shares.get(mix.dominant or "", 0.0), 1)],
        "samples": mix.n,
        "runs": mix.runs,
    }


def _pp(value: float | None) -> float | None:
    return None if value is None else round(100 * value, 1)


def overtaken(identity: Named, n: dict[str, Any]) -> str:
    """Where the phase leading now is not the shift's new leader (a third phase took over,
    or the old one is back), say which: the sentence of a firing shift is rewritten each
    run, and 'generation → network' beside a breakdown led by queue reads as a mistake."""
    tops = n.get("tops") or {"": n.get("top")}
    leaders = n.get("leaders") or {}
    said = []
    for vantage, top in sorted(tops.items()):
        if not top or top[0] is None:
            continue
        expected = (leaders.get(vantage) or [identity.to_phase])[0]
        if top[0] != expected:
            at = f" at {vantage}" if vantage else ""
            said.append(f"{top[0]} leads now{at} ({top[1]:g} %)")
    return "; " + ", ".join(said) if said else ""


def sentence(identity: Named, n: dict[str, Any]) -> str:
    if identity.from_phase is None and n.get("losers"):
        was = ", ".join(
            f"{phase} {share:g} % at {vantage}"
            for vantage, (phase, share) in sorted(n["losers"].items())
            if phase is not None and share is not None
        )
        return (
            f"dominant phase moved on {identity.target}: {identity.to_phase} now leads"
            f" ({n['to_share_pct']:g} %) where it took over from {was}"
        )
    before = n.get("from_share_before_pct", n["from_share_pct"])
    head = f"dominant phase moved on {identity.target}: {identity.from_phase} {before:g} % → "
    if identity.to_phase is None and n.get("leaders"):
        now = ", ".join(
            f"{phase} {share:g} % at {vantage}"
            for vantage, (phase, share) in sorted(n["leaders"].items())
            if phase is not None and share is not None
        )
        return head + now
    return (
        f"{head}{identity.to_phase} {n['to_share_pct']:g} % (lead {n['lead_pp']:g} pp"
        f"{ci(n.get('lead_low_pp'), n.get('lead_high_pp'), '')})"
    )


def current(identity: Named, n: dict[str, Any]) -> str:
    """The two phases' shares now (the sentence keeps those of the firing), at each
    vantage for a shift seen at several."""
    old_now, new_now = n.get("from_now"), n.get("leaders")
    if old_now and new_now:
        return ", ".join(
            f"{old} {was:g} %, {new_now[vantage][0]} {new_now[vantage][1]:g} % at {vantage}"
            for vantage, (old, was) in sorted(old_now.items())
            if old is not None and was is not None and vantage in new_now
        )
    return f"{n['from_phase']} {n['from_share_pct']:g} %, {n['to_phase']} {n['to_share_pct']:g} %"


DETECTOR = Detector(
    name="dominant_shift",
    summary="the bottleneck moved: another phase leads the accepted dominant one",
    sentence=sentence,
    judge=None,
    aside=overtaken,
    current=current,
    rebases=True,
    rebase_after=timedelta(hours=6),
)
