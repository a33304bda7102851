"""Targets: the targets table in step with the file, and a run's target found or created.

The rest of the store lives by question: ingest, chart, prune, rawdriver, reads."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import Insert, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from app.config import Target
from app.store.models import TargetRow

UNKNOWN_KIND = "unknown"


def sync_targets(session: Session, targets: Iterable[Target], now: datetime) -> dict[str, int]:
    """Make the targets table say what the file says; targets gone from it become inactive."""
    rows = {row.name: row for row in session.scalars(select(TargetRow))}
    wanted = {target.name: target for target in targets}
    for name, target in wanted.items():
        row = rows.get(name) or TargetRow(name=name)
        row.kind, row.url, row.interval_s = target.kind.value, target.url, target.interval
        row.config, row.active, row.updated_at = target.public(), True, now
        session.add(row)
    for name, row in rows.items():
        if name not in wanted and row.active:
            row.active, row.updated_at = False, now
    session.flush()
    return {row.name: row.id for row in session.scalars(select(TargetRow))}


def target_id(session: Session, name: str, now: datetime) -> int:
    """The id of a target, created bare if only its runs are known (imports, agents).

    Two writers may create the same bare target at once: ON CONFLICT DO NOTHING lets the
    second wait for the first and then find its row, instead of failing on the unique name.
    """
    found = session.scalar(select(TargetRow.id).where(TargetRow.name == name))
    if found is not None:
        return found
    bare = {"name": name, "kind": UNKNOWN_KIND, "url": "", "interval_s": 0.0, "config": {}}
    values = {**bare, "active": False, "updated_at": now}
    session.execute(insert_unless_present(session, TargetRow, ["name"]).values(values))
    return session.scalars(select(TargetRow.id).where(TargetRow.name == name)).one()


def insert_unless_present(session: Session, entity: Any, keys: list[str]) -> Insert:
    """INSERT ... ON CONFLICT (keys) DO NOTHING, which both our databases speak."""
    insert = pg_insert if session.get_bind().dialect.name == "postgresql" else sqlite_insert
    return insert(entity).on_conflict_do_nothing(index_elements=keys)
