"""The targets table: the file's targets synced in, bare targets for runs only an agent or
an import knows, and each target's id by name."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Insert, func, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from app.store.models import TargetRow

UNKNOWN_KIND = "unknown"


@dataclass(frozen=True, slots=True)
class TargetValues:
    """One target of the file as its row stores it (``config``: the target as it may be shown)."""

    name: str
    kind: str
    url: str
    interval_s: float
    config: dict[str, Any] = field(default_factory=dict)


def sync_targets(
    session: Session, targets: Iterable[TargetValues], now: datetime
) -> dict[str, int]:
    """Make the targets table say what the file says; targets gone from it become inactive.

    A target the file leaves as it was keeps its row as it was (``updated_at`` included):
    rewriting every row at each start and reload left as many dead rows on PostgreSQL, and
    pages no longer all-visible, so the overview's read of every target's name and interval
    went from its index to the table's 2 KB rows (bench/README.md, "One pass")."""
    rows = {row.name: row for row in session.scalars(select(TargetRow))}
    wanted = {target.name: target for target in targets}
    for name, target in wanted.items():
        row = rows.get(name) or TargetRow(name=name)
        values = {"kind": target.kind, "url": target.url, "interval_s": target.interval_s,
                  "config": target.config, "active": True}  # fmt: skip
        if row.id is None or any(getattr(row, key) != value for key, value in values.items()):
            for key, value in values.items():
                setattr(row, key, value)
            row.updated_at = now
            session.add(row)
    for name, row in rows.items():
        if name not in wanted and row.active:
            row.active, row.updated_at = False, now
    session.flush()
    return {row.name: row.id for row in session.scalars(select(TargetRow))}


def target_key(session: Session, name: str) -> int | None:
    """The id of the target called ``name``; None if it was never seen."""
    return session.scalar(select(TargetRow.id).where(TargetRow.name == name))


def target_id(session: Session, name: str, now: datetime) -> int:
    """The id of a target, created bare if only its runs are known (imports, agents).

    Two writers may create the same bare target at once: ON CONFLICT DO NOTHING lets the
    second wait for the first and then find its row, instead of failing on the unique name.
    """
    found = target_key(session, name)
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


def targets_after(session: Session, after: str | None, limit: int | None) -> list[TargetRow]:
    """Targets by name after ``after`` (all: None), at most ``limit`` + 1: one more than a
    page says another follows."""
    query = select(TargetRow).order_by(TargetRow.name)
    if after is not None:
        query = query.where(TargetRow.name > after)
    if limit is not None:
        query = query.limit(limit + 1)
    return list(session.scalars(query))


def target_count(session: Session) -> int:
    return session.scalar(select(func.count()).select_from(TargetRow)) or 0


def target_row(session: Session, name: str) -> TargetRow | None:
    return session.scalar(select(TargetRow).where(TargetRow.name == name))


def target_names(session: Session) -> list[str]:
    return list(session.scalars(select(TargetRow.name).order_by(TargetRow.name)))


def target_intervals(session: Session) -> dict[str, float]:
    """Each target's interval in seconds, by name."""
    return {row.name: row.interval_s for row in session.execute(_INTERVALS)}


def interval_of(session: Session, target: int) -> float | None:
    return session.scalar(select(TargetRow.interval_s).where(TargetRow.id == target))


_INTERVALS = select(TargetRow.name, TargetRow.interval_s)


def interval_by_name(session: Session, name: str) -> float | None:
    return session.scalar(select(TargetRow.interval_s).where(TargetRow.name == name))
