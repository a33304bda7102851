"""PostgreSQL: samples partitioned by day, so that retention drops a day whole.

``samples`` becomes a table partitioned by range of ``started_at``, one partition a UTC day
(``samples_pYYYYMMDD``) and a default partition (``samples_default``) for a sample no day
holds yet (an import of old runs, an agent's clock days ahead): an insert never fails for
want of a partition, and the upkeep moves such rows into their day when it creates it
(``app.store.partitions``, which also creates days ahead and drops those past retention).

A partitioned table's unique constraints must hold its partition key: the primary key is
``(run_id, idx, started_at)``. Ingest stays idempotent through ``runs`` (not partitioned:
its id and its ``(target_id, vantage, slot)`` stay unique): a run's samples go in only
with the run row that went in (``app.store.ingest``).

An existing database is converted by copy: the old table is renamed, a partition made
for every UTC day it holds (found by one index probe a day) and for today and the days
ahead, its rows copied in one INSERT, and the old table dropped. That takes about as long
as writing the samples once more (docs/deploy.md). SQLite is left as it is: it has no
partitions and keeps pruning by batched DELETEs.

Written without importing app code, as every migration here: the partition names are
those ``app.store.partitions`` reads (tests/store/test_partitions.py holds the two to
each other).

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

AHEAD_DAYS = 3
OLD = "samples_unpartitioned"
COLUMNS = """
    run_id UUID NOT NULL,
    idx INTEGER NOT NULL,
    started_at TIMESTAMP WITH TIME ZONE NOT NULL,
    status VARCHAR(20) NOT NULL,
    error_class VARCHAR(100),
    error TEXT,
    http_status INTEGER,
    total_ms DOUBLE PRECISION NOT NULL,
    phases JSONB NOT NULL,
    provenance JSONB NOT NULL,
    marks JSONB NOT NULL,
    details JSONB NOT NULL,
    CONSTRAINT fk_samples_run_id_runs FOREIGN KEY (run_id) REFERENCES runs (id)
        ON DELETE CASCADE"""
# The UTC days the old table holds, one index probe a day (a loose index scan).
DAYS_HELD = f"""
    WITH RECURSIVE day AS (
        SELECT date_trunc('day', min(started_at) AT TIME ZONE 'UTC') AS d FROM {OLD}
        UNION ALL
        SELECT (SELECT date_trunc('day', min(started_at) AT TIME ZONE 'UTC') FROM {OLD}
                WHERE started_at >= (day.d + interval '1 day') AT TIME ZONE 'UTC')
        FROM day WHERE day.d IS NOT NULL
    )
    SELECT d FROM day WHERE d IS NOT NULL"""


def upgrade() -> None:
    if op.get_context().dialect.name != "postgresql":
        return
    op.execute(f"ALTER TABLE samples RENAME TO {OLD}")
    op.execute(f"ALTER TABLE {OLD} RENAME CONSTRAINT pk_samples TO pk_{OLD}")
    op.execute(f"ALTER TABLE {OLD} RENAME CONSTRAINT fk_samples_run_id_runs TO fk_{OLD}_run_id")
    op.execute(f"ALTER INDEX ix_samples_started_at RENAME TO ix_{OLD}_started_at")
    op.execute(
        f"CREATE TABLE samples ({COLUMNS},"
        " CONSTRAINT pk_samples PRIMARY KEY (run_id, idx, started_at)"
        ") PARTITION BY RANGE (started_at)"
    )
    op.execute("CREATE INDEX ix_samples_started_at ON samples (started_at)")
    op.execute("CREATE TABLE samples_default PARTITION OF samples DEFAULT")
    # On the server (a DO block): `--sql` prints it for a DBA like every other step.
    op.execute(f"""
        DO $$
        DECLARE part_day timestamp;
        BEGIN
            FOR part_day IN
                {DAYS_HELD}
                UNION
                SELECT generate_series(date_trunc('day', now() AT TIME ZONE 'UTC'),
                                       date_trunc('day', now() AT TIME ZONE 'UTC')
                                       + interval '{AHEAD_DAYS} days', interval '1 day')
            LOOP
                EXECUTE format(
                    'CREATE TABLE %I PARTITION OF samples FOR VALUES FROM (%L) TO (%L)',
                    'samples_p' || to_char(part_day, 'YYYYMMDD'),
                    part_day AT TIME ZONE 'UTC', (part_day + interval '1 day') AT TIME ZONE 'UTC');
            END LOOP;
        END $$""")
    op.execute(f"INSERT INTO samples SELECT * FROM {OLD}")
    op.execute(f"DROP TABLE {OLD}")


def downgrade() -> None:
    if op.get_context().dialect.name != "postgresql":
        return
    op.execute(f"CREATE TABLE {OLD} ({COLUMNS})")
    op.execute(f"INSERT INTO {OLD} SELECT * FROM samples")
    op.execute("DROP TABLE samples")  # its partitions with it
    op.execute(f"ALTER TABLE {OLD} RENAME TO samples")
    op.execute("ALTER TABLE samples ADD CONSTRAINT pk_samples PRIMARY KEY (run_id, idx)")
    op.execute("CREATE INDEX ix_samples_started_at ON samples (started_at)")
