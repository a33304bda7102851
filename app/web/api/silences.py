"""/api/v1 — silences: create, list, expire. Shaped like Alertmanager's (camelCase,
``matchers`` of ``name``/``value``/``isRegex``), so what operators know carries over; the
snake_case spellings are accepted too."""

from __future__ import annotations

import asyncio
import math
import uuid
from datetime import datetime, timedelta
from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Query, Request, Response, status
from pydantic import AfterValidator, AwareDatetime, BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from app.alerts.silences import Matcher, SilenceNotFound, matchers_of, silence_row
from app.clock import utcnow
from app.durations import parse_duration
from app.store.silencerows import SilenceRecord
from app.web.api.listpaging import (
    LIST_HEADERS,
    ListLimitParam,
    page_or_422,
    paging_headers,
    time_key,
)
from app.web.api.params import NO_NUL, CursorParam, in_range
from app.web.auth import WRITE_ERRORS, WriteAccess
from app.web.deps import DatabaseAnswers, ServiceDep
from app.web.errors import errors

router = APIRouter(tags=["silences"])

NOT_FOUND = errors(404, 422, not_found="No silence has this id.")
_CAMEL = ConfigDict(alias_generator=to_camel, validate_by_name=True, validate_by_alias=True)
MAX_DURATION = timedelta(days=3660)
# In UTC, and in [1970, 2200): an end computed from it stays a date the databases can hold.
Moment = Annotated[AwareDatetime, AfterValidator(in_range)]


class MatcherBody(BaseModel):
    model_config = ConfigDict(**_CAMEL, extra="forbid")

    name: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    value: str = Field(max_length=1000, pattern=NO_NUL)
    is_regex: bool = Field(False, description="the value is a regex that must match whole")
    is_equal: bool = Field(True, description="false: the label must not match (!=, !~)")


class NewSilence(BaseModel):
    model_config = ConfigDict(**_CAMEL, extra="forbid")

    matchers: list[MatcherBody] = Field(min_length=1, max_length=50)
    starts_at: Moment | None = Field(None, description="default: now")
    ends_at: Moment | None = Field(None, description="give this or duration")
    duration: str | float | None = Field(
        None, description="'2h', '30m', '1d' or seconds; at most 3660 days"
    )
    created_by: str = Field(min_length=1, max_length=200, pattern=NO_NUL)
    comment: str = Field("", max_length=2000, pattern=NO_NUL)


class SilenceStatus(BaseModel):
    state: Literal["active", "pending", "expired"]


class SilenceView(BaseModel):
    model_config = _CAMEL

    id: str
    matchers: list[MatcherBody]
    starts_at: datetime
    ends_at: datetime
    created_by: str
    comment: str
    created_at: datetime
    status: SilenceStatus


@router.get(
    "/silences",
    response_model=list[SilenceView],
    responses=errors(422) | {200: {"headers": LIST_HEADERS}},
    dependencies=[DatabaseAnswers],
)
async def list_silences(
    service: ServiceDep,
    request: Request,
    response: Response,
    active: Annotated[bool, Query(description="only silences in effect now")] = False,
    limit: ListLimitParam = None,
    cursor: CursorParam = None,
) -> list[SilenceView]:
    """Silences, soonest to end first. With ``limit``, a page; the next one's link in
    ``Link``, the count in ``X-Total-Count``."""
    rows = await asyncio.to_thread(service.alerts.list_silences, active)
    shown, after = page_or_422(rows, silence_key, cursor, limit)
    paging_headers(request, response, len(rows), after)
    now = utcnow()
    return [silence_view(row, now) for row in shown]


@router.get(
    "/silences/{silence_id}",
    response_model=SilenceView,
    responses=NOT_FOUND,
    dependencies=[DatabaseAnswers],
)
def get_silence(silence_id: str, service: ServiceDep) -> SilenceView:
    # A plain def: the read runs on a worker thread, never on the event loop.
    key = _uuid_or_404(silence_id)
    with service.sessions() as session:
        row = silence_row(session, key)
    if row is None:
        raise _not_found(silence_id)
    return silence_view(row, utcnow())


