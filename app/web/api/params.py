"""Query parameters the read endpoints share: time windows, targets, vantages, cursors.

Times are ISO-8601 with an offset (``2026-03-02T12:00:00Z``, ``…+02:00``) or epoch seconds;
a time without an offset is refused rather than guessed. ``to`` defaults to now and
``from`` to 24 hours before ``to``; a time given lies in [1970, 2200) UTC, so that no
window, bucket or silence computed from it leaves what dates (and the databases) can hold.
Text parameters hold no NUL character: PostgreSQL refuses it in text. Every problem is a
4xx with a sentence in ``detail``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Annotated, TypeVar

from fastapi import Depends, HTTPException, Query, status
from starlette.convertors import Convertor, register_url_convertor

from app.clock import parse_timestamp, utcnow
from app.store.db import Session
from app.store.reads.browse import has_runs_from
from app.store.reads.paging import BadCursor
from app.store.targets import target_key
from app.web.deps import SessionDep
from app.web.errors import Responses, errors

T = TypeVar("T")
Span = tuple[datetime, datetime]
PageOf = Callable[
    [Session, Span, int | None, str | None, str | None, int], tuple[list[T], str | None]
]
CountOf = Callable[[Session, Span, int | None, str | None], int]

DEFAULT_SPAN = timedelta(hours=24)
MAX_SPAN = timedelta(days=3660)
UNPROCESSABLE = status.HTTP_422_UNPROCESSABLE_CONTENT
TIME_HELP = "ISO-8601 with an offset (e.g. 2026-03-02T12:00:00Z) or epoch seconds"
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(2200, 1, 1, tzinfo=UTC)
NO_NUL = r"^[^\x00]*$"


def bad_request(detail: str) -> HTTPException:
    return HTTPException(UNPROCESSABLE, detail)


def not_found(detail: str) -> HTTPException:
    return HTTPException(status.HTTP_404_NOT_FOUND, detail)


def parse_time(text: str, name: str) -> datetime:
    try:
        if text.lstrip("-").replace(".", "", 1).isdigit():
            return in_range(datetime.fromtimestamp(float(text), UTC))
        return in_range(parse_timestamp(text))
    except (ValueError, OverflowError, OSError) as exc:
        raise bad_request(f"{name}: {exc}") from None


def in_range(moment: datetime) -> datetime:
    """The time in UTC; ValueError outside [EARLIEST, LATEST)."""
    try:
        utc = moment.astimezone(UTC)
    except OverflowError:
        utc = None
    if utc is None or not EARLIEST <= utc < LATEST:
        raise ValueError("must be from 1970-01-01 to before 2200-01-01 (UTC)")
    return utc


@dataclass(frozen=True)
class Window:
    start: datetime
    end: datetime


def make_window(
    from_: str | None, to: str | None, default_span: timedelta = DEFAULT_SPAN
) -> Window:
    end = parse_time(to, "to") if to is not None else utcnow()
    start = parse_time(from_, "from") if from_ is not None else end - default_span
    if start >= end:
        raise bad_request(f"from ({start.isoformat()}) must be before to ({end.isoformat()})")
    if end - start > MAX_SPAN:
        raise bad_request("the window may span at most 3660 days")
    return Window(start, end)


def window(
    from_: Annotated[str | None, Query(alias="from", description=TIME_HELP)] = None,
    to: Annotated[str | None, Query(description=f"{TIME_HELP}; default now")] = None,
) -> Window:
    """[from, to): by default the last 24 hours."""
    return make_window(from_, to)


def recent_window(
    from_: Annotated[str | None, Query(alias="from", description=TIME_HELP)] = None,
    to: Annotated[str | None, Query(description=f"{TIME_HELP}; default now")] = None,
) -> Window:
    """[from, to): by default the last hour (what "current" means on the overview)."""
    return make_window(from_, to, timedelta(hours=1))


WindowDep = Annotated[Window, Depends(window)]
RecentWindowDep = Annotated[Window, Depends(recent_window)]
VantageParam = Annotated[
    str | None,
    Query(min_length=1, max_length=200, pattern=NO_NUL, description="one vantage; default all"),
]
TargetParam = Annotated[
    str | None,
    Query(min_length=1, max_length=200, pattern=NO_NUL, description="one target; default all"),
]
LimitParam = Annotated[int, Query(ge=1, le=1000, description="items per page")]
TotalParam = Annotated[
    bool,
    Query(
        description="also count the items over every page (`total`): a count of the whole"
        " window, which a large fleet's day of runs or samples makes slower than a page"
    ),
]
CursorParam = Annotated[
    str | None, Query(max_length=500, description="next_cursor of the previous page")
]


def target_id_or_404(session: Session, name: str) -> int:
    if "\x00" in name:  # no target has one; and PostgreSQL would refuse the query
        raise not_found(f"no target {name!r}")
    found = target_key(session, name)
    if found is None:
        raise not_found(f"no target {name!r}")
    return found


def check_vantage(session: Session, target: int, name: str, vantage: str | None) -> None:
    """404 for a vantage that never ran the target."""
    if vantage is None:
        return
    if not has_runs_from(session, target, vantage):
        raise not_found(f"target {name!r} has no runs from vantage {vantage!r}")


QUERY_ERRORS = errors(422)
TARGET_ERRORS: Responses = errors(
    404, 422, not_found="No target has this name (or the vantage never ran it)."
)


class TargetName(Convertor[str]):
    """A target name in a path: it may hold '/' (``openai/gpt-4o``), but a path ending in
    one of the target's sub-resources is that sub-resource, not a target's name."""

    # No NUL: see the module's docstring.
    regex = r"(?:(?!/(?:breakdown|history|whatif|levers)$)[^?#\x00])+"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("target", TargetName())


@dataclass(frozen=True)
class Browse:
    """A window's list as ``/runs`` and ``/samples`` take it: [from, to), one target's key
    (an unknown name is a 404 before any read) or all, one vantage or all, and the page."""

    span: Span
    target: int | None
    vantage: str | None
    limit: int
    cursor: str | None
    total: bool

    def page(
        self, session: Session, rows_of: PageOf[T], count_of: CountOf
    ) -> tuple[list[T], str | None, int | None]:
        """The page's rows, the next page's cursor, and the count over every page when
        ``total`` asked for it; a cursor that is not one of ours is a 400."""
        try:
            rows, after = rows_of(
                session, self.span, self.target, self.vantage, self.cursor, self.limit
            )
        except BadCursor as exc:
            raise bad_request(str(exc)) from None
        count = count_of(session, self.span, self.target, self.vantage) if self.total else None
        return rows, after, count


def browse(
    session: SessionDep,
    window: WindowDep,
    target: TargetParam = None,
    vantage: VantageParam = None,
    limit: LimitParam = 100,
    cursor: CursorParam = None,
    total: TotalParam = False,
) -> Browse:
    key = None if target is None else target_id_or_404(session, target)
    return Browse((window.start, window.end), key, vantage, limit, cursor, total)


BrowseDep = Annotated[Browse, Depends(browse)]
