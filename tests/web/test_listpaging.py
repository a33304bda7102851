"""Lists paged by a text key without changing their shape (targets, vantages): the page after
a cursor, the next cursor, a foreign cursor refused; table-driven."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from app.store.reads.paging import BadCursor, text_after, text_cursor
from app.web.api.listpaging import page_list, time_key

ITEMS = ["0own", "1alpha", "1beta", "1gamma"]  # the vantages' key: the server's own first


def walk(limit: int | None) -> list[list[str]]:
    pages, cursor = [], None
    while True:
        page, cursor = page_list(ITEMS, str, cursor, limit)
        pages.append(page)
        if cursor is None:
            return pages


@pytest.mark.parametrize(
    ("limit", "pages"),
    [
        (None, [ITEMS]),
        (1, [[i] for i in ITEMS]),
        (3, [ITEMS[:3], ITEMS[3:]]),
        (4, [ITEMS]),
        (9, [ITEMS]),
    ],
)
def test_pages_walk_every_item_once_in_order(limit: int | None, pages: list[list[str]]) -> None:
    assert walk(limit) == pages


def test_a_cursor_holds_when_items_come_and_go_before_it() -> None:
    _, cursor = page_list(ITEMS, str, None, 2)
    assert cursor is not None
    changed = ["0own", "1aardvark", "1beta", "1delta", "1gamma"]
    assert page_list(changed, str, cursor, 2) == (["1beta", "1delta"], text_cursor("1delta"))


@pytest.mark.parametrize("key", ["", "chat-prod", "a|b", "openai/gpt-4o", "ünïcode"])
def test_a_text_cursor_gives_back_its_key(key: str) -> None:
    assert text_after(text_cursor(key)) == key


@pytest.mark.parametrize("cursor", ["", "!!", "bm9wZQ", "YWZ0ZXI", "//79"])
def test_a_foreign_cursor_is_refused(cursor: str) -> None:
    with pytest.raises(BadCursor):
        text_after(cursor)


BERLIN = timezone(timedelta(hours=1))
MOMENTS = [
    datetime(2026, 3, 1, 23, 30, tzinfo=UTC),
    datetime(2026, 3, 2, 0, 15, tzinfo=BERLIN),  # 23:15 UTC: before the first
    datetime(2026, 3, 1, 23, 30, 0, 1, tzinfo=UTC),  # a microsecond after the first
    datetime(2026, 3, 1, 23, 30, 0, 999999, tzinfo=UTC),
    datetime(1999, 12, 31, 23, 59, 59, tzinfo=UTC),
]


def test_time_keys_sort_as_the_times_do_whatever_their_offset_or_fraction() -> None:
    assert sorted(MOMENTS, key=time_key) == sorted(MOMENTS)
