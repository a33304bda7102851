"""Lists that answered whole arrays (targets, vantages, silences, maintenance windows), paged
without changing their shape:
the body stays the array old clients read, ``limit`` and ``cursor`` are optional (no limit:
every item, as before), and the total and the next page travel in headers, as GitHub's
API does (``X-Total-Count``; ``Link: <…>; rel="next"`` while more pages follow)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Annotated, Any, TypeVar

from fastapi import Query, Request, Response

from app.store.reads.paging import BadCursor, text_after, text_cursor
from app.web.api.params import bad_request

T = TypeVar("T")

ListLimitParam = Annotated[
    int | None, Query(ge=1, le=1000, description="items per page; default: every item")
]
LIST_HEADERS: dict[str, Any] = {
    "X-Total-Count": {
        "description": "items in the list over every page",
        "schema": {"type": "integer"},
    },
    "Link": {
        "description": 'the next page, `<url>; rel="next"`; absent on the last page',
        "schema": {"type": "string"},
    },
}


def page_list(
    items: Sequence[T], key: Callable[[T], str], cursor: str | None, limit: int | None
) -> tuple[list[T], str | None]:
    """The items after ``cursor``'s key (``items`` sorted by ``key``), at most ``limit``, and
    the next page's cursor (None on the last). ``BadCursor`` for a foreign cursor."""
    after = None if cursor is None else text_after(cursor)
    return trimmed([item for item in items if after is None or key(item) > after], key, limit)


def page_or_422(
    items: Sequence[T], key: Callable[[T], str], cursor: str | None, limit: int | None
) -> tuple[list[T], str | None]:
    """``page_list``, a foreign cursor answered 422 with why."""
    try:
        return page_list(items, key, cursor, limit)
    except BadCursor as exc:
        raise bad_request(str(exc)) from None


def time_key(at: datetime) -> str:
    """A time as text that sorts as the times do (fixed width, in UTC): part of a key."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")


def trimmed(
    items: Sequence[T], key: Callable[[T], str], limit: int | None
) -> tuple[list[T], str | None]:
    """At most ``limit`` of ``items`` (read with one more, to tell a next page) and the next
    page's cursor (None on the last)."""
    if limit is None or len(items) <= limit:
        return list(items), None
    return list(items[:limit]), text_cursor(key(items[limit - 1]))


def paging_headers(request: Request, response: Response, total: int, after: str | None) -> None:
    response.headers["X-Total-Count"] = str(total)
    if after is not None:
        following = request.url.include_query_params(cursor=after)
        response.headers["Link"] = f'<{following.path}?{following.query}>; rel="next"'
