"""/api/v1 — compare: several targets over the same window, side by side."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from app.analysis.breakdown import Breakdown
from app.store.reads.breakdown import breakdown
from app.web.api.params import (
    TARGET_ERRORS,
    VantageParam,
    WindowDep,
    bad_request,
    check_vantage,
    target_id_or_404,
)
from app.web.deps import SessionDep
from app.web.schemas import BreakdownOut, CompareOut, DifferenceOut

router = APIRouter(tags=["compare"])

MAX_TARGETS = 10
TARGETS_HELP = "two or more target names, comma-separated (e.g. chat-prod,chat-edge)"


@router.get("/compare", response_model=CompareOut, responses=TARGET_ERRORS)
def compare(
    session: SessionDep,
    window: WindowDep,
    targets: Annotated[
        str, Query(min_length=1, max_length=MAX_TARGETS * 201, description=TARGETS_HELP)
    ],
    vantage: VantageParam = None,
) -> CompareOut:
    """Each target's breakdown over the same window (and vantage, if given), and the phase
    whose median differs most between them."""
    names = _names(targets)
    for name in names:
        check_vantage(session, target_id_or_404(session, name), name, vantage)
    found = [breakdown(session, n, window.start, window.end, vantage) for n in names]
    present = [b for b in found if b is not None]
    return CompareOut(
        from_=window.start,
        to=window.end,
        vantage=vantage,
        breakdowns=[BreakdownOut.model_validate(b.to_json()) for b in present],
        differs_most=differs_most(present),
    )


def _names(targets: str) -> list[str]:
    names = list(dict.fromkeys(n.strip() for n in targets.split(",") if n.strip()))
    if not 2 <= len(names) <= MAX_TARGETS:
        raise bad_request(f"compare takes 2 to {MAX_TARGETS} distinct targets, got {len(names)}")
    return names


def differs_most(breakdowns: list[Breakdown], statistic: str = "p50") -> DifferenceOut | None:
    """The phase every target has whose ``statistic`` spreads widest across the targets."""
    values: dict[str, dict[str, float]] = {}
    for found in breakdowns:
        for row in found.phases:
            values.setdefault(row.phase, {})[found.target] = getattr(row, statistic)
    common = {p: v for p, v in values.items() if len(v) == len(breakdowns) >= 2}
    if not common:
        return None
    phase = max(common, key=lambda p: max(common[p].values()) - min(common[p].values()))
    per_target = common[phase]
    fastest = min(per_target, key=lambda t: per_target[t])
    slowest = max(per_target, key=lambda t: per_target[t])
    return DifferenceOut(
        phase=phase,
        statistic=statistic,
        spread_ms=per_target[slowest] - per_target[fastest],
        fastest=fastest,
        slowest=slowest,
        values=per_target,
    )
