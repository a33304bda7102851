"""Keyset paging (app.store.reads.paging): every row once, newest first, while rows arrive."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Integer, Uuid, create_engine, select
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from app.store.models import UTCDateTime
from app.store.reads.paging import BadCursor, Keyset, keyset_page

T0 = datetime(2026, 3, 2, tzinfo=UTC)


class Base(DeclarativeBase):
    pass


class Item(Base):
    __tablename__ = "items"
    pk: Mapped[int] = mapped_column(Integer, primary_key=True)
    at: Mapped[datetime] = mapped_column(UTCDateTime())
    group: Mapped[uuid.UUID] = mapped_column(Uuid)
    idx: Mapped[int] = mapped_column(Integer)


def _digits(text: str) -> int:
    if not text.isdigit():
        raise ValueError(text)
    return int(text)


ITEMS = Keyset((Item.at, Item.group, Item.idx), (uuid.UUID, _digits))
GROUPS = [uuid.UUID(int=n) for n in (1, 2)]


def key(row: tuple[Item]) -> tuple[datetime, uuid.UUID, int]:
    return row[0].at, row[0].group, row[0].idx


@pytest.fixture
def session() -> Session:
    engine = create_engine("sqlite://")
    Base.metadata.create_all(engine)
    with Session(engine) as session:
        # Ties on the time and on the group: the later columns must break them.
        for n, (minute, group, idx) in enumerate(
            (m, g, i) for m in (0, 1, 3) for g in GROUPS for i in range(3)
        ):
            session.add(Item(pk=n, at=T0 + timedelta(minutes=minute), group=group, idx=idx))
        session.commit()
        return session


def all_pages(session: Session, limit: int) -> list[tuple[datetime, uuid.UUID, int]]:
    seen: list[tuple[datetime, uuid.UUID, int]] = []
    cursor = None
    while True:
        rows, cursor = keyset_page(session, select(Item), ITEMS, cursor, limit, key)
        assert len(rows) <= limit
        seen += [key(row) for row in rows]
        if cursor is None:
            return seen


@pytest.mark.parametrize("limit", [1, 2, 5, 17, 18, 100])
def test_pages_hold_every_row_once_newest_first(session: Session, limit: int) -> None:
    seen = all_pages(session, limit)
    everything = [key((row,)) for row in session.scalars(select(Item))]
    normal = [(at.astimezone(UTC), g, i) for at, g, i in seen]
    assert normal == sorted(
        {(at.replace(tzinfo=UTC), g, i) for at, g, i in everything}, reverse=True
    )


def test_a_row_added_above_the_cursor_does_not_shift_the_next_page(session: Session) -> None:
    first, cursor = keyset_page(session, select(Item), ITEMS, None, 4, key)
    session.add(Item(pk=99, at=T0 + timedelta(hours=1), group=GROUPS[0], idx=0))
    session.commit()
    second, _ = keyset_page(session, select(Item), ITEMS, cursor, 4, key)
    assert not {key(r) for r in first} & {key(r) for r in second}
    assert key(second[0]) < key(first[-1])


def test_a_cursor_round_trips() -> None:
    values = (T0, GROUPS[1], 7)
    assert ITEMS.decode(ITEMS.encode(values)) == values


@pytest.mark.parametrize(
    "cursor",
    [
        "not base64 at all!",
        ITEMS.encode((T0, GROUPS[0], 1))[:-3],  # cut short
        Keyset((Item.at, Item.group), (uuid.UUID,)).encode((T0, GROUPS[0])),  # too few parts
        ITEMS.encode((T0, "not-a-uuid", 1)),
        ITEMS.encode((T0, GROUPS[0], "-1")),
        "MjAyNi0wMy0wMlQwMDowMDowMHwwMDAwfDE",  # a time without an offset
    ],
)
def test_a_foreign_cursor_is_refused(cursor: str) -> None:
    with pytest.raises(BadCursor, match="not a cursor from this API"):
        ITEMS.decode(cursor)
