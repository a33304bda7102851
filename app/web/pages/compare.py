"""GET /compare?targets=a,b — two or more targets over the same window, side by side, and their
end-to-end history on one chart."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from app.clock import utcnow
from app.store.db import Session
from app.store.reads.breakdown import breakdown
from app.store.reads.browse import first_run_at
from app.store.targets import target_names, target_row
from app.web.deps import SessionDep
from app.web.pages import view
from app.web.pages.render import error_page, not_found, page

router = APIRouter()

WINDOWS = {"1h": timedelta(hours=1), "24h": timedelta(hours=24), "7d": timedelta(days=7)}
LONGEST = "7d"
MAX_TARGETS = 6


def parse_targets(values: Sequence[str]) -> list[str]:
    """``?targets=a,b`` or ``?targets=a&targets=b`` (what a form of checkboxes sends); in order,
    each once."""
    names = [name.strip() for value in values for name in value.split(",")]
    return list(dict.fromkeys(name for name in names if name))


def known_targets(session: Session) -> list[str]:
    return target_names(session)


def fitting_window(session: Session, names: Sequence[str], now: datetime) -> str:
    """The shortest window that holds the chosen targets' whole history, at most 7 days:
    new data as a sliver at the edge of a day's chart is no comparison."""
    firsts = []
    for name in names:
        row = target_row(session, name)
        first = first_run_at(session, row.id) if row is not None else None
        if first is not None:
            firsts.append(first)
    if not firsts:
        return LONGEST
    age = now - min(firsts)
    return next((name for name, span in WINDOWS.items() if age <= span), LONGEST)


@router.get("/compare", response_class=HTMLResponse, include_in_schema=False)
def compare_page(
    request: Request,
    session: SessionDep,
    targets: Annotated[list[str] | None, Query()] = None,
    window: str = "",
    vantage: str = "",
) -> HTMLResponse:
    chosen = parse_targets(targets or [])
    known = known_targets(session)
    now = utcnow()
    window = window or fitting_window(session, [n for n in chosen if n in known], now)
    if window not in WINDOWS:
        choices = ", ".join(WINDOWS)
        return error_page(request, 400, "Unknown window", f"window must be one of {choices}.")
    if len(chosen) > MAX_TARGETS:
        return error_page(request, 400, "Too many targets", f"Compare at most {MAX_TARGETS}.")
    missing = [name for name in chosen if name not in known]
    if missing:
        return not_found(request, f"target named {missing[0]!r}")
    start = now - WINDOWS[window]
    found = (breakdown(session, name, start, now, vantage=vantage or None) for name in chosen)
    breakdowns = [b for b in found if b is not None]
    return page(
        request,
        "compare.html.j2",
        now=now,
        section="compare",
        chosen=chosen,
        known=known,
        windows=list(WINDOWS),
        window=window,
        window_seconds=int(WINDOWS[window].total_seconds()),
        vantage=vantage,
        columns=[
            (b, view.share_segments((p.phase, p.share) for p in b.phases)) for b in breakdowns
        ],
    )
