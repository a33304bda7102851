"""``dominant_shift``'s one-round lane: a leader change every vantage shows in its newest
run, with the server's phase that moved far beyond its hours' normal as every vantage saw
it, is told on that round, confirmed.

A generation collapse (× 0.08) or its regrowth moves the phase by ~2.5 in log, some 20
of its run-to-run spreads, at every vantage at once: each round of it carries hundreds of
nats where an alert needs about twelve (bench/detection/README.md, "The oracle"). The
fast lane still waits for two runs at each vantage and then for a second round to confirm
(three rounds, four when the change falls between the vantages' runs of a slot). Here one
round is enough, when the false alarms of the benchmark fail each of these: every present
vantage (two at least, none late) sees a challenger lead its reference's leader in its
newest run, the lead's lower bound above 0 and beyond the reference's spread of one run
(a near tie, or a load that swaps two phases for a run at one vantage, does not), by
``dominant_fast_lead_pp`` at one vantage at least (a collapse may leave a near vantage's
queue, prefill and network within a few points of each other); each of those runs whole
(at most ``CUT_SHARE`` of it cut at the deadline or failed: a run cut at the deadline
reads its later phases as 0); the vantages agree on the phase that lost the lead or on
the one that won, and it is the server's work (prefill, generation; not the queue, where a
moment's load shows at every vantage at once); and that phase moved by
``dominant_round_z`` (12) of its one-run spread, averaged over the vantages, and materially
at each. The benchmark's collapses and regrowths read 30–33 spreads; its bad runs (the
queue × 10–30 in one run at both vantages) 9–12, in the queue.
"""

from __future__ import annotations

import math
from typing import Any

from app.alerts.combine import KIND, Round, agreement
from app.alerts.history import History
from app.alerts.identity import Identity
from app.alerts.memory import EvaluatorView
from app.alerts.pooling import level_told
from app.analysis import detectors as d
from app.analysis.dominance import phase_mix
from app.analysis.level import LevelReference, pooled_z
from app.analysis.runs import RunData

Moved = tuple[Identity, d.Finding]
# The phases one round may tell of: the server's work per request. Not the queue: a
# moment's load shows there, at every vantage at once (the benchmark's isolated bad runs,
# the queue × 10–30 in one run at both, read 9–12 spreads).
ONE_ROUND_PHASES = d.SERVER_SIDE - {"queue"}
# A run with more of its samples cut at the deadline or failed than this has no phase
# medians to tell a change by in one run (cut at the deadline, the later phases read 0).
CUT_SHARE = 0.1


def one_round(
    view: EvaluatorView,
    history: History,
    target: str,
    seen: Round,
    params: d.DetectorParams,
) -> Moved | None:
    """The service's leader change on this round's newest runs, confirmed; None when a
    condition fails (module docstring)."""
    if params.dominant_round_z <= 0 or params.dominant_fast_lead_pp <= 0:
        return None
    if len(seen.present) < 2 or seen.late:
        return None
    at: dict[str, tuple[Identity, d.Finding]] = {}
    levels: dict[str, tuple[LevelReference, list[RunData]]] = {}
    for vantage in seen.present:
        found = _newest_lead(view, history, target, vantage, params)
        if found is None:
            return None
        at[vantage], levels[vantage] = found
    # One vantage at least sees the lead of the fast lane; the others the lead of δ (a
    # collapse leaves a near vantage's queue, prefill and network near each other).
    if max(finding.numbers["lead_pp"] for _, finding in at.values()) < params.dominant_fast_lead_pp:
        return None
    losers = {identity.from_phase for identity, _ in at.values()}
    winners = {identity.to_phase for identity, _ in at.values()}
    starts = [window[0].at for _, window in levels.values()]
    if level_told(view, target, min(starts)):
        return None  # the hours' levels predate a change already told
    moved = None
    for phase, sign in _moved_phases(losers, winners):
        moved = moved or moved_by(list(levels.values()), phase, sign, params)
    if moved is None:
        return None
    old = losers.pop() if len(losers) == 1 else None
    new = winners.pop() if len(winners) == 1 else None
    identity = Identity(KIND, target, None, "service", old, new)
    return identity, agreement(at, list(at), seen, moved)


def _newest_lead(
    view: EvaluatorView, history: History, target: str, vantage: str, params: d.DetectorParams
) -> tuple[tuple[Identity, d.Finding], tuple[LevelReference, list[RunData]]] | None:
    """The vantage's newest run: a challenger leading its reference's leader, confirmed on
    that run (bootstrap, spread), and the vantage's hours' levels beside it."""
    reference = view.memory(target, vantage).reference
    if reference is None or reference.level is None or reference.mix.dominant is None:
        return None
    if reference.level.span.total_seconds() < params.level_min_days * 86400:
        return None
    newest = history.last(target, vantage, 1)
    if not newest or newest[0].failed + newest[0].censored > CUT_SHARE * newest[0].samples:
        return None
    leader = reference.mix.dominant
    candidate = d.challenger(phase_mix(newest), leader, params)
    if candidate is None:
        return None
    finding = d.dominant_finding(
        newest, leader, candidate, params, view.rng(target), reference.spread
    )
    if finding.signal is not d.Signal.HIT:
        return None
    before = {"from_share_before_pct": round(100 * reference.mix.shares.get(leader, 0.0), 1)}
    finding = d.Finding(d.Signal.HIT, finding.numbers | before)
    identity = Identity(KIND, target, vantage, "path", leader, candidate)
    return (identity, finding), (reference.level, list(newest))


def _moved_phases(losers: set[str | None], winners: set[str | None]) -> list[tuple[str, float]]:
    """The server's phases (``ONE_ROUND_PHASES``) the vantages agree may have moved: the
    one that lost the lead (it shrank: sign −1), the one that won it (it grew: +1)."""
    moved = []
    if len(losers) == 1 and (loser := next(iter(losers))) in ONE_ROUND_PHASES:
        moved.append((loser, -1.0))
    if len(winners) == 1 and (winner := next(iter(winners))) in ONE_ROUND_PHASES:
        moved.append((winner, 1.0))
    return moved


def moved_by(
    levels: list[tuple[LevelReference, list[RunData]]],
    phase: str,
    sign: float,
    params: d.DetectorParams,
) -> dict[str, Any] | None:
    """Each vantage's newest run of ``phase`` against its hours' level, in its spreads:
    their mean (× ``sign``) at least ``dominant_round_z``, and each vantage's move (× sign)
    at least the least material one; the pooled numbers, or None."""
    material = math.log1p(params.level_min_relative)
    zs, moves = [], []
    for reference, window in levels:
        found = pooled_z([reference], [window], phase)
        if found is None:
            return None  # a vantage without this phase's level (too few timed samples)
        zs.append(sign * found[0])
        moves.append(sign * found[1])
    z = sum(zs) / len(zs)
    if z < params.dominant_round_z or min(moves) < material:
        return None
    growth = sum(sign * move for move in moves) / len(moves)
    return {
        "pooled_phase": phase,
        "pooled_z": round(sign * z, 1),
        "pooled_growth_pct": round(100 * math.expm1(growth), 1),
        "pooled_vantages": len(levels),
        "pooled_runs": 1,
    }
