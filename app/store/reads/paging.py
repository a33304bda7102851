"""Keyset paging, newest first: the one way a list is paged (runs, samples, alerts).

A cursor is the last item's sort key, opaque to clients (base64 of ``time|key|...``). A
page asks for the rows strictly after it in the sort order, so it stays correct while new
rows arrive: a page never repeats or skips one. The first column of every key is a time.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVarTuple

from sqlalchemy import ColumnElement, Row, Select, and_, func, or_, select
from sqlalchemy.orm import InstrumentedAttribute, Session

from app.clock import parse_timestamp


class BadCursor(ValueError):
    """The cursor was not one this API handed out."""

    def __init__(self, cursor: str) -> None:
        super().__init__(f"not a cursor from this API: {cursor!r}")


Column = InstrumentedAttribute[Any]
Ts = TypeVarTuple("Ts")


@dataclass(frozen=True)
class Keyset:
    """A descending sort key: its columns, and how each part after the time is read back."""

    columns: tuple[Column, ...]
    parsers: tuple[Callable[[str], Any], ...]  # one per column after the first

    def encode(self, values: Sequence[object]) -> str:
        at, *keys = values
        assert isinstance(at, datetime)
        raw = "|".join([at.isoformat(), *(str(key) for key in keys)])
        return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")

    def decode(self, cursor: str) -> tuple[Any, ...]:
        try:
            raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
            at, *keys = raw.split("|")
            if len(keys) != len(self.parsers):
                raise ValueError
            return (
                parse_timestamp(at),
                *(parse(k) for parse, k in zip(self.parsers, keys, strict=True)),
            )
        except (binascii.Error, UnicodeDecodeError, ValueError):
            raise BadCursor(cursor) from None

    def after(self, values: Sequence[Any]) -> ColumnElement[bool]:
        """Rows after ``values`` in this descending order (the last column decides last)."""
        *leading, (last, value) = zip(self.columns, values, strict=True)
        found: ColumnElement[bool] = last < value
        for column, key in reversed(leading):
            found = or_(column < key, and_(column == key, found))
        return found


def keyset_page(
    session: Session,
    query: Select[*Ts],
    keyset: Keyset,
    cursor: str | None,
    limit: int,
    key: Callable[[Row[*Ts]], Sequence[object]],
) -> tuple[list[Row[*Ts]], str | None]:
    """One page of ``query`` (newest first) after ``cursor``, and the next page's cursor
    (None on the last page). ``key`` gives a row's sort key. ``BadCursor`` for a foreign one."""
    if cursor is not None:
        query = query.where(keyset.after(keyset.decode(cursor)))
    ordered = query.order_by(*(column.desc() for column in keyset.columns))
    rows = list(session.execute(ordered.limit(limit + 1)).all())
    more = len(rows) > limit
    return rows[:limit], keyset.encode(key(rows[limit - 1])) if more else None


def count_of(session: Session, query: Select[*Ts]) -> int:
    """How many rows ``query`` gives over every page: a list's ``total``."""
    counted = select(func.count()).select_from(query.order_by(None).subquery())
    return session.scalar(counted) or 0


# A list sorted by a text key (target names, vantages) pages after the last key shown.


def text_cursor(key: str) -> str:
    return base64.urlsafe_b64encode(f"after|{key}".encode()).decode().rstrip("=")


def text_after(cursor: str) -> str:
    """The key a ``text_cursor`` holds; ``BadCursor`` for anything else."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise BadCursor(cursor) from None
    tag, found, key = raw.partition("|")
    if tag != "after" or not found:
        raise BadCursor(cursor)
    return key
