"""/api/v1 — maintenance windows: list (the targets file's and the stored ones), create and
delete stored ones (token needed). A window's body is the targets file's entry, as JSON."""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime, timedelta
from typing import Annotated, Literal

from fastapi import APIRouter, HTTPException, Query, Request, Response, status
from pydantic import BaseModel, Field

from app.alerts.maintenance import WindowNotFound, window_of
from app.analysis.maintenance import MaintenanceWindow, active, spans_between
from app.clock import utcnow
from app.store.maintenancerows import MaintenanceRecord
from app.web.api.listpaging import (
    LIST_HEADERS,
    ListLimitParam,
    page_or_422,
    paging_headers,
    time_key,
)
from app.web.api.params import NO_NUL, CursorParam
from app.web.auth import WRITE_ERRORS, WriteAccess
from app.web.deps import DatabaseAnswers, ServiceDep
from app.web.errors import errors

router = APIRouter(tags=["maintenance"])

NOT_FOUND = errors(404, 422, not_found="No stored maintenance window has this id.")
Span = tuple[datetime, datetime]


class NewWindow(MaintenanceWindow):
    created_by: str = Field(min_length=1, max_length=200, pattern=NO_NUL)


class WindowView(BaseModel):
    id: str | None = Field(description="None: from the targets file (delete it there)")
    source: Literal["file", "api"]
    window: MaintenanceWindow
    created_by: str | None = None
    created_at: datetime | None = None
    active: bool
    next_spans: list[Span] = Field(description="its spans over the next 7 days (UTC)")


@router.get(
    "/maintenance",
    response_model=list[WindowView],
    responses=errors(422) | {200: {"headers": LIST_HEADERS}},
    dependencies=[DatabaseAnswers],
)
async def list_windows(
    service: ServiceDep,
    request: Request,
    response: Response,
    target: Annotated[str | None, Query(max_length=200, description="only its windows")] = None,
    limit: ListLimitParam = None,
    cursor: CursorParam = None,
) -> list[WindowView]:
    """The targets file's windows (in the file's order), then those made through the API,
    oldest first. With ``limit``, a page; the next one's link in ``Link``, the count in
    ``X-Total-Count``."""
    maintenance = service.alerts.maintenance
    assert maintenance is not None
    records = await asyncio.to_thread(maintenance.records)
    listed: list[tuple[str, MaintenanceRecord | None, MaintenanceWindow]] = [
        (f"0|{place:06d}", None, window) for place, window in enumerate(maintenance.from_file())
    ]
    for record in records:
        window = window_of(record)
        if window is not None:
            listed.append((_stored_key(record), record, window))
    kept = [item for item in listed if target is None or item[2].covers(target, None)]
    shown, after = page_or_422(kept, lambda item: item[0], cursor, limit)
    paging_headers(request, response, len(kept), after)
    now = utcnow()
    return [view(record, window, now) for _, record, window in shown]


def _stored_key(record: MaintenanceRecord) -> str:
    """After every file window's key (``0|…``): oldest first, then by id."""
    return f"1|{time_key(record.created_at)}|{record.id}"


@router.post(
    "/maintenance",
    response_model=WindowView,
    status_code=status.HTTP_201_CREATED,
    dependencies=[WriteAccess],
    responses=WRITE_ERRORS | errors(422),
)
async def create_window(body: NewWindow, service: ServiceDep) -> WindowView:
    """Store a window: its targets' alerts do not notify while it is open, and their runs
    stay out of references and error budgets."""
    maintenance = service.alerts.maintenance
    assert maintenance is not None
    window = MaintenanceWindow.model_validate(body.model_dump(exclude={"created_by"}))
    now = utcnow()
    record = await asyncio.to_thread(maintenance.create, window, body.created_by, now)
    return view(record, window, now)


@router.delete(
    "/maintenance/{window_id}",
    response_model=WindowView,
    dependencies=[WriteAccess],
    responses=WRITE_ERRORS | NOT_FOUND,
)
async def delete_window(window_id: str, service: ServiceDep) -> WindowView:
    """Delete a stored window (the targets file's are changed in the file)."""
    maintenance = service.alerts.maintenance
    assert maintenance is not None
    try:
        key = uuid.UUID(window_id)
        record = await asyncio.to_thread(maintenance.delete, key)
    except (ValueError, WindowNotFound):
        raise HTTPException(
            status.HTTP_404_NOT_FOUND, f"no maintenance window {window_id!r}"
        ) from None
    window = window_of(record)
    if window is None:  # stored before a change made it invalid: gone all the same
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"maintenance window {window_id} deleted")
    return view(record, window, utcnow())


def view(record: MaintenanceRecord | None, window: MaintenanceWindow, now: datetime) -> WindowView:
    return WindowView(
        id=None if record is None else str(record.id),
        source="file" if record is None else "api",
        window=window,
        created_by=None if record is None else record.created_by,
        created_at=None if record is None else record.created_at,
        active=active(window, now),
        next_spans=spans_between(window, now, now + timedelta(days=7))[:50],
    )
