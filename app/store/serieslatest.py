"""Each (target, vantage)'s newest run, kept beside the runs: what the overview sorts and
pages by, and what "last run" means everywhere, without a grouped scan of the runs.

Written in the same statement (PostgreSQL) or transaction (SQLite) as the run, by
``app.store.ingest``, which every run goes through (probe, agent push, CSV import). An
upsert that only moves forward: a late or replayed run older than the one kept leaves the
row as it is, so the order runs arrive in does not matter.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import Connection, ForeignKey, Index, Insert, String, Table, bindparam, text
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Mapped, mapped_column

from app.store.models import Base, TargetRow


class SeriesLatestRow(Base):
    __tablename__ = "series_latest"

    target_id: Mapped[int] = mapped_column(ForeignKey("targets.id"), primary_key=True)
    vantage: Mapped[str] = mapped_column(String(200), primary_key=True)
    run_id: Mapped[uuid.UUID]
    started_at: Mapped[datetime]
    status: Mapped[str] = mapped_column(String(20))
    n_samples: Mapped[int]
    n_errors: Mapped[int]
    n_deadline_exceeded: Mapped[int]


LATEST: Table = SeriesLatestRow.__table__  # type: ignore[assignment]

# What ranking every series needs of its target (app.store.reads.seriesrank), in an index
# it is read from: a target's row carries its whole config (2 KB: 40 MB at 10,000 targets
# on SQLite, a page each), which a fleet-wide join would otherwise read every time.
TARGETS_BRIEF = Index(None, TargetRow.name, TargetRow.interval_s, TargetRow.id)
# The run's columns kept here (``run_id`` is the run's ``id``).
KEPT = ("target_id", "vantage", "started_at", "status", "n_samples", "n_errors",
        "n_deadline_exceeded")  # fmt: skip
COLUMNS = ("run_id", *KEPT)
UPDATED = ("run_id", *KEPT[2:])  # all but the key


def sqlite_upsert() -> Insert:
    """The run's row here unless a run as new or newer is kept (binds ``latest_<column>``)."""
    values = {c.name: bindparam(f"latest_{c.name}", type_=c.type) for c in LATEST.c}
    insert = sqlite_insert(LATEST).values(values)
    return insert.on_conflict_do_update(
        index_elements=[LATEST.c.target_id, LATEST.c.vantage],
        set_={name: insert.excluded[name] for name in UPDATED},
        where=LATEST.c.started_at < insert.excluded.started_at,
    )


def postgres_upsert_from(cte: str) -> str:
    """The same upsert, of the row ``cte`` (a CTE returning the run's columns) holds."""
    names = ", ".join(COLUMNS)
    picked = ", ".join(["id", *KEPT])
    moved = ", ".join(f"{name} = excluded.{name}" for name in UPDATED)
    return (
        f"INSERT INTO series_latest ({names}) SELECT {picked} FROM {cte} "
        f"ON CONFLICT (target_id, vantage) DO UPDATE SET {moved} "
        "WHERE series_latest.started_at < excluded.started_at"
    )


# Every pair's newest run, ties broken by run id: what the migration fills the table with,
# and what a database filled in bulk (bench/) is brought up to date by.
REBUILD = f"""
    INSERT INTO series_latest ({", ".join(COLUMNS)})
    SELECT {", ".join(["id", *KEPT])} FROM (
        SELECT runs.*, ROW_NUMBER() OVER (
            PARTITION BY target_id, vantage ORDER BY started_at DESC, id DESC) AS newest
        FROM runs) AS ranked
    WHERE newest = 1"""


def rebuild(connection: Connection) -> None:
    """The table made again from the runs (in the caller's transaction)."""
    connection.execute(LATEST.delete())
    connection.execute(text(REBUILD))
