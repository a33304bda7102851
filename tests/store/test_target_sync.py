"""The targets file synced into the targets table: a target the file leaves as it was keeps
its row untouched (no new row version on PostgreSQL), a changed or new one is written."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import select, text
from sqlalchemy.orm import Session, sessionmaker

from app.store.models import TargetRow
from app.store.targets import TargetValues, sync_targets

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
LATER = NOW + timedelta(hours=1)
FILE = [
    TargetValues("a", "http", "http://127.0.0.1:9/a", 60.0, {"name": "a", "headers": {}}),
    TargetValues("b", "http", "http://127.0.0.1:9/b", 60.0, {"name": "b"}),
    TargetValues("c", "http", "http://127.0.0.1:9/c", 30.0),
]


def rows(sessions: sessionmaker[Session]) -> dict[str, tuple[bool, datetime, str]]:
    """name → (active, updated_at, the row's version: PostgreSQL's xmin, else "")."""
    with sessions() as session:
        postgres = session.get_bind().dialect.name == "postgresql"
        version = text("xmin::text") if postgres else text("''")
        query = select(TargetRow.name, TargetRow.active, TargetRow.updated_at, version)
        found = session.execute(query).all()
    return {name: (active, at.replace(tzinfo=UTC), v) for name, active, at, v in found}


def test_a_sync_of_the_same_file_writes_nothing(sessions: sessionmaker[Session]) -> None:
    with sessions.begin() as session:
        sync_targets(session, FILE, NOW)
    before = rows(sessions)
    with sessions.begin() as session:
        sync_targets(session, list(FILE), LATER)
    assert rows(sessions) == before
    assert {at for _, at, _ in before.values()} == {NOW}


def test_a_changed_new_or_dropped_target_is_written_and_only_it(
    sessions: sessionmaker[Session],
) -> None:
    with sessions.begin() as session:
        sync_targets(session, FILE, NOW)
    before = rows(sessions)
    changed = [
        TargetValues(
            "a", "http", "http://127.0.0.1:9/a", 60.0, {"name": "a", "headers": {"x": "1"}}
        ),
        FILE[1],
        TargetValues("d", "http", "http://127.0.0.1:9/d", 60.0),
    ]  # a's config changed, b the same, c dropped, d new
    with sessions.begin() as session:
        sync_targets(session, changed, LATER)
    after = rows(sessions)
    assert after["b"] == before["b"]
    assert {name: after[name][:2] for name in "acd"} == {
        "a": (True, LATER), "c": (False, LATER), "d": (True, LATER)
    }  # fmt: skip
    with sessions.begin() as session:
        sync_targets(session, FILE, LATER + timedelta(hours=1))  # c back: active again
    assert rows(sessions)["c"][:2] == (True, LATER + timedelta(hours=1))