@router.post(
    "/silences",
    response_model=SilenceView,
    status_code=status.HTTP_201_CREATED,
    dependencies=[WriteAccess],
    responses=WRITE_ERRORS | errors(422),
)
async def create_silence(body: NewSilence, service: ServiceDep) -> SilenceView:
    """Hold notifications of alerts whose labels match every matcher until ``endsAt``."""
    now = utcnow()
    starts_at, ends_at = silence_window(body, now)
    matchers = [matcher_of(raw) for raw in body.matchers]
    try:
        row = await asyncio.to_thread(
            service.alerts.create_silence,
            matchers,
            starts_at,
            ends_at,
            body.created_by,
            body.comment,
        )
    except ValueError as exc:
        raise _invalid(str(exc)) from None
    return silence_view(row, now)


@router.delete(
    "/silences/{silence_id}",
    response_model=SilenceView,
    dependencies=[WriteAccess],
    responses=WRITE_ERRORS | NOT_FOUND,
)
async def expire_silence(silence_id: str, service: ServiceDep) -> SilenceView:
    """End a silence now (one that already ended stays as it was)."""
    key = _uuid_or_404(silence_id)
    now = utcnow()
    try:
        row = await asyncio.to_thread(service.alerts.expire_silence, key, now)
    except SilenceNotFound:
        raise _not_found(silence_id) from None
    return silence_view(row, now)


# Validation and views ----------------------------------------------------------------------


def silence_window(body: NewSilence, now: datetime) -> tuple[datetime, datetime]:
    """When the silence starts and ends; 422 for a window that is not one."""
    starts_at = body.starts_at or now
    if (body.ends_at is None) == (body.duration is None):
        raise _invalid("give exactly one of endsAt and duration")
    if body.duration is not None:
        ends_at = starts_at + _duration(body.duration)
    else:
        assert body.ends_at is not None
        ends_at = body.ends_at
    if ends_at <= now:
        raise _invalid(f"endsAt ({ends_at.isoformat()}) is in the past")
    if ends_at <= starts_at:
        raise _invalid(f"endsAt ({ends_at.isoformat()}) must be after startsAt")
    return starts_at, ends_at


def _duration(given: str | float) -> timedelta:
    try:
        seconds = parse_duration(given)
    except ValueError as exc:
        raise _invalid(f"duration: {exc}") from None
    if not math.isfinite(seconds) or seconds <= 0:
        raise _invalid("duration must be more than 0")
    if seconds > MAX_DURATION.total_seconds():
        raise _invalid(f"duration must be at most {MAX_DURATION.days} days")
    return timedelta(seconds=seconds)


def matcher_of(body: MatcherBody) -> Matcher:
    try:
        raw = {"name": body.name, "value": body.value, "regex": body.is_regex}
        return Matcher.parse(raw | {"equal": body.is_equal})
    except ValueError as exc:
        raise _invalid(str(exc)) from None


def silence_view(row: SilenceRecord, now: datetime) -> SilenceView:
    return SilenceView(
        id=str(row.id),
        matchers=[
            MatcherBody(name=m.name, value=m.value, is_regex=m.regex, is_equal=m.equal)
            for m in matchers_of(row)
        ],
        starts_at=row.starts_at,
        ends_at=row.ends_at,
        created_by=row.created_by,
        comment=row.comment,
        created_at=row.created_at,
        status=SilenceStatus(state=silence_state(row, now)),
    )


def silence_key(row: SilenceRecord) -> str:
    """The list's order as text: soonest to end, then oldest, then by id."""
    return f"{time_key(row.ends_at)}|{time_key(row.created_at)}|{row.id}"


def silence_state(row: SilenceRecord, now: datetime) -> Literal["active", "pending", "expired"]:
    if row.ends_at <= now:
        return "expired"
    return "active" if row.starts_at <= now else "pending"


def _uuid_or_404(value: str) -> uuid.UUID:
    try:
        return uuid.UUID(value)
    except ValueError:
        raise _not_found(value) from None


def _not_found(silence_id: Any) -> HTTPException:
    return HTTPException(status.HTTP_404_NOT_FOUND, f"no silence {silence_id!r}")


def _invalid(detail: str) -> HTTPException:
    return HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, detail)
